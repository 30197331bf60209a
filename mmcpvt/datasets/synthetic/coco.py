"""Generate a small detection data set in the COCO 2017 on-disk layout.

Synthetic scenes (:mod:`.shapes`) stored exactly as mmdet's ``CocoDataset``
reads the real COCO 2017 (``data_root='data/coco/'``):
``OUT/annotations/instances_{train,val}2017.json``, ``OUT/train2017/``
(images 1..N), ``OUT/val2017/`` (N+1..) and ``OUT/make_coco.json`` (how it
was made, the files written).

The categories are the first ``num_classes`` real COCO categories with their
real ids and names ('person' = 1, ..., 'stop sign' = 13: ids are not
contiguous), so a config only sets ``metainfo=dict(classes=<those names>)``
and ``num_classes``. Each category is one shape in its own colour. Each
image side is 0.75x to 1.25x of ``size``, so batches need padding as on
real COCO. Seeding, ``--out`` and ``--overwrite``: docs/get_started.md.

Example::

    python tools/dataset_converters/make_coco.py --out data/coco \\
        --num-train 200 --num-val 50 --size 320 --num-classes 4
"""
import math
import os
import os.path as osp
import sys
from typing import List, Sequence

from .generator import Generator, at_least, between, save
from .shapes import scenes

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


INFO = dict(description='Synthetic shapes in the COCO 2017 layout (mmcpvt '
            'tools/dataset_converters/make_coco.py)', url='', version='1.0',
            year=2017, contributor='mmcpvt', date_created='2017-09-01')


def coco_classes(num_classes: int) -> tuple:
    """The names of the first ``num_classes`` COCO categories: the
    ``metainfo=dict(classes=...)`` of a config training on the set."""
    return tuple(name for _, name, _ in COCO_CATEGORIES[:num_classes])


def _image_ids(info: dict) -> dict:
    n, m = info['num_train'], info['num_val']
    return {'train2017': range(1, n + 1), 'val2017': range(n + 1, n + m + 1)}


def coco_files(info: dict) -> List[str]:
    return [f'annotations/instances_{split}.json' for split in SPLIT_IDS] + [
        f'{split}/{i:012d}.jpg' for split, ids in _image_ids(info).items()
        for i in ids]


def _write(out_dir: str, args: dict, update) -> dict:
    categories = COCO_CATEGORIES[:args['num_classes']]
    (low, high), fewest = args['object_scale'], args['objects_per_image'][0]
    canvas, num_objects = args['canvas_scale'], {}
    for split, ids in _image_ids(args).items():
        images, annotations = [], []
        os.makedirs(osp.join(out_dir, split), exist_ok=True)  # if empty
        # objects keep their pixel size on a canvas_scale x canvas
        for image_id, scene in zip(ids, scenes(
                args['seed'], SPLIT_IDS[split], len(ids), args['size'],
                args['num_classes'], canvas, scale_range=(
                    low / canvas, high / canvas),
                num_objects=args['objects_per_image'])):
            height, width = scene.image.shape[:2]
            file_name = f'{image_id:012d}.jpg'
            save(osp.join(out_dir, split, file_name), scene.image)
            update()
            images.append(dict(
                license=1, file_name=file_name, coco_url='', height=height,
                width=width, date_captured='2017-01-01 00:00:00',
                flickr_url='', id=image_id))
            for box, label, poly, area in zip(
                    scene.boxes, scene.labels, scene.polygons, scene.areas):
                annotations.append(dict(
                    id=len(annotations) + 1 + 10**7 * SPLIT_IDS[split],
                    image_id=image_id, category_id=categories[label][0],
                    bbox=[round(float(v), 2) for v in box],  # x, y, w, h
                    area=float(area), iscrowd=0, segmentation=[[
                        round(float(v), 2) for v in poly.ravel()]]))
        num_objects[split] = len(annotations)
        save(osp.join(out_dir, 'annotations', f'instances_{split}.json'),
             dict(info=INFO, licenses=[dict(id=1, name='CC0 1.0', url='')],
                  images=images, annotations=annotations, categories=[
                      dict(supercategory=sup, id=cat_id, name=name)
                      for cat_id, name, sup in categories]))
        if len(annotations) < fewest * len(ids):  # no place for all
            print(f'make_coco.py: warning: {split} has '
                  f'{len(annotations) / len(ids):.1f} objects per image, '
                  f'fewer than the --objects-per-image minimum {fewest}: '
                  f'objects that find no free place are left out. Lower '
                  f'--objects-per-image or --object-scale, or raise --size.',
                  file=sys.stderr)
    return dict(classes=coco_classes(args['num_classes']),
                num_objects=num_objects)


GENERATOR = Generator('make_coco.py', coco_files, _write, dict(
    num_classes=between(1, len(COCO_CATEGORIES)),
    num_train=at_least(0, ' (0: a test set)'), num_val=at_least(1),
    size=at_least(MIN_SIZE, " pixels: image sides go down to 0.75 x size, "
                  "and mmdet's COCO configs drop images under 32 px "
                  "(filter_cfg min_size=32)"),
    object_scale=(lambda s: 0 < s[0] <= s[1] <= 1, '0 < LOW <= HIGH <= 1'),
    objects_per_image=(lambda n: 1 <= n[0] <= n[1], '1 <= MIN <= MAX')))


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
        num_train (int): Training images; 0 makes a test set (no training
            images or annotations). Defaults to 200.
        num_val (int): Validation images, at least 1. Defaults to 50.
        size (int): Nominal image side; each side is 0.75x to 1.25x of it.
            Defaults to 320.
        num_classes (int): The first 1 to 80 COCO categories. Defaults to 4.
        seed (int): Random seed. Defaults to 0.
        overwrite (bool): Replace a set this generator made (only the files
            it wrote). Defaults to False.
        object_scale (Sequence[float]): Range of an object's extent, a
            fraction of the shorter image side. Defaults to (0.08, 0.4).
        objects_per_image (Sequence[int]): Range of the objects placed in an
            image (fewer where none finds a place). Defaults to (1, 5).
        progress (bool): Show a progress bar on stdout. Defaults to False.
        canvas_scale (float): Images this many times larger than ``size``,
            objects of their size in pixels at ``size``. Defaults to 1.

    Returns:
        dict: The arguments, class names and numbers of objects, as in
        ``out_dir/make_coco.json``.
    """
    return GENERATOR.make(**locals())  # the parameters, by name
