"""PVTPEG: Pyramid Vision Transformer (v1) with conditional position
encodings (the paper's PVT+PEG+GAP, Sec. 4.6 and Appendix B.6, Table 13).

Conditional Positional Encodings for Vision Transformers, Chu et al.,
ICLR 2023 (https://arxiv.org/abs/2102.10882); PVT: Wang et al., ICCV 2021
(https://arxiv.org/abs/2102.12122).
"""
from typing import Optional, Sequence, Union

import torch
import torch.nn as nn
from mmcv.cnn import build_norm_layer
from mmengine.model import ModuleList
from mmengine.utils import to_2tuple

from mmcpvt.registry import register_model
from ..layers import LearnedPositionEmbedding, TransformerBlock, nlc_to_nchw
from .base import (BEFORE_FIRST_BLOCK, BaseBackbone, arch_settings,
                   drop_path_rates, patch_embed, stage_indices)


@register_model
class PVTPEG(BaseBackbone):
    """PVT v1 with PEGs instead of its learned tables: four stages of
    spatial-reduction transformer blocks at strides 4, 8, 16 and 32; any
    input size works, the stage ``i`` map being ``ceil(H / 2**(i+2))`` high.

    Args:
        arch (str | dict): 'tiny' / 'small' / 'medium' / 'large' (or 't' /
            's' / 'm' / 'l'), or a dict of per-stage ``embed_dims``,
            ``num_heads``, ``mlp_ratios``, ``depths``, ``sr_ratios``.
            Defaults to 'tiny'.
        patch_sizes (Sequence[int]): Each stage's patch size (= stride).
            Defaults to (4, 2, 2, 2).
        peg_positions (Sequence): An entry per stage, as CPVT's. Defaults
            to a PEG after the first block of every stage.
        pos_embed (str): 'none' or 'learned' (PVT's tables, resized
            bilinearly, made for ``img_size``). Defaults to 'none'.
        out_type (str): 'avg_featmap' (PVT+PEG+GAP), 'cls_token' (PVT's,
            added in the last stage) or 'featmap' (NCHW maps of
            ``out_indices``). Defaults to 'featmap'.
        norm_after_stage (bool): A norm after every stage, not only the last
            (PVT / Twins classification). Defaults to False.

    A frozen stage includes its patch embedding. Other arguments:
    :class:`BaseBackbone`.
    """
    checkpoint_family = 'twins'
    arch_zoo = {  # PVT v1: the stage widths are shared, the depths differ
        name: dict(depths=depths, embed_dims=[64, 128, 320, 512],
                   num_heads=[1, 2, 5, 8], mlp_ratios=[8, 8, 4, 4],
                   sr_ratios=[8, 4, 2, 1])
        for names, depths in [(('t', 'tiny'), [2, 2, 2, 2]),
                              (('s', 'small'), [3, 4, 6, 3]),
                              (('m', 'medium'), [3, 4, 18, 3]),
                              (('l', 'large'), [3, 8, 27, 3])]
        for name in names
    }

    def __init__(self, arch: Union[str, dict] = 'tiny', in_channels: int = 3,
                 patch_sizes: Sequence[int] = (4, 2, 2, 2),
                 peg_positions: Sequence = (0, 0, 0, 0),
                 peg_cfg: Optional[dict] = None, pos_embed: str = 'none',
                 img_size: Union[int, Sequence[int]] = 224,
                 out_type: str = 'featmap',
                 out_indices: Sequence[int] = (0, 1, 2, 3),
                 qkv_bias: bool = True, drop_rate: float = 0.,
                 attn_drop_rate: float = 0., drop_path_rate: float = 0.1,
                 norm_cfg: dict = dict(type='LN', eps=1e-6),
                 norm_after_stage: bool = False, frozen_stages: int = -1,
                 norm_eval: bool = False, with_cp: bool = False,
                 init_cfg: Optional[Union[dict, list]] = None):
        arch = arch_settings(arch, self.arch_zoo)
        super().__init__(len(arch['depths']), peg_cfg, frozen_stages,
                         norm_eval, with_cp, init_cfg)
        # else a GAP or no table would be taken without a word
        if out_type not in ('featmap', 'avg_featmap', 'cls_token'):
            raise ValueError(f"out_type must be 'featmap', 'avg_featmap' or "
                             f"'cls_token', got {out_type!r}")
        if pos_embed not in ('none', 'learned'):
            raise ValueError(
                f"pos_embed must be 'none' or 'learned', got {pos_embed!r}")
        if len(peg_positions) != self.num_stages:
            raise ValueError(f'peg_positions needs an entry per stage, got '
                             f'{peg_positions}')
        # a reduced map has no place for the class token
        if out_type == 'cls_token' and arch['sr_ratios'][-1] != 1:
            raise ValueError(f"out_type='cls_token' needs arch sr_ratios 1 "
                             f"in the last stage, got {arch['sr_ratios']}")
        self.embed_dims = arch['embed_dims']
        self.out_type = out_type
        self.out_indices = stage_indices(out_indices, self.num_stages)
        self.with_cls_token = out_type == 'cls_token'

        dpr = iter(drop_path_rates(drop_path_rate, sum(arch['depths'])))
        self.pos_embeds = ModuleList() if pos_embed == 'learned' else None
        self.drop_after_pos = nn.Dropout(drop_rate)
        self.patch_embeds = ModuleList()
        self.stages = ModuleList()
        self.pegs = ModuleList()
        self.norms = ModuleList()
        in_dims, stride = in_channels, 1
        for i, depth in enumerate(arch['depths']):
            dims, last = self.embed_dims[i], i == self.num_stages - 1
            extra = int(last and self.with_cls_token)  # the class token
            stride *= patch_sizes[i]
            # PVT's / Twins' patch embedding norm has eps 1e-5, the blocks'
            # 1e-6 (pvt.py, gvt.py; timm the same)
            self.patch_embeds.append(patch_embed(in_dims, dims, patch_sizes[i],
                                                 norm_cfg=dict(type='LN')))
            if self.pos_embeds is not None:
                grid = tuple(-(-x // stride) for x in to_2tuple(img_size))
                self.pos_embeds.append(LearnedPositionEmbedding(
                    dims, grid, extra, interpolation='bilinear'))
            self.stages.append(ModuleList([
                TransformerBlock(
                    dims, arch['num_heads'][i], dims * arch['mlp_ratios'][i],
                    drop_rate=drop_rate, attn_drop_rate=attn_drop_rate,
                    drop_path_rate=next(dpr), qkv_bias=qkv_bias,
                    sr_ratio=arch['sr_ratios'][i], norm_cfg=norm_cfg)
                for _ in range(depth)
            ]))
            self.pegs.append(self.build_pegs(peg_positions[i], depth, dims,
                                             extra, f'peg_positions[{i}]'))
            self.norms.append(build_norm_layer(norm_cfg, dims)[1]
                              if norm_after_stage or last else nn.Identity())
            in_dims = dims
        if self.with_cls_token:
            self.cls_token = nn.Parameter(torch.zeros(1, 1, dims))
        self.train(self.training)

    def frozen_modules(self) -> list:
        frozen = []
        for i in range(self.frozen_stages):
            frozen += [self.patch_embeds[i], self.stages[i], self.pegs[i],
                       self.norms[i]]
            if self.pos_embeds is not None:
                frozen.append(self.pos_embeds[i])
        return frozen

    def forward(self, x: torch.Tensor) -> tuple:
        if x.dim() != 4:
            raise ValueError(f'x must be (B, C, H, W), got {tuple(x.shape)}')
        B = x.shape[0]
        last = self.num_stages - 1
        outs = []
        for i, blocks in enumerate(self.stages):
            x, hw = self.patch_embeds[i](x)  # (B, C, H, W) -> (B, H*W, C)
            if i == last and self.with_cls_token:
                x = torch.cat((self.cls_token.expand(B, -1, -1), x), dim=1)
            if self.pos_embeds is not None:
                x = self.pos_embeds[i](x, hw)
            x = self.drop_after_pos(x)
            x, hw = self.pegs[i](BEFORE_FIRST_BLOCK, x, hw)
            for j, block in enumerate(blocks):
                x = self.run_block(block, x, hw)
                x, hw = self.pegs[i](j, x, hw)
            x = self.norms[i](x)
            if i == last and self.out_type != 'featmap':
                return (x[:, 0] if self.with_cls_token else x.mean(1), )
            x = nlc_to_nchw(x, hw).contiguous()  # (B, H*W, C) -> (B, C, H, W)
            if i in self.out_indices:
                outs.append(x)
        return tuple(outs)
