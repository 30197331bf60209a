"""Bad data stops with an error that names the file, or is counted in a
warning, instead of training silently: ``CheckSegMap`` and
``CheckedCocoDataset`` (mmcpvt/datasets; tests/test_configs/
test_config_files.py checks that our configs use them). Generated data sets,
broken one way per test, are built from the real configs as the runner
builds them.
"""
import copy
import json
import logging
import os.path as osp

import numpy as np
import pytest
from mmengine.logging import MMLogger
from mmengine.registry import DefaultScope
from PIL import Image

from mmcpvt.datasets import CheckSegMap
from mmcpvt.datasets.synthetic.ade20k import make_ade20k
from mmcpvt.datasets.synthetic.coco import coco_classes, make_coco
from tests.utils import ROOT, load_config

SEG_CONFIG = 'configs/pvt_peg/fpn_pvt-t-peg_4xb4-80k_ade20k-512x512.py'
DET_CONFIG = 'configs/retinanet_pvt_tiny_peg_1x_coco.py'
K = 3


def _build(config, loader, **changes):
    """The data set of ``loader`` of ``config``, built in its scope as the
    runner builds it, with ``changes`` to its config."""
    from mmengine.registry import DATASETS
    cfg = load_config(osp.join(ROOT, config), import_custom_modules=False)
    dataset = copy.deepcopy(cfg[loader].dataset)
    dataset.update(changes)
    with DefaultScope.overwrite_default_scope(cfg.default_scope):
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


@pytest.mark.parametrize('loader', ['train_dataloader', 'val_dataloader'])
def test_seg_map_of_another_size_is_an_error(ade_root, loader):
    """A label map 5 px wider than its image: an error naming both files and
    both sizes, from the training pipeline (labels loaded before any
    resize) and the test one (loaded after Resize)."""
    split = 'training' if loader == 'train_dataloader' else 'validation'
    ds = _build(SEG_CONFIG, loader, data_root=ade_root)
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


def test_seg_map_of_16_bits_with_values_over_255_is_an_error(ade_root):
    """A 16-bit label map holding 300: LoadAnnotations casts it to uint8
    (300 -> 44, a valid class of a 150-class model), so the stored file is
    checked, with an error naming it, the value and what is allowed. A
    16-bit map whose values fit in 0-255 loads as its 8-bit twin."""
    ds = _build(SEG_CONFIG, 'train_dataloader', data_root=ade_root)
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


@pytest.mark.parametrize('seg, changes, error', [
    # labels outside [0, num_classes) other than 255: the loss cannot take
    # them
    ([[9, 4, 255], [1, 2, 255]], {},
     r'a\.png: holds the labels \[4, 9\].*outside \[0, 4\).*'
     r'decode_head\.num_classes'),
    # without reduce_zero_label, a map of 0..K says to set it
    ([[0, 4]], dict(reduce_zero_label=False), 'set reduce_zero_label=True'),
    # a colour (RGB-saved) label map loads as (H, W, 3)
    (np.zeros((4, 5, 3)), {}, r'label map a\.png: loads as an array of shape '
     r'\(4, 5, 3\), not \(height, width\)'),
], ids=['outside-classes', 'zero-label', 'colour'])
def test_unusable_label_values_are_an_error(seg, changes, error):
    seg = np.array(seg, np.uint8)
    results = dict(gt_seg_map=seg, seg_map_path='a.png', img_path='a.jpg',
                   ori_shape=seg.shape[:2], reduce_zero_label=True)
    with pytest.raises(ValueError, match=error):
        CheckSegMap(num_classes=4)(dict(results, **changes))


def test_check_seg_map_passes_usable_labels():
    seg = np.array([[0, 3, 255], [1, 2, 255]], np.uint8)
    results = dict(gt_seg_map=seg, seg_map_path='a.png', img_path='a.jpg',
                   ori_shape=(2, 3), reduce_zero_label=True)
    assert CheckSegMap(num_classes=4)(dict(results)) is not None
    # without num_classes the values are not checked
    assert CheckSegMap()(dict(results, gt_seg_map=seg + 100)) is not None
    # the inferencers remove LoadAnnotations: nothing to check
    results = dict(img=np.zeros((4, 5, 3), np.uint8), ori_shape=(4, 5))
    assert CheckSegMap(num_classes=2)(dict(results)).keys() == results.keys()


# --------------------------------------------------------------- detection
@pytest.fixture(scope='module')
def coco_root(tmp_path_factory):
    root = str(tmp_path_factory.mktemp('data') / 'coco') + '/'
    make_coco(root, num_train=6, num_val=2, size=64, num_classes=K)
    return root


@pytest.fixture
def coco_file(coco_root, tmp_path):
    """Writes the generated training json, changed by ``change(data, val)``
    (val: the validation json), to tmp_path; returns its path."""

    def write(change=None):
        files = {}
        for split in ('train', 'val'):
            with open(osp.join(coco_root, 'annotations',
                               f'instances_{split}2017.json')) as f:
                files[split] = json.load(f)
        if change:
            change(files['train'], files['val'])
        path = str(tmp_path / 'instances_train2017.json')
        with open(path, 'w') as f:
            json.dump(files['train'], f)
        return path

    return write


@pytest.fixture
def build_coco(coco_root):
    """Build the training data set of the entry config on ``ann_file``."""

    def build(ann_file, **changes):
        changes = dict(dict(data_root=coco_root, ann_file=ann_file,
                            metainfo=dict(classes=coco_classes(K))),
                       **changes)
        return _build(DET_CONFIG, 'train_dataloader', **changes)

    return build


def test_checked_coco_gives_mmdets_data_list(coco_root, coco_file,
                                             build_coco):
    """Same data list as mmdet's CocoDataset, filter_empty_gt included: an
    image whose annotations are all removed is filtered out by both."""
    from mmdet.datasets import CocoDataset

    def drop_image_1(data, val):
        data['annotations'] = [a for a in data['annotations']
                               if a['image_id'] != 1]

    ann_file = coco_file(drop_image_1)
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


def test_coco_without_annotations_is_an_error(coco_file, build_coco):
    """A training file with images and no annotations: an error naming the
    file and what is expected, instead of mmengine's "need at least one
    array to concatenate". Testing on such a file (test-dev) is fine."""
    ann_file = coco_file(lambda data, val: data.update(annotations=[]))
    with pytest.raises(ValueError) as e:
        build_coco(ann_file)
    assert str(e.value).startswith(
        f"{ann_file}: holds 6 images and no annotations ('annotations' is "
        f"empty): a training set needs boxes.")
    assert 'bbox=[x, y, w, h]' in str(e.value)
    assert len(build_coco(ann_file, test_mode=True)) == 6


def test_coco_dropped_annotations_are_counted_per_reason(
        coco_file, build_coco, logged):
    """mmdet drops these without a word: one warning names the file and
    counts them per reason, with their ids; the data list is mmdet's."""

    def break_some(data, val):
        anns = data['annotations']
        anns[0]['bbox'][:2] = [500., 500.]  # outside its image
        anns[1]['bbox'][2] = -4.  # negative width
        anns[2]['bbox'][3] = -1.  # negative height
        anns[3]['category_id'] = 99  # no such category
        anns[4]['image_id'] = 12345  # no such image
        anns[5]['bbox'][2] = 0.5  # under 1 px

    ann_file = coco_file(break_some)
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


def _same_id(data, val):
    data['images'][3]['id'] = data['images'][1]['id']


def _merge_val(data, val):  # val's ids restarted from 1, as in another file
    for i, img in enumerate(val['images']):
        img['id'] = i + 1
    data['images'] += val['images']


def _short_bbox(data, val):
    data['annotations'][1]['bbox'] = [1, 2, 3]


@pytest.mark.parametrize('change, changes, expected', [
    (lambda data, val: data.pop('images'), {},
     r"has no 'images' list \(its 'images' has none; its keys: \["
     r"'annotations', 'categories'.*\)\. A COCO detection file is a "
     r'dict with images='),
    (lambda data, val: data.pop('categories'), {},
     r"has no 'categories' list"),
    (lambda data, val: data['annotations'][2].pop('area'), {},
     r": 1 of the \d+ annotations lack keys that mmdet reads \(annotations "
     r"#2; the first lacks \['area'\]"),
    (_short_bbox, {}, r': 1 annotations have a bbox that is not 4 numbers '
     r'\[x, y, w, h\] \(annotations #1; the first, id \d+: bbox=\[1, 2, 3\]'),
    (None, dict(metainfo=dict(classes=('person', 'bike'))),
     r"instances_train2017\.json: metainfo classes bike are not categories "
     r"of the file \(its 3 categories: person, bicycle, car\)"),
    (None, dict(metainfo=dict(classes=('car', 'person'))),
     r"metainfo classes \('car', 'person'\) are not in the order of the "
     r"categories of .*: mmdet numbers them in the file's order, "
     r"\('person', 'car'\)"),
    # pycocotools keeps the last image of an id and gives it the boxes of
    # both: two images of one file with one id, or the images of two files
    # merged without renumbering
    (_same_id, {},
     r'instances_train2017\.json: the images 000000000002\.jpg and '
     r'000000000004\.jpg share the id 2: pycocotools keeps the last '
     r'image of an id'),
    (_merge_val, {},
     r'the images 000000000001\.jpg and 000000000007\.jpg share the '
     r'id 1:.*files merged from two sets need their ids renumbered'),
    # filter_cfg leaves no image: the counts, not "need at least one array
    # to concatenate"
    (None, dict(filter_cfg=dict(filter_empty_gt=True, min_size=1000)),
     r'instances_train2017\.json: no image is left for training '
     r"after filter_cfg=\{'filter_empty_gt': True, 'min_size': 1000\}:"
     r' of its 6 images, 6 have annotations of the classes .* and 0 '
     r'are at least min_size=1000 px'),
], ids=['no-images', 'no-categories', 'no-area', 'short-bbox',
        'unknown-class', 'class-order', 'same-id', 'merged-ids',
        'none-left'])
def test_unusable_coco_file_is_an_error(coco_file, build_coco, change,
                                        changes, expected):
    ann_file = coco_file(change)
    with pytest.raises(ValueError, match=expected) as e:
        build_coco(ann_file, **changes)
    assert str(e.value).startswith(ann_file)
