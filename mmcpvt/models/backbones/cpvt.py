"""CPVT: DeiT-shaped vision transformers with conditional position encodings.

Conditional Positional Encodings for Vision Transformers, Chu et al.,
ICLR 2023 (https://arxiv.org/abs/2102.10882).
"""
from typing import Optional, Sequence, Union

import torch
import torch.nn as nn
from mmcv.cnn import build_norm_layer
from mmengine.model import ModuleDict, ModuleList

from mmcpvt.registry import register_model
from ..layers import (LearnedPositionEmbedding, RotaryPositionEmbedding2d,
                      SinCos2dPositionEmbedding, TransformerBlock, nlc_to_nchw)
from .base import (BEFORE_FIRST_BLOCK, BaseBackbone, arch_settings,
                   block_positions, drop_path_rates, patch_embed,
                   stage_indices)

OUT_TYPES = ('cls_token', 'avg_featmap', 'featmap')
POS_EMBEDS = ('none', 'learned', 'sincos2d')


@register_model
class CPVT(BaseBackbone):
    """DeiT-Ti/S/B with PEGs after the configured encoders instead of the
    learned table; the paper's baselines (learned table, 2-D sin-cos, none,
    both, tables in six blocks, 2-D RPE) with other arguments.

    Args:
        arch (str | dict): 'tiny' / 'small' / 'base' (or 't' / 's' / 'b'),
            or a dict with keys ``embed_dims``, ``num_layers``, ``num_heads``
            and ``feedforward_channels``. Defaults to 'tiny'.
        img_size (int | tuple): Input size the learned tables are made for.
            Defaults to 224.
        peg_positions (Sequence[int]): ``(0,)`` is CPVT, ``(0, 1, 2, 3, 4)``
            the paper's double-dagger models, ``()`` none (-1: before the
            first encoder). Defaults to ``(0,)``.
        pos_embed (str): 'none', 'learned' (DeiT's table, resized by
            ``pos_embed_interpolation``, 'bicubic' or 'bilinear') or
            'sincos2d'. Defaults to 'none'.
        pos_embed_positions (Sequence[int]): Where ``pos_embed`` is added
            (before a PEG at the same place), a table each: ``pos_embed`` at
            -1, ``pos_embeds.<i>`` after encoder ``i``. Defaults to ``(-1,)``.
        rpe_cfg (dict, optional): :class:`RelativePositionEncoding2d`
            arguments of every encoder (the paper's "2D RPE").
        rope_cfg (dict, optional): 2-D rotary embeddings of the queries and
            keys of every encoder, beyond the paper:
            ``dict(type='axial' | 'mixed' | 'dinov3', **timm_args)``
            (:class:`RotaryPositionEmbedding2d`; needs timm). With PEGs
            too, they must keep the map size.
        out_type (str): 'cls_token', 'avg_featmap' (CPVT-GAP) or 'featmap'
            (B, C, H, W). Defaults to 'cls_token'.
        with_cls_token (bool, optional): None: only with
            ``out_type='cls_token'``. Defaults to None.

    ``frozen_stages`` counts encoders, and also freezes the class token and
    the tables of frozen positions (the final norm and RoPE-Mixed's
    frequencies, which every encoder uses, with all of them). Other
    arguments: :class:`BaseBackbone`.
    """
    checkpoint_family = 'deit'
    pegs_may_shrink = True
    arch_zoo = {  # DeiT's: 64-dimensional heads, 4x FFN
        name: dict(embed_dims=dims, num_layers=12, num_heads=dims // 64,
                   feedforward_channels=4 * dims)
        for names, dims in [(('t', 'tiny', 'deit-tiny'), 192),
                            (('s', 'small', 'deit-small'), 384),
                            (('b', 'base', 'deit-base'), 768)]
        for name in names
    }
    block_cls = TransformerBlock

    def __init__(self, arch: Union[str, dict] = 'tiny',
                 img_size: Union[int, Sequence[int]] = 224,
                 patch_size: int = 16, in_channels: int = 3,
                 peg_positions: Sequence[int] = (0, ),
                 peg_cfg: Optional[dict] = None, pos_embed: str = 'none',
                 pos_embed_positions: Sequence[int] = (BEFORE_FIRST_BLOCK, ),
                 pos_embed_interpolation: str = 'bicubic',
                 rpe_cfg: Optional[dict] = None,
                 rope_cfg: Optional[dict] = None, out_type: str = 'cls_token',
                 with_cls_token: Optional[bool] = None,
                 out_indices: Union[int, Sequence[int]] = -1,
                 drop_rate: float = 0., attn_drop_rate: float = 0.,
                 drop_path_rate: float = 0., qkv_bias: bool = True,
                 norm_cfg: dict = dict(type='LN', eps=1e-6),
                 final_norm: bool = True, frozen_stages: int = -1,
                 norm_eval: bool = False, with_cp: bool = False,
                 init_cfg: Optional[Union[dict, list]] = None):
        arch = arch_settings(arch, self.arch_zoo)
        super().__init__(arch['num_layers'], peg_cfg, frozen_stages,
                         norm_eval, with_cp, init_cfg)
        # else the last branch of the output or the table would be taken
        if out_type not in OUT_TYPES:
            raise ValueError(
                f'out_type must be one of {OUT_TYPES}, got {out_type!r}')
        if pos_embed not in POS_EMBEDS:
            raise ValueError(
                f'pos_embed must be one of {POS_EMBEDS}, got {pos_embed!r}')
        self.embed_dims = arch['embed_dims']
        self.num_layers = arch['num_layers']
        self.out_type = out_type
        self.out_indices = stage_indices(out_indices, self.num_layers)
        self.with_cls_token = (out_type == 'cls_token' if with_cls_token is
                               None else with_cls_token)
        # else the first patch token would be taken for the class token
        if out_type == 'cls_token' and not self.with_cls_token:
            raise ValueError(
                "out_type='cls_token' needs with_cls_token=True (or None)")
        self.num_extra_tokens = int(self.with_cls_token)
        self.pos_embed_interpolation = pos_embed_interpolation
        pos_embed_positions = block_positions(
            'pos_embed_positions', pos_embed_positions, self.num_layers)
        if pos_embed == 'none' and pos_embed_positions != (-1, ):
            raise ValueError(
                f'pos_embed_positions={pos_embed_positions} needs a pos_embed')
        if pos_embed != 'none' and not pos_embed_positions:
            raise ValueError(
                f'pos_embed={pos_embed!r} needs pos_embed_positions')

        self.patch_embed = patch_embed(in_channels, self.embed_dims,
                                       patch_size, input_size=img_size)
        if self.with_cls_token:
            self.cls_token = nn.Parameter(torch.zeros(1, 1, self.embed_dims))
        hw = self.patch_embed.init_out_size
        self.pos_embed = self._build_pos_embed(  # DeiT's key
            pos_embed if -1 in pos_embed_positions else 'none', hw)
        self.drop_after_pos = nn.Dropout(p=drop_rate)
        self.pegs = self.build_pegs(peg_positions, self.num_layers,
                                    self.embed_dims, self.num_extra_tokens)
        # a learned table is made for the map it gets at img_size
        self.pos_embeds = ModuleDict()
        for i in range(self.num_layers):
            if str(i - 1) in self.pegs:  # smaller after a PEG without padding
                hw = self.pegs[str(i - 1)].out_hw_shape(hw)
            if i in pos_embed_positions:
                self.pos_embeds[str(i)] = self._build_pos_embed(pos_embed, hw)
        dpr = drop_path_rates(drop_path_rate, self.num_layers)
        self.layers = ModuleList([
            self.block_cls(
                self.embed_dims, arch['num_heads'],
                arch['feedforward_channels'], drop_rate=drop_rate,
                attn_drop_rate=attn_drop_rate, drop_path_rate=dpr[i],
                qkv_bias=qkv_bias, norm_cfg=norm_cfg, rpe_cfg=rpe_cfg)
            for i in range(self.num_layers)
        ])
        self.norm = build_norm_layer(
            norm_cfg, self.embed_dims)[1] if final_norm else nn.Identity()
        # else the rotations of the first map meet a smaller one
        if rope_cfg is not None and not all(p.with_identity for p in
                                            self.pegs.values()):
            raise ValueError('rope_cfg needs PEGs that keep the map size, got '
                             f'peg_cfg={self.peg_cfg}')
        self.rope = None if rope_cfg is None else RotaryPositionEmbedding2d(
            self.embed_dims, arch['num_heads'], self.num_layers, **rope_cfg)
        self.train(self.training)

    def _build_pos_embed(self, kind: str, grid_size) -> Optional[nn.Module]:
        if kind == 'learned':
            return LearnedPositionEmbedding(self.embed_dims, grid_size,
                                            self.num_extra_tokens,
                                            self.pos_embed_interpolation)
        return SinCos2dPositionEmbedding(
            self.embed_dims, self.num_extra_tokens) if kind != 'none' else None

    def frozen_modules(self) -> list:
        if self.frozen_stages < 0:
            return []
        n = self.frozen_stages
        frozen = [self.patch_embed, self.drop_after_pos, *self.layers[:n]]
        frozen += [peg for pos, peg in self.pegs.items() if int(pos) < n]
        frozen += [pe for pos, pe in self.pos_embeds.items() if int(pos) < n]
        if self.pos_embed is not None:
            frozen.append(self.pos_embed)
        if self.with_cls_token:
            frozen.append(self.cls_token)
        if n == self.num_layers:
            frozen += [self.norm] + ([self.rope] if self.rope else [])
        return frozen

    def _embed(self, x: torch.Tensor):
        """Images -> the tokens before a PEG at -1, and their (H, W)."""
        if x.dim() != 4:
            raise ValueError(f'x must be (B, C, H, W), got {tuple(x.shape)}')
        x, hw = self.patch_embed(x)  # (B, C, H, W) -> (B, H*W, C)
        if self.with_cls_token:
            cls_token = self.cls_token.expand(x.shape[0], -1, -1)
            x = torch.cat((cls_token, x), dim=1)
        if self.pos_embed is not None:
            x = self.pos_embed(x, hw)
        return self.drop_after_pos(x), hw

    def _format_output(self, x: torch.Tensor, hw_shape) -> torch.Tensor:
        if self.out_type == 'cls_token':
            return x[:, 0]
        x = x[:, self.num_extra_tokens:]
        if self.out_type == 'avg_featmap':
            return x.mean(dim=1)
        return nlc_to_nchw(x, hw_shape).contiguous()  # (B, C, H, W)

    def forward(self, x: torch.Tensor) -> tuple:
        x, hw = self._embed(x)
        x, hw = self.pegs(BEFORE_FIRST_BLOCK, x, hw)
        ropes = self.rope(hw) if self.rope else [None] * self.num_layers
        outs = []
        for i, layer in enumerate(self.layers):
            x = self.run_block(layer, x, hw, ropes[i])
            if str(i) in self.pos_embeds:
                x = self.pos_embeds[str(i)](x, hw)
            x, hw = self.pegs(i, x, hw)
            if i == self.num_layers - 1:
                x = self.norm(x)
            if i in self.out_indices:
                outs.append(self._format_output(x, hw))
        return tuple(outs)
