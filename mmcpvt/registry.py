"""The mmcpvt model registry.

``MODELS`` is a child of mmengine's root registry with scope ``'mmcpvt'``, so
``type='mmcpvt.CPVT'`` resolves from any OpenMMLab scope. mmpretrain, mmdet and
mmseg each search their own registry and then its ancestors, never siblings,
so our modules are also registered into the root registry (as mmcv registers
its bricks): ``type='CPVT'`` then resolves from every downstream scope.
"""
from mmengine.registry import MODELS as MMENGINE_MODELS
from mmengine.registry import Registry

MODELS = Registry(
    'model', parent=MMENGINE_MODELS, scope='mmcpvt',
    locations=['mmcpvt.models'])


def register_model(cls=None, *, name=None):
    """Register ``cls`` into mmcpvt's registry and the root registry.

    Use as ``@register_model`` or ``@register_model(name='Alias')``.
    """

    def _register(module):
        MODELS.register_module(name=name, module=module)
        MMENGINE_MODELS.register_module(name=name, module=module)
        return module

    return _register if cls is None else _register(cls)


__all__ = ['MODELS', 'register_model']
