"""Generate a small data set in the ImageNet-1k on-disk layout.

Nothing can be downloaded here, so tests and the demo train on synthetic
images stored exactly as mmpretrain's ``ImageNet`` dataset reads the real
ILSVRC2012 (``data_root`` + ``split='train'`` / ``'val'``)::

    OUT/
    ├── meta/
    │   ├── train.txt     n01440764/n01440764_1.JPEG 0
    │   └── val.txt       ILSVRC2012_val_00000001.JPEG 2
    ├── train/
    │   ├── n01440764/n01440764_1.JPEG ...
    │   └── ...
    ├── val/
    │   └── ILSVRC2012_val_00000001.JPEG ...   (flat, classes interleaved)
    └── make_imagenet.json                     (how it was made, the files)

The classes are the first ``num_classes`` real ImageNet wnids in sorted
order, so label ``k`` is ImageNet class ``k`` and mmpretrain's category
names line up. Each image holds one object of its class, drawn with the
renderer the COCO and ADE20K generators share (``shapes.py``): class ``k`` is
one shape (disc, square, triangle, cross, ...) in its own hue, at a random
position, scale and rotation over a textured background. A small CPVT
learns it in a few hundred iterations; the object can be anywhere, so the
network has to find it. ``--canvas-scale`` makes the images larger and
keeps the object at its pixel size: with ``--train-per-class 0`` (the
validation split only), a test set of larger inputs at the training scale.
Every image is seeded from ``(seed, split, class, index)``: the same
arguments give byte-identical files, and adding classes or images leaves the
others unchanged. An existing set is replaced only with
``--overwrite`` and only file by file: what the tool wrote, never a file of
the user's (``generated.py``).

Example::

    python tools/dataset_converters/make_imagenet.py --out data/imagenet \\
        --num-classes 10 --train-per-class 100 --val-per-class 20 --size 64
"""
import argparse
import hashlib
import os
import os.path as osp
import sys
from typing import List, Optional, Tuple

import numpy as np
from PIL import Image

sys.path.insert(0, osp.dirname(osp.abspath(__file__)))
from generated import (Progress, prepare_out_dir,  # noqa: E402
                       read_marker, write_marker)
from shapes import (UNIT_POLYGONS, class_style, hsv_to_rgb,  # noqa: E402
                    polygon_mask, render_background)

MARKER = 'make_imagenet.json'
NUM_CLASSES = 1000  # ImageNet-1k
SPLIT_IDS = {'train': 0, 'val': 1}


def imagenet_wnids() -> List[str]:
    """The 1000 ImageNet-1k wnids in sorted (= label) order.

    Read from timm's copy of the synset list when timm is installed
    (a test requirement). Otherwise wnid-shaped placeholders
    ``n00000000``, ``n00000001``, ... that sort in the same label order.
    """
    try:
        from importlib.resources import files
        text = files('timm.data._info').joinpath(
            'imagenet_synsets.txt').read_text()
        wnids = sorted(line.strip() for line in text.splitlines()
                       if line.strip())
        if len(wnids) == NUM_CLASSES:
            return wnids
    except Exception:  # timm missing or laid out differently
        pass
    return [f'n{i:08d}' for i in range(NUM_CLASSES)]


def render_image(label: int, size: int, rng: np.random.Generator,
                 canvas_scale: float = 1.0) -> Tuple[np.ndarray, np.ndarray]:
    """One image of class ``label`` and its object's mask.

    The object is its class's shape in its hue (as in ``shapes.py``), 35-60%
    of ``size`` wide, rotated by up to 20 degrees, anywhere on a textured
    background. The canvas is ``round(size * canvas_scale)`` pixels square;
    the object keeps its size in pixels at every ``canvas_scale``.

    Returns:
        tuple[np.ndarray, np.ndarray]: The image, (S, S, 3) uint8 RGB, and
        the object's pixels, (S, S) bool.
    """
    canvas = int(round(size * canvas_scale))
    img = render_background(rng, canvas, canvas)
    radius = rng.uniform(0.35, 0.6) * size / 2
    cx, cy = rng.uniform(radius, canvas - radius, size=2)
    theta = np.deg2rad(rng.uniform(-20, 20))
    rot = np.array([[np.cos(theta), -np.sin(theta)],
                    [np.sin(theta), np.cos(theta)]])
    shape, hue = class_style(label)
    poly = UNIT_POLYGONS[shape] @ rot.T * radius + (cx, cy)  # (V, 2)
    mask = polygon_mask(poly, canvas, canvas)
    colour = hsv_to_rgb((hue + rng.normal(0, 0.02)) % 1.,
                        rng.uniform(0.7, 1.), rng.uniform(0.75, 1.))
    img[mask] = colour + rng.normal(0, 10, size=(int(mask.sum()), 3))
    return np.clip(img, 0, 255).astype(np.uint8), mask


def make_image(label: int, size: int, rng: np.random.Generator,
               canvas_scale: float = 1.0) -> Image:
    """The image of :func:`render_image` as an RGB PIL image."""
    return Image.fromarray(
        render_image(label, size, rng, canvas_scale)[0], 'RGB')


def generator_id() -> str:
    """A digest of this generator's code (with ``shapes.py``): a data set
    made with another id may hold other images for the same arguments."""
    digest = hashlib.sha1()
    here = osp.dirname(osp.abspath(__file__))
    for name in ('make_imagenet.py', 'shapes.py'):
        with open(osp.join(here, name), 'rb') as f:
            digest.update(f.read())
    return digest.hexdigest()[:12]


def _image_rng(seed: int, split: str, label: int, index: int):
    return np.random.default_rng([seed, SPLIT_IDS[split], label, index])


def _train_name(wnid: str, index: int) -> str:
    """Image ``index`` (from 0) of class ``wnid``, relative to train/."""
    return f'{wnid}/{wnid}_{index + 1}.JPEG'


def _val_name(index: int) -> str:
    """Validation image ``index`` (from 0), relative to val/."""
    return f'ILSVRC2012_val_{index + 1:08d}.JPEG'


def imagenet_files(info: dict) -> List[str]:
    """The files :func:`make_imagenet` writes for ``info`` (its arguments
    with the wnids), relative to the data root."""
    files = ['meta/train.txt', 'meta/val.txt']
    for wnid in info['wnids']:
        files += [f'train/{_train_name(wnid, i)}'
                  for i in range(info['train_per_class'])]
    num_val = len(info['wnids']) * info['val_per_class']
    return files + [f'val/{_val_name(n)}' for n in range(num_val)]


def make_imagenet(out: str,
                  num_classes: int = 10,
                  train_per_class: int = 100,
                  val_per_class: int = 20,
                  size: int = 64,
                  seed: int = 0,
                  overwrite: bool = False,
                  progress: bool = False,
                  canvas_scale: float = 1.0) -> dict:
    """Write the data set to ``out`` and return its description.

    Args:
        out (str): The data root (``data_root`` of the config).
        num_classes (int): Number of classes, 1 to 1000. Defaults to 10.
        train_per_class (int): Training images per class; 0 makes a test
            set (an empty ``meta/train.txt``, no ``train/``). Defaults to
            100.
        val_per_class (int): Validation images per class, at least 1.
            Defaults to 20.
        size (int): Side of the square images in pixels. Defaults to 64.
        seed (int): Random seed. Defaults to 0.
        overwrite (bool): Replace a data set made by this tool before: the
            files it wrote (listed in ``make_imagenet.json``); a directory
            that also holds other files is refused and nothing is deleted.
            Defaults to False.
        progress (bool): Show a progress bar on stdout. Defaults to False.
        canvas_scale (float): Images of side ``round(size * canvas_scale)``
            with the object of the size in pixels it has at ``size``,
            anywhere on them: a test set of larger inputs with objects at
            the training scale. Defaults to 1.

    Returns:
        dict: The arguments, the wnids and the number of images; also
        written to ``out/make_imagenet.json``, with the list of files
        written.
    """
    if not 1 <= num_classes <= NUM_CLASSES:
        raise ValueError(f'--num-classes (num_classes) must be 1 to '
                         f'{NUM_CLASSES}, got {num_classes}')
    if train_per_class < 0 or val_per_class < 1:
        raise ValueError('--train-per-class (train_per_class) must be >= 0 '
                         '(0: a test set) and --val-per-class '
                         f'(val_per_class) >= 1, got {train_per_class} and '
                         f'{val_per_class}')
    if size < 8:
        raise ValueError(f'--size (size) must be >= 8 pixels, got {size}')
    if seed < 0:
        raise ValueError(f'--seed (seed) must be >= 0, got {seed}')
    if not 1 <= canvas_scale <= 8:
        raise ValueError(f'--canvas-scale (canvas_scale) must be 1 to 8 (the '
                         f'image side over --size; the object keeps its '
                         f'size), got {canvas_scale}')
    prepare_out_dir(out, MARKER, overwrite, 'make_imagenet.py',
                    imagenet_files)
    wnids = imagenet_wnids()

    args = dict(
        num_classes=num_classes,
        train_per_class=train_per_class,
        val_per_class=val_per_class,
        size=size,
        seed=seed,
        canvas_scale=canvas_scale,
        generator=generator_id(),
        wnids=wnids[:num_classes])
    files = imagenet_files(args)
    write_marker(out, MARKER, args, files, complete=False)
    os.makedirs(osp.join(out, 'meta'), exist_ok=True)
    os.makedirs(osp.join(out, 'val'), exist_ok=True)

    total = num_classes * (train_per_class + val_per_class)
    with Progress(total, progress,
                  f'make_imagenet.py: writing {total} images to {out}') as bar:
        train_lines = []
        for label, wnid in enumerate(args['wnids']):
            if train_per_class:
                os.makedirs(osp.join(out, 'train', wnid), exist_ok=True)
            for i in range(train_per_class):
                name = _train_name(wnid, i)
                img = make_image(label, size,
                                 _image_rng(seed, 'train', label, i),
                                 canvas_scale)
                img.save(osp.join(out, 'train', name), quality=92)
                train_lines.append(f'{name} {label}')
                bar.update()

        # The real validation set is one flat folder, classes interleaved.
        val_items = [(label, i) for label in range(num_classes)
                     for i in range(val_per_class)]
        order = np.random.default_rng([seed, 99]).permutation(len(val_items))
        val_lines = []
        for n, j in enumerate(order):
            label, i = val_items[j]
            name = _val_name(n)
            img = make_image(label, size,
                             _image_rng(seed, 'val', label, i), canvas_scale)
            img.save(osp.join(out, 'val', name), quality=92)
            val_lines.append(f'{name} {label}')
            bar.update()

    for split, lines in (('train', train_lines), ('val', val_lines)):
        with open(osp.join(out, 'meta', f'{split}.txt'), 'w') as f:
            f.write(''.join(line + '\n' for line in lines))

    info = dict(
        args,
        num_train=len(train_lines),
        num_val=len(val_lines),
        shapes=[class_style(k)[0] for k in range(num_classes)])
    return write_marker(out, MARKER, info, files, complete=True)


def read_info(out: str) -> Optional[dict]:
    """The description of a data set made by :func:`make_imagenet`, or
    None if ``out`` holds none."""
    return read_marker(out, MARKER)


def parse_args(argv=None):
    parser = argparse.ArgumentParser(
        description='Generate a small synthetic data set in the ImageNet-1k '
        'layout read by mmpretrain (train/<wnid>/*.JPEG, flat val/, '
        'meta/train.txt and meta/val.txt)')
    parser.add_argument('--out', required=True, help='output data root')
    parser.add_argument('--num-classes', type=int, default=10)
    parser.add_argument('--train-per-class', type=int, default=100,
                        help='training images per class; 0: a test set '
                        '(val/ only, meta/train.txt empty)')
    parser.add_argument('--val-per-class', type=int, default=20,
                        help='validation images per class (>= 1)')
    parser.add_argument('--size', type=int, default=64,
                        help='image side in pixels')
    parser.add_argument('--seed', type=int, default=0)
    parser.add_argument('--canvas-scale', type=float, default=1.0,
                        help='images this many times larger than --size, '
                        'with the object of the pixel size it has at --size, '
                        'anywhere on them: a larger canvas with the object '
                        'at the training scale')
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
        info = make_imagenet(args.out, args.num_classes, args.train_per_class,
                             args.val_per_class, args.size, args.seed,
                             args.overwrite, progress=show,
                             canvas_scale=args.canvas_scale)
    except (ValueError, OSError) as e:
        raise SystemExit(f'make_imagenet.py: error: {e}')
    side = round(args.size * args.canvas_scale)
    print(f'Wrote {info["num_train"]} train and {info["num_val"]} val '
          f'images of {info["num_classes"]} classes ({side}x{side}) to '
          f'{args.out}')


if __name__ == '__main__':
    main()
