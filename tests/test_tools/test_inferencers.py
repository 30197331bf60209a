"""mmdet's, mmseg's and mmpretrain's inferencers on a user's own image (not
square, of a size no pipeline step produces), given our config file (its
backbone shrunk) and a checkpoint of the built model: with the
``dataset_meta`` the runner saves, and without (a hand-saved or converted
checkpoint), where the libraries fall back to default class names as
docs/checkpoints.md says."""
import importlib
import os.path as osp
import warnings

import cv2
import numpy as np
import pytest
import torch
from mmengine.config import Config
from mmengine.registry import init_default_scope
from mmengine.runner.checkpoint import save_checkpoint, weights_to_cpu
from tests.utils import ROOT

H, W = 90, 123  # the user's image

# PVT with 8-32 channels, one block a stage: the detector's and the
# segmentor's backbone, shrunk
PVT = dict(embed_dims=[8, 16, 24, 32], num_heads=[1, 2, 3, 4],
           mlp_ratios=[2, 2, 2, 2], depths=[1, 1, 1, 1],
           sr_ratios=[8, 4, 2, 1])
DET_CLASSES = ('person', 'bicycle', 'car', 'motorcycle')  # as the demo's
CLS_CLASSES = tuple(f'shape{i}' for i in range(10))


@pytest.fixture(scope='module')
def image(tmp_path_factory):
    """A PNG of H x W pixels: noise with a few filled rectangles."""
    rng = np.random.default_rng(0)
    img = rng.integers(0, 256, (H, W, 3), dtype=np.uint8)
    for x, y, c in ((10, 5, (255, 0, 0)), (60, 40, (0, 200, 0))):
        img[y:y + 30, x:x + 40] = c
    path = tmp_path_factory.mktemp('user') / 'my_image.png'
    assert cv2.imwrite(str(path), img)
    return str(path)


def _setup(out_dir, name, options, dataset_meta, resize=None):
    """One of our configs with ``options`` merged (and the test Resize's
    scale set to ``resize``), written out; the model as built saved with
    ``dataset_meta`` (``meta.pth``) and without (``bare.pth``)."""
    import mmcpvt  # noqa: F401  (registers the backbones)
    cfg = Config.fromfile(osp.join(ROOT, 'configs', name))
    if resize:
        types = [t['type'] for t in cfg.test_dataloader.dataset.pipeline]
        options[f'test_dataloader.dataset.pipeline.'
                f'{types.index("Resize")}.scale'] = resize
    cfg.merge_from_dict(options)
    path = str(out_dir / osp.basename(name))
    cfg.dump(path)
    init_default_scope(cfg.default_scope)
    registry = importlib.import_module(f'{cfg.default_scope}.registry')
    torch.manual_seed(0)
    state = weights_to_cpu(registry.MODELS.build(cfg.model).state_dict())
    paths = {k: str(out_dir / f'{k}.pth') for k in ('meta', 'bare')}
    save_checkpoint(dict(state_dict=state,
                         meta=dict(dataset_meta=dataset_meta)), paths['meta'])
    save_checkpoint(dict(state_dict=state), paths['bare'])
    return cfg, path, paths


def _picture(path):
    """A written visualisation: a colour image of the user's image size."""
    assert osp.isfile(path), path
    img = cv2.imread(path)
    assert img is not None and img.shape == (H, W, 3), (path, img.shape)


# ---------------------------------------------------------------- mmdet
def test_det_inferencer(image, tmp_path):
    from mmdet.apis import DetInferencer
    from mmdet.evaluation import get_classes
    cfg, path, ckpts = _setup(
        tmp_path, 'retinanet_pvt_tiny_peg_1x_coco.py', {
            'model.backbone.arch': dict(PVT, _delete_=True),
            'model.backbone.init_cfg': None,
            'model.neck.in_channels': PVT['embed_dims'],
            'model.neck.out_channels': 16,
            'model.bbox_head.in_channels': 16,
            'model.bbox_head.feat_channels': 16,
            'model.bbox_head.stacked_convs': 1,
            'model.bbox_head.num_classes': len(DET_CLASSES),
            # every box, whatever an untrained model scores
            'model.test_cfg.score_thr': 0.0,
        }, dict(classes=DET_CLASSES), resize=(192, 128))
    with warnings.catch_warnings():  # no fallback to default names
        warnings.filterwarnings('error', '.*dataset_meta')
        inferencer = DetInferencer(model=path, weights=ckpts['meta'],
                                   device='cpu')
    assert type(inferencer.model.backbone).__name__ == 'PVTPEG'
    assert inferencer.model.dataset_meta['classes'] == DET_CLASSES
    result = inferencer(image, out_dir=str(tmp_path), pred_score_thr=0.0)
    pred, = result['predictions']
    n = len(pred['labels'])
    assert n == len(pred['scores']) == len(pred['bboxes']) > 0, pred
    assert n <= cfg.model.test_cfg.max_per_img
    assert set(pred['labels']) <= set(range(len(DET_CLASSES)))
    assert all(0 <= s <= 1 for s in pred['scores'])
    assert pred['scores'] == sorted(pred['scores'], reverse=True)
    boxes = np.array(pred['bboxes'])
    assert boxes.shape == (n, 4)
    # (x1, y1, x2, y2) in the user's image, not the resized one
    tol = 1e-3
    assert (boxes[:, :2] >= -tol).all() and (boxes[:, 2] <= W + tol).all() \
        and (boxes[:, 3] <= H + tol).all(), boxes
    assert (boxes[:, 2:] >= boxes[:, :2] - tol).all(), boxes
    _picture(str(tmp_path / 'vis' / 'my_image.png'))
    # a checkpoint without dataset_meta: COCO's names
    with pytest.warns(UserWarning, match='dataset_meta.*COCO classes'):
        bare = DetInferencer(model=path, weights=ckpts['bare'], device='cpu')
    assert bare.model.dataset_meta['classes'] == get_classes('coco')
    assert len(bare(image)['predictions'][0]['labels']) > 0


# ---------------------------------------------------------------- mmseg
def test_seg_inferencer(image, tmp_path):
    from mmseg.apis import MMSegInferencer
    from mmseg.datasets import ADE20KDataset
    from mmseg.utils import get_classes
    cfg, path, ckpts = _setup(
        tmp_path, 'pvt_peg/fpn_pvt-t-peg_4xb4-80k_ade20k-512x512.py', {
            'model.backbone.arch': dict(PVT, _delete_=True),
            'model.backbone.init_cfg': None,
            'model.neck.in_channels': PVT['embed_dims'],
            'model.neck.out_channels': 16,
            'model.decode_head.in_channels': [16] * 4,
            'model.decode_head.channels': 16,
        }, ADE20KDataset.METAINFO, resize=(256, 64))
    with warnings.catch_warnings():  # no fallback to default names
        warnings.filterwarnings('error', '.*dataset_meta')
        inferencer = MMSegInferencer(model=path, weights=ckpts['meta'],
                                     device='cpu')
    classes = ADE20KDataset.METAINFO['classes']
    assert len(classes) == cfg.model.decode_head.num_classes == 150
    assert type(inferencer.model.backbone).__name__ == 'PVTPEG'
    assert tuple(inferencer.model.dataset_meta['classes']) == classes
    result = inferencer(image, out_dir=str(tmp_path))
    sem_seg = result['predictions']
    # a class index per pixel of the user's image
    assert isinstance(sem_seg, np.ndarray) and sem_seg.shape == (H, W)
    assert sem_seg.min() >= 0 and sem_seg.max() < len(classes)
    _picture(str(tmp_path / 'vis' / 'my_image.png'))
    # and the map itself, as an image of class indices
    saved = cv2.imread(str(tmp_path / 'pred' / '00000000_pred.png'),
                       cv2.IMREAD_UNCHANGED)
    assert saved is not None and np.array_equal(saved, sem_seg)
    # without dataset_meta mmseg falls back to Cityscapes' 19 names,
    # whatever the config's data set; ``dataset_name`` gives the
    # visualiser the right ones
    with pytest.warns(UserWarning, match='dataset_meta.*Cityscapes'):
        bare = MMSegInferencer(model=path, weights=ckpts['bare'],
                               device='cpu', dataset_name='ade20k')
    assert bare.model.dataset_meta['classes'] == get_classes('cityscapes')
    assert bare.visualizer.dataset_meta['classes'] == get_classes('ade20k')
    assert bare(image)['predictions'].shape == (H, W)


# ----------------------------------------------------------- mmpretrain
def test_cls_inferencer(image, tmp_path):
    from mmpretrain.apis import ImageClassificationInferencer
    from mmpretrain.datasets import ImageNet
    cfg, path, ckpts = _setup(tmp_path, 'cpvt/cpvt-tiny_4xb256_in1k.py', {
        'model.backbone.arch': dict(embed_dims=32, num_layers=2, num_heads=2,
                                    feedforward_channels=64, _delete_=True),
        'model.head.in_channels': 32,
        'model.head.num_classes': len(CLS_CLASSES),
    }, dict(classes=CLS_CLASSES))
    inferencer = ImageClassificationInferencer(
        model=path, pretrained=ckpts['meta'], device='cpu')
    assert type(inferencer.model.backbone).__name__ == 'CPVT'
    assert tuple(inferencer.classes) == CLS_CLASSES
    pred, = inferencer(image, show_dir=str(tmp_path / 'vis'))
    scores = np.asarray(pred['pred_scores'])
    assert scores.shape == (len(CLS_CLASSES), )
    assert scores.sum() == pytest.approx(1, abs=1e-4)
    assert pred['pred_label'] == int(scores.argmax())
    assert pred['pred_score'] == pytest.approx(float(scores.max()))
    assert pred['pred_class'] == CLS_CLASSES[pred['pred_label']]
    _picture(str(tmp_path / 'vis' / 'my_image.png'))
    # without dataset_meta: the class names of the config's test data set
    assert cfg.test_dataloader.dataset.type == 'ImageNet'
    bare = ImageClassificationInferencer(
        model=path, pretrained=ckpts['bare'], device='cpu')
    pred, = bare(image)
    assert pred['pred_class'] == \
        ImageNet.METAINFO['classes'][pred['pred_label']]
