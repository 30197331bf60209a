"""Generate a small segmentation data set in the ADE20K (SceneParsing
ADEChallengeData2016) on-disk layout.

Synthetic scenes (:mod:`.shapes`) stored exactly as mmseg's
``ADE20KDataset`` reads the real ADE20K
(``data_root='data/ade/ADEChallengeData2016'``):
``OUT/ADEChallengeData2016/{images,annotations}/{training,validation}/``
(``ADE_train_00000001.jpg`` / ``.png``, ..., ``ADE_val_...``) and
``OUT/make_ade20k.json`` (how it was made, the files written).

Label maps are single-channel PNGs as in ADE20K: 0 is "other" (here the
background), 1 to K the object classes, ADE20K's classes 1..K ('wall',
'building', ...): with ``reduce_zero_label=True`` a config sets
``num_classes=K`` and ``metainfo=dict(classes=ADE20KDataset.METAINFO[
'classes'][:K])``. Seeding, ``--out`` and ``--overwrite``:
docs/get_started.md.

Example::

    python tools/dataset_converters/make_ade20k.py --out data/ade \\
        --num-train 200 --num-val 50 --size 256 --num-classes 4
"""
import os.path as osp
from typing import List

from .generator import Generator, at_least, between, save
from .shapes import scenes

SUBDIR = 'ADEChallengeData2016'
# split directory -> (file name prefix, its argument)
SPLITS = {'training': ('ADE_train', 'num_train'),
          'validation': ('ADE_val', 'num_val')}


def _names(info: dict, split: str) -> List[str]:
    prefix, num = SPLITS[split]
    return [f'{prefix}_{index + 1:08d}' for index in range(info[num])]


def ade20k_files(info: dict) -> List[str]:
    return [f'{SUBDIR}/{kind}/{split}/{name}.{ext}' for split in SPLITS
            for name in _names(info, split)
            for kind, ext in (('images', 'jpg'), ('annotations', 'png'))]


def _write(out_dir: str, args: dict, update) -> dict:
    root = osp.join(out_dir, SUBDIR)
    for split_id, split in enumerate(SPLITS):
        names = _names(args, split)
        # busier scenes than detection's
        for name, scene in zip(names, scenes(
                args['seed'], split_id, len(names), args['size'],
                args['num_classes'], num_objects=(2, 8),
                scale_range=(0.1, 0.45))):
            save(osp.join(root, 'images', split, name + '.jpg'), scene.image)
            # 0: other (background), k + 1: class k (ADE class ids)
            save(osp.join(root, 'annotations', split, name + '.png'),
                 scene.class_map)
            update()
    return dict(data_root=root)


GENERATOR = Generator('make_ade20k.py', ade20k_files, _write, dict(
    num_classes=between(1, 150), num_train=at_least(1), num_val=at_least(1),
    size=at_least(32, ' pixels')))


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
        num_train (int): Training images, at least 1. Defaults to 200.
        num_val (int): Validation images, at least 1. Defaults to 50.
        size (int): Nominal image side; each side is 0.75x to 1.25x of it.
            Defaults to 256.
        num_classes (int): ADE20K classes 1..K, 1 to 150. Defaults to 4.
        seed (int): Random seed. Defaults to 0.
        overwrite (bool): Replace a set this generator made (only the files
            it wrote). Defaults to False.
        progress (bool): Show a progress bar on stdout. Defaults to False.

    Returns:
        dict: The arguments and the data root, as in
        ``out_dir/make_ade20k.json``.
    """
    return GENERATOR.make(**locals())  # the parameters, by name
