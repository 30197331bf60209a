from .checkpoint import register_checkpoint_safe_globals

__all__ = ['register_checkpoint_safe_globals']
