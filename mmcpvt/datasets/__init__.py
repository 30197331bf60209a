"""Checks of data sets and their annotations.

- :class:`CheckSegMap` (``transforms.py``): a label map fits its image and
  the model; placed after ``LoadAnnotations`` in our segmentation pipelines.
- ``CheckedCocoDataset`` (``coco.py``): mmdet's ``CocoDataset`` with clear
  errors for unusable files and a warning for the annotations it drops. It
  subclasses mmdet's class, so it is imported only when a config names
  ``mmcpvt.CheckedCocoDataset`` (the registry's ``locations``): mmcpvt
  needs no mmdet otherwise.
"""
from .transforms import CheckSegMap

__all__ = ['CheckSegMap']
