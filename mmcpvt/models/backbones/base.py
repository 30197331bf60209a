"""What every mmcpvt backbone shares: initialisation, checkpoint conversion,
argument checks, PEG placement, gradient checkpointing, freezing."""
import math
import os.path as osp
from typing import Optional, Sequence, Tuple

import torch.nn as nn
import torch.utils.checkpoint as cp
from mmengine.logging import MMLogger
from mmengine.model import BaseModule, ModuleDict
from mmengine.model.weight_init import trunc_normal_
from torch.nn.modules.batchnorm import _BatchNorm

from mmcpvt.utils.convert import CONVERTERS, detect_family, unwrap
from ..layers import ConditionalPositionEncoding

# The PEG position "before the first block" in ``peg_positions``.
BEFORE_FIRST_BLOCK = -1

# Parameters initialised like a Linear weight (truncated normal, std .02).
TRUNC_NORMAL_PARAMS = ('cls_token', 'pos_embed',
                       'relative_position_bias_table', 'relative_key_table')


class BaseBackbone(BaseModule):
    """Base of the CPVT / PVTPEG / SwinPEG backbones.

    ``init_cfg=None`` (the default) gives the transformer initialisation of
    DeiT / PVT / Twins: truncated normal (std .02) for linear layers, class
    tokens and position tables, ones/zeros for norms, fan-out normal for
    convolutions (PEG, patch embeddings, spatial reduction). A ``Pretrained``
    ``init_cfg`` loads a checkpoint instead (e.g. an ImageNet classifier with
    ``prefix='backbone.'``); other ``init_cfg`` entries apply on top.

    Official / timm checkpoints of ``checkpoint_family`` are converted when
    loaded (a state-dict pre-hook), so ``init_cfg`` (without ``prefix``) and
    ``load_state_dict`` take them as they are.

    Backbones share the skeleton below: argument checks, PEGs per position,
    gradient checkpointing, freezing (they list ``_frozen_modules``);
    ``norm_eval`` (if set) keeps BatchNorm layers in eval mode during
    training.
    """
    norm_eval = False
    checkpoint_family: Optional[str] = None  # see mmcpvt.utils.convert
    # Whether a PEG may shrink the token map (``peg_cfg`` padding below
    # (k-1)/2): only where the backbone threads the new map size through.
    pegs_may_shrink = False

    def __init__(self, init_cfg=None):
        super().__init__(init_cfg=init_cfg)
        self._register_load_state_dict_pre_hook(self._convert_official_keys)

    def _convert_official_keys(self, state_dict, prefix, *args):
        keys = [k for k in state_dict if k.startswith(prefix)]
        local = unwrap({k[len(prefix):]: state_dict[k] for k in keys})
        if self.checkpoint_family is None or detect_family(
                local) != self.checkpoint_family:
            return
        converted, report = CONVERTERS[self.checkpoint_family](
            local, with_head=False)
        for k in keys:
            del state_dict[k]
        state_dict.update({prefix + k: v for k, v in converted.items()})
        MMLogger.get_current_instance().info(
            f'{type(self).__name__}: converted an official checkpoint at '
            f'load time\n{report.summary()}')

    def init_weights(self):
        cfgs = self.init_cfg if isinstance(self.init_cfg,
                                           list) else [self.init_cfg]
        pretrained = [
            c for c in cfgs
            if isinstance(c, dict) and c.get('type') == 'Pretrained'
        ]
        for cfg in pretrained:
            ckpt = cfg.get('checkpoint')
            if not ckpt or ('://' not in str(ckpt)
                            and not osp.isfile(str(ckpt))):
                raise FileNotFoundError(
                    f'{type(self).__name__}: init_cfg asks for the pretrained '
                    f'checkpoint {ckpt!r}, which does not exist. Train or '
                    f'convert one (see tools/model_converters), point '
                    f'model.backbone.init_cfg.checkpoint at it, or start '
                    f'from random weights with '
                    f'--cfg-options model.backbone.init_cfg=None')
        if not pretrained:
            self._default_init()
        super().init_weights()

    def _default_init(self):
        for m in self.modules():
            if isinstance(m, nn.Linear):
                trunc_normal_(m.weight, std=.02)
                if m.bias is not None:
                    nn.init.zeros_(m.bias)
            elif isinstance(m, (nn.LayerNorm, nn.GroupNorm, _BatchNorm)):
                if m.weight is not None:
                    nn.init.ones_(m.weight)
                    nn.init.zeros_(m.bias)
            elif isinstance(m, nn.Conv2d):
                fan_out = m.kernel_size[0] * m.kernel_size[1] * \
                    m.out_channels // m.groups
                nn.init.normal_(m.weight, 0, math.sqrt(2.0 / fan_out))
                if m.bias is not None:
                    nn.init.zeros_(m.bias)
        for name, p in self.named_parameters():
            if name.rsplit('.', 1)[-1] in TRUNC_NORMAL_PARAMS:
                trunc_normal_(p, std=.02)

    # -- the skeleton every backbone is built from ------------------------

    def _check_peg_positions(self, positions, depth: int, where: str = '',
                             name: str = 'peg_positions') -> Tuple[int, ...]:
        """``positions`` (an int or a sequence of ints) as a sorted tuple,
        each in ``BEFORE_FIRST_BLOCK`` (-1) .. ``depth - 1``; ``name`` is the
        argument the errors name."""
        owner = type(self).__name__
        if isinstance(positions, int) and not isinstance(positions, bool):
            positions = (positions, )
        if not isinstance(positions, (tuple, list)) or not all(
                isinstance(p, int) and not isinstance(p, bool)
                for p in positions):
            raise TypeError(
                f'{owner}: {name}{where} must be an int or a '
                f'sequence of ints (block indices), got {positions!r}')
        bad = [p for p in positions if not BEFORE_FIRST_BLOCK <= p < depth]
        if bad:
            raise ValueError(
                f'{owner}: {name} {bad}{where} out of range; allowed '
                f'are -1 (before the first block) to {depth - 1} (after the '
                f'last of its {depth} blocks)')
        return tuple(sorted(set(positions)))

    def _check_stage_peg_positions(self, positions,
                                   depths: Sequence[int]) -> list:
        """One entry of ``peg_positions`` per stage, each checked."""
        if not isinstance(positions, (tuple, list)) or len(positions) != len(
                depths):
            raise ValueError(
                f'{type(self).__name__}: peg_positions needs one entry per '
                f'stage ({len(depths)}), got {positions!r}; use () for a '
                f'stage without PEG')
        return [
            self._check_peg_positions(p, d, f' of stage {i}')
            for i, (p, d) in enumerate(zip(positions, depths))
        ]

    def _check_out_indices(self, out_indices, num: int,
                           what: str = 'stages') -> Tuple[int, ...]:
        """``out_indices`` (an int or ints, negative counting from the end)
        as a sorted tuple of indices in 0 .. num - 1."""
        if isinstance(out_indices, int):
            out_indices = (out_indices, )
        bad = [i for i in out_indices if not -num <= i < num]
        if bad:
            raise ValueError(
                f'{type(self).__name__}: out_indices {bad} out of range for '
                f'{num} {what} (allowed: -{num} to {num - 1})')
        return tuple(sorted({i % num for i in out_indices}))

    def _build_pegs(self, positions: Sequence[int], embed_dims: int,
                    peg_cfg: Optional[dict]) -> ModuleDict:
        """A PEG per position. The keys are the positions as written in
        the config ('0' follows block 0, '-1' comes before the first block)
        and so appear in checkpoints (``pegs.-1.proj.0.weight``): they stay
        in that form for saved weights to keep loading."""
        pegs = ModuleDict({
            str(p): ConditionalPositionEncoding(embed_dims, embed_dims,
                                                **(peg_cfg or {}))
            for p in positions
        })
        for peg in pegs.values():
            if peg.crop and not self.pegs_may_shrink:
                raise ValueError(
                    f'{type(self).__name__}: peg_cfg padding={peg.padding} '
                    f'shrinks the token map (kernel_size {peg.kernel_size} '
                    f'keeps it with padding {peg.kernel_size // 2}), but '
                    f'{type(self).__name__} needs a fixed map size; leave '
                    f'padding out of peg_cfg (or use CPVT, which threads '
                    f'the new size through)')
        return pegs

    def _run_block(self, block, x, *args):
        """``block(x, *args)``, with gradient checkpointing when ``with_cp``
        is set and training."""
        if self.with_cp and self.training and x.requires_grad:
            return cp.checkpoint(block, x, *args, use_reentrant=False)
        return block(x, *args)

    def _run_stage(self, blocks, pegs, x, hw_shape):
        """Run ``blocks`` on the tokens ``x``, with the PEG of position
        ``j`` after block ``j`` (``BEFORE_FIRST_BLOCK``: before block 0)."""
        if str(BEFORE_FIRST_BLOCK) in pegs:
            x = pegs[str(BEFORE_FIRST_BLOCK)](x, hw_shape)
        for j, block in enumerate(blocks):
            x = self._run_block(block, x, hw_shape)
            if str(j) in pegs:
                x = pegs[str(j)](x, hw_shape)
        return x

    def _frozen_modules(self) -> list:
        """The modules ``frozen_stages`` freezes (backbones list them)."""
        return []

    def _freeze_stages(self):
        """Put the frozen modules in eval mode without gradients."""
        for m in self._frozen_modules():
            if isinstance(m, nn.Parameter):
                m.requires_grad_(False)
            else:
                m.eval()
                m.requires_grad_(False)

    def train(self, mode: bool = True):
        super().train(mode)
        self._freeze_stages()
        if mode and self.norm_eval:
            for m in self.modules():
                if isinstance(m, _BatchNorm):
                    m.eval()
        return self
