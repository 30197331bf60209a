"""Bad data stops with an error that names the file, or is counted in a
warning, instead of training silently (mmcpvt/datasets).

Segmentation: ``CheckSegMap`` after every ``LoadAnnotations`` of our ADE20K
configs. Detection: ``CheckedCocoDataset``, the data set type of our COCO
configs. The data sets are generated (tools/dataset_converters) and then
broken one way per test; the data sets are built from the real configs, as
the runner builds them.
"""
import copy
import glob
import json
import logging
import os
import os.path as osp
import subprocess
import sys

import numpy as np
import pytest
from mmengine.config import Config
from mmengine.logging import MMLogger
from mmengine.registry import DefaultScope
from PIL import Image

from mmcpvt.datasets import CheckSegMap
from mmcpvt.datasets.synthetic.ade20k import make_ade20k
from mmcpvt.datasets.synthetic.coco import coco_classes, make_coco
from tests.utils import ROOT

SEG_CONFIG = 'configs/pvt_peg/fpn_pvt-t-peg_4xb4-80k_ade20k-512x512.py'
DET_CONFIG = 'configs/retinanet_pvt_tiny_peg_1x_coco.py'
K = 3


@pytest.fixture(scope='module')
def dense_configs():
    """Every detection and segmentation config of ours (named ``*coco*`` or
    ``*ade20k*``), loaded, by default scope.

    mmengine looks an ``mmdet::``/``mmseg::`` base up in every metafile of
    the package, again for each config (0.5 s a base here): the look-up is
    memoised while they load, which gives the same configs 4x faster."""
    import mmengine.config.config as config_module
    lookup = config_module._get_external_cfg_path
    memo = {}

    def memoised(*args):
        if args not in memo:
            try:
                memo[args] = lookup(*args), None
            except ValueError as e:  # a _base_ file: not in the metafiles
                memo[args] = None, e
        path, error = memo[args]
        if error is not None:
            raise error
        return path

    paths = sorted(
        p for p in glob.glob(osp.join(ROOT, 'configs', '**', '*.py'),
                             recursive=True)
        if '_base_' not in p and ('coco' in osp.basename(p)
                                  or 'ade20k' in osp.basename(p)))
    cfgs = {'mmdet': {}, 'mmseg': {}}
    config_module._get_external_cfg_path = memoised
    try:
        for path in paths:
            cfg = Config.fromfile(path, import_custom_modules=False)
            cfgs[cfg.default_scope][osp.relpath(path, ROOT)] = cfg
    finally:
        config_module._get_external_cfg_path = lookup
    return cfgs


def _build(cfg, loader, scope, **changes):
    """The data set of ``cfg[loader]``, built in ``scope`` as the runner
    builds it, with ``changes`` to its config."""
    from mmengine.registry import DATASETS
    dataset = copy.deepcopy(cfg[loader].dataset)
    dataset.update(changes)
    with DefaultScope.overwrite_default_scope(scope):
        return DATASETS.build(dataset)


@pytest.fixture
def logged():
    """The records of mmengine's current logger while the test runs."""
    records = []
    handler = logging.Handler()
    handler.emit = records.append
    logger = MMLogger.get_current_instance()
    logger.addHandler(handler)
    yield records
    logger.removeHandler(handler)


# ------------------------------------------------------------ segmentation
@pytest.fixture
def ade_root(tmp_path):
    info = make_ade20k(str(tmp_path / 'ade'), num_train=2, num_val=2,
                       size=48, num_classes=K)
    return info['data_root']


def test_every_seg_config_checks_label_maps_after_loading(dense_configs):
    """Each pipeline of each segmentation config (train, val, test, TTA)
    has CheckSegMap right after LoadAnnotations."""
    cfgs = dense_configs['mmseg']
    assert len(cfgs) >= 6
    for name, cfg in cfgs.items():
        pipelines = [cfg[loader].dataset.pipeline for loader in
                     ('train_dataloader', 'val_dataloader', 'test_dataloader')]
        pipelines.append(
            [t for group in cfg.tta_pipeline[1].transforms for t in group])
        for pipeline in pipelines:
            types = [t['type'] for t in pipeline]
            assert 'LoadAnnotations' in types, name
            after = types[types.index('LoadAnnotations') + 1]
            assert after == 'mmcpvt.CheckSegMap', (name, types)


@pytest.mark.parametrize('loader', ['train_dataloader', 'val_dataloader'])
def test_seg_map_of_another_size_is_an_error(dense_configs, ade_root,
                                             loader):
    """A label map 5 px wider than its image: an error naming both files and
    both sizes, from the training pipeline (labels loaded before any
    resize) and the test one (loaded after Resize)."""
    cfg = dense_configs['mmseg'][SEG_CONFIG]
    split = 'training' if loader == 'train_dataloader' else 'validation'
    ds = _build(cfg, loader, 'mmseg', data_root=ade_root)
    ds[0]  # a good pair goes through
    info = ds.get_data_info(1)
    with Image.open(info['seg_map_path']) as seg:
        h, w = seg.height, seg.width
        seg.resize((w + 5, h), Image.NEAREST).save(info['seg_map_path'])
    with pytest.raises(ValueError) as e:
        ds[1]
    msg = str(e.value)
    assert f'label map {info["seg_map_path"]}: {h}x{w + 5}' in msg
    assert f'but its image {info["img_path"]} is {h}x{w}' in msg
    assert f'annotations/{split}/' in msg and f'images/{split}/' in msg


def test_seg_map_of_16_bits_with_values_over_255_is_an_error(
        dense_configs, ade_root):
    """A 16-bit label map holding 300: LoadAnnotations casts it to uint8
    (300 -> 44, a valid class of a 150-class model), so the stored file is
    checked, with an error naming it, the value and what is allowed. A
    16-bit map whose values fit in 0-255 loads as its 8-bit twin."""
    cfg = dense_configs['mmseg'][SEG_CONFIG]
    ds = _build(cfg, 'train_dataloader', 'mmseg', data_root=ade_root)
    path = ds.get_data_info(0)['seg_map_path']
    labels = np.asarray(Image.open(path)).astype(np.uint16)
    Image.fromarray(labels).save(path)  # 16 bits, same values
    with Image.open(path) as stored:
        assert stored.mode.startswith('I')
    assert ds[0]['data_samples'].gt_sem_seg is not None
    labels[0, :3] = 300, 256, 7
    Image.fromarray(labels).save(path)
    with pytest.raises(ValueError) as e:
        ds[0]
    assert str(e.value).startswith(
        f'label map {path}: holds the value 300, outside the 0 to 255 a '
        f'label map may hold (a uint16 image, PIL mode ')
    assert 'its values outside: [256, 300]' in str(e.value)
    assert 'so 300 would become 44, another label' in str(e.value)


def test_seg_map_values_outside_the_classes_are_an_error():
    """Labels outside [0, num_classes) other than 255 (the loss cannot take
    them); without reduce_zero_label, a map of 0..K says to set it."""
    check = CheckSegMap(num_classes=4)
    seg = np.array([[0, 3, 255], [1, 2, 255]], np.uint8)
    results = dict(gt_seg_map=seg, seg_map_path='a.png', img_path='a.jpg',
                   ori_shape=(2, 3), reduce_zero_label=True)
    assert check(dict(results)) is not None  # in range
    bad = seg.copy()
    bad[0, :2] = 9, 4
    with pytest.raises(ValueError, match=r'a\.png: holds the labels \[4, 9\]'
                       r'.*outside \[0, 4\).*decode_head\.num_classes'):
        check(dict(results, gt_seg_map=bad))
    with pytest.raises(ValueError, match='set reduce_zero_label=True'):
        check(dict(results, gt_seg_map=np.array([[0, 4]], np.uint8),
                   ori_shape=(1, 2), reduce_zero_label=False))
    # without num_classes the values are not checked
    assert CheckSegMap()(dict(results, gt_seg_map=seg + 100)) is not None


def test_seg_map_with_colour_channels_is_an_error():
    """A colour (RGB-saved) label map loads as (H, W, 3)."""
    seg = np.zeros((4, 5, 3), np.uint8)
    with pytest.raises(ValueError, match=r'label map m\.png: loads as an '
                       r'array of shape \(4, 5, 3\), not \(height, width\)'):
        CheckSegMap()(dict(gt_seg_map=seg, seg_map_path='m.png',
                           ori_shape=(4, 5)))


def test_check_seg_map_passes_results_without_labels():
    """The inferencers remove LoadAnnotations: nothing to check."""
    results = dict(img=np.zeros((4, 5, 3), np.uint8), ori_shape=(4, 5))
    assert CheckSegMap(num_classes=2)(dict(results)).keys() == results.keys()


def test_mmcpvt_imports_and_finds_its_transform_without_downstream_libs():
    """mmdet, mmseg and mmpretrain blocked: ``import mmcpvt`` works, and
    ``type='mmcpvt.CheckSegMap'`` resolves (the COCO data set is imported
    only when a config names it)."""
    code = (
        'import sys\n'
        "for name in ('mmdet', 'mmseg', 'mmpretrain'):\n"
        '    sys.modules[name] = None  # as if not installed\n'
        'import mmcpvt\n'
        'from mmengine.registry import TRANSFORMS\n'
        "t = TRANSFORMS.build(dict(type='mmcpvt.CheckSegMap', "
        'num_classes=3))\n'
        "print(type(t).__name__, 'mmcpvt.datasets.coco' in sys.modules)\n")
    proc = subprocess.run([sys.executable, '-c', code], cwd=ROOT,
                          capture_output=True, text=True, timeout=300,
                          env=dict(os.environ, OMP_NUM_THREADS='1'))
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout.split()[-2:] == ['CheckSegMap', 'False']


# --------------------------------------------------------------- detection
@pytest.fixture(scope='module')
def coco_root(tmp_path_factory):
    root = str(tmp_path_factory.mktemp('data') / 'coco') + '/'
    make_coco(root, num_train=6, num_val=2, size=64, num_classes=K)
    return root


def _coco_file(coco_root, tmp_path, change):
    """The generated training json, changed by ``change(data)``, written
    to tmp_path; its path."""
    with open(osp.join(coco_root, 'annotations',
                       'instances_train2017.json')) as f:
        data = json.load(f)
    change(data)
    path = str(tmp_path / 'instances_train2017.json')
    with open(path, 'w') as f:
        json.dump(data, f)
    return path


@pytest.fixture
def build_coco(dense_configs, coco_root):
    """Build the training data set of the entry config on ``ann_file``."""

    def build(ann_file, **changes):
        return _coco(dense_configs['mmdet'][DET_CONFIG], coco_root,
                     ann_file, **changes)

    return build


def _coco(cfg, coco_root, ann_file, **changes):
    changes = dict(dict(data_root=coco_root, ann_file=ann_file,
                        metainfo=dict(classes=coco_classes(K))), **changes)
    return _build(cfg, 'train_dataloader', 'mmdet', **changes)


def test_every_det_config_uses_the_checked_coco_dataset(dense_configs):
    cfgs = dense_configs['mmdet']
    assert len(cfgs) >= 14  # pvt_peg, swin_peg, entry point, demo
    for name, cfg in cfgs.items():
        for loader in ('train_dataloader', 'val_dataloader',
                       'test_dataloader'):
            assert cfg[loader].dataset.type == 'mmcpvt.CheckedCocoDataset', \
                (name, loader)


def test_checked_coco_gives_mmdets_data_list(coco_root, tmp_path, build_coco):
    """Same data list as mmdet's CocoDataset, filter_empty_gt included: an
    image whose annotations are all removed is filtered out by both."""
    from mmdet.datasets import CocoDataset

    def drop_image_1(data):
        data['annotations'] = [a for a in data['annotations']
                               if a['image_id'] != 1]

    ann_file = _coco_file(coco_root, tmp_path, drop_image_1)
    checked = build_coco(ann_file)
    plain = CocoDataset(
        data_root=coco_root, ann_file=ann_file,
        data_prefix=dict(img='train2017/'), metainfo=dict(
            classes=coco_classes(K)),
        filter_cfg=dict(filter_empty_gt=True, min_size=32), pipeline=[])
    assert type(checked).__name__ == 'CheckedCocoDataset'
    assert len(checked) == len(plain) == 5
    assert [checked.get_data_info(i) for i in range(5)] == \
        [plain.get_data_info(i) for i in range(5)]
    sample = checked[0]  # the config's pipeline runs
    assert len(sample['data_samples'].gt_instances) > 0


def test_coco_without_annotations_is_an_error(coco_root, tmp_path,
                                              build_coco):
    """A training file with images and no annotations: an error naming the
    file and what is expected, instead of mmengine's "need at least one
    array to concatenate". Testing on such a file (test-dev) is fine."""

    def no_annotations(data):
        data['annotations'] = []

    ann_file = _coco_file(coco_root, tmp_path, no_annotations)
    with pytest.raises(ValueError) as e:
        build_coco(ann_file)
    assert str(e.value).startswith(
        f"{ann_file}: holds 6 images and no annotations ('annotations' is "
        f"empty): a training set needs boxes.")
    assert 'bbox=[x, y, w, h]' in str(e.value)
    assert len(build_coco(ann_file, test_mode=True)) == 6


def test_coco_dropped_annotations_are_counted_per_reason(
        coco_root, tmp_path, build_coco, logged):
    """mmdet drops these without a word: one warning names the file and
    counts them per reason, with their ids; the data list is mmdet's."""

    def break_some(data):
        anns = data['annotations']
        anns[0]['bbox'][:2] = [500., 500.]  # outside its image
        anns[1]['bbox'][2] = -4.  # negative width
        anns[2]['bbox'][3] = -1.  # negative height
        anns[3]['category_id'] = 99  # no such category
        anns[4]['image_id'] = 12345  # no such image
        anns[5]['bbox'][2] = 0.5  # under 1 px

    ann_file = _coco_file(coco_root, tmp_path, break_some)
    with open(ann_file) as f:
        anns = json.load(f)['annotations']
    ids = [a['id'] for a in anns]
    ds = build_coco(ann_file)
    kept = sum(len(ds.get_data_info(i)['instances']) for i in range(len(ds)))
    assert kept == len(anns) - 6
    warnings = [r.getMessage() for r in logged
                if r.levelno == logging.WARNING and ann_file in r.getMessage()]
    assert len(warnings) == 1, [r.getMessage() for r in logged]
    assert warnings[0] == (
        f'{ann_file}: 6 of {len(anns)} annotations are left out: '
        f'2 with a negative or zero box width or height (annotation ids '
        f'{ids[1]}, {ids[2]}); 1 whose box lies outside its image '
        f'(annotation ids {ids[0]}); 1 whose box is under 1 px wide or high, '
        f'or whose area is <= 0 (annotation ids {ids[5]}); 1 whose '
        f"category_id is not one of the file's categories (category_id 99; "
        f"annotation ids {ids[3]}); 1 whose image_id is not one of the "
        f"file's images (annotation ids {ids[4]}). mmdet's CocoDataset drops "
        f'these without a word; correct them in the file to use them.')


def _del(key):
    return lambda data: data.pop(key)


def _del_area(data):
    del data['annotations'][2]['area']


def _short_bbox(data):
    data['annotations'][1]['bbox'] = [1, 2, 3]


@pytest.mark.parametrize('change, classes, expected', [
    (_del('images'), None,
     r"has no 'images' list \(its 'images' has none; its keys: \["
     r"'annotations', 'categories'.*\)\. A COCO detection file is a "
     r'dict with images='),
    (_del('categories'), None, r"has no 'categories' list"),
    (_del_area, None,
     r": 1 of the \d+ annotations lack keys that mmdet reads \(annotations "
     r"#2; the first lacks \['area'\]"),
    (_short_bbox, None, r': 1 annotations have a bbox that is not 4 numbers '
     r'\[x, y, w, h\] \(annotations #1; the first, id \d+: bbox=\[1, 2, 3\]'),
    (None, ('person', 'bike'),
     r"instances_train2017\.json: metainfo classes bike are not categories "
     r"of the file \(its 3 categories: person, bicycle, car\)"),
    (None, ('car', 'person'),
     r"metainfo classes \('car', 'person'\) are not in the order of the "
     r"categories of .*: mmdet numbers them in the file's order, "
     r"\('person', 'car'\)"),
], ids=['no-images', 'no-categories', 'no-area', 'short-bbox',
        'unknown-class', 'class-order'])
def test_unusable_coco_file_is_an_error(coco_root, tmp_path, build_coco,
                                        change, classes, expected):
    ann_file = _coco_file(coco_root, tmp_path, change or (lambda data: None))
    changes = dict(metainfo=dict(classes=classes)) if classes else {}
    with pytest.raises(ValueError, match=expected) as e:
        build_coco(ann_file, **changes)
    assert ann_file in str(e.value)


def test_coco_images_sharing_an_id_are_an_error(coco_root, tmp_path,
                                                build_coco):
    """pycocotools keeps the last image of an id and gives it the boxes of
    both. Two images of one file with one id, or the images of two files
    merged without renumbering: an error naming the file, the id and both
    images."""

    def same_id(data):
        data['images'][3]['id'] = data['images'][1]['id']

    ann_file = _coco_file(coco_root, tmp_path, same_id)
    with pytest.raises(ValueError, match=(
            r'instances_train2017\.json: the images 000000000002\.jpg and '
            r'000000000004\.jpg share the id 2: pycocotools keeps the last '
            r'image of an id')) as e:
        build_coco(ann_file)
    assert str(e.value).startswith(ann_file)

    with open(osp.join(coco_root, 'annotations',
                       'instances_val2017.json')) as f:
        val = json.load(f)

    def merge_val(data):  # val's ids restarted from 1, as in another file
        for i, img in enumerate(val['images']):
            img['id'] = i + 1
        data['images'] += val['images']

    ann_file = _coco_file(coco_root, tmp_path, merge_val)
    with pytest.raises(ValueError, match=(
            r'the images 000000000001\.jpg and 000000000007\.jpg share the '
            r'id 1:.*files merged from two sets need their ids renumbered')):
        build_coco(ann_file)


def test_coco_with_no_image_left_after_filtering_is_an_error(
        coco_root, build_coco):
    """filter_cfg leaves no image (all under min_size): an error with the
    counts, not "need at least one array to concatenate"."""
    ann_file = osp.join(coco_root, 'annotations', 'instances_train2017.json')
    with pytest.raises(ValueError, match=(
            r'instances_train2017\.json: no image is left for training '
            r"after filter_cfg=\{'filter_empty_gt': True, 'min_size': 1000\}:"
            r' of its 6 images, 6 have annotations of the classes .* and 0 '
            r'are at least min_size=1000 px')):
        build_coco(ann_file,
                   filter_cfg=dict(filter_empty_gt=True, min_size=1000))
