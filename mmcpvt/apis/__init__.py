from .model_index import (get_mim_root, register_mmpretrain_models,
                          register_mmpretrain_models_if_installed)

__all__ = [
    'get_mim_root', 'register_mmpretrain_models',
    'register_mmpretrain_models_if_installed'
]
