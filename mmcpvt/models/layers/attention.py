"""Multi-head self-attention shared by every mmcpvt backbone."""
from typing import Optional, Sequence

import torch
import torch.nn as nn
import torch.nn.functional as F
from mmengine.model import BaseModule

from .rope import apply_rope
from .rpe import RelativePositionEncoding2d
from .utils import nchw_to_nlc, nlc_to_nchw


class Attention(BaseModule):
    """Multi-head self-attention, optionally with PVT's spatial reduction.

    Not mmcv's ``MultiheadAttention``: it wraps ``nn.MultiheadAttention``,
    which returns the attention weights by default and so never takes the
    fused kernel. ``fused_attn`` (True; ``get_flops.py`` turns it off) picks
    ``F.scaled_dot_product_attention``; the explicit softmax path serves
    when attention maps are wanted (``return_attn``).

    Args:
        embed_dims (int): Embedding dimension.
        num_heads (int): Number of heads.
        qkv_bias (bool): Bias in the q/k/v projections. Defaults to True.
        attn_drop (float): Dropout on the attention weights. Defaults to 0.
        proj_drop (float): Dropout after the projection. Defaults to 0.
        sr_ratio (int): Keys and values from the map reduced by an r x r,
            stride r convolution and a norm (PVT); a map under r a side is
            padded to r. Defaults to 1.
        rpe_cfg (dict, optional): :class:`RelativePositionEncoding2d`
            arguments. Defaults to None.

    ``max_pairs``: the most query-key pairs a head may attend over; past it
    (CPVT on a 10000 px image: 390,625 tokens, 1.5e11 pairs) the input is
    refused in one line rather than run for hours or fail in the allocator.
    ``Attention.max_pairs = None`` lifts it.
    """
    fused_attn = True
    max_pairs = 2**34  # a 64 GiB float32 map a head where it is formed

    def __init__(self, embed_dims: int, num_heads: int, qkv_bias: bool = True,
                 attn_drop: float = 0., proj_drop: float = 0.,
                 sr_ratio: int = 1, rpe_cfg: Optional[dict] = None):
        super().__init__()
        # else the head split fails with a reshape message
        if embed_dims % num_heads != 0:
            raise ValueError(f'embed_dims {embed_dims} must be divisible by '
                             f'num_heads {num_heads}')
        self.num_heads = num_heads
        self.head_dims = embed_dims // num_heads
        self.scale = self.head_dims**-0.5
        self.attn_drop = attn_drop
        self.sr_ratio = sr_ratio
        if sr_ratio > 1:
            self.q = nn.Linear(embed_dims, embed_dims, bias=qkv_bias)
            self.kv = nn.Linear(embed_dims, embed_dims * 2, bias=qkv_bias)
            self.sr = nn.Conv2d(
                embed_dims, embed_dims, kernel_size=sr_ratio, stride=sr_ratio)
            # the authors' eps 1e-5, whatever the blocks' (pvt.py, gvt.py,
            # timm; mmpretrain's PCPVT: 1e-6)
            self.norm = nn.LayerNorm(embed_dims)
        else:
            self.qkv = nn.Linear(embed_dims, embed_dims * 3, bias=qkv_bias)
        self.proj = nn.Linear(embed_dims, embed_dims)
        self.proj_drop = nn.Dropout(proj_drop)
        self.rpe = None if rpe_cfg is None else RelativePositionEncoding2d(
            self.head_dims, **rpe_cfg)

    def _split_heads(self, x: torch.Tensor, num: int) -> torch.Tensor:
        # (B, N, num * C) -> (num, B, heads, N, head_dims)
        B, N, _ = x.shape
        return x.reshape(B, N, num, self.num_heads,
                         self.head_dims).permute(2, 0, 3, 1, 4)

    def forward(self, x: torch.Tensor,
                hw_shape: Optional[Sequence[int]] = None,
                attn_bias: Optional[torch.Tensor] = None,
                return_attn: bool = False,
                rope: Optional[torch.Tensor] = None):
        """Tokens (B, N, C), the last H*W of the ``hw_shape`` map;
        ``rope``: their rotations (:class:`RotaryPositionEmbedding2d`)."""
        if self.sr_ratio > 1:
            q = self._split_heads(self.q(x), 1)[0]
            feat = nlc_to_nchw(x, hw_shape)  # (B, N, C) -> (B, C, H, W)
            r, (H, W) = self.sr_ratio, hw_shape
            if H < r or W < r:  # at least one r x r window
                feat = F.pad(feat, (0, max(r - W, 0), 0, max(r - H, 0)))
            x_ = nchw_to_nlc(self.sr(feat))  # reduced (B, N', C)
            k, v = self._split_heads(self.kv(self.norm(x_)), 2).unbind(0)
        else:
            q, k, v = self._split_heads(self.qkv(x), 3).unbind(0)
        if rope is not None:
            q, k = apply_rope(q, rope), apply_rope(k, rope)
        attn_bias = self.position_bias(q, hw_shape, attn_bias)
        return self.attend(q, k, v, attn_bias, return_attn)

    def position_bias(self, q: torch.Tensor, hw_shape,
                      attn_bias: Optional[torch.Tensor] = None):
        """``attn_bias`` plus the relative position bias, if any."""
        if self.rpe is None:
            return attn_bias
        bias = self.rpe(q, hw_shape)  # (B, heads, N, N)
        return bias if attn_bias is None else attn_bias + bias

    def attend(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor,
               attn_bias: Optional[torch.Tensor] = None,
               return_attn: bool = False):
        """q, k, v (B, heads, N, head_dims) -> tokens (B, N, C) [, weights]."""
        n, m = q.shape[-2], k.shape[-2]
        if self.max_pairs is not None and n * m > self.max_pairs:
            raise ValueError(
                f'attention of {n} tokens over {m} keys ({n * m:.2g} pairs a '
                f'head) is past Attention.max_pairs ({self.max_pairs:.2g}): '
                f'global attention this large does not fit in memory or '
                f'time. Give a smaller input, or lift the limit: '
                f'mmcpvt.models.layers.Attention.max_pairs = None')
        if self.fused_attn and not return_attn:
            x = F.scaled_dot_product_attention(
                q, k, v, attn_mask=attn_bias,
                dropout_p=self.attn_drop if self.training else 0.)
            attn = None
        else:
            attn = (q * self.scale) @ k.transpose(-2, -1)
            if attn_bias is not None:
                attn = attn + attn_bias
            attn = attn.softmax(dim=-1)
            x = F.dropout(attn, self.attn_drop, self.training) @ v
        x = x.transpose(1, 2).flatten(2)  # (B, heads, N, d) -> (B, N, C)
        x = self.proj_drop(self.proj(x))
        return (x, attn) if return_attn else x
