"""The Position Encoding Generator (PEG) of CPVT.

Conditional Positional Encodings for Vision Transformers
(https://arxiv.org/abs/2102.10882), Sec. 3.2 and Alg. 1.
"""
from typing import Optional, Sequence

import torch
import torch.nn as nn
from mmcv.cnn import build_activation_layer, build_norm_layer
from mmengine.model import BaseModule

from mmcpvt.ops import fused_ops_available, peg_depthwise_
from mmcpvt.registry import register_model

PADDING_MODES = ('zeros', 'reflect', 'replicate', 'circular')


@register_model
class ConditionalPositionEncoding(BaseModule):
    """Position Encoding Generator: ``x + F(x)`` on the 2-D token map.

    Tokens (B, N, C) are reshaped to a map (B, C, H, W), ``F`` is applied and
    added back, and the map is flattened again. Leading extra tokens (the
    class token) bypass ``F``. The default ``F`` is the paper's: one 3x3
    depth-wise convolution with (k-1)/2 zero padding; the zero padding is what
    tells border tokens where they are. The ablations of the paper are
    options of this one module.

    Args:
        in_channels (int): Number of input channels.
        embed_dims (int): Number of output channels. Defaults to 768.
        stride (int): Stride of the first convolution. With a stride other
            than 1, or ``in_channels != embed_dims``, there is no identity
            branch (a down-sampling PEG, as in Twins). Defaults to 1.
        kernel_size (int): Odd kernel size k (3, 7, 27 in the paper).
            Defaults to 3.
        depthwise (bool): Depth-wise (True) or dense (False) convolutions.
            Defaults to True.
        num_layers (int): Number of stacked convolutions. Defaults to 1.
        norm_cfg (dict, optional): Norm after each convolution, e.g.
            ``dict(type='BN')`` for the paper's "4 x (DW conv + BN + ReLU)".
            Defaults to None.
        act_cfg (dict, optional): Activation after each convolution (after
            the norm). Defaults to None.
        padding_mode (str): How the (k-1)/2 border is filled: 'zeros' (the
            paper's PEG) or 'reflect' / 'replicate' / 'circular', which keep
            the token count but carry no zero-padding position cue (the "no
            zero padding" ablation). Defaults to 'zeros'.
        frozen (bool): Freeze the PEG's parameters (the "fixed weights"
            ablation). Defaults to False.
        fused (bool): Let in-place calls without autograd on float32 CPU
            tokens run mmcpvt's fused kernel (``mmcpvt.ops.peg_depthwise_``,
            one read and one write of the tokens instead of PyTorch's copy,
            convolution and add) where the PEG is the paper's: one
            depth-wise convolution, zero padding, with identity. Results
            agree with PyTorch's to float rounding. Defaults to True.
        init_cfg (dict, optional): Initialization config. Defaults to None.
    """

    def __init__(self,
                 in_channels: int,
                 embed_dims: int = 768,
                 stride: int = 1,
                 kernel_size: int = 3,
                 depthwise: bool = True,
                 num_layers: int = 1,
                 norm_cfg: Optional[dict] = None,
                 act_cfg: Optional[dict] = None,
                 padding_mode: str = 'zeros',
                 frozen: bool = False,
                 fused: bool = True,
                 init_cfg: Optional[dict] = None):
        super().__init__(init_cfg=init_cfg)
        if kernel_size < 1 or kernel_size % 2 == 0:
            raise ValueError(
                f'PEG kernel_size must be a positive odd number so that '
                f'(k-1)/2 padding keeps the token map size, got {kernel_size}')
        if padding_mode not in PADDING_MODES:
            raise ValueError(f'PEG padding_mode must be one of '
                             f'{PADDING_MODES}, got {padding_mode!r}')
        if num_layers < 1:
            raise ValueError(f'PEG num_layers must be >= 1, got {num_layers}')
        if depthwise and in_channels != embed_dims:
            raise ValueError(
                f'a depth-wise PEG needs in_channels == embed_dims, got '
                f'{in_channels} and {embed_dims}; set depthwise=False')
        self.in_channels = in_channels
        self.embed_dims = embed_dims
        self.stride = stride
        self.kernel_size = kernel_size
        self.with_identity = stride == 1 and in_channels == embed_dims
        self.frozen = frozen

        layers = []
        for i in range(num_layers):
            layers.append(
                nn.Conv2d(
                    in_channels if i == 0 else embed_dims,
                    embed_dims,
                    kernel_size,
                    stride=stride if i == 0 else 1,
                    padding=kernel_size // 2,
                    padding_mode=padding_mode,
                    groups=embed_dims if depthwise else 1,
                    bias=norm_cfg is None))
            if norm_cfg is not None:
                layers.append(build_norm_layer(norm_cfg, embed_dims)[1])
            if act_cfg is not None:
                layers.append(build_activation_layer(act_cfg))
        # Named and indexed as the authors' PosCNN (``proj.0.weight``).
        self.proj = nn.Sequential(*layers)
        # the fused kernel computes x + conv(x) with one depth-wise conv
        self.fused = (fused and self.with_identity and num_layers == 1
                      and depthwise and padding_mode == 'zeros'
                      and norm_cfg is None and act_cfg is None)
        if frozen:
            self.proj.requires_grad_(False)

    def train(self, mode: bool = True):
        super().train(mode)
        if self.frozen:  # frozen BN statistics too
            self.proj.eval()
        return self

    def _autograd_records(self, x: torch.Tensor) -> bool:
        """Whether autograd records this call (then nothing is in place)."""
        return x.requires_grad or (torch.is_grad_enabled() and any(
            p.requires_grad for p in self.proj.parameters()))

    def _runs_fused(self, x: torch.Tensor) -> bool:
        """Whether the fused kernel may compute this in-place call without
        autograd: float32 CPU tokens dense per image, no autocast, and no
        tracing or compiling (their graphs keep PyTorch's operators, which
        FLOP counters, exporters and Inductor know)."""
        return (self.fused and fused_ops_available()
                and x.device.type == 'cpu' and x.dtype == torch.float32
                and all(p.dtype == torch.float32
                        for p in self.proj.parameters())
                and not torch.is_autocast_enabled('cpu')
                and not torch.jit.is_tracing()
                and not torch.compiler.is_compiling()
                and x.stride(2) == 1 and x.stride(1) == x.shape[2])

    def forward(self,
                x: torch.Tensor,
                hw_shape: Sequence[int],
                inplace: bool = False) -> torch.Tensor:
        """Add the conditional position encoding.

        Args:
            x (Tensor): Tokens (B, N, C); the first ``N - H*W`` tokens (class
                token) are passed through unchanged.
            hw_shape (tuple[int]): (H, W) of the token map.
            inplace (bool): Where autograd records nothing (no grad, frozen
                weights), add the encoding into ``x`` itself and return it,
                with the fused kernel where it applies (see ``fused``). The
                backbones pass True for the token tensors they own: it saves
                the two (B, N, C) allocations of the sum and of the
                concatenation with the class token. Defaults to False.

        Returns:
            Tensor: (B, N', C), with N' = N for stride 1.
        """
        B, N, C = x.shape
        H, W = hw_shape
        num_extra = N - H * W
        if num_extra < 0:
            raise ValueError(f'PEG got {N} tokens for a {H}x{W} token map')
        inplace = (inplace and self.with_identity
                   and not self._autograd_records(x))
        if inplace and self._runs_fused(x):
            conv = self.proj[0]
            return peg_depthwise_(x, conv.weight, conv.bias, hw_shape)
        extra, tokens = x[:, :num_extra], x[:, num_extra:]
        # (B, H*W, C) -> (B, C, H, W) as a channels-last view: no copy here,
        # and the convolution runs in its fast channels-last kernel. (With a
        # class token the patch tokens are not one dense map; the
        # convolution then makes a dense copy of them, docs/benchmarks.md.)
        feat = tokens.reshape(B, H, W, C).permute(0, 3, 1, 2)
        out = self.proj(feat)
        if inplace and out.dtype == x.dtype:  # (autocast may change it)
            # (B, C, H, W) channels-last -> (B, H*W, C) view, added into
            # the patch tokens of x: the class token stays where it is.
            tokens.add_(out.permute(0, 2, 3, 1).reshape(B, H * W, C))
            return x
        if self.with_identity:
            out = out + feat
        # (B, C', H', W') -> (B, H'*W', C'), a view for channels-last maps
        out = out.permute(0, 2, 3, 1).reshape(B, -1, out.shape[1])
        return torch.cat((extra, out), dim=1) if num_extra else out
