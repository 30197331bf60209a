"""The mmcpvt registries.

``MODELS``, ``DATASETS``, ``TRANSFORMS``, ``HOOKS`` and ``RUNNERS`` are
children of mmengine's root registries with scope ``'mmcpvt'``, so
``type='mmcpvt.CPVT'`` resolves from any OpenMMLab scope (and imports the
module that registers it, from the registry's ``locations``). mmpretrain,
mmdet and mmseg each search their own registry and then its ancestors, never
siblings, so our modules are also registered into the root registries (as
mmcv registers its bricks): ``type='CPVT'`` then resolves from every
downstream scope once the module is imported.

The data set classes subclass a downstream library's (mmdet's
``CocoDataset``): their module is imported only when a config names one
(``type='mmcpvt.CheckedCocoDataset'``), so ``import mmcpvt`` needs none of
mmdet, mmseg or mmpretrain.
"""
from mmengine import registry as root
from mmengine.registry import Registry


def _child(name: str, parent: Registry, location: str) -> Registry:
    return Registry(name, parent=parent, scope='mmcpvt', locations=[location])


MODELS = _child('model', root.MODELS, 'mmcpvt.models')
DATASETS = _child('dataset', root.DATASETS, 'mmcpvt.datasets.coco')
HOOKS = _child('hook', root.HOOKS, 'mmcpvt.engine')
RUNNERS = _child('runner', root.RUNNERS, 'mmcpvt.engine')
TRANSFORMS = _child('transform', root.TRANSFORMS, 'mmcpvt.datasets.transforms')


def _registrar(registry: Registry):
    """A decorator that registers a class into ``registry`` and its parent,
    the root registry: ``@register_model`` or
    ``@register_model(name='Alias')``; ``register_model(cls)`` directly."""

    def register(cls=None, *, name=None):

        def _register(module):
            registry.register_module(name=name, module=module)
            registry.parent.register_module(name=name, module=module)
            return module

        return _register if cls is None else _register(cls)

    return register


register_model = _registrar(MODELS)
register_dataset = _registrar(DATASETS)
register_transform = _registrar(TRANSFORMS)
register_hook = _registrar(HOOKS)
register_runner = _registrar(RUNNERS)

__all__ = [
    'MODELS', 'DATASETS', 'TRANSFORMS', 'HOOKS', 'RUNNERS', 'register_model',
    'register_dataset', 'register_transform', 'register_hook',
    'register_runner'
]
