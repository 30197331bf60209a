"""mmcpvt's classifiers (model-index-mmpretrain.yml) in mmpretrain's model
hub, so that ``list_models('cpvt-tiny')`` and ``get_model(name,
pretrained=PATH)`` know them; docs/get_started.md."""
import importlib.util
import os.path as osp
import warnings

# .../mmcpvt
PACKAGE_DIR = osp.dirname(osp.dirname(osp.abspath(__file__)))
INDEX = 'model-index-mmpretrain.yml'
_registered = False


def get_mim_root() -> str:
    """The folder of the model-indexes and configs/: the repository in a
    source checkout (edits count at once), else ``mmcpvt/.mim``, where
    setup.py copies them (as OpenMMLab packages do, for mim)."""
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
    """Register model-index-mmpretrain.yml with mmpretrain's
    ``ModelHub.register_model_index`` (which refuses a name twice); returns
    whether this call registered it."""
    global _registered
    if _registered:
        return False
    from mmpretrain.apis.model import ModelHub
    root = get_mim_root()
    ModelHub.register_model_index(osp.join(root, INDEX), config_prefix=root)
    _registered = True
    return True


def register_mmpretrain_models_if_installed() -> bool:
    """:func:`register_mmpretrain_models` where mmpretrain is installed and
    imports (else a warning; mmcpvt still works for mmdet and mmseg);
    returns whether our models are registered."""
    if importlib.util.find_spec('mmpretrain') is None:
        return False
    try:
        register_mmpretrain_models()
    except (ImportError, AssertionError) as e:  # installed, but broken
        warnings.warn(
            f'mmpretrain is installed but does not import ({e!r}): mmcpvt\'s '
            'models are not in its list_models / get_model. Fix the install '
            '(mmpretrain asks for mmcv>=2.0.0,<2.4.0), then call '
            'mmcpvt.apis.register_mmpretrain_models()')
        return False
    return True
