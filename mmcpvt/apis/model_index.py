"""mmcpvt's models in mmpretrain's model hub (docs/get_started.md).

``import mmcpvt``, where mmpretrain is installed, registers
model-index-mmpretrain.yml (the image classification models of
configs/*/metafile*.yml) with mmpretrain's public
``ModelHub.register_model_index``, so that ``list_models`` and ``get_model``
know them::

    >>> import mmcpvt
    >>> from mmpretrain import get_model, list_models
    >>> list_models('cpvt-tiny')
    ['cpvt-tiny-gap-p0-4_4xb256_in1k', 'cpvt-tiny-p0-4_4xb256_in1k',
     'cpvt-tiny_4xb256_in1k']
    >>> model = get_model('cpvt-tiny_4xb256_in1k')  # the architecture

mmcpvt releases no weights: ``get_model(name, pretrained=PATH)`` loads one's
own. mmengine loads a URL through torch.hub, which turns ``weights_only``
off: set ``TORCH_FORCE_WEIGHTS_ONLY_LOAD=1`` first (docs/checkpoints.md).
Left out: detection and segmentation models, and our DeiT baselines, whose
names mmpretrain has.
"""
import importlib.util
import os.path as osp
import warnings

# .../mmcpvt
PACKAGE_DIR = osp.dirname(osp.dirname(osp.abspath(__file__)))
INDEX = 'model-index-mmpretrain.yml'
_registered = False


def get_mim_root() -> str:
    """The folder that holds the model-indexes and the configs/ they name.

    In a source checkout (an editable install, or the repository on the
    path) it is the repository, so that an edited config counts at once; in
    an installed package it is ``mmcpvt/.mim``, where setup.py copies
    configs/, tools/ and the model-indexes (as OpenMMLab packages do, for
    mim).
    """
    checkout = osp.dirname(PACKAGE_DIR)
    installed = osp.join(PACKAGE_DIR, '.mim')
    for root, marker in ((checkout, 'setup.py'), (installed, 'configs')):
        if (osp.isfile(osp.join(root, INDEX))
                and osp.exists(osp.join(root, marker))):
            return root
    raise FileNotFoundError(
        f'mmcpvt has no {INDEX}: neither in {checkout} (a source checkout) '
        f'nor in {installed} (an installed package). Install mmcpvt from its '
        'repository with `pip install .` or `pip install -e .`: setup.py '
        'puts configs/, tools/ and the model-indexes into mmcpvt/.mim')


def register_mmpretrain_models() -> bool:
    """Register model-index-mmpretrain.yml with mmpretrain's model hub
    (``ModelHub.register_model_index``); the configs it names resolve
    against :func:`get_mim_root`. Calling it again does nothing.

    Returns:
        bool: Whether this call registered the models.
    """
    global _registered
    if _registered:
        return False
    from mmpretrain.apis.model import ModelHub
    root = get_mim_root()
    ModelHub.register_model_index(osp.join(root, INDEX), config_prefix=root)
    _registered = True
    return True


def register_mmpretrain_models_if_installed() -> bool:
    """:func:`register_mmpretrain_models` where mmpretrain is installed
    (what ``import mmcpvt`` calls: mmcpvt imports without mmpretrain).

    Returns:
        bool: Whether our models are registered. Where mmpretrain is
        installed but does not import, a warning says why, and importing
        mmcpvt still works for mmdet and mmseg.
    """
    if importlib.util.find_spec('mmpretrain') is None:
        return False
    try:
        register_mmpretrain_models()
    except (ImportError, AssertionError) as e:  # installed, but broken
        warnings.warn(
            f'mmpretrain is installed but does not import ({e!r}), so '
            "mmcpvt's models are not added to mmpretrain's list_models / "
            'get_model. Fix the mmpretrain install (its version check asks '
            'for mmcv>=2.0.0,<2.4.0), then call '
            'mmcpvt.apis.register_mmpretrain_models()')
        return False
    return True
