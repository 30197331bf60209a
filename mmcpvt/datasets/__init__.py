"""Checks of data sets: :class:`CheckSegMap` (``transforms.py``) and
``CheckedCocoDataset`` (``coco.py``, imported only when a config names
``mmcpvt.CheckedCocoDataset``: mmcpvt needs no mmdet otherwise)."""
from .transforms import CheckSegMap

__all__ = ['CheckSegMap']
