"""Checks of data sets and their annotations.

- :class:`CheckSegMap` (``transforms.py``): a label map must be the size of
  its image, one channel, stored in 0-255 (not wrapped by the uint8 cast of
  ``LoadAnnotations``) and hold labels the model can take; placed after
  ``LoadAnnotations`` in our segmentation pipelines.
- ``CheckedCocoDataset`` (``coco.py``): mmdet's ``CocoDataset`` with clear
  errors for unusable files (images sharing an id among them) and a warning
  for the annotations it drops; used by our detection configs. It
  subclasses mmdet's class, so it is imported only when a config names
  ``mmcpvt.CheckedCocoDataset`` (the registry's ``locations``) or by ``from
  mmcpvt.datasets.coco import CheckedCocoDataset``: mmcpvt needs no mmdet
  otherwise.
"""
from .transforms import CheckSegMap

__all__ = ['CheckSegMap']
