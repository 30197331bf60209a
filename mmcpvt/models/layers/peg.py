"""The Position Encoding Generator (PEG) of CPVT: Conditional Positional
Encodings for Vision Transformers (https://arxiv.org/abs/2102.10882),
Sec. 3.2 and Alg. 1."""
from typing import Optional, Sequence, Tuple

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

    With less padding than (k-1)/2 (``padding``; 0 is the paper's "remove
    the zero paddings" taken literally) each convolution shrinks the map by
    ``k - 1 - 2 * padding`` per axis, and the output is ``F(x) + crop(x)``:
    the identity is the centre crop of the input map to the size of
    ``F(x)``. The caller learns the new map size from :meth:`out_hw_shape`.

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
        padding (int, optional): Padding of each convolution, 0 to (k-1)/2.
            None is (k-1)/2, which keeps the map size (the paper's PEG);
            less shrinks the map (see above). Defaults to None.
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
                 padding: Optional[int] = None,
                 padding_mode: str = 'zeros', frozen: bool = False,
                 init_cfg: Optional[dict] = None):
        super().__init__(init_cfg=init_cfg)
        if kernel_size < 1 or kernel_size % 2 == 0:
            raise ValueError(f'PEG kernel_size must be a positive odd number '
                             f'(so that (k-1)/2 padding keeps the token map '
                             f'size), got {kernel_size}')
        if padding is None:
            padding = kernel_size // 2
        if not isinstance(padding, int) or isinstance(
                padding, bool) or not 0 <= padding <= kernel_size // 2:
            raise ValueError(f'PEG padding must be None or an int from 0 to '
                             f'(kernel_size-1)/2 = {kernel_size // 2}, got '
                             f'{padding!r}; set it in peg_cfg')
        if padding_mode not in PADDING_MODES or num_layers < 1:
            raise ValueError(f'PEG needs padding_mode in {PADDING_MODES} and '
                             f'num_layers >= 1, got {padding_mode!r} and '
                             f'{num_layers}')
        if depthwise and in_channels != embed_dims:
            raise ValueError(f'a depth-wise PEG needs in_channels == '
                             f'embed_dims, got {in_channels} and '
                             f'{embed_dims}; set depthwise=False')
        self.with_identity = stride == 1 and in_channels == embed_dims
        self.kernel_size = kernel_size
        self.stride = stride
        self.num_layers = num_layers
        self.padding = padding
        # cells that F cuts from each side of the map (stride 1)
        self.crop = num_layers * (kernel_size // 2 - padding)
        self.frozen = frozen
        layers = []
        for i in range(num_layers):
            layers.append(nn.Conv2d(
                in_channels if i == 0 else embed_dims, embed_dims,
                kernel_size, stride=stride if i == 0 else 1,
                padding=padding, padding_mode=padding_mode,
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

    def out_hw_shape(self, hw_shape: Sequence[int]) -> Tuple[int, int]:
        """The (H', W') of the map that :meth:`forward` returns for an
        (H, W) map: (H, W) unless ``padding`` < (k-1)/2 or stride > 1."""
        k, p = self.kernel_size, self.padding
        out = []
        for size in hw_shape:
            size = (size + 2 * p - k) // self.stride + 1
            size -= (self.num_layers - 1) * (k - 1 - 2 * p)
            out.append(size)
        if min(out) < 1:
            raise ValueError(
                f'PEG with kernel_size {k}, padding {p} and {self.num_layers} '
                f'layer(s) leaves no token of a {hw_shape[0]}x{hw_shape[1]} '
                f'map; use a larger input or more padding')
        return tuple(out)

    def forward(self, x: torch.Tensor,
                hw_shape: Sequence[int]) -> torch.Tensor:
        """Tokens (B, N, C), of which the first ``N - H*W`` are extra, and
        the (H, W) of the map -> tokens (B, N', C') whose map is
        :meth:`out_hw_shape` (H, W)."""
        num_extra = x.shape[1] - hw_shape[0] * hw_shape[1]
        if num_extra < 0:
            raise ValueError(f'PEG got {x.shape[1]} tokens for a '
                             f'{hw_shape[0]}x{hw_shape[1]} token map')
        H, W = hw_shape
        if self.crop:  # a map too small for a shrinking F is explained
            self.out_hw_shape(hw_shape)
        feat = nlc_to_nchw(x[:, num_extra:], hw_shape)
        out = self.proj(feat)
        if self.with_identity:
            # F(x) + crop(x): the centre of the input map, F(x)'s size
            c = self.crop
            out = out + feat[:, :, c:H - c, c:W - c]
        out = nchw_to_nlc(out)
        return torch.cat((x[:, :num_extra], out), dim=1) if num_extra else out
