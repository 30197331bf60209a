"""Token <-> map layouts. Not mmdet's / mmseg's ``nlc_to_nchw``: mmcpvt
imports without either (mmcpvt/registry.py), and theirs copy the map where
ours is a view."""
from typing import Sequence

import torch


def nlc_to_nchw(x: torch.Tensor, hw_shape: Sequence[int]) -> torch.Tensor:
    """Tokens (B, H*W, C) -> map (B, C, H, W): a channels-last view, which
    convolutions take as it is; ``.contiguous()`` where NCHW is wanted."""
    B, _, C = x.shape
    H, W = hw_shape
    return x.reshape(B, H, W, C).permute(0, 3, 1, 2)


def nchw_to_nlc(x: torch.Tensor) -> torch.Tensor:
    """Map (B, C, H, W) -> tokens (B, H*W, C); a view of a channels-last
    map. No -1 in the shape: an empty batch would leave it undetermined."""
    B, C, H, W = x.shape
    return x.permute(0, 2, 3, 1).reshape(B, H * W, C)
