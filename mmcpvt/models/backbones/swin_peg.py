"""SwinPEG: Swin Transformer with a PEG after the first block of each stage
(the paper's Swin+PEG, Appendix B.5).

Conditional Positional Encodings for Vision Transformers, Chu et al.,
ICLR 2023 (https://arxiv.org/abs/2102.10882); Swin: Liu et al., ICCV 2021
(https://arxiv.org/abs/2103.14030).
"""
from typing import Optional, Sequence, Union

import torch
import torch.nn as nn
import torch.nn.functional as F
from mmcv.cnn import build_norm_layer
from mmengine.model import BaseModule, ModuleList
from mmengine.model.weight_init import trunc_normal_

from mmcpvt.registry import register_model
from ..layers import TransformerBlock, nlc_to_nchw, relative_position_index
from .base import (BEFORE_FIRST_BLOCK, BaseBackbone, arch_settings,
                   drop_path_rates, patch_embed, stage_indices)


class SwinBlock(TransformerBlock):
    """The shared transformer block attending in windows, shifted by half
    a window if ``shift``, with Swin's relative position bias.

    Not mmpretrain's ``ShiftWindowMSA``: checkpoints name these tensors
    ``attn.*`` (its ``w_msa.*``), and it decides the shift and the mask with
    Python ints, which an ONNX export keeps at its example size (traced at
    an 8x8 map, 0.65 off at 12x20; ours equal: test_swin_peg.py::
    test_window_attention_is_traced_for_any_size)."""

    def __init__(self, *args, window_size: int = 7, shift: bool = False,
                 **kwargs):
        super().__init__(*args, **kwargs)
        ws = self.window_size = window_size
        self.shift_size = ws // 2 if shift else 0
        self.relative_position_bias_table = nn.Parameter(
            torch.zeros((2 * ws - 1)**2, self.attn.num_heads))
        trunc_normal_(self.relative_position_bias_table, std=.02)
        # Swin's rows are for query - key offsets, those of rpe.py for key -
        # query: row r here is row (2ws-1)^2 - 1 - r there. (N, N), N = ws^2
        self.register_buffer('relative_position_index', (2 * ws - 1)**2 - 1 -
                             relative_position_index((ws, ws), 0, ws - 1),
                             persistent=False)

    def _shift_mask(self, Hp: int, Wp: int, s: int, device) -> torch.Tensor:
        """(nW, N, N): -100 between tokens of different regions (Swin's
        slices ``[:-ws]``, ``[-ws:-s]``, ``[-s:]`` of each axis), found by
        comparisons, not slices, so that a traced ``s`` stays symbolic."""
        ws = self.window_size

        def regions(n):  # (n, ): 0, 1 or 2 per cell
            i = torch.arange(n, device=device)
            return (i >= n - ws).long() + (i >= n - s).long()

        # (Hp, Wp): the region of each cell
        img = (regions(Hp)[:, None] * 3 + regions(Wp)[None]).float()
        windows = self._partition(img[None, :, :, None]).squeeze(-1)
        mask = windows[:, None, :] - windows[:, :, None]  # (nW, N, N)
        return mask.masked_fill(mask != 0, -100.).masked_fill(mask == 0, 0.)

    @staticmethod
    def _roll(x: torch.Tensor, s) -> torch.Tensor:
        """``torch.roll(x, (s, s), dims=(1, 2))``; by indexing when ``s`` is
        traced (ONNX export), where ``torch.roll`` would freeze it. Eager
        keeps ``torch.roll``: indexing took 17.0 ms against 10.7 (forward
        and backward of an (8, 56, 56, 96) map, 1 CPU thread, median of 30),
        +1.7% on a Swin-T stage-1 block."""
        if isinstance(s, int):
            return torch.roll(x, (s, s), dims=(1, 2))
        Hp, Wp = x.shape[1:3]
        rows = (torch.arange(Hp, device=x.device) - s) % Hp
        cols = (torch.arange(Wp, device=x.device) - s) % Wp
        return x[:, rows][:, :, cols]

    def _partition(self, x: torch.Tensor) -> torch.Tensor:
        # (B, Hp, Wp, C) -> (B*nW, ws*ws, C)
        B, Hp, Wp, C = x.shape
        ws = self.window_size
        x = x.view(B, Hp // ws, ws, Wp // ws, ws, C).permute(0, 1, 3, 2, 4, 5)
        # no -1: an empty batch (B = 0) would leave it undetermined
        return x.reshape(B * (Hp // ws) * (Wp // ws), ws * ws, C)

    def _window_attention(self, x: torch.Tensor, hw_shape) -> torch.Tensor:
        B, _, C = x.shape
        H, W = hw_shape
        ws = self.window_size
        # (B, H*W, C) -> (B, Hp, Wp, C), zero-padded to whole windows
        x = F.pad(x.view(B, H, W, C), (0, 0, 0, (-W) % ws, 0, (-H) % ws))
        Hp, Wp = x.shape[1:3]
        # Swin's relative position bias: (N, N, heads) -> (heads, N, N)
        bias = self.relative_position_bias_table[
            self.relative_position_index].permute(2, 0, 1)
        if self.shift_size:
            # no shift where the map fits in one window (as Swin); by
            # arithmetic, so that an exported graph decides it for each size
            s = self.shift_size * ((H > ws) | (W > ws))
            x = self._roll(x, -s)
            mask = self._shift_mask(Hp, Wp, s, x.device)  # (nW, N, N)
            # (nW, heads, N, N) -> (B*nW, heads, N, N)
            bias = (bias[None] + mask[:, None]).repeat(B, 1, 1, 1)
        windows = self.attn(self._partition(x), attn_bias=bias.to(x.dtype))
        # (B*nW, ws*ws, C) -> (B, Hp, Wp, C)
        x = windows.view(B, Hp // ws, Wp // ws, ws, ws, C).permute(
            0, 1, 3, 2, 4, 5).reshape(B, Hp, Wp, C)
        if self.shift_size:
            x = self._roll(x, s)
        return x[:, :H, :W].reshape(B, H * W, C)  # (B, H*W, C)

    def forward(self, x: torch.Tensor, hw_shape) -> torch.Tensor:
        x = x + self.drop_path(self._window_attention(self.ln1(x), hw_shape))
        return x + self.drop_path(self.ffn(self.ln2(x)))


class PatchMerging(BaseModule):
    """2x2 neighbourhood concatenation, norm and linear reduction 4C -> 2C.
    Not mmcv's ``PatchMerging`` (the same keys): its unfold orders the 4C
    channels otherwise than Swin's checkpoints (test_swin_peg.py::
    test_patch_merging_keeps_swins_channel_order)."""

    def __init__(self, in_channels: int, out_channels: int,
                 norm_cfg: dict = dict(type='LN')):
        super().__init__()
        self.norm = build_norm_layer(norm_cfg, 4 * in_channels)[1]
        self.reduction = nn.Linear(4 * in_channels, out_channels, bias=False)

    def forward(self, x: torch.Tensor, hw_shape):
        B, _, C = x.shape
        H, W = hw_shape
        # (B, H*W, C) -> (B, H, W, C), padded to even
        x = F.pad(x.view(B, H, W, C), (0, 0, 0, W % 2, 0, H % 2))
        H, W = x.shape[1:3]
        # (B, H, W, C) -> (B, H/2, W/2, 4C): channels ordered (0,0), (1,0),
        # (0,1), (1,1) as in Swin's x0..x3
        x = x.view(B, H // 2, 2, W // 2, 2, C).permute(0, 1, 3, 4, 2, 5)
        x = x.reshape(B, H // 2 * W // 2, 4 * C)
        return self.reduction(self.norm(x)), (H // 2, W // 2)


@register_model
class SwinPEG(BaseBackbone):
    """Swin Transformer with PEGs: Swin keeps its relative position bias,
    the PEG adds the conditional (absolute) position. Any input size works
    (padded at the bottom/right).

    Args:
        arch (str | dict): 'tiny' / 'small' / 'base' (or 't' / 's' / 'b'),
            or a dict with ``embed_dims``, ``depths``, ``num_heads``.
            Defaults to 'tiny'.
        peg_positions (Sequence): An entry per stage, as CPVT's. Defaults
            to a PEG after each stage's first block.
        out_type (str): 'featmap' (normed NCHW maps of ``out_indices``) or
            'avg_featmap' (final norm, pooled). Defaults to 'featmap'.

    A frozen stage includes the patch merging after it. Other arguments:
    see :class:`BaseBackbone`.
    """
    checkpoint_family = 'swin'
    arch_zoo = {  # 32-dimensional heads
        name: dict(embed_dims=dims, depths=[2, 2, depth, 2],
                   num_heads=[dims // 32 * 2**i for i in range(4)])
        for names, dims, depth in [(('t', 'tiny'), 96, 6),
                                   (('s', 'small'), 96, 18),
                                   (('b', 'base'), 128, 18)]
        for name in names
    }

    def __init__(self, arch: Union[str, dict] = 'tiny', in_channels: int = 3,
                 patch_size: int = 4, window_size: int = 7,
                 mlp_ratio: int = 4, peg_positions: Sequence = (0, 0, 0, 0),
                 peg_cfg: Optional[dict] = None, out_type: str = 'featmap',
                 out_indices: Sequence[int] = (0, 1, 2, 3),
                 qkv_bias: bool = True, drop_rate: float = 0.,
                 attn_drop_rate: float = 0., drop_path_rate: float = 0.1,
                 norm_cfg: dict = dict(type='LN'), frozen_stages: int = -1,
                 norm_eval: bool = False, with_cp: bool = False,
                 init_cfg: Optional[Union[dict, list]] = None):
        arch = arch_settings(arch, self.arch_zoo)
        super().__init__(len(arch['depths']), peg_cfg, frozen_stages,
                         norm_eval, with_cp, init_cfg)
        # else no output would be made without a word
        if out_type not in ('featmap', 'avg_featmap'):
            raise ValueError(f"out_type must be 'featmap' or 'avg_featmap', "
                             f"got {out_type!r}")
        if len(peg_positions) != self.num_stages:
            raise ValueError(f'peg_positions needs an entry per stage, got '
                             f'{peg_positions}')
        if type(window_size) is not int or window_size < 1:
            raise ValueError(
                f'window_size must be an int >= 1, got {window_size}')
        dims = [arch['embed_dims'] * 2**i for i in range(self.num_stages)]
        self.embed_dims = dims  # per stage
        self.out_type = out_type
        self.out_indices = stage_indices(out_indices, self.num_stages)

        self.patch_embed = patch_embed(in_channels, dims[0], patch_size,
                                       norm_cfg=norm_cfg)
        self.drop_after_pos = nn.Dropout(drop_rate)
        dpr = iter(drop_path_rates(drop_path_rate, sum(arch['depths'])))
        self.stages = ModuleList()
        self.pegs = ModuleList()
        self.downsamples = ModuleList()
        for i, depth in enumerate(arch['depths']):
            self.stages.append(ModuleList([
                SwinBlock(dims[i], arch['num_heads'][i], mlp_ratio * dims[i],
                          window_size=window_size, shift=j % 2 == 1,
                          drop_rate=drop_rate, attn_drop_rate=attn_drop_rate,
                          drop_path_rate=next(dpr), qkv_bias=qkv_bias,
                          norm_cfg=norm_cfg) for j in range(depth)
            ]))
            self.pegs.append(self.build_pegs(peg_positions[i], depth, dims[i],
                                             name=f'peg_positions[{i}]'))
            if i < self.num_stages - 1:
                self.downsamples.append(
                    PatchMerging(dims[i], dims[i + 1], norm_cfg))
        if out_type == 'featmap':
            self.norms = ModuleList([
                build_norm_layer(norm_cfg, dims[i])[1]
                if i in self.out_indices else nn.Identity()
                for i in range(self.num_stages)
            ])
        else:
            self.norm = build_norm_layer(norm_cfg, dims[-1])[1]
        self.train(self.training)

    def frozen_modules(self) -> list:
        if self.frozen_stages < 0:
            return []
        frozen = [self.patch_embed, self.drop_after_pos]
        for i in range(self.frozen_stages):
            frozen += [self.stages[i], self.pegs[i]]
            if i < len(self.downsamples):
                frozen.append(self.downsamples[i])
            if self.out_type == 'featmap':
                frozen.append(self.norms[i])
        return frozen

    def forward(self, x: torch.Tensor) -> tuple:
        if x.dim() != 4:
            raise ValueError(f'x must be (B, C, H, W), got {tuple(x.shape)}')
        x, hw = self.patch_embed(x)  # (B, C, H, W) -> (B, H*W, C)
        x = self.drop_after_pos(x)
        outs = []
        for i, (blocks, pegs) in enumerate(zip(self.stages, self.pegs)):
            x, hw = pegs(BEFORE_FIRST_BLOCK, x, hw)
            for j, block in enumerate(blocks):
                x = self.run_block(block, x, hw)
                x, hw = pegs(j, x, hw)
            if self.out_type == 'featmap' and i in self.out_indices:
                outs.append(nlc_to_nchw(self.norms[i](x), hw).contiguous())
            if i < self.num_stages - 1:
                x, hw = self.downsamples[i](x, hw)
        if self.out_type == 'avg_featmap':
            outs.append(self.norm(x).mean(dim=1))
        return tuple(outs)
