from . import atomic  # noqa: F401  (registers the 'mmcpvt_atomic' backend)
from .checkpoint import register_checkpoint_safe_globals

__all__ = ['register_checkpoint_safe_globals']
