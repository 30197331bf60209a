"""Absolute position embeddings: the baselines CPVT is compared against."""
from typing import Sequence, Tuple

import torch
import torch.nn as nn
import torch.nn.functional as F
from mmengine.model.weight_init import trunc_normal_

from .utils import nchw_to_nlc, nlc_to_nchw


class LearnedPositionEmbedding(nn.Module):
    """A learned position table (DeiT's, PVT's), resized for other sizes.

    Not mmpretrain's ``resize_pos_embed`` (the same interpolation), which
    returns the table as it is at its own size: a trace (ONNX export) there
    keeps that size for every input (exported at 64x64, onnxruntime fails at
    48x80; test_cpvt.py::test_learned_table_is_resized_in_a_trace).

    Args:
        embed_dims (int): Embedding dimension.
        grid_size (tuple[int]): (H, W) token grid the table is learned for.
        num_extra_tokens (int): Leading (class) tokens. Defaults to 1.
        interpolation (str): 'bicubic' (DeiT's fine-tuning) or 'bilinear'
            (PVT's ``_get_pos_embed``). Defaults to 'bicubic'.
    """

    def __init__(self, embed_dims: int, grid_size: Tuple[int, int],
                 num_extra_tokens: int = 1, interpolation: str = 'bicubic'):
        super().__init__()
        self.grid_size = tuple(grid_size)
        self.num_extra_tokens = num_extra_tokens
        self.interpolation = interpolation
        self.pos_embed = nn.Parameter(
            torch.zeros(1, num_extra_tokens + grid_size[0] * grid_size[1],
                        embed_dims))
        trunc_normal_(self.pos_embed, std=.02)

    def resized(self, hw_shape: Sequence[int]) -> torch.Tensor:
        """The table for an (H, W) grid: (1, extra + H*W, C)."""
        # traced (ONNX export), always resized: the graph takes any size
        if tuple(hw_shape) == self.grid_size and not torch.jit.is_tracing():
            return self.pos_embed
        n = self.num_extra_tokens
        extra, table = self.pos_embed[:, :n], self.pos_embed[:, n:]
        table = F.interpolate(  # bicubic needs float32
            nlc_to_nchw(table, self.grid_size).float(), size=tuple(hw_shape),
            mode=self.interpolation, align_corners=False).to(extra.dtype)
        return torch.cat((extra, nchw_to_nlc(table)), dim=1)

    def forward(self, x: torch.Tensor, hw_shape: Sequence[int]):
        return x + self.resized(hw_shape)


class SinCos2dPositionEmbedding(nn.Module):
    """Fixed 2-D sine-cosine embedding of the actual grid (mmpretrain's
    table, MoCo v3 / MAE layout); extra (class) tokens get none.

    Args:
        embed_dims (int): Embedding dimension (a multiple of 4).
        num_extra_tokens (int): Leading tokens left unchanged. Defaults to 1.
    """

    def __init__(self, embed_dims: int, num_extra_tokens: int = 1):
        super().__init__()
        # imported here: mmcpvt imports without mmpretrain (~4 s to import)
        from mmpretrain.models.utils import build_2d_sincos_position_embedding
        self.build_table = build_2d_sincos_position_embedding
        self.embed_dims = embed_dims
        self.num_extra_tokens = num_extra_tokens

    def forward(self, x: torch.Tensor, hw_shape: Sequence[int]):
        # its meshgrid takes (W, H): the tokens come row by row
        table = self.build_table(tuple(hw_shape)[::-1], self.embed_dims)
        n = self.num_extra_tokens
        return torch.cat((x[:, :n], x[:, n:] + table.to(x)), dim=1)
