"""Tiny models for the analysis tests, and the tools' modules (the
instruments are in tools/, which is no package)."""
import importlib
import os.path as osp
import sys

import torch

import mmcpvt  # noqa: F401
from mmcpvt.registry import MODELS

TINY_ARCH = dict(embed_dims=32, num_layers=3, num_heads=2,
                 feedforward_channels=64)
PVT_ARCH = dict(embed_dims=[8, 16, 24, 32], num_heads=[1, 2, 3, 4],
                mlp_ratios=[2, 2, 2, 2], depths=[1, 2, 1, 1],
                sr_ratios=[8, 4, 2, 1])
SWIN_ARCH = dict(embed_dims=8, depths=[2, 2, 2, 2], num_heads=[1, 2, 2, 4])


def build(type='CPVT', seed=0, **kwargs):
    """A backbone in eval mode, initialised as in training (seeded)."""
    if type in ('CPVT', 'CPVTQKOnly'):
        kwargs = dict(dict(arch=TINY_ARCH, img_size=64, patch_size=8),
                      **kwargs)
    torch.manual_seed(seed)
    model = MODELS.build(dict(type=type, **kwargs))
    with tool_module('tools/models.py').quiet_logs():
        model.init_weights()
    return model.eval()


def images(n=4, size=64, seed=0):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(n, 3, size, size, generator=g)


ROOT = osp.dirname(osp.dirname(osp.dirname(osp.abspath(__file__))))


def tool_module(path: str):
    """A module of tools/ (path from the repository root), its folder and
    tools/ on ``sys.path`` as when it runs, imported by its name: the same
    module that the tools import (``from blocks import ...``)."""
    path = osp.join(ROOT, path)
    for folder in (osp.join(ROOT, 'tools'), osp.dirname(path)):
        if folder not in sys.path:
            sys.path.insert(0, folder)
    module = importlib.import_module(osp.splitext(osp.basename(path))[0])
    assert osp.samefile(module.__file__, path), (
        f'{path}: the name is taken by {module.__file__}')
    return module
