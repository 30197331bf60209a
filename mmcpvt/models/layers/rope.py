"""2-D rotary position embeddings of queries and keys, as today's
any-resolution backbones use them, from timm's maintained implementations:

- 'axial': RoPE-Axial, and 'mixed': RoPE-Mixed, its frequencies learned per
  block and head (Heo et al., Rotary Position Embedding for Vision
  Transformer, ECCV 2024, https://arxiv.org/abs/2403.13298; timm's
  ``RotaryEmbeddingCat`` and ``RotaryEmbeddingMixed``, defaults of its
  ``vit_*_patch16_rope[_mixed]_224`` ports of naver-ai/rope-vit);
- 'dinov3': DINOv3's, coordinates centred and normalised to the map, so
  that any size spans [-1, 1] (Simeoni et al., 2025,
  https://arxiv.org/abs/2508.10104; ``RotaryEmbeddingDinoV3``).

Not in the CPVT paper: a baseline beside it (docs/reproduction.md, "Beyond
the paper").
"""
from typing import Sequence

import torch
import torch.nn as nn

ROPE_TYPES = ('axial', 'mixed', 'dinov3')
# timm's arguments of its models of each (overridable in rope_cfg)
ROPE_DEFAULTS = {
    'axial': dict(temperature=100., in_pixels=False, grid_indexing='xy'),
    'mixed': dict(temperature=10., grid_indexing='xy'),
    'dinov3': dict(temperature=100., normalize_coords='separate'),
}


class RotaryPositionEmbedding2d(nn.Module):
    """The rotations of every block for the token map of a forward.

    ``forward(hw_shape)`` gives ``(depth, [heads,] H*W, 2 * head_dims)``:
    sines then cosines, row ``i`` for block ``i`` (one table for all blocks
    but with 'mixed'), built for the map it is given, so any input size
    works; :func:`apply_rope` rotates the last H*W tokens of queries and
    keys with it (a class token stays unrotated).

    Interleaved pairs for all three (DINOv3's own layout rotates halves: for
    a model trained from scratch the two differ by a fixed permutation of
    the head channels, which the query and key projections absorb).

    Args:
        embed_dims (int): Embedding dimension.
        num_heads (int): Heads; ``embed_dims / num_heads`` must be a
            multiple of 4 (two axes, pairs of channels).
        depth (int): Blocks ('mixed' learns frequencies for each).
        type (str): One of :data:`ROPE_TYPES`. Defaults to 'axial'.
        **kwargs: Other arguments of timm's module, over
            :data:`ROPE_DEFAULTS`.
    """

    def __init__(self, embed_dims: int, num_heads: int, depth: int,
                 type: str = 'axial', **kwargs):
        super().__init__()
        # else timm builds a table of another width, and rotation fails
        # later with a broadcast message
        if type not in ROPE_TYPES:
            raise ValueError(
                f'rope_cfg type must be one of {ROPE_TYPES}, got {type!r}')
        if embed_dims % (4 * num_heads) != 0:
            raise ValueError(f'RoPE needs head dims (embed_dims {embed_dims} '
                             f'/ num_heads {num_heads}) that are a multiple '
                             f'of 4')
        try:  # timm only when a RoPE model is built
            from timm.layers import (RotaryEmbeddingCat,
                                     RotaryEmbeddingDinoV3,
                                     RotaryEmbeddingMixed)
        except ImportError as e:
            raise ImportError(
                "rope_cfg needs timm: pip install 'mmcpvt[rope]'") from e
        self.type = type
        self.depth = depth
        kwargs = dict(ROPE_DEFAULTS[type], **kwargs)
        head_dims = embed_dims // num_heads
        if type == 'mixed':
            self.embed = RotaryEmbeddingMixed(embed_dims, depth, num_heads,
                                              **kwargs)
        elif type == 'axial':
            self.embed = RotaryEmbeddingCat(head_dims, **kwargs)
        else:
            self.embed = RotaryEmbeddingDinoV3(head_dims, rotate_half=False,
                                               **kwargs)

    def forward(self, hw_shape: Sequence[int]) -> torch.Tensor:
        rope = self.embed.get_embed(list(hw_shape))
        if self.type == 'mixed':  # (depth, heads, H*W, 2 * head_dims)
            return rope
        return rope.expand(self.depth, -1, -1)  # the blocks share it


def apply_rope(x: torch.Tensor, rope: torch.Tensor) -> torch.Tensor:
    """Rotate the last H*W tokens of queries or keys (B, heads, N, d) by
    one block's ``rope`` ([heads,] H*W, 2d); leading tokens stay."""
    from timm.layers import apply_rot_embed_cat
    n = x.shape[-2] - rope.shape[-2]
    return torch.cat(
        [x[..., :n, :], apply_rot_embed_cat(x[..., n:, :], rope)], dim=-2)
