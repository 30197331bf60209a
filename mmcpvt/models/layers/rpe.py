"""2-D relative position encoding after Shaw et al.: the relative-encoding
baseline of CPVT (Conditional Positional Encodings for Vision Transformers,
https://arxiv.org/abs/2102.10882, Tables 1, 6 and 7, "2D RPE").

Self-Attention with Relative Position Representations, Shaw et al., NAACL
2018 (https://arxiv.org/abs/1803.02155).
"""
from typing import Sequence

import torch
import torch.nn as nn
import torch.nn.functional as F
from mmengine.model.weight_init import trunc_normal_

from ..checks import Int, check_args


def relative_position_index(hw_shape: Sequence[int], num_extra_tokens: int,
                            clip_distance: int,
                            device=None) -> torch.Tensor:
    """(N, N) row of the relative table for every (query, key) pair of
    ``num_extra_tokens`` leading tokens followed by an H x W map, N =
    ``num_extra_tokens + H*W``.

    A patch pair with key - query offset (dy, dx) gets row
    ``(clip(dy) + K) * (2K + 1) + clip(dx) + K``, each axis clipped to
    [-K, K]; a pair that involves an extra token gets the last row,
    ``(2K + 1)**2``.
    """
    H, W = hw_shape
    K = clip_distance
    ys = torch.arange(H, device=device).repeat_interleave(W)  # (H*W, )
    xs = torch.arange(W, device=device).repeat(H)
    # rows are queries, columns keys: (H*W, H*W)
    dy = (ys[None, :] - ys[:, None]).clamp(-K, K) + K
    dx = (xs[None, :] - xs[:, None]).clamp(-K, K) + K
    index = dy * (2 * K + 1) + dx
    n = num_extra_tokens
    # (H*W, H*W) -> (N, N): extra rows and columns point at the extra row
    return F.pad(index, (n, 0, n, 0), value=(2 * K + 1)**2)


class RelativePositionEncoding2d(nn.Module):
    """Shaw et al.'s relative position encoding of the keys, in 2-D.

    Adds ``q_i . a_ij / sqrt(head_dims)`` to the attention logit of query
    ``i`` and key ``j`` (the same scale as ``q_i . k_j``), where ``a_ij`` is
    a learned vector of size ``head_dims`` chosen by the clipped 2-D offset
    of key ``j`` from query ``i``: ``(clip(dy), clip(dx))``, each axis
    clipped to [-K, K] (K = ``clip_distance``; the paper sets K = 8). The
    table is joint over (dy, dx), (2K+1)^2 rows, and one more row serves
    every pair that involves an extra (class) token, which has no place on
    the map (so a class-token query gets one bias for all keys, which the
    softmax ignores; patch queries tell the class key apart by it). As in
    Shaw et al., the table is shared by the heads of a block.

    Only the key term: Shaw et al. found the relative encoding of the values
    unnecessary (no gain in their translation experiments), so there is
    none here.

    Parameters per block: ``((2K + 1)**2 + 1) * head_dims``, e.g. 18,560 for
    K = 8 and DeiT-Ti's 64-dimensional heads. The encoding depends on
    offsets only, so it works at any input size and does not encode absolute
    position.

    The bias is computed as ``q @ table.T`` (B, heads, N, (2K+1)^2 + 1) and a
    gather with an (N, N) index of rows (see :func:`relative_position_index`,
    cached per map size), and handed to the attention as a float bias, so
    the fused ``F.scaled_dot_product_attention`` path still applies.

    Args:
        head_dims (int): Dimension of each head.
        clip_distance (int): K, the largest offset told apart on each axis.
            Defaults to 8.
    """

    def __init__(self, head_dims: int, clip_distance: int = 8):
        super().__init__()
        check_args('RelativePositionEncoding2d', locals(),
                   dict(clip_distance=Int(1)), 'model.backbone.rpe_cfg.')
        self.head_dims = head_dims
        self.clip_distance = clip_distance
        self.scale = head_dims**-0.5
        self.relative_key_table = nn.Parameter(
            torch.zeros((2 * clip_distance + 1)**2 + 1, head_dims))
        trunc_normal_(self.relative_key_table, std=.02)
        self._index_cache = {}

    def extra_repr(self) -> str:
        return (f'head_dims={self.head_dims}, '
                f'clip_distance={self.clip_distance}')

    def _index(self, hw_shape: Sequence[int], num_extra: int,
               device) -> torch.Tensor:
        key = (tuple(hw_shape), num_extra, device)
        if key not in self._index_cache:
            self._index_cache[key] = relative_position_index(
                hw_shape, num_extra, self.clip_distance, device)
        return self._index_cache[key]

    def forward(self, q: torch.Tensor,
                hw_shape: Sequence[int]) -> torch.Tensor:
        """Queries (B, heads, N, head_dims), of which the first
        ``N - H*W`` are extra tokens, and the (H, W) of the map -> the
        attention bias (B, heads, N, N)."""
        if hw_shape is None:
            raise ValueError('RelativePositionEncoding2d needs the (H, W) of '
                             'the token map: pass hw_shape to the attention')
        B, heads, N, _ = q.shape
        num_extra = N - hw_shape[0] * hw_shape[1]
        if num_extra < 0:
            raise ValueError(f'RelativePositionEncoding2d got {N} tokens for '
                             f'a {hw_shape[0]}x{hw_shape[1]} token map')
        index = self._index(hw_shape, num_extra, q.device)  # (N, N)
        # (B, heads, N, head_dims) @ (head_dims, R) -> (B, heads, N, R)
        logits = (q * self.scale) @ self.relative_key_table.T.to(q.dtype)
        # (B, heads, N, R) -> (B, heads, N, N)
        return logits.gather(-1, index.expand(B, heads, N, N))
