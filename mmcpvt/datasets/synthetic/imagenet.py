"""Generate a small data set in the ImageNet-1k on-disk layout.

Synthetic images stored exactly as mmpretrain's ``ImageNet`` dataset reads
the real ILSVRC2012 (``data_root`` + ``split='train'`` / ``'val'``):
``OUT/train/n01440764/n01440764_1.JPEG``, ..., a flat ``OUT/val/`` of
``ILSVRC2012_val_00000001.JPEG``, ... (classes interleaved), the lists
``OUT/meta/{train,val}.txt`` (``NAME LABEL`` lines) and
``OUT/make_imagenet.json`` (how it was made, the files written).

The classes are the first ``num_classes`` real ImageNet wnids in sorted
order, so label ``k`` is ImageNet class ``k``. Each image holds one object
of its class (:mod:`.shapes`) anywhere on a textured background: a small
CPVT learns to find it in a few hundred iterations. Images are seeded per
class too, so adding classes or images leaves the others unchanged.
Seeding, ``--out`` and ``--overwrite``: docs/get_started.md.

Example::

    python tools/dataset_converters/make_imagenet.py --out data/imagenet \\
        --num-classes 10 --train-per-class 100 --val-per-class 20 --size 64
"""
import os.path as osp
from typing import List, Tuple

import numpy as np

from .generator import Generator, at_least, between, save
from .shapes import outline, paint, polygon_mask, render_background

NUM_CLASSES = 1000  # ImageNet-1k
SPLIT_IDS = {'train': 0, 'val': 1}


def imagenet_wnids() -> List[str]:
    """The 1000 ImageNet-1k wnids in sorted (= label) order, from timm;
    without timm (or with one before ``ImageNetInfo``), placeholders
    ``n00000000``, ... in the same label order."""
    try:
        from timm.data import ImageNetInfo
    except ImportError:
        return [f'n{i:08d}' for i in range(NUM_CLASSES)]
    return ImageNetInfo().label_names()


def render_image(label: int, size: int, rng: np.random.Generator,
                 canvas_scale: float = 1.0) -> Tuple[np.ndarray, np.ndarray]:
    """One image of class ``label``, (S, S, 3) uint8 RGB with S =
    ``round(size * canvas_scale)``, and its object's mask, (S, S) bool. The
    object is 35-60% of ``size`` wide at any ``canvas_scale``, rotated by
    up to 20 degrees, anywhere on the canvas."""
    canvas = int(round(size * canvas_scale))
    img = render_background(rng, canvas, canvas)
    radius = rng.uniform(0.35, 0.6) * size / 2
    cx, cy = rng.uniform(radius, canvas - radius, size=2)
    mask = polygon_mask(outline(rng, label, radius, cx, cy), canvas, canvas)
    paint(rng, img, mask, label)
    return np.clip(img, 0, 255).astype(np.uint8), mask


def _image_rng(seed: int, split: str, label: int, index: int):
    return np.random.default_rng([seed, SPLIT_IDS[split], label, index])


def _images(info: dict) -> List[Tuple[str, str, int, int]]:
    """``(split, name, label, index)`` of every image of a set made with
    ``info`` (its arguments with the wnids), in the order written: ``name``
    (under ``split``/) is ImageNet's, ``index`` counts the images of its
    class in the split, from 0."""
    images = [('train', f'{wnid}/{wnid}_{i + 1}.JPEG', label, i)
              for label, wnid in enumerate(info['wnids'])
              for i in range(info['train_per_class'])]
    # The real validation set is one flat folder, classes interleaved.
    val = [(label, i) for label in range(len(info['wnids']))
           for i in range(info['val_per_class'])]
    order = np.random.default_rng([info['seed'], 99]).permutation(len(val))
    return images + [('val', f'ILSVRC2012_val_{n + 1:08d}.JPEG', *val[j])
                     for n, j in enumerate(order)]


def imagenet_files(info: dict) -> List[str]:
    return ['meta/train.txt', 'meta/val.txt'] + [
        f'{split}/{name}' for split, name, _, _ in _images(info)]


def _write(out_dir: str, args: dict, update) -> dict:
    lines = {'train': [], 'val': []}
    for split, name, label, i in _images(args):
        save(osp.join(out_dir, split, name), render_image(
            label, args['size'], _image_rng(args['seed'], split, label, i),
            args['canvas_scale'])[0])
        lines[split].append(f'{name} {label}\n')
        update()
    for split in lines:
        save(osp.join(out_dir, 'meta', f'{split}.txt'), ''.join(lines[split]))
    return dict(num_train=len(lines['train']), num_val=len(lines['val']))


GENERATOR = Generator('make_imagenet.py', imagenet_files, _write, dict(
    num_classes=between(1, NUM_CLASSES),
    train_per_class=at_least(0, ' (0: a test set)'),
    val_per_class=at_least(1), size=at_least(8, ' pixels')))


def make_imagenet(out_dir: str,
                  num_classes: int = 10,
                  train_per_class: int = 100,
                  val_per_class: int = 20,
                  size: int = 64,
                  seed: int = 0,
                  overwrite: bool = False,
                  progress: bool = False,
                  canvas_scale: float = 1.0) -> dict:
    """Write the data set to ``out_dir`` and return its description.

    Args:
        out_dir (str): The data root (``data_root`` of the config).
        num_classes (int): Number of classes, 1 to 1000. Defaults to 10.
        train_per_class (int): Training images per class; 0 makes a test
            set. Defaults to 100.
        val_per_class (int): Validation images per class, at least 1.
            Defaults to 20.
        size (int): Side of the square images in pixels. Defaults to 64.
        seed (int): Random seed. Defaults to 0.
        overwrite (bool): Replace a set this generator made (only the files
            it wrote). Defaults to False.
        progress (bool): Show a progress bar on stdout. Defaults to False.
        canvas_scale (float): Images this many times larger than ``size``,
            the object of its size in pixels at ``size``. Defaults to 1.

    Returns:
        dict: The arguments, the wnids and the number of images, as in
        ``out_dir/make_imagenet.json``.
    """
    return GENERATOR.make(**locals(),  # the parameters, by name
                          wnids=imagenet_wnids()[:num_classes])
