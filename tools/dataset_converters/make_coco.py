"""Generate a small detection data set in the COCO 2017 on-disk layout.

Nothing can be downloaded here, so tests and the demo train on synthetic
scenes (see ``shapes.py``) stored exactly as mmdet's ``CocoDataset`` reads
the real COCO 2017 (``data_root='data/coco/'``)::

    OUT/
    ├── annotations/
    │   ├── instances_train2017.json
    │   └── instances_val2017.json
    ├── train2017/000000000001.jpg ...
    ├── val2017/000000000101.jpg ...
    └── make_coco.json                 (how it was made, the files written)

The categories are the first ``num_classes`` real COCO categories with their
real ids and names ('person' = 1, 'bicycle' = 2, ..., 'traffic light' = 10,
'fire hydrant' = 11, 'stop sign' = 13: ids are not contiguous), so a config
only has to set ``metainfo=dict(classes=<those names>)`` and
``num_classes``. Each category is one shape in its own colour. Image sizes
vary between 0.75x and 1.25x of ``size`` on each side, so batches need
padding as on real COCO. Every image is seeded from ``(seed, split,
index)``: the same arguments give byte-identical files.

An existing set is replaced only with ``--overwrite`` and only file by file:
what the tool wrote, never a file of the user's (``generated.py``).

Example::

    python tools/dataset_converters/make_coco.py --out data/coco \\
        --num-train 200 --num-val 50 --size 320 --num-classes 4
"""
import argparse
import datetime
import json
import math
import os
import os.path as osp
import sys
from typing import List, Optional, Sequence

import numpy as np
from PIL import Image

sys.path.insert(0, osp.dirname(osp.abspath(__file__)))
from generated import (Progress, prepare_out_dir,  # noqa: E402
                       read_marker, write_marker)
from shapes import class_style, render_scene  # noqa: E402

MARKER = 'make_coco.json'
SPLIT_IDS = {'train2017': 0, 'val2017': 1}
# mmdet's COCO configs drop images under 32 px (filter_cfg min_size=32);
# image sides go down to 0.75x of --size.
MIN_SIZE = math.ceil(32 / 0.75)
# (id, name, supercategory) of the 80 COCO 2017 detection categories, in the
# order of mmdet's CocoDataset.METAINFO['classes'].
COCO_CATEGORIES = [
    (1, 'person', 'person'), (2, 'bicycle', 'vehicle'),
    (3, 'car', 'vehicle'), (4, 'motorcycle', 'vehicle'),
    (5, 'airplane', 'vehicle'), (6, 'bus', 'vehicle'),
    (7, 'train', 'vehicle'), (8, 'truck', 'vehicle'), (9, 'boat', 'vehicle'),
    (10, 'traffic light', 'outdoor'), (11, 'fire hydrant', 'outdoor'),
    (13, 'stop sign', 'outdoor'), (14, 'parking meter', 'outdoor'),
    (15, 'bench', 'outdoor'), (16, 'bird', 'animal'), (17, 'cat', 'animal'),
    (18, 'dog', 'animal'), (19, 'horse', 'animal'), (20, 'sheep', 'animal'),
    (21, 'cow', 'animal'), (22, 'elephant', 'animal'), (23, 'bear', 'animal'),
    (24, 'zebra', 'animal'), (25, 'giraffe', 'animal'),
    (27, 'backpack', 'accessory'), (28, 'umbrella', 'accessory'),
    (31, 'handbag', 'accessory'), (32, 'tie', 'accessory'),
    (33, 'suitcase', 'accessory'), (34, 'frisbee', 'sports'),
    (35, 'skis', 'sports'), (36, 'snowboard', 'sports'),
    (37, 'sports ball', 'sports'), (38, 'kite', 'sports'),
    (39, 'baseball bat', 'sports'), (40, 'baseball glove', 'sports'),
    (41, 'skateboard', 'sports'), (42, 'surfboard', 'sports'),
    (43, 'tennis racket', 'sports'), (44, 'bottle', 'kitchen'),
    (46, 'wine glass', 'kitchen'), (47, 'cup', 'kitchen'),
    (48, 'fork', 'kitchen'), (49, 'knife', 'kitchen'),
    (50, 'spoon', 'kitchen'), (51, 'bowl', 'kitchen'), (52, 'banana', 'food'),
    (53, 'apple', 'food'), (54, 'sandwich', 'food'), (55, 'orange', 'food'),
    (56, 'broccoli', 'food'), (57, 'carrot', 'food'), (58, 'hot dog', 'food'),
    (59, 'pizza', 'food'), (60, 'donut', 'food'), (61, 'cake', 'food'),
    (62, 'chair', 'furniture'), (63, 'couch', 'furniture'),
    (64, 'potted plant', 'furniture'), (65, 'bed', 'furniture'),
    (67, 'dining table', 'furniture'), (70, 'toilet', 'furniture'),
    (72, 'tv', 'electronic'), (73, 'laptop', 'electronic'),
    (74, 'mouse', 'electronic'), (75, 'remote', 'electronic'),
    (76, 'keyboard', 'electronic'), (77, 'cell phone', 'electronic'),
    (78, 'microwave', 'appliance'), (79, 'oven', 'appliance'),
    (80, 'toaster', 'appliance'), (81, 'sink', 'appliance'),
    (82, 'refrigerator', 'appliance'), (84, 'book', 'indoor'),
    (85, 'clock', 'indoor'), (86, 'vase', 'indoor'),
    (87, 'scissors', 'indoor'), (88, 'teddy bear', 'indoor'),
    (89, 'hair drier', 'indoor'), (90, 'toothbrush', 'indoor')
]


def coco_classes(num_classes: int) -> tuple:
    """The names of the first ``num_classes`` COCO categories: the
    ``metainfo=dict(classes=...)`` of a config training on the set."""
    return tuple(name for _, name, _ in COCO_CATEGORIES[:num_classes])


def _image_ids(num_train: int, num_val: int) -> dict:
    """The image ids of each split: train 1..N, val N+1..N+M."""
    return {
        'train2017': range(1, num_train + 1),
        'val2017': range(num_train + 1, num_train + num_val + 1),
    }


def _file_name(image_id: int) -> str:
    return f'{image_id:012d}.jpg'


def coco_files(info: dict) -> List[str]:
    """The files :func:`make_coco` writes for ``info`` (its arguments),
    relative to the data root."""
    files = [f'annotations/instances_{split}.json' for split in SPLIT_IDS]
    for split, ids in _image_ids(info['num_train'], info['num_val']).items():
        files += [f'{split}/{_file_name(i)}' for i in ids]
    return files


def _split_dataset(out_dir, split, image_ids, size, num_classes, seed,
                   object_scale, objects_per_image, progress,
                   canvas_scale=1.0):
    """Render the images of one split; return its COCO json dict.

    With ``canvas_scale`` c, each image is c times the side it has at c = 1
    and an object's extent is ``object_scale`` / c of the shorter side: the
    objects keep their size in pixels, the canvas around them grows.
    """
    object_scale = tuple(f / canvas_scale for f in object_scale)
    categories = COCO_CATEGORIES[:num_classes]
    images, annotations = [], []
    os.makedirs(osp.join(out_dir, split), exist_ok=True)
    for index, image_id in enumerate(image_ids):
        rng = np.random.default_rng([seed, SPLIT_IDS[split], index])
        height, width = (int(round(size * canvas_scale * f))
                         for f in rng.uniform(0.75, 1.25, size=2))
        scene = render_scene(rng, height, width, num_classes,
                             num_objects=objects_per_image,
                             scale_range=object_scale)
        file_name = _file_name(image_id)
        Image.fromarray(scene.image).save(
            osp.join(out_dir, split, file_name), quality=92)
        progress.update()
        images.append(
            dict(
                license=1,
                file_name=file_name,
                coco_url='',
                height=height,
                width=width,
                date_captured='2017-01-01 00:00:00',
                flickr_url='',
                id=image_id))
        for box, label, poly, area in zip(scene.boxes, scene.labels,
                                          scene.polygons, scene.areas):
            annotations.append(
                dict(
                    id=len(annotations) + 1 + 10**7 * SPLIT_IDS[split],
                    image_id=image_id,
                    category_id=categories[label][0],
                    # [x, y, w, h], float as in COCO
                    bbox=[round(float(v), 2) for v in box],
                    area=float(area),
                    iscrowd=0,
                    segmentation=[[
                        round(float(v), 2) for v in poly.reshape(-1)
                    ]]))
    return dict(
        info=dict(
            description='Synthetic shapes in the COCO 2017 layout '
            '(mmcpvt tools/dataset_converters/make_coco.py)',
            url='',
            version='1.0',
            year=2017,
            contributor='mmcpvt',
            date_created=datetime.date(2017, 9, 1).isoformat()),
        licenses=[dict(id=1, name='CC0 1.0', url='')],
        images=images,
        annotations=annotations,
        categories=[
            dict(supercategory=sup, id=cat_id, name=name)
            for cat_id, name, sup in categories
        ])


def make_coco(out_dir: str,
              num_train: int = 200,
              num_val: int = 50,
              size: int = 320,
              num_classes: int = 4,
              seed: int = 0,
              overwrite: bool = False,
              object_scale: Sequence[float] = (0.08, 0.4),
              objects_per_image: Sequence[int] = (1, 5),
              progress: bool = False,
              canvas_scale: float = 1.0) -> dict:
    """Write the data set to ``out_dir`` and return its description.

    Args:
        out_dir (str): The data root (``data_root`` of the config).
        num_train (int): Training images; 0 makes a test set
            (``instances_train2017.json`` without images or annotations,
            ``train2017/`` empty). Defaults to 200.
        num_val (int): Validation images, at least 1. Defaults to 50.
        size (int): Nominal image side; each side is drawn from 0.75x to
            1.25x of it. Defaults to 320.
        num_classes (int): Number of categories, 1 to 80: the first ones of
            COCO. Defaults to 4.
        seed (int): Random seed. Defaults to 0.
        overwrite (bool): Replace a data set made by this tool before: the
            files it wrote (listed in ``make_coco.json``); a directory that
            also holds other files is refused and nothing is deleted.
            Defaults to False.
        object_scale (Sequence[float]): Range of an object's extent as a
            fraction of the shorter image side (``scale_range`` of
            ``shapes.render_scene``). Defaults to (0.08, 0.4).
        objects_per_image (Sequence[int]): Inclusive range of the number of
            objects placed in an image (fewer where no free place is found;
            ``num_objects`` of ``shapes.render_scene``). Defaults to (1, 5).
        progress (bool): Show a progress bar on stdout. Defaults to False.
        canvas_scale (float): Images this many times larger than ``size``
            says, with objects of the size in pixels they have at ``size``
            (``object_scale`` applies to the canvas of ``size``): a test set
            of larger inputs with objects at the training scale. Place more
            objects (``objects_per_image``) to keep their density. Defaults
            to 1.

    Returns:
        dict: The arguments, class names and ids and the numbers of images
        and objects; also written to ``out_dir/make_coco.json``, with the
        list of files written.
    """
    if not 1 <= num_classes <= len(COCO_CATEGORIES):
        raise ValueError(f'--num-classes (num_classes) must be 1 to '
                         f'{len(COCO_CATEGORIES)}, got {num_classes}')
    if num_train < 0 or num_val < 1:
        raise ValueError('--num-train (num_train) must be >= 0 (0: a test '
                         'set) and --num-val (num_val) >= 1, got '
                         f'{num_train} and {num_val}')
    if size < MIN_SIZE:
        raise ValueError(
            f'--size (size) must be >= {MIN_SIZE} pixels, got {size}: image '
            f'sides go down to 0.75 x size, and mmdet\'s COCO configs drop '
            f'images under 32 px (filter_cfg min_size=32)')
    if seed < 0:
        raise ValueError(f'--seed (seed) must be >= 0, got {seed}')
    low, high = object_scale
    if not 0 < low <= high <= 1:
        raise ValueError(f'--object-scale (object_scale) must be 0 < LOW <= '
                         f'HIGH <= 1, got {tuple(object_scale)}')
    if not 1 <= canvas_scale <= 8:
        raise ValueError(f'--canvas-scale (canvas_scale) must be 1 to 8 (the '
                         f'image side over --size; objects keep their '
                         f'size), got {canvas_scale}')
    fewest, most = objects_per_image
    if not 1 <= fewest <= most:
        raise ValueError(f'--objects-per-image (objects_per_image) must be '
                         f'1 <= MIN <= MAX, got {tuple(objects_per_image)}')
    prepare_out_dir(out_dir, MARKER, overwrite, 'make_coco.py', coco_files)

    args = dict(
        num_train=num_train,
        num_val=num_val,
        size=size,
        num_classes=num_classes,
        seed=seed,
        object_scale=[low, high],
        objects_per_image=[fewest, most],
        canvas_scale=canvas_scale)
    files = coco_files(args)
    write_marker(out_dir, MARKER, args, files, complete=False)
    os.makedirs(osp.join(out_dir, 'annotations'), exist_ok=True)
    counts = {}
    total = num_train + num_val
    with Progress(total, progress,
                  f'make_coco.py: writing {total} images to {out_dir}') as bar:
        for split, ids in _image_ids(num_train, num_val).items():
            coco = _split_dataset(out_dir, split, ids, size, num_classes,
                                  seed, (low, high), (fewest, most), bar,
                                  canvas_scale)
            with open(osp.join(out_dir, 'annotations',
                               f'instances_{split}.json'), 'w') as f:
                json.dump(coco, f)
            counts[split] = (len(coco['images']), len(coco['annotations']))

    info = dict(
        args,
        classes=coco_classes(num_classes),
        category_ids=[c[0] for c in COCO_CATEGORIES[:num_classes]],
        shapes=[class_style(k)[0] for k in range(num_classes)],
        num_objects={split: n for split, (_, n) in counts.items()})
    return write_marker(out_dir, MARKER, info, files, complete=True)


def read_info(out_dir: str) -> Optional[dict]:
    """The description of a set made by :func:`make_coco`, or None."""
    return read_marker(out_dir, MARKER)


def parse_args(argv=None):
    parser = argparse.ArgumentParser(
        description='Generate a small synthetic detection set in the COCO '
        '2017 layout read by mmdet (train2017/, val2017/, '
        'annotations/instances_{train,val}2017.json)')
    parser.add_argument('--out', required=True, help='output data root')
    parser.add_argument('--num-train', type=int, default=200,
                        help='training images; 0: a test set (no '
                        'train2017 images, instances_train2017.json without '
                        'images)')
    parser.add_argument('--num-val', type=int, default=50,
                        help='validation images (>= 1)')
    parser.add_argument('--size', type=int, default=320,
                        help='nominal image side in pixels (each side '
                        'varies from 0.75x to 1.25x)')
    parser.add_argument('--num-classes', type=int, default=4,
                        help='the first N COCO categories (1 to 80)')
    parser.add_argument('--seed', type=int, default=0)
    parser.add_argument('--object-scale', type=float, nargs=2,
                        default=(0.08, 0.4), metavar=('LOW', 'HIGH'),
                        help='range of an object\'s extent as a fraction '
                        'of the shorter image side')
    parser.add_argument('--objects-per-image', type=int, nargs=2,
                        default=(1, 5), metavar=('MIN', 'MAX'),
                        help='range of the number of objects in an image')
    parser.add_argument('--canvas-scale', type=float, default=1.0,
                        help='images this many times larger than --size, '
                        'with objects of the pixel size they have at --size '
                        '(--object-scale is of the --size canvas): a larger '
                        'canvas with objects at the training scale')
    parser.add_argument('--overwrite', action='store_true',
                        help='replace a data set this tool made before (only '
                        'the files it wrote)')
    parser.add_argument('--no-progress', action='store_true',
                        help='no progress bar (none is shown either when '
                        'stdout is not a terminal)')
    return parser.parse_args(argv)


def main(argv=None):
    args = parse_args(argv)
    show = not args.no_progress and sys.stdout.isatty()
    try:
        info = make_coco(args.out, args.num_train, args.num_val, args.size,
                         args.num_classes, args.seed, args.overwrite,
                         args.object_scale, args.objects_per_image,
                         progress=show, canvas_scale=args.canvas_scale)
    except (ValueError, OSError) as e:
        raise SystemExit(f'make_coco.py: error: {e}')
    print(f'Wrote {info["num_train"]} train and {info["num_val"]} val images '
          f'({info["num_objects"]["train2017"]} and '
          f'{info["num_objects"]["val2017"]} objects) of '
          f'{info["num_classes"]} classes {info["classes"]} to {args.out}')
    fewest = info['objects_per_image'][0]
    for split, n in (('train2017', info['num_train']),
                     ('val2017', info['num_val'])):
        if info['num_objects'][split] < fewest * n:
            print(f'make_coco.py: warning: {split} has '
                  f'{info["num_objects"][split] / n:.1f} objects per image, '
                  f'fewer than the --objects-per-image minimum {fewest}: '
                  f'objects that find no free place are left out. Lower '
                  f'--objects-per-image or --object-scale, or raise --size.',
                  file=sys.stderr)
    print('Configs must set metainfo=dict(classes=...) and num_classes '
          'accordingly; see configs/pvt_peg/README.md')


if __name__ == '__main__':
    main()
