"""The Position Encoding Generator (PEG) of CPVT: Conditional Positional
Encodings for Vision Transformers (https://arxiv.org/abs/2102.10882),
Sec. 3.2 and Alg. 1."""
from typing import Optional, Sequence

import torch
import torch.nn as nn
from mmcv.cnn import build_activation_layer, build_norm_layer
from mmengine.model import BaseModule

from mmcpvt.registry import register_model
from .utils import nchw_to_nlc, nlc_to_nchw

PADDING_MODES = ('zeros', 'reflect', 'replicate', 'circular')


@register_model
class ConditionalPositionEncoding(BaseModule):
    """PEG: tokens (B, N, C) -> map (B, C, H, W) -> ``F(x) + x`` -> tokens.

    Leading extra tokens (the class token) bypass ``F``. The paper's ``F`` is
    one k x k depth-wise convolution with (k-1)/2 zero padding: the zeros
    tell border tokens where they are. The ablations are options.

    Args:
        in_channels (int): Number of input channels.
        embed_dims (int): Number of output channels. Defaults to 768.
        stride (int): Stride of the first convolution; with stride > 1 or
            ``in_channels != embed_dims`` there is no identity (Twins'
            down-sampling PEG). Defaults to 1.
        kernel_size (int): Odd k (3, 7, 27 in the paper). Defaults to 3.
        depthwise (bool): Depth-wise or dense convolutions. Defaults to True.
        num_layers (int): Stacked convolutions. Defaults to 1.
        norm_cfg (dict, optional): Norm after each convolution, e.g.
            ``dict(type='BN')``. Defaults to None.
        act_cfg (dict, optional): Activation after each norm.
            Defaults to None.
        padding_mode (str): 'zeros' (the paper's), or one of 'reflect',
            'replicate', 'circular' (no zero-padding position cue).
            Defaults to 'zeros'.
        frozen (bool): Fixed weights (and BN statistics). Defaults to False.
        init_cfg (dict, optional): Initialization config. Defaults to None.
    """

    def __init__(self, in_channels: int, embed_dims: int = 768,
                 stride: int = 1, kernel_size: int = 3,
                 depthwise: bool = True, num_layers: int = 1,
                 norm_cfg: Optional[dict] = None,
                 act_cfg: Optional[dict] = None,
                 padding_mode: str = 'zeros', frozen: bool = False,
                 init_cfg: Optional[dict] = None):
        super().__init__(init_cfg=init_cfg)
        if kernel_size < 1 or kernel_size % 2 == 0:
            raise ValueError(f'PEG kernel_size must be a positive odd number '
                             f'(so that (k-1)/2 padding keeps the token map '
                             f'size), got {kernel_size}')
        if padding_mode not in PADDING_MODES or num_layers < 1:
            raise ValueError(f'PEG needs padding_mode in {PADDING_MODES} and '
                             f'num_layers >= 1, got {padding_mode!r} and '
                             f'{num_layers}')
        if depthwise and in_channels != embed_dims:
            raise ValueError(f'a depth-wise PEG needs in_channels == '
                             f'embed_dims, got {in_channels} and '
                             f'{embed_dims}; set depthwise=False')
        self.with_identity = stride == 1 and in_channels == embed_dims
        self.frozen = frozen
        layers = []
        for i in range(num_layers):
            layers.append(nn.Conv2d(
                in_channels if i == 0 else embed_dims, embed_dims,
                kernel_size, stride=stride if i == 0 else 1,
                padding=kernel_size // 2, padding_mode=padding_mode,
                groups=embed_dims if depthwise else 1,
                bias=norm_cfg is None))
            if norm_cfg is not None:
                layers.append(build_norm_layer(norm_cfg, embed_dims)[1])
            if act_cfg is not None:
                layers.append(build_activation_layer(act_cfg))
        # named and indexed as the authors' PosCNN: ``proj.0.weight``
        self.proj = nn.Sequential(*layers).requires_grad_(not frozen)

    def train(self, mode: bool = True):
        super().train(mode)
        if self.frozen:
            self.proj.eval()
        return self

    def forward(self, x: torch.Tensor,
                hw_shape: Sequence[int]) -> torch.Tensor:
        """Tokens (B, N, C), of which the first ``N - H*W`` are extra, and
        the (H, W) of the map -> tokens (B, N', C')."""
        num_extra = x.shape[1] - hw_shape[0] * hw_shape[1]
        if num_extra < 0:
            raise ValueError(f'PEG got {x.shape[1]} tokens for a '
                             f'{hw_shape[0]}x{hw_shape[1]} token map')
        feat = nlc_to_nchw(x[:, num_extra:], hw_shape)
        out = self.proj(feat) + feat if self.with_identity else self.proj(feat)
        out = nchw_to_nlc(out)
        return torch.cat((x[:, :num_extra], out), dim=1) if num_extra else out
