"""Models from configs, for the tools: built by the init function of the
library that the config's ``default_scope`` names, then initialised and
loaded (:func:`build_model`)."""
import copy
import importlib
import warnings
from contextlib import contextmanager
from typing import Optional, Union

import torch
import torch.nn as nn
from mmengine.config import Config
from mmengine.logging import MMLogger
from mmengine.registry import init_default_scope

from mmcpvt.utils.checkpoint import (load_weights, read_checkpoint,
                                     require_file, state_dict_of)
from .cfg_options import merge_cfg_options

INIT_FUNCTIONS = {
    'mmpretrain': ('mmpretrain.apis', 'init_model'),
    'mmdet': ('mmdet.apis', 'init_detector'),
    'mmseg': ('mmseg.apis', 'init_model'),
}


@contextmanager
def quiet_logs(level: str = 'WARNING'):
    """mmengine's current logger at ``level`` for a while (initialisation
    reports every tensor at INFO)."""
    logger = MMLogger.get_current_instance()
    old = logger.level
    logger.setLevel(level)
    try:
        yield
    finally:
        logger.setLevel(old)


def _drop_pretrained(cfg):
    """Remove ``Pretrained`` init_cfg entries, nested ones included."""
    if isinstance(cfg, (list, tuple)):
        for value in cfg:
            _drop_pretrained(value)
    elif isinstance(cfg, dict):
        init = cfg.get('init_cfg')
        if isinstance(init, dict) and init.get('type') == 'Pretrained':
            cfg['init_cfg'] = None
        elif isinstance(init, list):
            cfg['init_cfg'] = [
                c for c in init if c.get('type') != 'Pretrained'
            ] or None
        for value in cfg.values():
            _drop_pretrained(value)


def init_model(cfg: Config, pretrained: bool = False) -> nn.Module:
    """The model of ``cfg`` on the CPU, not initialised, from its library's
    init function (the scope made the default one, which mmdet's and mmseg's
    functions leave, for the config's pipelines and data sets);
    ``Pretrained`` init_cfg entries are dropped unless ``pretrained``."""
    scope = cfg.get('default_scope', None) or 'mmpretrain'
    if scope not in INIT_FUNCTIONS:
        raise ValueError(f'the config\'s default_scope is {scope!r}; models '
                         f'are built for {", ".join(INIT_FUNCTIONS)} configs')
    module, name = INIT_FUNCTIONS[scope]
    init_fn = getattr(importlib.import_module(module), name)
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
                device: str = 'cpu',
                seed: Optional[int] = 0,
                pretrained: bool = False,
                cfg_options: Optional[dict] = None):
    """``(model, cfg, report)``: the model of ``config`` (``cfg_options``
    merged) in eval mode on ``device``: :func:`init_model`, ``init_weights``
    and the checkpoint (``report``: :func:`load_checkpoint`'s, or None).
    Building draws from a generator seeded with ``seed``, leaving the
    caller's random state as it was; with None, from the global one."""
    cfg = config
    if not isinstance(cfg, Config):
        require_file(cfg, 'config')
        cfg = Config.fromfile(cfg)
    merge_cfg_options(cfg, cfg_options, cfg.filename)
    with quiet_logs(), torch.random.fork_rng(devices=[],
                                             enabled=seed is not None):
        if seed is not None:
            torch.manual_seed(seed)
        model = init_model(cfg, pretrained)
        model.init_weights()
    report = None if checkpoint is None else load_checkpoint(model,
                                                             checkpoint)
    return model.to(device).eval(), cfg, report


def get_backbone(model: nn.Module) -> nn.Module:
    """``model.backbone`` (classifier, detector, segmentor), or ``model``."""
    return getattr(model, 'backbone', model)


def input_channels(model: nn.Module) -> int:
    """The input channels of the model's first convolution (3 if none)."""
    return next((m.in_channels for m in model.modules()
                 if isinstance(m, nn.Conv2d)), 3)


def load_checkpoint(model: nn.Module, checkpoint: str) -> dict:
    """Load a checkpoint (a file or URL) whole into ``model``, or into
    ``model.backbone`` if it holds no ``backbone.*`` key (a backbone or a
    converted or official classification checkpoint), by
    :func:`mmcpvt.utils.checkpoint.load_weights`; returns ``target``
    ('model' or 'backbone') and ``loaded`` (the number of tensors)."""
    ckpt = read_checkpoint(checkpoint)
    whole = not hasattr(model, 'backbone') or any(
        k.startswith('backbone.') for k in state_dict_of(ckpt, checkpoint))
    fit = load_weights(model if whole else model.backbone, ckpt,
                       source=checkpoint)
    return dict(target='model' if whole else 'backbone',
                loaded=len(fit.loaded))
