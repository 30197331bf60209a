"""Generic checks over every detection (mmdet) and segmentation (mmseg)
config of configs/pvt_peg, configs/swin_peg and the entry point: it builds in
its own default scope (without the ImageNet checkpoint), gives finite outputs
of the expected shapes, builds its optimizer, and carries PVT's dense setting
that CPVT keeps (Appendix "Evaluation on Segmentation and Detection").
"""
import glob
import importlib
import logging
import math
import os.path as osp
import re

import pytest
import torch
from mmengine.logging import MMLogger
from mmengine.optim import build_optim_wrapper
from mmengine.registry import init_default_scope
from mmengine.utils import import_modules_from_strings
from tests.utils import ROOT, load_config, n_params

ENTRY = 'retinanet_pvt_tiny_peg_1x_coco.py'
CONFIGS = sorted(  # the ImageNet configs of the same backbones left out
    p for p in glob.glob(osp.join(ROOT, 'configs', 'pvt_peg', '*.py')) +
    glob.glob(osp.join(ROOT, 'configs', 'swin_peg', '*.py')) +
    [osp.join(ROOT, 'configs', ENTRY)] if 'in1k' not in osp.basename(p))
IDS = [osp.relpath(p, osp.join(ROOT, 'configs')) for p in CONFIGS]

# The paper's Table "PVT+PEG": parameters (M) of the whole detector /
# segmentor, the same with and without PEG at this precision.
PAPER_PARAMS_M = {
    ('retinanet', 't'): 23, ('retinanet', 's'): 34, ('retinanet', 'm'): 54,
    ('fpn', 't'): 17, ('fpn', 's'): 28, ('fpn', 'm'): 48,
}
H, W = 128, 160  # small, not square, a multiple of 32


def _load(path):
    cfg = load_config(path)
    import_modules_from_strings(**cfg.custom_imports)
    init_default_scope(cfg.default_scope)
    return cfg


def _registry(scope):
    return importlib.import_module(f'{scope}.registry').MODELS


def _build(cfg):
    cfg.model.backbone.init_cfg = None  # no ImageNet checkpoint here
    model = _registry(cfg.default_scope).build(cfg.model)
    logger = MMLogger.get_current_instance()
    level = logger.level
    logger.setLevel(logging.WARNING)  # init_weights logs every parameter
    try:
        model.init_weights()
    finally:
        logger.setLevel(level)
    return model


@pytest.mark.parametrize('path', CONFIGS, ids=IDS)
def test_model_forward_optimizer_and_pvt_setting(path):
    """Outputs, the optimizer's groups, and the optimizer and schedule of
    PVT's dense setting, kept by CPVT."""
    cfg = _load(path)
    name = osp.basename(path)
    opt = cfg.optim_wrapper.optimizer
    assert opt.type == 'AdamW'
    assert opt.lr == 1e-4
    swin = name.startswith('retinanet_swin')
    # Swin keeps its own dense recipe (weight decay 0.05), see README
    assert opt.weight_decay == (0.05 if swin else 1e-4)
    if cfg.default_scope == 'mmdet':
        epochs = 36 if '3x' in name else 12
        assert cfg.train_cfg.type == 'EpochBasedTrainLoop'
        assert cfg.train_cfg.max_epochs == epochs
        warmup, steps = cfg.param_scheduler
        assert (warmup.type, warmup.end, warmup.by_epoch) == ('LinearLR', 500,
                                                              False)
        assert steps.type == 'MultiStepLR' and steps.end == epochs
        assert steps.milestones == ([27, 33] if epochs == 36 else [8, 11])
        assert cfg.auto_scale_lr.base_batch_size == 16
        assert cfg.train_dataloader.batch_size == 2  # x 8 GPUs
        resize = cfg.train_dataloader.dataset.pipeline[2]
        if '3x' in name:  # multi-scale training, shorter side 640-800
            assert resize.type == 'RandomResize'
            assert resize.scale == [(1333, 640), (1333, 800)]
        else:
            assert (resize.type, resize.scale) == ('Resize', (1333, 800))
        assert cfg.val_evaluator.type == 'CocoMetric'
    else:
        assert cfg.train_cfg.type == 'IterBasedTrainLoop'
        assert cfg.train_cfg.max_iters == 80000
        (poly, ) = cfg.param_scheduler
        assert (poly.type, poly.power, poly.eta_min, poly.end) == ('PolyLR',
                                                                   0.9, 0.,
                                                                   80000)
        assert cfg.train_dataloader.batch_size == 4  # x 4 GPUs = 16
        assert cfg.model.data_preprocessor.size == (512, 512)
        assert cfg.val_evaluator.type == 'IoUMetric'
    backbone = cfg.model.backbone
    if 'peg' in name or 'pcpvt' in name:
        # ImageNet-pretrained PEG backbone, taken from a classifier
        assert backbone.init_cfg.type == 'Pretrained'
        assert backbone.init_cfg.prefix == 'backbone.'
        assert backbone.peg_positions == (0, 0, 0, 0)
    else:  # baselines: mmdet's PVT v1 with the official PVT weights
        assert backbone.type.endswith('PyramidVisionTransformer')
        assert 'whai362/PVT' in backbone.init_cfg.checkpoint

    torch.manual_seed(0)
    model = _build(cfg).eval()
    # 'retinanet_pvt-t-peg_...', 'fpn_pvt-s_...'; not pcpvt, swin
    match = re.match(r'(retinanet|fpn)_pvt-([tsm])[-_]', name)
    key = ('retinanet', 't') if name == ENTRY else match and match.groups()
    if key in PAPER_PARAMS_M:
        assert round(n_params(model) / 1e6) == PAPER_PARAMS_M[key], (
            n_params(model), key)

    inputs = torch.randn(2, 3, H, W)
    with torch.no_grad():
        out = model(inputs, mode='tensor')
    if cfg.default_scope == 'mmdet':
        cls_scores, bbox_preds = out
        num_levels = cfg.model.neck.num_outs
        assert len(cls_scores) == len(bbox_preds) == num_levels
        head = cfg.model.bbox_head
        anchors = len(head.anchor_generator.ratios) * \
            head.anchor_generator.scales_per_octave
        h, w = H, W
        for level, stride in enumerate(head.anchor_generator.strides):
            # FPN levels: exact strides 8-32, then stride-2 convs (ceil)
            h, w = (H // stride, W // stride) if stride <= 32 else (
                math.ceil(h / 2), math.ceil(w / 2))
            assert cls_scores[level].shape == (2, anchors * head.num_classes,
                                               h, w)
            assert bbox_preds[level].shape == (2, anchors * 4, h, w)
            assert torch.isfinite(cls_scores[level]).all()
            assert torch.isfinite(bbox_preds[level]).all()
    else:
        head = cfg.model.decode_head
        assert out.shape == (2, head.num_classes, H // 4, W // 4)
        assert torch.isfinite(out).all()

    groups = build_optim_wrapper(model, cfg.optim_wrapper).optimizer \
        .param_groups
    assert sum(p.numel() for g in groups for p in g['params']) == sum(
        p.numel() for p in model.parameters() if p.requires_grad)
    if 'paramwise_cfg' in cfg.optim_wrapper:  # Swin: no decay on norms/bias
        decay = {id(p): g['weight_decay'] for g in groups for p in g['params']}
        params = dict(model.named_parameters())
        stage = 'backbone.stages.0.0.'
        assert decay[id(params[stage + 'ln1.weight'])] == 0
        assert decay[id(params[stage + 'relative_position_bias_table'])] == 0
        assert decay[id(params[stage + 'attn.qkv.weight'])] == 0.05


def test_entry_point_and_the_demo_detection_config():
    """The entry point is RetinaNet PVT-T+PEG 1x; `make demo`'s config
    inherits it and changes only data, classes, scale, schedule and the
    ImageNet checkpoint."""
    entry = load_config(osp.join(ROOT, 'configs', ENTRY))
    full = load_config(
        osp.join(ROOT, 'configs', 'pvt_peg',
                 'retinanet_pvt-t-peg_fpn_1x_coco.py'))
    assert entry.to_dict() == full.to_dict()
    assert entry.model.backbone.type == 'mmcpvt.PVTPEG'
    assert entry.model.backbone.arch == 'tiny'
    assert entry.data_root == 'data/coco/'
    cfg = _load(osp.join(ROOT, 'configs', 'demo',
                         'retinanet_pvt-t-peg_demo_coco.py'))
    assert cfg.model.backbone.type == entry.model.backbone.type
    assert cfg.model.backbone.init_cfg is None
    assert cfg.model.bbox_head.num_classes == len(cfg.classes)
    assert cfg.train_dataloader.dataset.metainfo.classes == cfg.classes
    assert cfg.model.neck == entry.model.neck
    model = _build(cfg).eval()
    with torch.no_grad():
        cls_scores, _ = model(torch.randn(1, 3, 256, 256), mode='tensor')
    assert cls_scores[0].shape[1] == 9 * len(cfg.classes)
    assert all(torch.isfinite(s).all() for s in cls_scores)


@pytest.mark.parametrize('name', ['retinanet_pcpvt-s_fpn_1x_coco.py',
                                  'fpn_pcpvt-s_4xb4-80k_ade20k-512x512.py'])
def test_pcpvt_configs_say_where_the_weights_come_from(name, monkeypatch,
                                                       tmp_path):
    """The Twins-setting configs start from the authors' PCPVT-S weights
    under one file name; without the file, the error says where to get it."""
    cfg = _load(osp.join(ROOT, 'configs', 'pvt_peg', name))
    backbone = cfg.model.backbone
    assert backbone.init_cfg.checkpoint == 'checkpoints/twins-pcpvt-s_in1k.pth'
    assert backbone.drop_path_rate == 0.2  # Twins' detection / segmentation
    monkeypatch.chdir(tmp_path)
    model = _registry(cfg.default_scope).build(cfg.model)
    with pytest.raises(FileNotFoundError,
                       match=r'twins-pcpvt-s_in1k\.pth.*docs/model_zoo\.md'):
        model.backbone.init_weights()
