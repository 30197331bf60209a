"""The Position Encoding Generator (PEG) of CPVT: Conditional Positional
Encodings for Vision Transformers (https://arxiv.org/abs/2102.10882),
Sec. 3.2, Fig. 2 and Alg. 1 (Appendix C.1)."""
import itertools
from typing import Optional, Sequence, Tuple

import torch
import torch.nn as nn
from mmcv.cnn import build_activation_layer, build_norm_layer
from mmengine.model import BaseModule

from mmcpvt.registry import register_model
from ..checks import check_flag, check_int
from .utils import nchw_to_nlc, nlc_to_nchw

PADDING_MODES = ('zeros', 'reflect', 'replicate', 'circular')


@register_model
class ConditionalPositionEncoding(BaseModule):
    """PEG: tokens (B, N, C) -> map (B, C, H, W) -> ``F(x) + x`` -> tokens.

    The first ``num_extra_tokens`` tokens (the class token) bypass ``F``;
    the others must be exactly the H x W map. The paper's ``F`` is
    one k x k depth-wise convolution with (k-1)/2 zero padding: the zeros
    tell border tokens where they are. The ablations are options.

    With less padding than (k-1)/2 (``padding``; 0 is the paper's "remove
    the zero paddings" taken literally) each convolution shrinks the map by
    ``k - 1 - 2 * padding`` per axis and the output is ``F(x)`` alone, with
    no skip connection: the first author's answer to how the paper did it
    (Meituan-AutoML/CPVT issue #3, "we just remove the skip connection of
    PEG"); the next block takes the shorter sequence. The caller learns the
    new map size from :meth:`out_hw_shape`.

    Args:
        in_channels (int): Number of input channels.
        embed_dims (int): Number of output channels. Defaults to 768.
        stride (int): Stride of the first convolution; with stride > 1 or
            ``in_channels != embed_dims`` there is no identity (Twins'
            down-sampling PEG), nor when ``padding`` shrinks the map.
            Defaults to 1.
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
        num_extra_tokens (int): Leading tokens (class token) before the map,
            which bypass ``F``. Defaults to 0.
        init_cfg (dict, optional): Initialization config. Defaults to None.
    """

    def __init__(self, in_channels: int, embed_dims: int = 768,
                 stride: int = 1, kernel_size: int = 3,
                 depthwise: bool = True, num_layers: int = 1,
                 norm_cfg: Optional[dict] = None,
                 act_cfg: Optional[dict] = None,
                 padding: Optional[int] = None,
                 padding_mode: str = 'zeros', frozen: bool = False,
                 num_extra_tokens: int = 0,
                 init_cfg: Optional[dict] = None):
        super().__init__(init_cfg=init_cfg)
        owner, hint = 'PEG', '; set it in peg_cfg'
        for name, value in (('in_channels', in_channels),
                            ('embed_dims', embed_dims), ('stride', stride),
                            ('kernel_size', kernel_size),
                            ('num_layers', num_layers)):
            check_int(name, value, owner, low=1, hint=hint)
        check_int('num_extra_tokens', num_extra_tokens, owner, low=0)
        check_flag('depthwise', depthwise, owner, hint)
        check_flag('frozen', frozen, owner, hint)
        if kernel_size % 2 == 0:
            raise ValueError(f'PEG kernel_size must be a positive odd number '
                             f'(so that (k-1)/2 padding keeps the token map '
                             f'size), got {kernel_size}{hint}')
        if padding is None:
            padding = kernel_size // 2
        if not isinstance(padding, int) or isinstance(
                padding, bool) or not 0 <= padding <= kernel_size // 2:
            raise ValueError(f'PEG padding must be None or an int from 0 to '
                             f'(kernel_size-1)/2 = {kernel_size // 2}, got '
                             f'{padding!r}{hint}')
        if padding_mode not in PADDING_MODES:
            raise ValueError(f'PEG padding_mode must be one of '
                             f'{PADDING_MODES}, got {padding_mode!r}{hint}')
        if depthwise and in_channels != embed_dims:
            raise ValueError(f'a depth-wise PEG needs in_channels == '
                             f'embed_dims, got {in_channels} and '
                             f'{embed_dims}; set depthwise=False')
        self.in_channels = in_channels
        self.num_extra_tokens = num_extra_tokens
        self.padding_mode = padding_mode
        self.kernel_size = kernel_size
        self.stride = stride
        self.num_layers = num_layers
        self.padding = padding
        # cells that F cuts from each side of the map (stride 1)
        self.crop = num_layers * (kernel_size // 2 - padding)
        self.with_identity = (stride == 1 and in_channels == embed_dims
                              and self.crop == 0)
        self.frozen = frozen
        # the smallest map side F takes (1 unless the padding is reflect or
        # circular, or F shrinks the map)
        self.min_map_size = next(n for n in itertools.count(1)
                                 if self._takes(n))
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

    def _takes(self, size: int) -> bool:
        """Whether every convolution of F takes a map side of ``size``:
        reflect padding needs more cells than it pads, circular padding no
        fewer (PyTorch's rules), and each output keeps a cell."""
        k, p = self.kernel_size, self.padding
        for i in range(self.num_layers):
            if (self.padding_mode == 'reflect' and size <= p) or (
                    self.padding_mode == 'circular' and size < p):
                return False
            size = (size + 2 * p - k) // (self.stride if i == 0 else 1) + 1
            if size < 1:
                return False
        return True

    def describe(self) -> str:
        """The settings that decide the smallest map, for errors."""
        return (f'kernel_size {self.kernel_size}, padding {self.padding}, '
                f'padding_mode {self.padding_mode!r}, {self.num_layers} '
                f'layer(s)')

    def too_small_hint(self) -> str:
        """What lets F take smaller maps."""
        if self.padding_mode in ('reflect', 'circular'):
            return ("a smaller kernel_size, or padding_mode 'zeros' or "
                    "'replicate'")
        return 'a smaller kernel_size, fewer layers or more padding'

    def _check_map(self, hw_shape: Sequence[int]):
        H, W = hw_shape
        if H < self.min_map_size or W < self.min_map_size:
            m = self.min_map_size
            raise ValueError(
                f'PEG ({self.describe()}) needs a token map of at least '
                f'{m}x{m}, got {H}x{W}; use larger inputs, or '
                f'{self.too_small_hint()} (in peg_cfg)')

    def out_hw_shape(self, hw_shape: Sequence[int]) -> Tuple[int, int]:
        """The (H', W') of the map that :meth:`forward` returns for an
        (H, W) map: (H, W) unless ``padding`` < (k-1)/2 or stride > 1."""
        self._check_map(hw_shape)
        k, p = self.kernel_size, self.padding
        out = []
        for size in hw_shape:
            size = (size + 2 * p - k) // self.stride + 1
            size -= (self.num_layers - 1) * (k - 1 - 2 * p)
            out.append(size)
        return tuple(out)

    def _bad_tokens(self, x, hw_shape: Sequence[int]) -> Exception:
        """The error for tokens ``x`` that :meth:`forward` does not take."""
        H, W = hw_shape
        n = self.num_extra_tokens
        if x.dim() != 3:
            return ValueError(f'PEG takes tokens (B, N, C), got a '
                              f'{tuple(x.shape)} tensor')
        if x.shape[2] != self.in_channels:
            return ValueError(f'PEG has in_channels={self.in_channels}, got '
                              f'tokens of {x.shape[2]} channels')
        if x.shape[1] != H * W + n:
            return ValueError(
                f'PEG got {x.shape[1]} tokens, which do not match the '
                f'{H}x{W} token map (hw_shape) plus its num_extra_tokens={n} '
                f'class token(s): H*W + {n} = {H * W + n}; pass the (H, W) '
                f'of the tokens, or set num_extra_tokens')
        try:
            self._check_map(hw_shape)
        except ValueError as e:
            return e
        return ValueError(f'PEG cannot take {tuple(x.shape)} tokens with '
                          f'hw_shape {tuple(hw_shape)}')

    def forward(self, x: torch.Tensor,
                hw_shape: Sequence[int]) -> torch.Tensor:
        """Tokens (B, ``num_extra_tokens`` + H*W, C) and the (H, W) of the
        map -> tokens (B, N', C') whose map is :meth:`out_hw_shape` (H, W)."""
        H, W = hw_shape
        num_extra = self.num_extra_tokens
        # one branch of int comparisons; the message is worked out off it
        if x.dim() != 3 or x.shape[1] != H * W + num_extra or x.shape[
                2] != self.in_channels or min(H, W) < self.min_map_size:
            raise self._bad_tokens(x, hw_shape)
        feat = nlc_to_nchw(x[:, num_extra:], hw_shape)
        out = self.proj(feat)
        if self.with_identity:
            out = out + feat
        out = nchw_to_nlc(out)
        return torch.cat((x[:, :num_extra], out), dim=1) if num_extra else out
