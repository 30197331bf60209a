"""Token <-> map layout helpers shared by the PEG, the attention and the
backbones. mmdet and mmseg have both, but mmcpvt imports without either
(mmcpvt/registry.py), and theirs copy the map where ours is a view."""
from typing import Sequence

import torch


def nlc_to_nchw(x: torch.Tensor, hw_shape: Sequence[int]) -> torch.Tensor:
    """Tokens (B, H*W, C) -> map (B, C, H, W).

    A view in channels-last memory, no copy: convolutions take it as it is
    and run their channels-last kernels. Call ``.contiguous()`` where an
    NCHW-contiguous map is wanted (outputs for a neck)."""
    B, _, C = x.shape
    H, W = hw_shape
    # (B, H*W, C) -> (B, H, W, C) -> (B, C, H, W)
    return x.reshape(B, H, W, C).permute(0, 3, 1, 2)


def nchw_to_nlc(x: torch.Tensor) -> torch.Tensor:
    """Map (B, C, H, W) -> tokens (B, H*W, C); a view for channels-last
    maps, a copy otherwise."""
    B, C, H, W = x.shape
    # (B, C, H, W) -> (B, H, W, C) -> (B, H*W, C); no -1, which an empty
    # batch (B = 0) leaves undetermined
    return x.permute(0, 2, 3, 1).reshape(B, H * W, C)
