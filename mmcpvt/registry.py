"""The mmcpvt registries.

``MODELS``, ``DATASETS`` and ``TRANSFORMS`` are children of mmengine's root
registries with scope ``'mmcpvt'``, so ``type='mmcpvt.CPVT'`` resolves from
any OpenMMLab scope (and imports the module that registers it, from the
registry's ``locations``). mmpretrain, mmdet and mmseg each search their own
registry and then its ancestors, never siblings, so our modules are also
registered into the root registries (as mmcv registers its bricks):
``type='CPVT'`` then resolves from every downstream scope once the module is
imported.

The data set classes subclass a downstream library's (mmdet's
``CocoDataset``): their module is imported only when a config names one
(``type='mmcpvt.CheckedCocoDataset'``), so ``import mmcpvt`` needs none of
mmdet, mmseg or mmpretrain.
"""
from mmengine.registry import DATASETS as MMENGINE_DATASETS
from mmengine.registry import HOOKS as MMENGINE_HOOKS
from mmengine.registry import MODELS as MMENGINE_MODELS
from mmengine.registry import TRANSFORMS as MMENGINE_TRANSFORMS
from mmengine.registry import Registry

MODELS = Registry(
    'model', parent=MMENGINE_MODELS, scope='mmcpvt',
    locations=['mmcpvt.models'])
DATASETS = Registry(
    'dataset', parent=MMENGINE_DATASETS, scope='mmcpvt',
    locations=['mmcpvt.datasets.coco'])
HOOKS = Registry(
    'hook', parent=MMENGINE_HOOKS, scope='mmcpvt',
    locations=['mmcpvt.engine'])
TRANSFORMS = Registry(
    'transform', parent=MMENGINE_TRANSFORMS, scope='mmcpvt',
    locations=['mmcpvt.datasets.transforms'])


def _register_twice(registry, root, cls, name):
    """Register into ``registry`` and the root registry ``root``, as a
    decorator (``cls`` None) or directly."""

    def _register(module):
        registry.register_module(name=name, module=module)
        root.register_module(name=name, module=module)
        return module

    return _register if cls is None else _register(cls)


def register_model(cls=None, *, name=None):
    """Register ``cls`` into mmcpvt's registry and the root registry.

    Use as ``@register_model`` or ``@register_model(name='Alias')``.
    """
    return _register_twice(MODELS, MMENGINE_MODELS, cls, name)


def register_dataset(cls=None, *, name=None):
    """Register a data set class into mmcpvt's ``DATASETS`` and the root
    registry, as :func:`register_model`."""
    return _register_twice(DATASETS, MMENGINE_DATASETS, cls, name)


def register_transform(cls=None, *, name=None):
    """Register a data transform into mmcpvt's ``TRANSFORMS`` and the root
    registry, as :func:`register_model`."""
    return _register_twice(TRANSFORMS, MMENGINE_TRANSFORMS, cls, name)


def register_hook(cls=None, *, name=None):
    """Register a runner hook into mmcpvt's ``HOOKS`` and the root
    registry, as :func:`register_model`."""
    return _register_twice(HOOKS, MMENGINE_HOOKS, cls, name)


__all__ = [
    'MODELS', 'DATASETS', 'TRANSFORMS', 'HOOKS', 'register_model',
    'register_dataset', 'register_transform', 'register_hook'
]
