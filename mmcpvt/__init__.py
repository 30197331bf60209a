"""mmcpvt: Conditional Positional Encodings for Vision Transformers
(Chu et al., ICLR 2023, https://arxiv.org/abs/2102.10882) for OpenMMLab.

Importing this package registers every module (the target of
``custom_imports=dict(imports=['mmcpvt'])``), makes mmengine checkpoints
loadable under torch's ``weights_only`` unpickler with clear errors for
broken or unsafe files, and checkpoint saving atomic
(:mod:`mmcpvt.utils.checkpoint`). Where mmpretrain is installed, it also adds
our image classification models to mmpretrain's ``list_models`` and
``get_model`` (:mod:`mmcpvt.apis.model_index`).
"""
from .version import __version__
from .utils.checkpoint import setup_checkpoint_io

setup_checkpoint_io()

from . import models  # noqa: E402,F401  (registers the modules)
from .apis import register_mmpretrain_models_if_installed  # noqa: E402

register_mmpretrain_models_if_installed()
# the transforms; mmcpvt.datasets.coco (mmdet's CocoDataset) is imported
# when a config names it (mmcpvt/registry.py)
from . import datasets  # noqa: E402,F401

__all__ = ['__version__']
