"""What the command lines of tools/, demo/ and projects/ share: :mod:`.cli`
(start-up, checks of option values, the runner), :mod:`.cfg_options`,
:mod:`.model` (models from configs), :mod:`.resume`, :mod:`.cpu_dist`,
:mod:`.convert`, :mod:`.resolution`, :mod:`.measure` and
:mod:`.instruments`: plain functions; each tool builds its own parser.
``import mmcpvt`` imports only :mod:`.model_index` of them; a tool imports
the module it uses."""
from .model_index import (get_mim_root, register_mmpretrain_models,
                          register_mmpretrain_models_if_installed)

__all__ = [
    'get_mim_root', 'register_mmpretrain_models',
    'register_mmpretrain_models_if_installed'
]
