"""mmcpvt's models in mmpretrain's model hub.

mmpretrain lists, builds and runs models by name (``list_models``,
``get_model``, ``inference_model``, the inferencers) from one model-index:
its own (``ModelHub._register_mmpretrain_models``). ``import mmcpvt``, where
mmpretrain is installed, adds our image classification models to it, read
from model-index.yml and configs/*/metafile*.yml::

    >>> import mmcpvt
    >>> from mmpretrain import get_model, list_models
    >>> list_models('cpvt-tiny')
    ['cpvt-tiny-gap-p0-4_4xb256_in1k', 'cpvt-tiny-p0-4_4xb256_in1k',
     'cpvt-tiny_4xb256_in1k']
    >>> model = get_model('cpvt-tiny_4xb256_in1k')  # the architecture

mmcpvt releases no weights (``Weights: null``): ``get_model`` builds the
architecture, and ``pretrained=True`` warns that there is no checkpoint. A
checkpoint of one's own loads with ``get_model(name, pretrained=PATH)``.

Left out: the detection and segmentation models of the model-index
(mmpretrain builds classifiers; use ``mim search mmcpvt`` or the configs
with mmdet / mmseg), and names mmpretrain has already: our DeiT baselines
``deit-tiny_4xb256_in1k`` and ``deit-small_4xb256_in1k`` repeat mmpretrain's
recipes under mmpretrain's names, and those names keep mmpretrain's models,
which have weights.
"""
import importlib.util
import os.path as osp
import warnings
from typing import List, Optional

# .../mmcpvt
PACKAGE_DIR = osp.dirname(osp.dirname(osp.abspath(__file__)))
TASK = 'Image Classification'


def get_mim_root() -> str:
    """The folder that holds model-index.yml and the configs/ it names.

    In a source checkout (an editable install, or the repository on the
    path) it is the repository, so that an edited config counts at once; in
    an installed package it is ``mmcpvt/.mim``, where setup.py copies
    configs/, tools/ and model-index.yml (as OpenMMLab packages do, for mim).
    """
    checkout = osp.dirname(PACKAGE_DIR)
    installed = osp.join(PACKAGE_DIR, '.mim')
    for root, marker in ((checkout, 'setup.py'), (installed, 'configs')):
        if (osp.isfile(osp.join(root, 'model-index.yml'))
                and osp.exists(osp.join(root, marker))):
            return root
    raise FileNotFoundError(
        f'mmcpvt has no model-index.yml: neither in {checkout} (a source '
        f'checkout) nor in {installed} (an installed package). Install mmcpvt '
        'from its repository with `pip install .` or `pip install -e .`: '
        'setup.py puts configs/, tools/ and model-index.yml into mmcpvt/.mim')


def load_classification_models(root: Optional[str] = None) -> List:
    """The image classification models of mmcpvt's model-index.

    Args:
        root (str, optional): The folder of model-index.yml, whose paths
            the metafiles' ``Config`` entries are relative to. Defaults to
            :func:`get_mim_root`.

    Returns:
        list[modelindex.models.Model.Model]: The models whose ``Results``
        name the task 'Image Classification', each with its collection's
        metadata merged in and ``config`` an absolute path.
    """
    from modelindex.load_model_index import load
    root = get_mim_root() if root is None else root
    index = load(osp.join(root, 'model-index.yml'))
    index.build_models_with_collections()
    models = []
    for model in index.models:
        if any(result.task == TASK for result in model.results or []):
            model.config = osp.join(root, model.config)
            models.append(model)
    return models


def _add_models(model_hub) -> None:
    for model in load_classification_models():
        name = model.name.lower()
        # a name mmpretrain already has stays mmpretrain's (module doc)
        if name not in model_hub._models_dict:
            model_hub._models_dict[name] = model


def register_mmpretrain_models() -> None:
    """Make mmpretrain's model hub list mmcpvt's image classification models.

    mmpretrain reads its own model-index at the first call that needs it
    (``list_models``, ``get_model``, ...), through
    ``ModelHub._register_mmpretrain_models``; this wraps that method so
    that ours follow at the same moment: mmpretrain's names are known by
    then (they keep their models), and importing mmcpvt does not pay for
    reading the metafiles (about 1 s for mmpretrain's). A call after
    mmpretrain has read its index adds ours at the next ``list_models``.
    ``import mmcpvt`` calls it where mmpretrain is installed; calling it
    again does nothing.
    """
    from mmpretrain.apis.model import ModelHub
    original = ModelHub.__dict__['_register_mmpretrain_models'].__func__
    if getattr(original, 'adds_mmcpvt_models', False):
        return
    added = False

    def register(cls):
        nonlocal added
        original(cls)
        if not added:
            _add_models(cls)
            added = True

    register.adds_mmcpvt_models = True
    ModelHub._register_mmpretrain_models = classmethod(register)


def register_mmpretrain_models_if_installed() -> bool:
    """:func:`register_mmpretrain_models` where mmpretrain is installed
    (what ``import mmcpvt`` calls: mmcpvt imports without mmpretrain).

    Returns:
        bool: Whether our models were registered. Where mmpretrain is
        installed but does not import, a warning says why, and importing
        mmcpvt still works for mmdet and mmseg.
    """
    if importlib.util.find_spec('mmpretrain') is None:
        return False
    try:
        register_mmpretrain_models()
    except Exception as e:  # mmpretrain installed but broken
        warnings.warn(
            f'mmpretrain is installed but does not import ({e!r}), so '
            "mmcpvt's models are not added to mmpretrain's list_models / "
            'get_model. Fix the mmpretrain install (its version check asks '
            'for mmcv>=2.0.0,<2.4.0), then call '
            'mmcpvt.apis.register_mmpretrain_models()')
        return False
    return True
