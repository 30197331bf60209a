"""The Position Encoding Generator of Conditional Positional Encodings for
Vision Transformers (https://arxiv.org/abs/2102.10882), Sec. 3.2, Alg. 1."""
from typing import Optional, Sequence, Tuple

import torch
import torch.nn as nn
from mmcv.cnn import build_activation_layer, build_norm_layer
from mmengine.model import BaseModule, ModuleDict

from mmcpvt.registry import register_model
from .utils import nchw_to_nlc, nlc_to_nchw


@register_model
class ConditionalPositionEncoding(BaseModule):
    """PEG: tokens (B, N, C) -> map (B, C, H, W) -> ``F(x) + x`` -> tokens.

    The first ``num_extra_tokens`` (class) tokens bypass ``F``, in the paper
    a k x k depth-wise convolution with (k-1)/2 zero padding, whose zeros
    tell border tokens where they are. Less padding (0: the paper's "remove
    the zero paddings") shrinks the map (:meth:`out_hw_shape`) and drops the
    identity, as the first author answered (Meituan-AutoML/CPVT issue #3);
    so do stride > 1 and ``in_channels != embed_dims`` (Twins' PEG).

    Args:
        in_channels (int): Input channels.
        embed_dims (int): Output channels. Defaults to 768.
        stride (int): Stride of the first convolution. Defaults to 1.
        kernel_size (int): Odd k (3, 7, 27 in the paper). Defaults to 3.
        depthwise (bool): Depth-wise or dense convolutions. Defaults to True.
        num_layers (int): Stacked convolutions. Defaults to 1.
        norm_cfg (dict, optional): Norm after each conv. Defaults to None.
        act_cfg (dict, optional): Activation after each norm. Defaults to None.
        padding (int, optional): 0 to (k-1)/2; None: (k-1)/2. Defaults to None.
        padding_mode (str): 'zeros' (default), 'reflect', 'replicate', or
            'circular' (the last three give no zero-padding position cue).
        frozen (bool): Fixed weights and BN statistics. Defaults to False.
        num_extra_tokens (int): Leading (class) tokens. Defaults to 0.
        init_cfg (dict, optional): Initialization config. Defaults to None.
    """

    def __init__(self, in_channels: int, embed_dims: int = 768,
                 stride: int = 1, kernel_size: int = 3, depthwise: bool = True,
                 num_layers: int = 1, norm_cfg: Optional[dict] = None,
                 act_cfg: Optional[dict] = None, padding: Optional[int] = None,
                 padding_mode: str = 'zeros', frozen: bool = False,
                 num_extra_tokens: int = 0, init_cfg: Optional[dict] = None):
        super().__init__(init_cfg=init_cfg)
        # else the map grows, and torch names a size mismatch further on
        if type(kernel_size) is not int or kernel_size < 1 or \
                kernel_size % 2 != 1:
            raise ValueError(f'PEG kernel_size must be a positive odd int, '
                             f'got {kernel_size}')
        p = kernel_size // 2 if padding is None else padding
        if not 0 <= p <= kernel_size // 2:
            raise ValueError(f'PEG padding must be from 0 to '
                             f'{kernel_size // 2}, got {padding}')
        self.stride = stride
        self.kernel_size = kernel_size
        self.padding = p
        self.num_layers = num_layers
        self.frozen = frozen
        self.num_extra_tokens = num_extra_tokens
        self.with_identity = (stride == 1 and in_channels == embed_dims
                              and p == kernel_size // 2)
        layers = []
        for i in range(num_layers):
            layers.append(nn.Conv2d(
                in_channels if i == 0 else embed_dims, embed_dims,
                kernel_size, stride=stride if i == 0 else 1, padding=p,
                padding_mode=padding_mode, bias=norm_cfg is None,
                groups=embed_dims if depthwise else 1))
            if norm_cfg is not None:
                layers.append(build_norm_layer(norm_cfg, embed_dims)[1])
            if act_cfg is not None:
                layers.append(build_activation_layer(act_cfg))
        # named and indexed as the authors' PosCNN: ``proj.0.weight``
        self.proj = nn.Sequential(*layers).requires_grad_(not frozen)

    def train(self, mode: bool = True):
        super().train(mode)
        self.proj.train(mode and not self.frozen)  # frozen: BN stats too
        return self

    def out_hw_shape(self, hw_shape: Sequence[int]) -> Tuple[int, int]:
        """The (H', W') of the map :meth:`forward` returns for (H, W)."""
        k, p = self.kernel_size, self.padding
        return tuple((s + 2 * p - k) // self.stride + 1 - (self.num_layers - 1)
                     * (k - 1 - 2 * p) for s in hw_shape)

    def forward(self, x: torch.Tensor,
                hw_shape: Sequence[int]) -> torch.Tensor:
        """Tokens (B, extra + H*W, C) -> (B, extra + H'*W', C')."""
        n = self.num_extra_tokens
        feat = nlc_to_nchw(x[:, n:], hw_shape)  # (B, C, H, W)
        out = self.proj(feat) + feat if self.with_identity else self.proj(feat)
        out = nchw_to_nlc(out)  # (B, H'*W', C')
        return torch.cat((x[:, :n], out), dim=1) if n else out


class PEGs(ModuleDict):
    """The PEGs of one stage, keyed by position: -1 before the first block,
    ``j`` after block ``j`` (``pegs.-1.proj.0.weight``); ``peg_cfg``: other
    :class:`ConditionalPositionEncoding` arguments."""

    def __init__(self, positions: Sequence[int], embed_dims: int, **peg_cfg):
        super().__init__({
            str(p): ConditionalPositionEncoding(embed_dims, embed_dims,
                                                **peg_cfg)
            for p in positions
        })

    def forward(self, position: int, x: torch.Tensor,
                hw_shape: Sequence[int]) -> Tuple[torch.Tensor, tuple]:
        """Tokens and (H, W) after the PEG at ``position``, if any."""
        if str(position) not in self:
            return x, hw_shape
        peg = self[str(position)]
        return peg(x, hw_shape), peg.out_hw_shape(hw_shape)
