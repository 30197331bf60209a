"""2-D relative position encoding after Shaw et al. (Self-Attention with
Relative Position Representations, https://arxiv.org/abs/1803.02155): the
"2D RPE" baseline of CPVT (https://arxiv.org/abs/2102.10882, Tables 1, 7
and 8)."""
from typing import Sequence

import torch
import torch.nn as nn
import torch.nn.functional as F
from mmengine.model.weight_init import trunc_normal_


def relative_position_index(hw_shape: Sequence[int], num_extra_tokens: int,
                            clip_distance: int, device=None) -> torch.Tensor:
    """(N, N) table rows of the (query, key) pairs of ``num_extra_tokens``
    tokens and an H x W map: ``(dy + K) * (2K + 1) + dx + K`` for the key -
    query offset clipped to [-K, K]; ``(2K + 1)**2`` with an extra token."""
    H, W = hw_shape
    K = clip_distance
    ys = torch.arange(H, device=device).repeat_interleave(W)  # (H*W, )
    xs = torch.arange(W, device=device).repeat(H)
    # rows are queries, columns keys: (H*W, H*W)
    dy = (ys[None, :] - ys[:, None]).clamp(-K, K) + K
    dx = (xs[None, :] - xs[:, None]).clamp(-K, K) + K
    n = num_extra_tokens
    return F.pad(dy * (2 * K + 1) + dx, (n, 0, n, 0), value=(2 * K + 1)**2)


class RelativePositionEncoding2d(nn.Module):
    """Adds ``q_i . a_ij / sqrt(head_dims)`` to the logit of query ``i`` and
    key ``j``, ``a_ij`` the learned row of their clipped offset; shared by
    the heads of a block, no value term (as Shaw et al.).

    Args:
        head_dims (int): Dimension of each head.
        clip_distance (int): K (the paper's 8). Defaults to 8.
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
        """Queries (B, heads, N, head_dims) -> bias (B, heads, N, N)."""
        B, heads, N, _ = q.shape
        index = relative_position_index(  # (N, N); the map is the last H*W
            hw_shape, N - hw_shape[0] * hw_shape[1], self.clip_distance,
            q.device)
        # (B, heads, N, head_dims) @ (head_dims, R) -> (B, heads, N, R)
        logits = (q * self.scale) @ self.relative_key_table.T.to(q.dtype)
        return logits.gather(-1, index.expand(B, heads, N, N))
