"""The synthetic COCO and ADE20K sets of tools/dataset_converters load with
the readers of the real ones: pycocotools' COCO, mmdet's CocoDataset and
mmseg's ADE20KDataset, unchanged."""
import json
import os
import os.path as osp
import sys

import numpy as np
import pytest
from PIL import Image

from tests.utils import ROOT

sys.path.insert(0, osp.join(ROOT, 'tools', 'dataset_converters'))
from make_ade20k import make_ade20k  # noqa: E402
from make_coco import COCO_CATEGORIES, coco_classes, make_coco  # noqa: E402
from shapes import SHAPES, polygon_mask, render_scene  # noqa: E402

K_COCO = 12  # reaches 'stop sign' (id 13): COCO ids are not contiguous
K_ADE = 5
NUM_TRAIN, NUM_VAL, SIZE = 12, 4, 96


@pytest.fixture(scope='module')
def coco_root(tmp_path_factory):
    root = str(tmp_path_factory.mktemp('data') / 'coco')
    make_coco(root, NUM_TRAIN, NUM_VAL, SIZE, K_COCO, seed=0)
    return root


@pytest.fixture(scope='module')
def ade_out(tmp_path_factory):
    out = str(tmp_path_factory.mktemp('data') / 'ade')
    make_ade20k(out, NUM_TRAIN, NUM_VAL, SIZE, K_ADE, seed=0)
    return out


# --------------------------------------------------------------- renderer
def test_render_scene_is_deterministic_and_consistent():
    a = render_scene(np.random.default_rng(7), 90, 120, 10, (3, 8))
    b = render_scene(np.random.default_rng(7), 90, 120, 10, (3, 8))
    assert np.array_equal(a.image, b.image)
    assert np.array_equal(a.class_map, b.class_map)
    assert a.image.shape == (90, 120, 3) and a.image.dtype == np.uint8
    assert len(a.labels) >= 1
    for i, (box, label, poly, area) in enumerate(
            zip(a.boxes, a.labels, a.polygons, a.areas)):
        mask = a.instance_map == i + 1
        ys, xs = np.nonzero(mask)
        x, y, w, h = box
        assert (xs.min(), ys.min()) == (x, y)
        assert (xs.max() + 1, ys.max() + 1) == (x + w, y + h)
        assert mask.sum() == area
        # nothing is occluded: the mask is the polygon's
        assert np.array_equal(mask, polygon_mask(poly, 90, 120))
        assert (a.class_map[mask] == label + 1).all()
    assert ((a.class_map > 0) == (a.instance_map > 0)).all()


def test_render_scene_scales():
    """Objects span the configured scales of the shorter side."""
    rng = np.random.default_rng(0)
    extents = []
    for _ in range(60):
        s = render_scene(rng, 100, 150, len(SHAPES))
        extents += list(s.boxes[:, 2:].max(1) / 100)
    assert min(extents) < 0.12 and max(extents) > 0.3
    assert max(extents) <= 0.41


def test_render_scene_rejects_bad_arguments():
    rng = np.random.default_rng(0)
    with pytest.raises(ValueError, match='16x16'):
        render_scene(rng, 8, 100, 3)
    with pytest.raises(ValueError, match='num_classes'):
        render_scene(rng, 64, 64, 0)
    with pytest.raises(ValueError, match='scale_range'):
        render_scene(rng, 64, 64, 3, scale_range=(0.5, 0.1))


# ------------------------------------------------------------------- COCO
def test_coco_layout(coco_root):
    for split, n in (('train2017', NUM_TRAIN), ('val2017', NUM_VAL)):
        assert len(os.listdir(osp.join(coco_root, split))) == n
        assert osp.isfile(
            osp.join(coco_root, 'annotations', f'instances_{split}.json'))


def test_coco_loads_with_pycocotools(coco_root):
    from pycocotools.coco import COCO
    coco = COCO(
        osp.join(coco_root, 'annotations', 'instances_train2017.json'))
    cats = coco.loadCats(coco.getCatIds())
    assert [(c['id'], c['name'], c['supercategory'])
            for c in cats] == COCO_CATEGORIES[:K_COCO]
    assert cats[-1] == dict(id=13, name='stop sign', supercategory='outdoor')
    assert set(coco.dataset) >= {
        'info', 'licenses', 'images', 'annotations', 'categories'
    }
    assert len(coco.getImgIds()) == NUM_TRAIN
    assert len(coco.getAnnIds()) >= NUM_TRAIN  # at least one object each
    sizes = set()
    for img in coco.loadImgs(coco.getImgIds()):
        with Image.open(osp.join(coco_root, 'train2017',
                                 img['file_name'])) as im:
            assert im.size == (img['width'], img['height'])
            assert im.mode == 'RGB'
        sizes.add((img['width'], img['height']))
        assert 0.75 * SIZE - 1 <= img['width'] <= 1.25 * SIZE + 1
        for ann in coco.loadAnns(coco.getAnnIds(imgIds=img['id'])):
            x, y, w, h = ann['bbox']
            assert x >= 0 and y >= 0 and w > 0 and h > 0
            assert x + w <= img['width'] and y + h <= img['height']
            assert ann['iscrowd'] == 0 and ann['area'] > 0
            assert ann['category_id'] in coco.getCatIds()
            # the polygon rasterises (pycocotools) to about the same area
            assert coco.annToMask(ann).sum() == pytest.approx(
                ann['area'], rel=0.3, abs=8)
    assert len(sizes) > 1  # images of varying size


def test_coco_ids_unique_across_splits(coco_root):
    ids = {}
    for split in ('train2017', 'val2017'):
        with open(osp.join(coco_root, 'annotations',
                           f'instances_{split}.json')) as f:
            data = json.load(f)
        ids[split] = ({i['id'] for i in data['images']},
                      {a['id'] for a in data['annotations']})
    assert not ids['train2017'][0] & ids['val2017'][0]
    assert not ids['train2017'][1] & ids['val2017'][1]


def test_coco_classes_are_mmdets():
    from mmdet.datasets import CocoDataset
    assert coco_classes(80) == tuple(CocoDataset.METAINFO['classes'])
    assert len({c[0] for c in COCO_CATEGORIES}) == 80


def test_coco_loads_with_mmdet(coco_root):
    from mmdet.datasets import CocoDataset
    ds = CocoDataset(
        data_root=coco_root,
        ann_file='annotations/instances_train2017.json',
        data_prefix=dict(img='train2017/'),
        metainfo=dict(classes=coco_classes(K_COCO)),
        filter_cfg=dict(filter_empty_gt=True, min_size=32),
        pipeline=[])
    assert len(ds) == NUM_TRAIN
    assert ds.cat_ids == [c[0] for c in COCO_CATEGORIES[:K_COCO]]
    assert ds.cat2label[13] == K_COCO - 1  # 'stop sign'
    labels = set()
    for i in range(len(ds)):
        info = ds.get_data_info(i)
        assert osp.isfile(info['img_path'])
        for inst in info['instances']:
            x1, y1, x2, y2 = inst['bbox']
            assert 0 <= x1 < x2 <= info['width']
            assert 0 <= y1 < y2 <= info['height']
            assert 0 <= inst['bbox_label'] < K_COCO
            labels.add(inst['bbox_label'])
    assert len(labels) > 3


def test_coco_is_deterministic(tmp_path, coco_root):
    again = str(tmp_path / 'coco')
    make_coco(again, NUM_TRAIN, NUM_VAL, SIZE, K_COCO, seed=0)
    for rel in ('annotations/instances_val2017.json',
                'train2017/000000000003.jpg'):
        with open(osp.join(coco_root, rel), 'rb') as a, \
                open(osp.join(again, rel), 'rb') as b:
            assert a.read() == b.read()


def test_coco_refuses_to_overwrite(tmp_path):
    out = str(tmp_path / 'coco')
    make_coco(out, 2, 1, 64, 2)
    with pytest.raises(FileExistsError, match='overwrite'):
        make_coco(out, 2, 1, 64, 2)
    make_coco(out, 3, 1, 64, 2, overwrite=True)  # ours: replaced
    assert len(os.listdir(osp.join(out, 'train2017'))) == 3
    foreign = tmp_path / 'mine'
    foreign.mkdir()
    (foreign / 'notes.txt').write_text('keep me')
    with pytest.raises(FileExistsError, match='refusing'):
        make_coco(str(foreign), 2, 1, 64, 2, overwrite=True)
    assert (foreign / 'notes.txt').exists()
    with pytest.raises(ValueError, match='num_classes'):
        make_coco(str(tmp_path / 'x'), 2, 1, 64, 81)



def test_coco_objects_per_image(tmp_path):
    out = str(tmp_path / 'coco')
    info = make_coco(out, 6, 2, 96, 2, objects_per_image=(4, 6))
    assert info['objects_per_image'] == [4, 6]
    with open(osp.join(out, 'annotations', 'instances_train2017.json')) as f:
        coco = json.load(f)
    per_image = {}
    for ann in coco['annotations']:
        per_image[ann['image_id']] = per_image.get(ann['image_id'], 0) + 1
    # fewer than 4 only where no free place was found
    assert max(per_image.values()) <= 6
    assert np.mean(list(per_image.values())) > 3
    with pytest.raises(ValueError, match='objects_per_image'):
        make_coco(str(tmp_path / 'x'), 2, 1, 64, 2, objects_per_image=(3, 2))

# ----------------------------------------------------------------- ADE20K
def test_ade20k_layout(ade_out):
    root = osp.join(ade_out, 'ADEChallengeData2016')
    for split, prefix, n in (('training', 'ADE_train', NUM_TRAIN),
                             ('validation', 'ADE_val', NUM_VAL)):
        imgs = sorted(os.listdir(osp.join(root, 'images', split)))
        anns = sorted(os.listdir(osp.join(root, 'annotations', split)))
        assert imgs == [f'{prefix}_{i:08d}.jpg' for i in range(1, n + 1)]
        assert anns == [f'{prefix}_{i:08d}.png' for i in range(1, n + 1)]
        for img, ann in zip(imgs, anns):
            with Image.open(osp.join(root, 'images', split, img)) as im, \
                    Image.open(osp.join(root, 'annotations', split,
                                        ann)) as seg:
                assert im.mode == 'RGB' and seg.mode == 'L'
                assert im.size == seg.size
                values = np.unique(np.asarray(seg))
                assert values.min() == 0 and values.max() <= K_ADE


def test_ade20k_loads_with_mmseg(ade_out):
    from mmseg.datasets import ADE20KDataset
    from mmseg.datasets.transforms import LoadAnnotations
    root = osp.join(ade_out, 'ADEChallengeData2016')
    classes = ADE20KDataset.METAINFO['classes'][:K_ADE]
    ds = ADE20KDataset(
        data_root=root,
        data_prefix=dict(
            img_path='images/validation',
            seg_map_path='annotations/validation'),
        metainfo=dict(classes=classes),
        pipeline=[LoadAnnotations(reduce_zero_label=True)])
    assert len(ds) == NUM_VAL
    assert ds.metainfo['classes'] == classes
    seen = set()
    for i in range(len(ds)):
        info = ds.get_data_info(i)
        assert osp.isfile(info['img_path'])
        assert info['reduce_zero_label'] is True
        raw = np.asarray(Image.open(info['seg_map_path']))
        gt = ds[i]['gt_seg_map']
        # reduce_zero_label: 0 (other) is ignored, class k becomes k - 1
        assert (gt[raw == 0] == 255).all()
        for k in range(1, K_ADE + 1):
            assert (gt[raw == k] == k - 1).all()
        seen |= set(np.unique(gt).tolist())
    assert seen <= set(range(K_ADE)) | {255}
    assert len(seen - {255}) >= 3


def test_ade20k_refuses_bad_arguments(tmp_path):
    with pytest.raises(ValueError, match='num_classes'):
        make_ade20k(str(tmp_path / 'a'), 2, 1, 64, 151)
    with pytest.raises(ValueError, match='size'):
        make_ade20k(str(tmp_path / 'a'), 2, 1, 16, 3)
