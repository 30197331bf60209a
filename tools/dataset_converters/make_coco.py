"""Generate a small detection data set in the COCO 2017 on-disk layout.

Synthetic scenes (``shapes.py``) stored exactly as mmdet's
``CocoDataset`` reads the real COCO 2017 (``data_root='data/coco/'``)::

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
padding as on real COCO. Seeding, ``--out`` and ``--overwrite``: as every
generator (``generated.py``).

Example::

    python tools/dataset_converters/make_coco.py --out data/coco \\
        --num-train 200 --num-val 50 --size 320 --num-classes 4
"""
import datetime
import json
import math
import os
import os.path as osp
import sys
from typing import List, Sequence

sys.path.insert(0, osp.dirname(osp.abspath(__file__)))
from generated import Generator, save_image  # noqa: E402
from shapes import class_style, scenes  # noqa: E402

SPLIT_IDS = {'train2017': 0, 'val2017': 1}
# mmdet's COCO configs drop images under 32 px (filter_cfg min_size=32);
# image sides go down to 0.75x of --size.
MIN_SIZE = math.ceil(32 / 0.75)
# The 80 COCO 2017 detection categories, in the order of mmdet's
# CocoDataset.METAINFO['classes']: ids (not contiguous), names, and the
# supercategories with the number of categories of each, in turn.
_IDS = [*range(1, 12), *range(13, 26), 27, 28, *range(31, 45),
        *range(46, 66), 67, 70, *range(72, 83), *range(84, 91)]
_NAMES = ('person, bicycle, car, motorcycle, airplane, bus, train, truck, '
          'boat, traffic light, fire hydrant, stop sign, parking meter, '
          'bench, bird, cat, dog, horse, sheep, cow, elephant, bear, '
          'zebra, giraffe, backpack, umbrella, handbag, tie, suitcase, '
          'frisbee, skis, snowboard, sports ball, kite, baseball bat, '
          'baseball glove, skateboard, surfboard, tennis racket, bottle, '
          'wine glass, cup, fork, knife, spoon, bowl, banana, apple, '
          'sandwich, orange, broccoli, carrot, hot dog, pizza, donut, '
          'cake, chair, couch, potted plant, bed, dining table, toilet, '
          'tv, laptop, mouse, remote, keyboard, cell phone, microwave, '
          'oven, toaster, sink, refrigerator, book, clock, vase, scissors, '
          'teddy bear, hair drier, toothbrush')
_SUPERCATEGORIES = dict(person=1, vehicle=8, outdoor=5, animal=10,
                        accessory=5, sports=10, kitchen=7, food=10,
                        furniture=6, electronic=6, appliance=5, indoor=7)
# (id, name, supercategory) of each
COCO_CATEGORIES = list(zip(_IDS, _NAMES.split(', '), [
    sup for sup, n in _SUPERCATEGORIES.items() for _ in range(n)]))


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


GENERATOR = Generator('make_coco.py', coco_files)
read_info = GENERATOR.read_info


def _split_dataset(out_dir, split, image_ids, args, progress):
    """Render the images of one split; return its COCO json dict.

    With ``canvas_scale`` c, each image is c times the side it has at c = 1
    and an object's extent is ``object_scale`` / c of the shorter side: the
    objects keep their size in pixels, the canvas around them grows.
    """
    c = args['canvas_scale']
    categories = COCO_CATEGORIES[:args['num_classes']]
    images, annotations = [], []
    for image_id, scene in zip(image_ids, scenes(
            args['seed'], SPLIT_IDS[split], len(image_ids), args['size'],
            args['num_classes'], c,
            num_objects=tuple(args['objects_per_image']),
            scale_range=tuple(f / c for f in args['object_scale']))):
        height, width = scene.image.shape[:2]
        file_name = _file_name(image_id)
        save_image(osp.join(out_dir, split, file_name), scene.image)
        progress.update()
        images.append(dict(
            license=1, file_name=file_name, coco_url='', height=height,
            width=width, date_captured='2017-01-01 00:00:00', flickr_url='',
            id=image_id))
        for box, label, poly, area in zip(scene.boxes, scene.labels,
                                          scene.polygons, scene.areas):
            annotations.append(dict(
                id=len(annotations) + 1 + 10**7 * SPLIT_IDS[split],
                image_id=image_id, category_id=categories[label][0],
                # [x, y, w, h], float as in COCO
                bbox=[round(float(v), 2) for v in box], area=float(area),
                iscrowd=0,
                segmentation=[[round(float(v), 2) for v in poly.ravel()]]))
    return dict(
        info=dict(description='Synthetic shapes in the COCO 2017 layout '
                  '(mmcpvt tools/dataset_converters/make_coco.py)', url='',
                  version='1.0', year=2017, contributor='mmcpvt',
                  date_created=datetime.date(2017, 9, 1).isoformat()),
        licenses=[dict(id=1, name='CC0 1.0', url='')],
        images=images, annotations=annotations,
        categories=[dict(supercategory=sup, id=cat_id, name=name)
                    for cat_id, name, sup in categories])


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
        overwrite (bool): Replace a data set made by this tool before (only
            the files it wrote; see ``generated.py``). Defaults to False.
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
    (low, high), (fewest, most) = object_scale, objects_per_image
    args = dict(num_train=num_train, num_val=num_val, size=size,
                num_classes=num_classes, seed=seed,
                object_scale=[low, high], objects_per_image=[fewest, most],
                canvas_scale=canvas_scale)
    checks = [
        ('num_classes', num_classes,
         1 <= num_classes <= len(COCO_CATEGORIES),
         f'1 to {len(COCO_CATEGORIES)}'),
        ('num_train', num_train, num_train >= 0, '>= 0 (0: a test set)'),
        ('num_val', num_val, num_val >= 1, '>= 1'),
        ('size', size, size >= MIN_SIZE,
         f'>= {MIN_SIZE} pixels: image sides go down to 0.75 x size, and '
         f"mmdet's COCO configs drop images under 32 px (filter_cfg "
         f'min_size=32)'),
        ('seed', seed, seed >= 0, '>= 0'),
        ('object_scale', object_scale, 0 < low <= high <= 1,
         '0 < LOW <= HIGH <= 1'),
        ('canvas_scale', canvas_scale, 1 <= canvas_scale <= 8,
         '1 to 8 (the image side over --size; objects keep their size)'),
        ('objects_per_image', objects_per_image, 1 <= fewest <= most,
         '1 <= MIN <= MAX'),
    ]

    def write(bar):
        num_objects = {}
        for split, ids in _image_ids(num_train, num_val).items():
            for sub in (split, 'annotations'):  # train2017/ even if empty
                os.makedirs(osp.join(out_dir, sub), exist_ok=True)
            coco = _split_dataset(out_dir, split, ids, args, bar)
            with open(osp.join(out_dir, 'annotations',
                               f'instances_{split}.json'), 'w') as f:
                json.dump(coco, f)
            num_objects[split] = len(coco['annotations'])
        return dict(
            classes=coco_classes(num_classes),
            category_ids=[c[0] for c in COCO_CATEGORIES[:num_classes]],
            shapes=[class_style(k)[0] for k in range(num_classes)],
            num_objects=num_objects)

    return GENERATOR.write(out_dir, args, checks, overwrite, progress,
                           num_train + num_val, write)


def main(argv=None):
    info, out = GENERATOR.main(make_coco, __doc__, dict(
        object_scale=('LOW', 'HIGH'), objects_per_image=('MIN', 'MAX')),
        argv)
    print(f'Wrote {info["num_train"]} train and {info["num_val"]} val images '
          f'({info["num_objects"]["train2017"]} and '
          f'{info["num_objects"]["val2017"]} objects) of '
          f'{info["num_classes"]} classes {info["classes"]} to {out}')
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
