"""The Position Encoding Generator (PEG) of CPVT: Conditional Positional
Encodings for Vision Transformers (https://arxiv.org/abs/2102.10882),
Sec. 3.2, Fig. 2 and Alg. 1 (Appendix C.1)."""
from typing import Optional, Sequence, Tuple

import torch
import torch.nn as nn
from mmcv.cnn import build_activation_layer, build_norm_layer
from mmengine.model import BaseModule

from mmcpvt.registry import register_model
from ..checks import Choice, Flag, Int, check_args
from .utils import nchw_to_nlc, nlc_to_nchw


@register_model
class ConditionalPositionEncoding(BaseModule):
    """PEG: tokens (B, N, C) -> map (B, C, H, W) -> ``F(x) + x`` -> tokens.

    The first ``num_extra_tokens`` tokens (the class token) bypass ``F``;
    the others must be exactly the H x W map. The paper's ``F`` is one k x k
    depth-wise convolution with (k-1)/2 zero padding: the zeros tell border
    tokens where they are. The ablations are options. With less padding
    (0 is the paper's "remove the zero paddings") each convolution shrinks
    the map by ``k - 1 - 2 * padding`` per axis and the output is ``F(x)``
    alone, without skip connection, as the first author answered
    (Meituan-AutoML/CPVT issue #3); :meth:`out_hw_shape` gives the new map.

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
        act_cfg (dict, optional): Activation after each norm. Defaults to None.
        padding (int, optional): Padding of each convolution, 0 to (k-1)/2;
            None is (k-1)/2, which keeps the map size. Defaults to None.
        padding_mode (str): 'zeros' (the paper's), 'reflect', 'replicate'
            or 'circular' (no zero-padding position cue). Defaults to 'zeros'.
        frozen (bool): Fixed weights (and BN statistics). Defaults to False.
        num_extra_tokens (int): Leading tokens (class token) before the map,
            which bypass ``F``. Defaults to 0.
        init_cfg (dict, optional): Initialization config. Defaults to None.
    """
    ARGS = dict(**dict.fromkeys(('in_channels', 'embed_dims', 'stride',
                                 'num_layers'), Int(1)),
                kernel_size=Int(1, odd=True), num_extra_tokens=Int(0),
                padding=lambda a: Int(0, a['kernel_size'] // 2, none=True),
                depthwise=Flag(), frozen=Flag(), padding_mode=Choice(
                    'zeros', 'reflect', 'replicate', 'circular'))

    def __init__(self, in_channels: int, embed_dims: int = 768,
                 stride: int = 1, kernel_size: int = 3, depthwise: bool = True,
                 num_layers: int = 1, norm_cfg: Optional[dict] = None,
                 act_cfg: Optional[dict] = None, padding: Optional[int] = None,
                 padding_mode: str = 'zeros', frozen: bool = False,
                 num_extra_tokens: int = 0, init_cfg: Optional[dict] = None):
        super().__init__(init_cfg=init_cfg)
        # the checked arguments become attributes (self.kernel_size, ...)
        vars(self).update(check_args('PEG', locals(), self.ARGS,
                                     'model.backbone.peg_cfg.'))
        if depthwise and in_channels != embed_dims:
            raise ValueError(f'PEG: a depth-wise PEG needs in_channels == '
                             f'embed_dims, got {in_channels} and '
                             f'{embed_dims}; set depthwise=False')
        p = self.padding = kernel_size // 2 if padding is None else padding
        # cells that F cuts from each side of the map (stride 1)
        self.crop = num_layers * (kernel_size // 2 - p)
        self.with_identity = (stride == 1 and in_channels == embed_dims
                              and self.crop == 0)
        # the smallest map side F takes, from its output (1 cell) back:
        # reflect padding needs more cells than it pads, circular padding
        # no fewer (PyTorch's rules)
        size, need = 1, {'reflect': p + 1, 'circular': p}.get(padding_mode, 1)
        for i in reversed(range(num_layers)):
            size = max(need, (size - 1) * (stride if i == 0 else 1) +
                       kernel_size - 2 * p)
        self.min_map_size = size
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
        if self.frozen:
            self.proj.eval()
        return self

    def extra_repr(self) -> str:
        """The settings that decide the smallest map (errors show them)."""
        return (f'kernel_size={self.kernel_size}, padding={self.padding}, '
                f'padding_mode={self.padding_mode!r}, '
                f'num_layers={self.num_layers}')

    def out_hw_shape(self, hw_shape: Sequence[int]) -> Tuple[int, int]:
        """The (H', W') of the map that :meth:`forward` returns for an
        (H, W) map: (H, W) unless ``padding`` < (k-1)/2 or stride > 1."""
        if min(hw_shape) < self.min_map_size:
            raise self._refuse(None, hw_shape)
        k, p = self.kernel_size, self.padding
        return tuple((s + 2 * p - k) // self.stride + 1 - (self.num_layers - 1)
                     * (k - 1 - 2 * p) for s in hw_shape)

    def _refuse(self, x, hw_shape: Sequence[int]) -> ValueError:
        """The error for tokens ``x`` (None: a map alone) that
        :meth:`forward` does not take."""
        (H, W), n, m = hw_shape, self.num_extra_tokens, self.min_map_size
        if x is not None and (x.dim() != 3 or x.shape[2] != self.in_channels):
            return ValueError(f'PEG takes tokens (B, N, C) with C = '
                              f'in_channels = {self.in_channels}, got a '
                              f'{tuple(x.shape)} tensor')
        if x is not None and x.shape[1] != H * W + n:
            return ValueError(
                f'PEG got {x.shape[1]} tokens, which do not match the {H}x{W} '
                f'token map (hw_shape) plus its num_extra_tokens={n} class '
                f'token(s): H*W + {n} = {H * W + n}; pass the (H, W) of the '
                f'tokens, or set num_extra_tokens')
        return ValueError(f'PEG({self.extra_repr()}) needs a token map of at '
                          f'least {m}x{m}, got {H}x{W}; use larger inputs, or '
                          f'change kernel_size, padding or padding_mode in '
                          f'model.backbone.peg_cfg')

    def forward(self, x: torch.Tensor,
                hw_shape: Sequence[int]) -> torch.Tensor:
        """Tokens (B, ``num_extra_tokens`` + H*W, C) and the (H, W) of the
        map -> tokens (B, N', C') whose map is :meth:`out_hw_shape` (H, W)."""
        (H, W), n = hw_shape, self.num_extra_tokens
        # one branch of int comparisons; the message is worked out off it
        if x.dim() != 3 or x.shape[1] != H * W + n or x.shape[
                2] != self.in_channels or min(H, W) < self.min_map_size:
            raise self._refuse(x, hw_shape)
        feat = nlc_to_nchw(x[:, n:], hw_shape)  # (B, C, H, W)
        out = self.proj(feat) + feat if self.with_identity else self.proj(feat)
        out = nchw_to_nlc(out)  # (B, H'*W', C')
        return torch.cat((x[:, :n], out), dim=1) if n else out
