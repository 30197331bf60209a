"""The pre-norm transformer block shared by CPVT and PVTPEG."""
from typing import Optional, Sequence

import torch
from mmcv.cnn import build_norm_layer
from mmcv.cnn.bricks.drop import DropPath
from mmengine.model import BaseModule

from .attention import Attention
from .ffn import FFN


class TransformerBlock(BaseModule):
    """``x + attn(ln1(x))``, then ``x + ffn(ln2(x))``, with drop path;
    parameters named as mmpretrain's ``TransformerEncoderLayer``.

    Args:
        feedforward_channels (int): Hidden size of the FFN (GELU).
        drop_rate (float): Dropout after the projections. Defaults to 0.
        attn_drop_rate (float): Dropout on attention weights. Defaults to 0.
        drop_path_rate (float): Stochastic depth rate. Defaults to 0.
        norm_cfg (dict): The two norms. Others: see :class:`Attention`.
    """
    attn_cls = Attention  # a subclass may attend differently

    def __init__(self, embed_dims: int, num_heads: int,
                 feedforward_channels: int, drop_rate: float = 0.,
                 attn_drop_rate: float = 0., drop_path_rate: float = 0.,
                 qkv_bias: bool = True, sr_ratio: int = 1,
                 norm_cfg: dict = dict(type='LN'),
                 rpe_cfg: Optional[dict] = None):
        super().__init__()
        self.ln1 = build_norm_layer(norm_cfg, embed_dims)[1]
        self.attn = self.attn_cls(
            embed_dims, num_heads, qkv_bias=qkv_bias, attn_drop=attn_drop_rate,
            proj_drop=drop_rate, sr_ratio=sr_ratio, rpe_cfg=rpe_cfg)
        self.ln2 = build_norm_layer(norm_cfg, embed_dims)[1]
        self.ffn = FFN(embed_dims=embed_dims,
                       feedforward_channels=feedforward_channels,
                       act_cfg=dict(type='GELU'), ffn_drop=drop_rate,
                       add_identity=False)
        self.drop_path = DropPath(
            drop_path_rate) if drop_path_rate > 0. else torch.nn.Identity()

    def forward(self, x: torch.Tensor,
                hw_shape: Optional[Sequence[int]] = None,
                rope: Optional[torch.Tensor] = None) -> torch.Tensor:
        x = x + self.drop_path(self.attn(self.ln1(x), hw_shape, rope=rope))
        return x + self.drop_path(self.ffn(self.ln2(x)))
