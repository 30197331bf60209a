"""Models from configs, for the analysis instruments and the tools.

A model is built by its library's own function, chosen by the config's
``default_scope``: ``mmpretrain.apis.init_model`` (classifiers),
``mmdet.apis.init_detector`` (detectors) or ``mmseg.apis.init_model``
(segmentors). None of them runs ``init_weights``; :func:`build_model` does,
seeded, so that a model without a checkpoint has the config's own random
initialisation, and loads a checkpoint with :func:`load_weights`, which
also takes a bare backbone's (an official or converted one) and says how
much of it fitted.
"""
import copy
import importlib
import os.path as osp
import re
import warnings
from contextlib import contextmanager
from typing import Optional, Union

import torch
import torch.nn as nn
from mmengine.config import Config
from mmengine.logging import MMLogger
from mmengine.registry import init_default_scope

from mmcpvt.utils.checkpoint import require_file
from mmcpvt.utils.convert import unwrap

# default_scope -> (module, function) that builds the model
INIT_FUNCTIONS = {
    'mmpretrain': ('mmpretrain.apis', 'init_model'),
    'mmdet': ('mmdet.apis', 'init_detector'),
    'mmseg': ('mmseg.apis', 'init_model'),
}


@contextmanager
def quiet_logs(level: str = 'WARNING'):
    """Raise the level of mmengine's current logger for a while (model
    initialisation reports every tensor at INFO)."""
    logger = MMLogger.get_current_instance()
    old = logger.level
    logger.setLevel(level)
    try:
        yield
    finally:
        logger.setLevel(old)


def _drop_pretrained(cfg):
    """Remove ``Pretrained`` init_cfg entries (nested dicts included): the
    weights come from the checkpoint given, or stay random."""
    if isinstance(cfg, dict):
        init = cfg.get('init_cfg')
        if isinstance(init, dict) and init.get('type') == 'Pretrained':
            cfg['init_cfg'] = None
        elif isinstance(init, list):
            cfg['init_cfg'] = [
                c for c in init
                if not (isinstance(c, dict) and c.get('type') == 'Pretrained')
            ] or None
        for value in cfg.values():
            _drop_pretrained(value)
    elif isinstance(cfg, (list, tuple)):
        for value in cfg:
            _drop_pretrained(value)


def load_config(config: Union[str, Config],
                cfg_options: Optional[dict] = None) -> Config:
    """A config from a file (or as given), with ``cfg_options`` merged
    (the tools check them first for misspelt keys)."""
    if not isinstance(config, Config):
        require_file(config, 'config')
        config = Config.fromfile(config)
    if cfg_options:
        config.merge_from_dict(cfg_options)
    return config


def init_model(cfg: Config, pretrained: bool = False) -> nn.Module:
    """The model of ``cfg``, built on the CPU by its library's init function
    (see the module docstring), without ``init_weights``; the config's
    scope becomes the default one. ``Pretrained`` init_cfg entries are
    dropped unless ``pretrained``; ``cfg`` is left as it was."""
    scope = cfg.get('default_scope', None) or 'mmpretrain'
    if scope not in INIT_FUNCTIONS:
        raise ValueError(f'the config\'s default_scope is {scope!r}; models '
                         f'are built for {", ".join(INIT_FUNCTIONS)} configs')
    module, name = INIT_FUNCTIONS[scope]
    init_fn = getattr(importlib.import_module(module), name)
    # the scope stays, as mmdet's and mmseg's functions leave it, for the
    # config's pipelines and data sets
    init_default_scope(scope)
    cfg = copy.deepcopy(cfg)
    if not pretrained:
        _drop_pretrained(cfg.model)
    backbone_init = cfg.model.get('backbone', {}).get('init_cfg')
    with warnings.catch_warnings():  # class names / palette without data
        warnings.simplefilter('ignore')
        model = init_fn(cfg, None, device='cpu')
    if backbone_init is not None:  # mmdet and mmseg drop it: restored
        model.backbone.init_cfg = backbone_init
    return model


def build_model(config: Union[str, Config],
                checkpoint: Optional[str] = None,
                cfg_options: Optional[dict] = None,
                device: str = 'cpu',
                seed: Optional[int] = 0,
                pretrained: bool = False):
    """The model of a classifier, detector or segmentor config, in eval
    mode: :func:`init_model`, then ``init_weights`` and the checkpoint.

    ``Pretrained`` init_cfg entries are dropped (the weights are the
    checkpoint's, or the config's random initialisation without one)
    unless ``pretrained``, when ``init_weights`` loads them as training
    would. Building and initialisation draw from a generator seeded with
    ``seed``, leaving the caller's random state as it was; with None they
    draw from (and advance) the global one.

    Returns:
        tuple: ``(model, cfg, report)``; ``report`` is None without a
        checkpoint, else as :func:`load_weights` returns it. The backbone is
        ``get_backbone(model)``.
    """
    cfg = load_config(config, cfg_options)
    with quiet_logs(), torch.random.fork_rng(devices=[],
                                             enabled=seed is not None):
        if seed is not None:
            torch.manual_seed(seed)
        model = init_model(cfg, pretrained)
        model.init_weights()
    report = None
    if checkpoint is not None:
        report = load_weights(model, checkpoint)
    return model.to(device).eval(), cfg, report


def get_backbone(model: nn.Module) -> nn.Module:
    """``model.backbone`` (classifier, detector, segmentor), or the model
    itself if it is a backbone."""
    return getattr(model, 'backbone', model)


def load_weights(model: nn.Module, checkpoint: str) -> dict:
    """Load a checkpoint into ``model`` and say how much of it fitted.

    The file (or URL) is read by mmengine's checkpoint loader; a checkpoint
    of the whole model (keys ``backbone.*``, as the runner saves) goes into
    the model, any other (an official or converted backbone) into the
    backbone, where the backbone's load-time converter applies. Loading is
    not strict, but tensors of the wrong shape and a checkpoint of which no
    backbone tensor fits are refused.

    Returns:
        dict: ``target`` ('model' or 'backbone'), ``loaded`` / ``total``
        (tensors of the target), ``backbone_loaded`` / ``backbone_total``,
        ``missing`` and ``unexpected`` (key lists).
    """
    from mmengine.runner.checkpoint import _load_checkpoint
    require_file(checkpoint)
    state = unwrap(_load_checkpoint(checkpoint, map_location='cpu'))
    if not isinstance(state, dict):
        raise ValueError(f'{checkpoint}: no state dict found in it')
    state = {re.sub(r'^module\.', '', k): v for k, v in state.items()}
    backbone = get_backbone(model)
    whole = backbone is not model and any(
        k.startswith('backbone.') for k in state)
    target = model if whole else backbone
    try:
        # torch's loader: returns the missing / unexpected keys after the
        # backbone's converting pre-hook and refuses shape mismatches
        result = target.load_state_dict(state, strict=False)
    except RuntimeError as e:
        raise RuntimeError(
            f'{checkpoint} does not fit the config\'s model '
            f'({type(backbone).__name__} arguments differ?):\n{e}') from e

    def counted(names):  # BN step counters are no weights
        return [k for k in names if 'num_batches_tracked' not in k]

    keys = counted(target.state_dict())
    missing = counted(result.missing_keys)
    prefix = 'backbone.' if whole else ''
    b_keys = [k for k in keys if k.startswith(prefix)]
    b_missing = [k for k in missing if k.startswith(prefix)]
    report = dict(
        target='model' if whole else 'backbone',
        loaded=len(keys) - len(missing),
        total=len(keys),
        backbone_loaded=len(b_keys) - len(b_missing),
        backbone_total=len(b_keys),
        missing=missing,
        unexpected=list(result.unexpected_keys))
    if report['backbone_loaded'] == 0:
        sample = ', '.join(list(state)[:3])
        raise ValueError(
            f'{checkpoint}: none of the {len(b_keys)} tensors of the '
            f'{type(backbone).__name__} backbone is in it (its keys: '
            f'{sample}, ...); is it a checkpoint of this config?')
    return report
