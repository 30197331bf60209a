"""Plain functions that the command lines of tools/, demo/ and projects/
share (each tool builds its own parser and imports the module it uses).
``import mmcpvt`` imports only :mod:`.model_index` of them."""
from .model_index import (get_mim_root, register_mmpretrain_models,
                          register_mmpretrain_models_if_installed)

__all__ = [
    'get_mim_root', 'register_mmpretrain_models',
    'register_mmpretrain_models_if_installed'
]
