"""What every mmcpvt backbone shares: initialisation, checkpoint conversion,
argument checks, PEG placement, gradient checkpointing, freezing."""
import math
import os.path as osp
from typing import Iterator, Optional, Sequence, Tuple

import torch
import torch.nn as nn
import torch.utils.checkpoint as cp
from mmengine.logging import MMLogger
from mmengine.model import BaseModule, ModuleDict
from mmengine.model.weight_init import trunc_normal_
from torch.nn.modules.batchnorm import _BatchNorm

from mmcpvt.utils.checkpoint import (USUAL_CAUSES, CheckpointMismatchError,
                                     KeyMatch, check_state_dict_fits,
                                     checkpoint_state_dict)
from mmcpvt.utils.convert import CONVERTERS, detect_family, unwrap
from ..checks import check_cfg_keys, check_int, describe, is_int
from ..layers import ConditionalPositionEncoding
from .utils import ARG_CHECKS

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
    ``load_state_dict`` take them as they are. A checkpoint that gives the
    backbone fewer than half of its tensors (names and shapes, after that
    conversion) is refused when loaded (``init_cfg``, ``load_from``,
    ``load_state_dict``), naming the mismatched keys and the likely cause;
    a partial load (new PEGs, a classifier's backbone in a detector) logs
    the missing keys, which keep the transformer initialisation.

    Backbones share the skeleton below: argument checks, PEGs per position,
    gradient checkpointing, freezing (they list ``_frozen_modules``);
    ``norm_eval`` (if set) keeps BatchNorm layers in eval mode during
    training.

    Bad arguments are refused when the backbone is built, naming what was
    given and what is allowed. ``forward`` checks its input in one branch
    of int comparisons (:meth:`_check_input`): a float (B, in_channels, H,
    W) tensor of at least ``min_input_size`` px a side (1 unless a PEG
    needs a larger token map: reflect or circular padding, or a PEG that
    shrinks the map). An empty batch (B = 0) gives empty outputs.
    """
    norm_eval = False
    in_channels = 3
    min_input_size = 1  # px a side; set by _find_min_input_size
    checkpoint_family: Optional[str] = None  # see mmcpvt.utils.convert
    # Whether a PEG may shrink the token map (``peg_cfg`` padding below
    # (k-1)/2): only where the backbone threads the new map size through.
    pegs_may_shrink = False

    def __init__(self, init_cfg=None):
        super().__init__(init_cfg=init_cfg)
        self._register_load_state_dict_pre_hook(self._convert_official_keys)
        self._register_load_state_dict_pre_hook(self._check_checkpoint_fits)

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

    def _check_checkpoint_fits(self, state_dict, prefix, *args):
        """Refuse, before anything is copied, a state dict that gives this
        backbone fewer than half of its tensors.

        Half: the partial loads people mean are far above it (a DeiT into
        CPVT-Ti: 149 of 151, the PEGs are new; a classifier's backbone into
        a detector: all), the mistakes far below (another architecture, a
        missing or wrong prefix, another size: none fit), and a backbone
        that gets less than half is mostly random anyway.
        """
        offered = {k[len(prefix):]: v for k, v in state_dict.items()
                   if k.startswith(prefix)}
        check_state_dict_fits(
            self.state_dict(), offered, 0.5,
            owner=f'the {type(self).__name__} backbone', prefix=prefix,
            why='fewer than half is refused, as it would leave the backbone '
            'mostly at random weights.')

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
        if not self._is_init:
            # The transformer init first, a checkpoint on top: what the
            # checkpoint lacks (new PEGs) keeps this init, not PyTorch's.
            self._default_init()
        try:
            super().init_weights()
        except CheckpointMismatchError as e:
            where = ', '.join(
                repr(c.get('checkpoint')) + (f' (prefix {c["prefix"]!r})'
                                             if c.get('prefix') else '')
                for c in pretrained)
            raise CheckpointMismatchError(
                f'{type(self).__name__}: init_cfg Pretrained {where}: {e}'
            ) from None
        except AssertionError as e:
            # mmengine's PretrainedInit asserts that the prefix occurs
            bad = [c for c in pretrained if c.get('prefix') and
                   f'{c["prefix"]} is not in the pretrained model' in str(e)]
            if not bad:
                raise
            raise self._prefix_not_found(bad[0]) from None

    def _prefix_not_found(self, cfg) -> CheckpointMismatchError:
        """The error for an init_cfg ``prefix`` that no key starts with."""
        ckpt, prefix = cfg['checkpoint'], cfg['prefix']
        keys = checkpoint_state_dict(ckpt)
        owner = type(self).__name__
        match = KeyMatch(self.state_dict(), keys)
        if detect_family(keys) == self.checkpoint_family:
            hint = (f'it is an official {self.checkpoint_family} checkpoint, '
                    f'which {owner} converts when it loads: leave prefix out')
        elif len(match.matched) * 2 >= match.total:
            hint = 'its keys are the backbone\'s own: leave prefix out'
        else:
            hint = '; or '.join(match.likely_causes()) or USUAL_CAUSES
        return CheckpointMismatchError(
            f'{owner}: init_cfg Pretrained {ckpt!r}: no key of the '
            f'checkpoint starts with prefix={prefix!r} (it has {len(keys)} '
            f'tensors, e.g. {", ".join(list(keys)[:3])}). Likely: {hint}. '
            f'Change model.backbone.init_cfg.prefix.')

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

    def _check_args(self, **kwargs):
        """Check arguments that several backbones take, by name (the rules
        are ``ARG_CHECKS`` in ``backbones/utils.py``)."""
        for name, value in kwargs.items():
            ARG_CHECKS[name](name, value, type(self).__name__,
                             hint=f'; change model.backbone.{name}')

    def _check_frozen_stages(self, frozen_stages, num: int,
                             what: str) -> int:
        """``frozen_stages``: -1 (none frozen) to ``num`` (all ``num``
        ``what``), the same range in every backbone."""
        return check_int(
            'frozen_stages', frozen_stages, type(self).__name__, low=-1,
            high=num, hint=f'; -1 freezes none, {num} all {num} {what}; '
            f'change model.backbone.frozen_stages')

    def _check_peg_positions(self, positions, depth: int, where: str = '',
                             name: str = 'peg_positions') -> Tuple[int, ...]:
        """``positions`` (an int or a sequence of ints) as a sorted tuple,
        each in ``BEFORE_FIRST_BLOCK`` (-1) .. ``depth - 1``; ``name`` is the
        argument the errors name."""
        owner = type(self).__name__
        if is_int(positions):
            positions = (positions, )
        what = ('an int or a sequence of ints (block indices; -1 is before '
                'the first block; a bool is no block index here)')
        if not isinstance(positions, (tuple, list)):
            raise TypeError(f'{owner}: {name}{where} must be {what}, got '
                            f'{describe(positions)}; change '
                            f'model.backbone.{name}')
        wrong = [p for p in positions if not is_int(p)]
        if wrong:
            raise TypeError(
                f'{owner}: {name}{where} must be {what}, got {positions!r}, '
                f'which holds {", ".join(describe(p) for p in wrong)}; '
                f'change model.backbone.{name}')
        positions = [int(p) for p in positions]
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
                f'stage ({len(depths)}), got {describe(positions)}; use () '
                f'for a stage without PEG')
        return [
            self._check_peg_positions(p, d, f' of stage {i}')
            for i, (p, d) in enumerate(zip(positions, depths))
        ]

    def _check_out_indices(self, out_indices, num: int,
                           what: str = 'stages') -> Tuple[int, ...]:
        """``out_indices`` (an int or ints, negative counting from the end)
        as a sorted tuple of indices in 0 .. num - 1."""
        owner = type(self).__name__
        if is_int(out_indices):
            out_indices = (out_indices, )
        if not isinstance(out_indices, (tuple, list)) or not all(
                is_int(i) for i in out_indices):
            raise TypeError(
                f'{owner}: out_indices must be an int or a sequence of ints '
                f'(indices of {what}, negative from the end; a bool is no '
                f'index here), got {describe(out_indices)}; change '
                f'model.backbone.out_indices')
        if not out_indices:
            raise ValueError(
                f'{owner}: out_indices=() returns nothing; give at least one '
                f'of -{num} to {num - 1} in model.backbone.out_indices')
        out_indices = [int(i) for i in out_indices]
        bad = [i for i in out_indices if not -num <= i < num]
        if bad:
            raise ValueError(
                f'{type(self).__name__}: out_indices {bad} out of range for '
                f'{num} {what} (allowed: -{num} to {num - 1})')
        return tuple(sorted({i % num for i in out_indices}))

    def _build_pegs(self, positions: Sequence[int], embed_dims: int,
                    peg_cfg: Optional[dict],
                    num_extra_tokens: int = 0) -> ModuleDict:
        """A PEG per position, for tokens with ``num_extra_tokens`` class
        tokens. The keys are the positions as written in the config ('0'
        follows block 0, '-1' comes before the first block) and so appear
        in checkpoints (``pegs.-1.proj.0.weight``): they stay in that form
        for saved weights to keep loading."""
        owner = type(self).__name__
        peg_cfg = check_cfg_keys(
            'peg_cfg', peg_cfg, ConditionalPositionEncoding, owner,
            set_by_owner=('in_channels', 'embed_dims', 'num_extra_tokens'),
            hint='; change model.backbone.peg_cfg')
        if peg_cfg.get('stride', 1) != 1:
            raise ValueError(
                f'{owner}: peg_cfg stride={peg_cfg["stride"]!r}; a PEG '
                f'between blocks keeps the token map, so its stride is 1; '
                f'remove stride from peg_cfg')
        pegs = ModuleDict({
            str(p): ConditionalPositionEncoding(
                embed_dims, embed_dims, num_extra_tokens=num_extra_tokens,
                **peg_cfg)
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

    def _peg_map_sides(self, size: int) -> Iterator[tuple]:
        """For a ``size`` x ``size`` input, ``(name, peg, side)`` for each
        PEG in the order they run: the side of the token map it gets.
        Backbones give their geometry here; :meth:`_find_min_input_size`
        searches it."""
        return iter(())

    def _find_min_input_size(self):
        """Set ``min_input_size``, the smallest input side (px) at which
        every PEG takes the token map it gets, and the reason given when an
        input is smaller. Called at the end of ``__init__``: the search
        runs once, when the backbone is built."""
        self._min_input_reason = 'an image needs at least one pixel a side'
        size = 1
        while size < 1 << 16:  # map sides grow with the input: stop there
            short = [(name, peg, side)
                     for name, peg, side in self._peg_map_sides(size)
                     if side < peg.min_map_size]
            if not short:
                break
            name, peg, side = short[0]
            size += 1
            m = peg.min_map_size
            self._min_input_reason = (
                f'{name} ({peg.describe()}) needs a token map of at least '
                f'{m}x{m}, which inputs of {{size}}x{{size}} px or more '
                f'give; use larger inputs, or {peg.too_small_hint()} in '
                f'model.backbone.peg_cfg')
        self.min_input_size = size
        self._min_input_reason = self._min_input_reason.format(size=size)

    def _check_input(self, x: torch.Tensor):
        """Refuse an input ``forward`` cannot take, before any layer runs.
        One branch of int comparisons (no loop, no sync); torch.compile
        specialises it away."""
        if not isinstance(x, torch.Tensor) or x.dim() != 4 or x.shape[
                1] != self.in_channels or not x.is_floating_point() or min(
                    x.shape[2], x.shape[3]) < self.min_input_size:
            raise self._bad_input(x)

    def _bad_input(self, x) -> Exception:
        """The error for an input :meth:`_check_input` refuses."""
        owner = type(self).__name__
        want = (f'{owner} takes images as a float tensor (B, C, H, W) with '
                f'C = in_channels = {self.in_channels}')
        if not isinstance(x, torch.Tensor):
            return TypeError(f'{want}, got a {type(x).__name__}')
        shape = tuple(x.shape)
        if x.dim() == 3:
            return ValueError(
                f'{want}, got a {shape} tensor without the batch dimension; '
                f'a single image is x[None] (B = 1)')
        if x.dim() != 4:
            return ValueError(f'{want}, got a {x.dim()}-D {shape} tensor')
        if x.shape[1] != self.in_channels:
            return ValueError(
                f'{want}, got {x.shape[1]} channels {shape}; convert the '
                f'images (e.g. gray to RGB), or build the model with '
                f'in_channels={x.shape[1]} (model.backbone.in_channels)')
        if not x.is_floating_point():
            return TypeError(
                f'{want}, got {x.dtype}; convert and normalise the images '
                f'first (x.float(), as the data preprocessor does)')
        H, W = shape[2:]
        return ValueError(f'{owner}: a {H}x{W} input is too small: '
                          f'{self._min_input_reason}')

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
