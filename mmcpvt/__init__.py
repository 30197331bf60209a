"""mmcpvt: Conditional Positional Encodings for Vision Transformers
(Chu et al., ICLR 2023, https://arxiv.org/abs/2102.10882) for OpenMMLab.

Importing this package (the target of ``custom_imports=dict(imports=
['mmcpvt'])``) registers our modules and changes nothing else in the host
stack: the models, transforms and hooks in the registries, the
``'mmcpvt_atomic'`` file backend by its name, mmengine's checkpoint types in
torch's ``weights_only`` allow-list (``torch.serialization.add_safe_globals``,
:mod:`mmcpvt.utils.checkpoint`) and, where mmpretrain is installed, our
image classification models in its model hub through its public
``ModelHub.register_model_index`` (:mod:`mmcpvt.apis.model_index`).
"""
from .version import __version__
from .utils.checkpoint import register_checkpoint_safe_globals

register_checkpoint_safe_globals()

from . import engine, models  # noqa: E402,F401  (registers the modules)
from .apis import register_mmpretrain_models_if_installed  # noqa: E402

register_mmpretrain_models_if_installed()
# the transforms; mmcpvt.datasets.coco (mmdet's CocoDataset) is imported
# when a config names it (mmcpvt/registry.py)
from . import datasets  # noqa: E402,F401

__all__ = ['__version__']
