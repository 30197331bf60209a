"""The synthetic COCO and ADE20K sets of mmcpvt.datasets.synthetic load with
the readers of the real ones: pycocotools' COCO, mmdet's CocoDataset and
mmseg's ADE20KDataset, unchanged. The generators (COCO, ADE20K, ImageNet)
delete only what they wrote, refuse bad arguments with a message, and show
progress. The COCO and ImageNet ones make test sets: larger canvases with
objects at the training scale, without a training split."""
import io
import json
import os
import os.path as osp
import re
from collections import Counter

import numpy as np
import pytest
from PIL import Image

from mmcpvt.datasets.synthetic.ade20k import make_ade20k
from mmcpvt.datasets.synthetic.coco import (COCO_CATEGORIES, GENERATOR,
                                            coco_classes, make_coco)
from mmcpvt.datasets.synthetic.imagenet import (_image_rng, make_imagenet,
                                                render_image)
from mmcpvt.datasets.synthetic.shapes import (SHAPES, polygon_mask,
                                              render_scene)
from tests.utils import explain, run_tool

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
def test_render_scene_is_deterministic_consistent_and_scaled():
    a = render_scene(np.random.default_rng(7), 90, 120, 10, (3, 8))
    b = render_scene(np.random.default_rng(7), 90, 120, 10, (3, 8))
    assert np.array_equal(a.image, b.image)
    assert np.array_equal(a.class_map, b.class_map)
    assert a.image.shape == (90, 120, 3) and a.image.dtype == np.uint8
    assert len(a.labels) >= 1
    for box, label, poly, area in zip(a.boxes, a.labels, a.polygons,
                                      a.areas):
        mask = polygon_mask(poly, 90, 120)
        ys, xs = np.nonzero(mask)
        x, y, w, h = box
        assert (xs.min(), ys.min()) == (x, y)
        assert (xs.max() + 1, ys.max() + 1) == (x + w, y + h)
        assert mask.sum() == area
        assert (a.class_map[mask] == label + 1).all()
    # nothing is occluded: the polygons' masks are disjoint and make up the
    # objects of the class map
    assert (a.class_map > 0).sum() == a.areas.sum()
    # objects span the configured scales of the shorter side
    rng = np.random.default_rng(0)
    extents = []
    for _ in range(60):
        s = render_scene(rng, 100, 150, len(SHAPES))
        extents += list(s.boxes[:, 2:].max(1) / 100)
    assert min(extents) < 0.12 and max(extents) > 0.3
    assert max(extents) <= 0.41


@pytest.mark.parametrize('args, got', [
    ((8, 100, 3), 'got 8x100, 3 and'), ((64, 64, 0), 'got 64x64, 0 and'),
    ((64, 64, 3, (1, 5), (0.5, 0.1)), r'got 64x64, 3 and \(0\.5, 0\.1\)$')])
def test_render_scene_rejects_bad_arguments(args, got):
    with pytest.raises(ValueError, match='at least 16x16, num_classes >= 1 '
                       'and 0 < low <= high <= 1 of scale_range, ' + got):
        render_scene(np.random.default_rng(0), *args)


# ------------------------------------------------------------------- COCO
def test_coco_loads_with_pycocotools_split_by_split(coco_root):
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
    # each split holds its images; image and annotation ids are unique
    ids = {}
    for split, n in (('train2017', NUM_TRAIN), ('val2017', NUM_VAL)):
        with open(osp.join(coco_root, 'annotations',
                           f'instances_{split}.json')) as f:
            data = json.load(f)
        assert len(data['images']) == n
        assert sorted(os.listdir(osp.join(coco_root, split))) == sorted(
            i['file_name'] for i in data['images'])
        ids[split] = ({i['id'] for i in data['images']},
                      {a['id'] for a in data['annotations']})
    assert not ids['train2017'][0] & ids['val2017'][0]
    assert not ids['train2017'][1] & ids['val2017'][1]


def test_coco_loads_with_mmdet_and_its_classes(coco_root):
    from mmdet.datasets import CocoDataset
    assert coco_classes(80) == tuple(CocoDataset.METAINFO['classes'])
    assert len({c[0] for c in COCO_CATEGORIES}) == 80
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
    # the boxes: as pycocotools reads them
    labels = {inst['bbox_label'] for i in range(len(ds))
              for inst in ds.get_data_info(i)['instances']}
    assert labels <= set(range(K_COCO)) and len(labels) > 3


def test_coco_refuses_a_folder_it_did_not_make(tmp_path):
    (tmp_path / 'notes.txt').write_text('keep me')
    with pytest.raises(FileExistsError, match=r'not empty \(1 files: notes'
                       r'\.txt\) and was not made by make_coco.py .*refusing'):
        make_coco(str(tmp_path), 2, 1, 64, 2, overwrite=True)
    assert (tmp_path / 'notes.txt').read_text() == 'keep me'


def test_coco_objects_per_image(tmp_path):
    out = str(tmp_path / 'coco')
    info = make_coco(out, 6, 2, 96, 2, objects_per_image=(4, 6))
    assert info['objects_per_image'] == [4, 6]
    with open(osp.join(out, 'annotations', 'instances_train2017.json')) as f:
        coco = json.load(f)
    per_image = Counter(ann['image_id'] for ann in coco['annotations'])
    # fewer than 4 only where no free place was found
    assert max(per_image.values()) <= 6
    assert np.mean(list(per_image.values())) > 3


def test_coco_test_set_on_a_larger_canvas(tmp_path):
    """num_train=0: a validation split that pycocotools reads, a training
    json without images or annotations, an empty train2017/.
    --canvas-scale 2: images twice the side, objects of the same pixel
    sizes (box sizes in the json), unlike the same images scaled up."""
    from pycocotools.coco import COCO

    def make(canvas_scale):
        out = tmp_path / f'coco{canvas_scale}'
        info = make_coco(str(out), 0, 24, 64, 2, object_scale=(0.2, 0.5),
                         objects_per_image=(1, 3), canvas_scale=canvas_scale)
        assert info['canvas_scale'] == canvas_scale
        assert (info['num_train'], info['num_val']) == (0, 24)
        assert info['num_objects']['train2017'] == 0
        val = COCO(str(out / 'annotations' / 'instances_val2017.json'))
        assert len(val.getImgIds()) == 24 and len(val.getAnnIds()) >= 24
        for img in val.loadImgs(val.getImgIds()):
            with Image.open(out / 'val2017' / img['file_name']) as im:
                assert im.size == (img['width'], img['height'])
        sides = [min(i['height'], i['width']) for i in val.dataset['images']]
        boxes = [max(a['bbox'][2:]) for a in val.dataset['annotations']]
        return out, np.median(sides), np.median(boxes)

    _, side1, box1 = make(1.0)
    out, side2, box2 = make(2.0)
    assert side2 / side1 == pytest.approx(2, rel=0.1)
    assert box2 / box1 == pytest.approx(1, rel=0.15)
    assert box2 / side2 < 0.6 * box1 / side1  # objects take less of it
    train = COCO(str(out / 'annotations' / 'instances_train2017.json'))
    assert train.getImgIds() == [] and train.getAnnIds() == []
    assert len(train.getCatIds()) == 2
    assert os.listdir(out / 'train2017') == []
    assert sorted(_listed(str(out), 'make_coco.json')['files'] +
                  ['make_coco.json']) == _files(str(out))


# --------------------------------------------------------------- ImageNet
def test_imagenet_test_set_on_a_larger_canvas(tmp_path):
    """train_per_class=0: meta/train.txt is empty and there is no train/.
    --canvas-scale 2: images twice the side, each the render of its class
    with the generator's rng, whose object mask has the pixel extent and
    area it has at scale 1 (not 2x and 4x, as in the same images scaled up)
    and lies anywhere on the larger canvas."""
    size, classes, per_class, seed = 32, 4, 6, 3
    out = tmp_path / 'canvas2'
    info = make_imagenet(str(out), classes, 0, per_class, size, seed,
                         canvas_scale=2.0)
    assert info['canvas_scale'] == 2.0
    assert (info['num_train'], info['num_val']) == (0, classes * per_class)
    assert (out / 'meta' / 'train.txt').read_text() == ''
    assert not (out / 'train').exists()
    assert sorted(_listed(str(out), 'make_imagenet.json')['files'] +
                  ['make_imagenet.json']) == _files(str(out))

    areas, centres, renders = {1: [], 2: []}, [], {}
    for label in range(classes):
        for i in range(50):  # the first per_class are the files written
            for scale in (1, 2):
                img, mask = render_image(label, size,
                                         _image_rng(seed, 'val', label, i),
                                         float(scale))
                assert img.shape == (size * scale, size * scale, 3)
                assert mask.shape == img.shape[:2]
                ys, xs = np.nonzero(mask)
                # 35-60% of size wide at any scale (scaled up: to 120%)
                assert max(np.ptp(xs), np.ptp(ys)) + 1 <= 0.6 * size + 1
                areas[scale].append(mask.sum())
            centres.append((xs.mean(), ys.mean()))
            if i < per_class:
                jpeg = io.BytesIO()
                Image.fromarray(img, 'RGB').save(jpeg, 'JPEG', quality=92)
                renders[jpeg.getvalue()] = label
    # the files written are these renders, each of its label
    lines = (out / 'meta' / 'val.txt').read_text().splitlines()
    assert len(lines) == classes * per_class
    for line in lines:
        name, label = line.split()
        assert renders[(out / 'val' / name).read_bytes()] == int(label)
    # the same mean area (scaled up: 4x)
    assert np.mean(areas[2]) / np.mean(areas[1]) == pytest.approx(1, rel=0.1)
    assert max(max(c) for c in centres) > 1.5 * size  # all over the canvas


# ----------------------------------------------------------------- ADE20K
def test_ade20k_layout_loads_with_mmseg(ade_out):
    from mmseg.datasets import ADE20KDataset
    from mmseg.datasets.transforms import LoadAnnotations
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


# ------------------------------------------- what the generators write
# name: (function, small arguments, marker file)
GENERATORS = {
    'coco': (make_coco, dict(num_train=3, num_val=1, size=48,
                             num_classes=2), 'make_coco.json'),
    'ade20k': (make_ade20k, dict(num_train=3, num_val=1, size=32,
                                 num_classes=2), 'make_ade20k.json'),
    'imagenet': (make_imagenet, dict(num_classes=2, train_per_class=2,
                                     val_per_class=1, size=16),
                 'make_imagenet.json'),
}


@pytest.mark.parametrize('name, changes, message', [
    ('coco', dict(num_classes=81), 'num_classes.* 1 to 80, got 81'),
    ('coco', dict(num_train=-1), r'num_train.* >= 0 \(0: a test set\), '
     'got -1'),
    ('coco', dict(num_val=0), r'num_val.* >= 1, got 0'),
    ('coco', dict(objects_per_image=(3, 2)), r'--objects-per-image '
     r'\(objects_per_image\) must be 1 <= MIN <= MAX, got \[3, 2\]'),
    ('coco', dict(canvas_scale=0.5), r'--canvas-scale \(canvas_scale\) '
     r'must be 1 to 8 \(the image side over --size.*got 0.5'),
    ('imagenet', dict(canvas_scale=9), 'canvas_scale.* 1 to 8 .*got 9'),
    ('imagenet', dict(train_per_class=-1), 'train_per_class.*got -1'),
    ('imagenet', dict(val_per_class=0), 'val_per_class.*got 0'),
    ('ade20k', dict(num_classes=151), 'num_classes.* 1 to 150, got 151'),
    ('ade20k', dict(size=16), 'size.* >= 32 pixels, got 16'),
])
def test_bad_arguments_are_refused(tmp_path, name, changes, message):
    """ValueError naming the option, what is allowed and the value;
    nothing written."""
    make, kwargs, _ = GENERATORS[name]
    with pytest.raises(ValueError, match=message + '$'):
        make(str(tmp_path / 'x'), **dict(kwargs, **changes))
    assert not (tmp_path / 'x').exists()


def _files(root):
    """Every file under ``root``, relative to it."""
    return sorted(
        osp.relpath(osp.join(d, f), root) for d, _, names in os.walk(root)
        for f in names)


def _listed(out, marker):
    with open(osp.join(out, marker)) as f:
        return json.load(f)


@pytest.mark.parametrize('name', GENERATORS)
def test_overwrite_deletes_only_what_the_generator_wrote(tmp_path, name):
    """--overwrite on a generated set that also holds the user's files:
    refused, those files named, nothing deleted. Without them, the set is
    replaced and nothing of the old one is left."""
    make, kwargs, marker = GENERATORS[name]
    out = tmp_path / name
    make(str(out), **kwargs)
    generated = _files(out)
    mine = [osp.join(osp.dirname(generated[-1]), 'mine.jpg'),
            osp.join('notes', 'todo.txt')]
    for rel in mine:
        (out / rel).parent.mkdir(exist_ok=True)
        (out / rel).write_text('keep me')
    with pytest.raises(FileExistsError) as e:
        make(str(out), overwrite=True, **kwargs)
    assert f'{out} holds 2 files that make_{name}.py did not write: ' \
        f'{", ".join(sorted(mine))}; nothing is deleted.' in str(e.value)
    assert _files(out) == sorted(generated + mine)

    for rel in mine:
        (out / rel).unlink()
    (out / 'notes').rmdir()
    smaller = dict(kwargs, **{next(iter(kwargs)): 1})  # fewer images
    make(str(out), overwrite=True, **smaller)
    assert sorted(_listed(out, marker)['files'] + [marker]) == _files(out)
    assert len(_files(out)) < len(generated)


def test_overwrite_of_a_set_made_before_the_file_list(tmp_path):
    """A marker without a file list (written by an earlier version): the
    files are worked out from its arguments, with the same rule. A run
    stopped half-way (its marker says complete=False) is not a data set,
    and a new run replaces it without --overwrite."""
    out = tmp_path / 'coco'
    make_coco(str(out), 3, 1, 48, 2)
    listed = _listed(str(out), 'make_coco.json')
    (out / 'make_coco.json').write_text(json.dumps(
        {k: v for k, v in listed.items() if k not in ('files', 'complete')}))
    (out / 'train2017' / 'mine.jpg').write_text('keep me')
    with pytest.raises(FileExistsError, match=r'1 files that make_coco.py '
                       r'did not write: train2017/mine.jpg'):
        make_coco(str(out), 2, 1, 48, 2, overwrite=True)
    (out / 'train2017' / 'mine.jpg').unlink()
    make_coco(str(out), 2, 1, 48, 2, overwrite=True)
    assert len(os.listdir(out / 'train2017')) == 2

    listed = _listed(str(out), 'make_coco.json')
    (out / 'make_coco.json').write_text(
        json.dumps(dict(listed, complete=False)))
    (out / 'annotations' / 'instances_val2017.json').unlink()
    assert GENERATOR.read_info(str(out)) is None
    info = make_coco(str(out), 2, 1, 48, 2)  # no overwrite
    assert GENERATOR.read_info(str(out)) == json.loads(json.dumps(info))


@pytest.mark.parametrize('tool, args, message', [
    # refused before anything else (here a size too small)
    ('make_imagenet.py', ['--out', 'FILE', '--size', '1'], r'--out (.*)FILE:'
     r' \1FILE is a file; it takes a directory for the data set \(made if '
     r'missing\)$'),
    ('make_coco.py', ['--out', 'SET'], r'.*SET holds a data set that '
     r'make_coco.py made; pass --overwrite'),
    ('make_coco.py', ['--out', 'NEW', '--num-train', '-3'], r'--num-train '
     r'\(num_train\) must be >= 0 \(0: a test set\), got -3$'),
    ('make_coco.py', ['--out', 'NEW', '--size', '40'], r'--size \(size\) '
     r'must be >= 43 pixels: image sides go down to 0.75 x size.*, got 40$'),
    ('make_ade20k.py', ['--out', 'NEW', '--seed', '-1'], r'--seed \(seed\) '
     r'must be >= 0, got -1'),
], ids=['out-is-file', 'out-is-set', 'negative-count',
        'size-too-small', 'negative-seed'])
def test_cli_errors_are_one_line(tmp_path, tool, args, message):
    """Refused arguments and output paths end in one line that says what
    was given and what to do; no traceback, nothing written."""
    (tmp_path / 'FILE').write_text('a file')
    make_coco(str(tmp_path / 'SET'), 1, 1, 48, 1)
    before = _files(tmp_path)
    args = [str(tmp_path / a) if a in ('FILE', 'SET', 'NEW')
            else a for a in args]
    proc = run_tool(osp.join('tools', 'dataset_converters', tool), *args)
    assert proc.returncode == 1, explain(proc)
    assert 'Traceback' not in proc.stderr, explain(proc)
    error, = proc.stderr.strip().splitlines()
    assert re.match(f'{tool}: error: {message}', error), error
    assert _files(tmp_path) == before


@pytest.mark.parametrize('name', GENERATORS)
def test_cli_writes_what_the_function_writes(tmp_path, name):
    """Each parameter of the function is an option, with its default and
    the text of its docstring as help; the same arguments write the same
    files, byte for byte, and the marker lists exactly them."""
    make, kwargs, marker = GENERATORS[name]
    info = make(str(tmp_path / 'function'), **kwargs)
    listed = _listed(tmp_path / 'function', marker)
    assert listed['complete'] is True
    assert sorted(listed['files'] + [marker]) == _files(tmp_path / 'function')
    assert 'files' not in info and 'complete' not in info
    assert re.fullmatch('[0-9a-f]{12}', info['generator'])  # the code's id
    tool = osp.join('tools', 'dataset_converters', f'make_{name}.py')
    proc = run_tool(tool, '--out', str(tmp_path / 'cli'), *[
        f'--{k.replace("_", "-")}={v}' for k, v in kwargs.items()])
    assert proc.returncode == 0, explain(proc)
    assert proc.stdout.startswith('Wrote '), explain(proc)
    files = _files(tmp_path / 'function')
    assert _files(tmp_path / 'cli') == files
    for rel in files:
        if rel != marker:  # it holds the output path
            assert (tmp_path / 'cli' / rel).read_bytes() == \
                (tmp_path / 'function' / rel).read_bytes(), rel
    if name == 'coco':
        usage = run_tool(tool, '--help').stdout
        assert re.search(r'--object-scale LOW HIGH\s+Range of an object\'s '
                         r'extent', usage), usage
        assert 'Defaults to (0.08, 0.4).' in usage and '--overwrite' in usage


def test_cli_warns_when_objects_do_not_fit(tmp_path):
    """Objects too large for --size to place --objects-per-image of them:
    a warning with the number placed and what to change."""
    proc = run_tool(
        'tools/dataset_converters/make_coco.py', '--out',
        str(tmp_path / 'coco'), '--num-train', '2', '--num-val', '1',
        '--size', '43', '--object-scale', '0.5', '0.5', '--objects-per-image',
        '6', '6')
    assert proc.returncode == 0, explain(proc)
    assert re.search(r'make_coco.py: warning: train2017 has [\d.]+ objects '
                     r'per image, fewer than the --objects-per-image minimum '
                     r'6.*Lower --objects-per-image or --object-scale, or '
                     r'raise --size', proc.stderr), explain(proc)


def test_progress_bar(tmp_path, capsys):
    """mmengine's bar on stdout, ending at N/N, updated at most ~100 times
    (a log that captures it gets one short line); none by default."""
    make_imagenet(str(tmp_path / 'a'), num_classes=1, train_per_class=300,
                  val_per_class=2, size=8, progress=True)
    out = capsys.readouterr().out
    assert out.startswith('make_imagenet.py: writing 302 images to ')
    updates = out.split('\r')
    assert 300 // 3 <= len(updates) - 1 <= 101
    assert updates[-1].startswith('[' + '>' * 10) and '302/302' in updates[-1]
    make_coco(str(tmp_path / 'b'), 2, 1, 48, 2)
    assert capsys.readouterr().out == ''
