"""mmcpvt: Conditional Positional Encodings for Vision Transformers
(Chu et al., ICLR 2023, https://arxiv.org/abs/2102.10882) for OpenMMLab.

Importing this package registers every module (the target of
``custom_imports=dict(imports=['mmcpvt'])``) and makes mmengine checkpoints
loadable under torch's ``weights_only`` unpickler.
"""
from .version import __version__
from .utils import register_checkpoint_safe_globals

register_checkpoint_safe_globals()

from . import models  # noqa: E402,F401  (registers the modules)

__all__ = ['__version__']
