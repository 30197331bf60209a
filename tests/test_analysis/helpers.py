"""Tiny models for the analysis tests."""
import torch

import mmcpvt  # noqa: F401
from mmcpvt.apis.model import quiet_logs
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
    with quiet_logs():
        model.init_weights()
    return model.eval()


def images(n=4, size=64, seed=0):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(n, 3, size, size, generator=g)
