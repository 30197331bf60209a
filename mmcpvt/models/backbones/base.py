"""What every mmcpvt backbone shares: PEG placement, the transformer init
and ``Pretrained`` loading, gradient checkpointing and freezing, written
once."""
import math
from abc import abstractmethod
from typing import Optional, Sequence, Union

import torch
import torch.nn as nn
import torch.utils.checkpoint as cp
from mmcv.cnn.bricks.transformer import PatchEmbed
from mmengine.model import BaseModule
from mmengine.model.weight_init import (constant_init, normal_init,
                                        trunc_normal_, trunc_normal_init)
from torch.nn.modules.batchnorm import _BatchNorm

from mmcpvt.utils.checkpoint import load_weights
from ..layers import PEGs

BEFORE_FIRST_BLOCK = -1  # the PEG position before the first block
# Parameters initialised like a Linear weight (truncated normal, std .02).
TRUNC_NORMAL_PARAMS = ('cls_token', 'pos_embed',
                       'relative_position_bias_table', 'relative_key_table')


def patch_embed(in_channels: int, embed_dims: int, patch_size: int,
                **kwargs) -> PatchEmbed:
    """Pads the bottom/right to a multiple of the patch: any input size."""
    if type(patch_size) is not int or patch_size < 1:
        raise ValueError(f'patch_size must be an int >= 1, got {patch_size}')
    return PatchEmbed(in_channels=in_channels, embed_dims=embed_dims,
                      conv_type='Conv2d', kernel_size=patch_size,
                      stride=patch_size, padding='corner', **kwargs)


def arch_settings(arch: Union[str, dict], zoo: dict) -> dict:
    """A name in ``zoo``, or a dict of exactly its keys (others unread)."""
    if isinstance(arch, str):
        if arch.lower() not in zoo:
            raise ValueError(f'arch {arch!r} is not in {sorted(zoo)}')
        return zoo[arch.lower()]
    keys = sorted(next(iter(zoo.values())))
    if not isinstance(arch, dict) or sorted(arch) != keys:
        raise ValueError(f'arch needs the keys {keys}, got {arch}')
    return arch


def int_tuple(name: str, value: Union[int, Sequence[int]]) -> tuple:
    """An int or a sequence of ints as a tuple; TypeError otherwise."""
    if isinstance(value, int):
        value = (value, )
    if not isinstance(value, Sequence) or not all(
            type(v) is int for v in value):
        raise TypeError(f'{name} must be an int or a sequence of ints, got '
                        f'{value!r}')
    return tuple(value)


def block_positions(name: str, positions: Union[int, Sequence[int]],
                    num_blocks: int) -> tuple:
    """``positions``: -1 before the first block, ``j`` after block ``j``."""
    positions = int_tuple(name, positions)
    if len(set(positions)) != len(positions) or not all(
            -1 <= p < num_blocks for p in positions):
        raise ValueError(f'{name} must be distinct ints from -1 to '
                         f'{num_blocks - 1}, got {positions}')
    return positions


def stage_indices(indices: Union[int, Sequence[int]], num: int) -> tuple:
    """``out_indices`` of ``num`` stages (negative: from the end), sorted."""
    indices = int_tuple('out_indices', indices)
    wrapped = {i % num for i in indices if -num <= i < num}
    if not indices or len(wrapped) != len(indices):
        raise ValueError(f'out_indices must be distinct ints from {-num} to '
                         f'{num - 1}, got {indices}')
    return tuple(sorted(wrapped))


def drop_path_rates(drop_path_rate: float, num_blocks: int) -> list:
    """Stochastic depth rising from 0 (below 0: off without a word)."""
    if not 0 <= drop_path_rate < 1:
        raise ValueError(
            f'drop_path_rate must be in [0, 1), got {drop_path_rate}')
    return torch.linspace(0, drop_path_rate, num_blocks).tolist()


class BaseBackbone(BaseModule):
    """Base of the backbones. A backbone provides its PEGs from
    :meth:`build_pegs`, run in ``forward`` as ``x, hw = pegs(j, x, hw)``
    after ``x = self.run_block(block, x, hw)``; :meth:`frozen_modules`; and
    ``self.train(self.training)`` last in ``__init__``.

    Args:
        num_stages (int): Stages (CPVT: encoders) ``frozen_stages`` counts.
        peg_cfg (dict, optional): Other :class:`ConditionalPositionEncoding`
            arguments of every PEG.
        frozen_stages (int): Freezes the patch embedding and the first
            ``frozen_stages`` stages with their PEGs; -1: none.
        norm_eval (bool): Batch norms in eval mode while training.
        with_cp (bool): Gradient checkpointing of each block.
        init_cfg (dict | list, optional): None: the transformer init of
            DeiT / PVT / Twins (truncated normal, std .02, for linear layers,
            class tokens and tables; ones/zeros for norms; fan-out normal
            for convolutions). A ``Pretrained`` one (``checkpoint``,
            ``prefix``) loads the part of a checkpoint that fits on top
            (:func:`mmcpvt.utils.checkpoint.load_weights`), an official /
            timm one of ``checkpoint_family`` converted.
    """
    pegs_may_shrink = False  # whether it follows a smaller map through
    checkpoint_family = None  # see mmcpvt.utils.convert; None: converts none

    def __init__(self, num_stages: int, peg_cfg: Optional[dict],
                 frozen_stages: int, norm_eval: bool, with_cp: bool,
                 init_cfg: Optional[Union[dict, list]]):
        super().__init__(init_cfg)
        if not -1 <= frozen_stages <= num_stages:
            raise ValueError(f'frozen_stages must be from -1 to {num_stages}, '
                             f'got {frozen_stages}')
        self.num_stages = num_stages
        self.peg_cfg = peg_cfg or {}
        self.frozen_stages = frozen_stages
        self.norm_eval = norm_eval
        self.with_cp = with_cp

    def init_weights(self):
        """The transformer init, mmengine's for other init_cfg entries,
        then each ``Pretrained`` checkpoint by ``load_weights`` (not
        mmengine's ``PretrainedInit``, which loads any file without
        checking what fits)."""
        cfgs = self.init_cfg if isinstance(self.init_cfg, list) else [
            self.init_cfg]
        pretrained = [c for c in cfgs
                      if isinstance(c, dict) and c.get('type') == 'Pretrained']
        first = not self._is_init
        if first:  # what a checkpoint lacks (new PEGs) keeps this init
            self._default_init()
        init_cfg, self.init_cfg = self.init_cfg, [
            c for c in cfgs if c and c not in pretrained] or None
        try:
            super().init_weights()
        finally:
            self.init_cfg = init_cfg
        for cfg in pretrained if first else []:
            checkpoint = cfg.get('checkpoint')
            source = f'{type(self).__name__} init_cfg Pretrained {checkpoint}'
            try:
                load_weights(self, checkpoint or '', cfg.get('prefix'),
                             strict=False, source=source)
            except FileNotFoundError as e:
                raise FileNotFoundError(
                    f'{source}: {e}. docs/model_zoo.md ("Weights") says where '
                    f'the authors publish ImageNet weights; or start from '
                    f'random weights: model.backbone.init_cfg=None') from None

    def _default_init(self):
        for m in self.modules():
            if isinstance(m, nn.Linear):
                trunc_normal_init(m, std=.02, bias=0)
            elif isinstance(m, (nn.LayerNorm, nn.GroupNorm, _BatchNorm)):
                constant_init(m, 1, bias=0)
            elif isinstance(m, nn.Conv2d):
                fan_out = m.kernel_size[0] * m.kernel_size[1] * \
                    m.out_channels // m.groups
                normal_init(m, 0, math.sqrt(2.0 / fan_out), bias=0)
        for name, p in self.named_parameters():
            if name.rsplit('.', 1)[-1] in TRUNC_NORMAL_PARAMS:
                trunc_normal_(p, std=.02)

    def build_pegs(self, positions: Union[int, Sequence[int]],
                   num_blocks: int, embed_dims: int,
                   num_extra_tokens: int = 0,
                   name: str = 'peg_positions') -> PEGs:
        pegs = PEGs(block_positions(name, positions, num_blocks), embed_dims,
                    num_extra_tokens=num_extra_tokens, **self.peg_cfg)
        # else the next block gets a map of another size, and says so less
        if not self.pegs_may_shrink and not all(
                peg.with_identity for peg in pegs.values()):
            raise ValueError(
                f'{type(self).__name__} needs PEGs that keep the map size, '
                f'got peg_cfg={self.peg_cfg}; leave out padding and stride')
        return pegs

    def run_block(self, block: nn.Module, x: torch.Tensor, *args):
        if self.with_cp and self.training and x.requires_grad:
            return cp.checkpoint(block, x, *args, use_reentrant=False)
        return block(x, *args)

    def train(self, mode: bool = True):
        super().train(mode)
        for m in self.frozen_modules():
            m.requires_grad_(False)
            if isinstance(m, nn.Module):
                m.eval()
        if mode and self.norm_eval:
            for m in self.modules():
                if isinstance(m, _BatchNorm):
                    m.eval()
        return self

    @abstractmethod
    def frozen_modules(self) -> list:
        """The modules and parameters that ``frozen_stages`` freezes."""
