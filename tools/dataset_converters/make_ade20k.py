"""Generate a small segmentation data set in the ADE20K (SceneParsing
ADEChallengeData2016) on-disk layout.

Nothing can be downloaded here, so tests and the demo train on synthetic
scenes (see ``shapes.py``) stored exactly as mmseg's ``ADE20KDataset`` reads
the real ADE20K (``data_root='data/ade/ADEChallengeData2016'``)::

    OUT/
    ├── ADEChallengeData2016/
    │   ├── images/
    │   │   ├── training/ADE_train_00000001.jpg ...
    │   │   └── validation/ADE_val_00000001.jpg ...
    │   └── annotations/
    │       ├── training/ADE_train_00000001.png ...
    │       └── validation/ADE_val_00000001.png ...
    └── make_ade20k.json               (how it was made, the files written)

Label maps are single-channel PNGs as in ADE20K: 0 is "other" (here the
background), 1 to ``num_classes`` are the object classes, i.e. ADE20K's
classes 1..K ('wall', 'building', 'sky', ...). mmseg's
``LoadAnnotations(reduce_zero_label=True)`` maps 0 to the ignore index 255
and class ``k`` to ``k - 1``, so a config sets ``num_classes=K`` and
``metainfo=dict(classes=ADE20KDataset.METAINFO['classes'][:K])``. Image sizes
vary between 0.75x and 1.25x of ``size`` on each side. Every image is seeded
from ``(seed, split, index)``: the same arguments give byte-identical files.
An existing set is replaced only with ``--overwrite`` and only file by file:
what the tool wrote, never a file of the user's (``generated.py``).

Example::

    python tools/dataset_converters/make_ade20k.py --out data/ade \\
        --num-train 200 --num-val 50 --size 256 --num-classes 4
"""
import argparse
import os
import os.path as osp
import sys
from typing import List, Optional

import numpy as np
from PIL import Image

sys.path.insert(0, osp.dirname(osp.abspath(__file__)))
from generated import (Progress, prepare_out_dir,  # noqa: E402
                       read_marker, write_marker)
from shapes import class_style, render_scene  # noqa: E402

MARKER = 'make_ade20k.json'
SUBDIR = 'ADEChallengeData2016'
# split directory -> (file name prefix, seed id)
SPLITS = {'training': ('ADE_train', 0), 'validation': ('ADE_val', 1)}
MAX_CLASSES = 150


def _name(split: str, index: int) -> str:
    """The file name (no extension) of image ``index`` (from 0)."""
    return f'{SPLITS[split][0]}_{index + 1:08d}'


def ade20k_files(info: dict) -> List[str]:
    """The files :func:`make_ade20k` writes for ``info`` (its arguments),
    relative to its ``out_dir``."""
    files = []
    for split, num in (('training', info['num_train']),
                       ('validation', info['num_val'])):
        for index in range(num):
            name = _name(split, index)
            files += [f'{SUBDIR}/images/{split}/{name}.jpg',
                      f'{SUBDIR}/annotations/{split}/{name}.png']
    return files


def make_ade20k(out_dir: str,
                num_train: int = 200,
                num_val: int = 50,
                size: int = 256,
                num_classes: int = 4,
                seed: int = 0,
                overwrite: bool = False,
                progress: bool = False) -> dict:
    """Write the data set under ``out_dir`` and return its description.

    Args:
        out_dir (str): Output directory; the data root of a config is
            ``out_dir/ADEChallengeData2016``.
        num_train (int): Training images. Defaults to 200.
        num_val (int): Validation images. Defaults to 50.
        size (int): Nominal image side; each side is drawn from 0.75x to
            1.25x of it. Defaults to 256.
        num_classes (int): Object classes, 1 to 150 (ADE20K classes 1..K).
            Defaults to 4.
        seed (int): Random seed. Defaults to 0.
        overwrite (bool): Replace a data set made by this tool before: the
            files it wrote (listed in ``make_ade20k.json``); a directory that
            also holds other files is refused and nothing is deleted.
            Defaults to False.
        progress (bool): Show a progress bar on stdout. Defaults to False.

    Returns:
        dict: The arguments, the data root and the pixel counts per label
        value (0 = background); also written to ``out_dir/make_ade20k.json``,
        with the list of files written.
    """
    if not 1 <= num_classes <= MAX_CLASSES:
        raise ValueError(f'--num-classes (num_classes) must be 1 to '
                         f'{MAX_CLASSES}, got {num_classes}')
    if num_train < 1 or num_val < 1:
        raise ValueError('--num-train and --num-val (num_train, num_val) '
                         f'must be >= 1, got {num_train} and {num_val}')
    if size < 32:
        raise ValueError(f'--size (size) must be >= 32 pixels, got {size}')
    if seed < 0:
        raise ValueError(f'--seed (seed) must be >= 0, got {seed}')
    prepare_out_dir(out_dir, MARKER, overwrite, 'make_ade20k.py',
                    ade20k_files)

    args = dict(
        num_train=num_train,
        num_val=num_val,
        size=size,
        num_classes=num_classes,
        seed=seed)
    files = ade20k_files(args)
    write_marker(out_dir, MARKER, args, files, complete=False)
    root = osp.join(out_dir, SUBDIR)
    counts = {}
    total = num_train + num_val
    with Progress(total, progress,
                  f'make_ade20k.py: writing {total} images and label maps '
                  f'to {root}') as bar:
        for split, num in (('training', num_train), ('validation', num_val)):
            split_id = SPLITS[split][1]
            img_dir = osp.join(root, 'images', split)
            ann_dir = osp.join(root, 'annotations', split)
            os.makedirs(img_dir, exist_ok=True)
            os.makedirs(ann_dir, exist_ok=True)
            hist = np.zeros(num_classes + 1, np.int64)
            for index in range(num):
                rng = np.random.default_rng([seed, split_id, index])
                height, width = (int(round(size * f))
                                 for f in rng.uniform(0.75, 1.25, size=2))
                # Segmentation scenes are busier than detection ones.
                scene = render_scene(
                    rng, height, width, num_classes, num_objects=(2, 8),
                    scale_range=(0.1, 0.45))
                name = _name(split, index)
                Image.fromarray(scene.image).save(
                    osp.join(img_dir, name + '.jpg'), quality=92)
                # 0 = other / background, k + 1 = class k (ADE class ids)
                Image.fromarray(scene.class_map).save(  # mode 'L'
                    osp.join(ann_dir, name + '.png'))
                hist += np.bincount(
                    scene.class_map.reshape(-1), minlength=num_classes + 1)
                bar.update()
            counts[split] = hist.tolist()

    info = dict(
        args,
        data_root=root,
        shapes=[class_style(k)[0] for k in range(num_classes)],
        pixels_per_label=counts)
    return write_marker(out_dir, MARKER, info, files, complete=True)


def read_info(out_dir: str) -> Optional[dict]:
    """The description of a set made by :func:`make_ade20k`, or None."""
    return read_marker(out_dir, MARKER)


def parse_args(argv=None):
    parser = argparse.ArgumentParser(
        description='Generate a small synthetic segmentation set in the '
        'ADE20K layout read by mmseg (ADEChallengeData2016/images/'
        '{training,validation}/*.jpg and annotations/.../*.png)')
    parser.add_argument('--out', required=True,
                        help='output directory (data root = '
                        'OUT/ADEChallengeData2016)')
    parser.add_argument('--num-train', type=int, default=200)
    parser.add_argument('--num-val', type=int, default=50)
    parser.add_argument('--size', type=int, default=256,
                        help='nominal image side in pixels (each side '
                        'varies from 0.75x to 1.25x)')
    parser.add_argument('--num-classes', type=int, default=4,
                        help='object classes = ADE20K classes 1..N '
                        '(1 to 150)')
    parser.add_argument('--seed', type=int, default=0)
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
        info = make_ade20k(args.out, args.num_train, args.num_val, args.size,
                           args.num_classes, args.seed, args.overwrite,
                           progress=show)
    except (ValueError, OSError) as e:
        raise SystemExit(f'make_ade20k.py: error: {e}')
    print(f'Wrote {info["num_train"]} training and {info["num_val"]} '
          f'validation images of {info["num_classes"]} classes to '
          f'{info["data_root"]}')
    print('Configs must set num_classes and metainfo=dict(classes=...) '
          'accordingly; see configs/pvt_peg/README.md')


if __name__ == '__main__':
    main()
