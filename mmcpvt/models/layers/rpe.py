"""2-D relative position encoding after Shaw et al.: the relative-encoding
baseline of CPVT (Conditional Positional Encodings for Vision Transformers,
https://arxiv.org/abs/2102.10882, Tables 1, 7 and 8, "2D RPE").

Self-Attention with Relative Position Representations, Shaw et al., NAACL
2018 (https://arxiv.org/abs/1803.02155).
"""
from typing import Sequence

import torch
import torch.nn as nn
import torch.nn.functional as F
from mmengine.model.weight_init import trunc_normal_


def relative_position_index(hw_shape: Sequence[int], num_extra_tokens: int,
                            clip_distance: int,
                            device=None) -> torch.Tensor:
    """(N, N) rows of the relative table for the (query, key) pairs of
    ``num_extra_tokens`` tokens and an H x W map: ``(clip(dy) + K) * (2K +
    1) + clip(dx) + K`` for key - query offsets (dy, dx) clipped to [-K, K],
    the last row, ``(2K + 1)**2``, for a pair with an extra token."""
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

    Adds ``q_i . a_ij / sqrt(head_dims)`` to the logit of query ``i`` and
    key ``j``, ``a_ij`` a learned vector chosen by the offset of key ``j``
    from query ``i``, each axis clipped to [-K, K] (K = ``clip_distance``;
    the paper's 8). The table is joint over (dy, dx), (2K+1)^2 rows, plus a
    row for every pair with an extra (class) token, which has no place on
    the map; shared by the heads of a block and without a value term, as in
    Shaw et al. Offsets only: any input size works, and no absolute
    position is encoded. The bias goes to the attention as a float mask, so
    the fused SDPA path still applies.

    Args:
        head_dims (int): Dimension of each head.
        clip_distance (int): K, the largest offset told apart on each axis.
            Defaults to 8.
    """

    def __init__(self, head_dims: int, clip_distance: int = 8):
        super().__init__()
        self.head_dims = head_dims
        self.clip_distance = clip_distance
        self.scale = head_dims**-0.5
        self.relative_key_table = nn.Parameter(
            torch.zeros((2 * clip_distance + 1)**2 + 1, head_dims))
        trunc_normal_(self.relative_key_table, std=.02)

    def forward(self, q: torch.Tensor,
                hw_shape: Sequence[int]) -> torch.Tensor:
        """Queries (B, heads, N, head_dims), of which the first ``N - H*W``
        are extra tokens, and the (H, W) of the map -> the attention bias
        (B, heads, N, N)."""
        B, heads, N, _ = q.shape
        index = relative_position_index(hw_shape, N - hw_shape[0] *
                                        hw_shape[1], self.clip_distance,
                                        q.device)  # (N, N)
        # (B, heads, N, head_dims) @ (head_dims, R) -> (B, heads, N, R)
        logits = (q * self.scale) @ self.relative_key_table.T.to(q.dtype)
        # (B, heads, N, R) -> (B, heads, N, N)
        return logits.gather(-1, index.expand(B, heads, N, N))
