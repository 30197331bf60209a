"""What every mmcpvt backbone shares: its common arguments, initialisation,
checkpoint conversion, input checks, PEG placement, gradient checkpointing
and freezing."""
import math
import os.path as osp

import torch
import torch.nn as nn
import torch.utils.checkpoint as cp
from mmcv.cnn.bricks.transformer import PatchEmbed
from mmengine.logging import MMLogger
from mmengine.model import BaseModule, ModuleDict
from mmengine.model.weight_init import (constant_init, normal_init,
                                        trunc_normal_, trunc_normal_init)
from torch.nn.modules.batchnorm import _BatchNorm

from mmcpvt.utils.checkpoint import (CheckpointError, CheckpointMismatchError,
                                     check_checkpoint,
                                     checkpoint_state_dict, weights_only_loads)
from mmcpvt.utils.convert import CONVERTERS, detect_family, unwrap
from mmcpvt.utils.state_dict import (USUAL_CAUSES, KeyMatch,
                                     check_state_dict_fits)
from ..checks import (Cfg, Flag, Int, Ints, Rate, Size, StagePositions,
                      check_args, out_indices)
from ..layers import ConditionalPositionEncoding, RelativePositionEncoding2d

# The PEG position "before the first block" in ``peg_positions``.
BEFORE_FIRST_BLOCK = -1

# Parameters initialised like a Linear weight (truncated normal, std .02).
TRUNC_NORMAL_PARAMS = ('cls_token', 'pos_embed',
                       'relative_position_bias_table', 'relative_key_table')


def patch_embed(in_channels: int, embed_dims: int, patch_size: int,
                **kwargs) -> PatchEmbed:
    """A patch embedding that pads the bottom/right to a multiple of the
    patch size, so that any input size works."""
    return PatchEmbed(in_channels=in_channels, embed_dims=embed_dims,
                      conv_type='Conv2d', kernel_size=patch_size,
                      stride=patch_size, padding='corner', **kwargs)


class BaseBackbone(BaseModule):
    """Base of the CPVT / PVTPEG / SwinPEG backbones.

    Arguments they share, besides the usual OpenMMLab ones (``in_channels``,
    ``qkv_bias``, ``drop_rate``, ``attn_drop_rate``, ``drop_path_rate``,
    ``norm_cfg``, ``out_indices``, ``norm_eval``, ``with_cp``): PEGs go at
    ``peg_positions`` (-1: before the first block, ``i``: after block ``i``;
    in stages, an entry per stage, ``()`` for none) and take ``peg_cfg``
    (extra :class:`ConditionalPositionEncoding` arguments);
    ``frozen_stages`` (-1: none) freezes the patch embedding and the first
    ``n`` encoders or stages with their PEGs.

    ``init_cfg=None`` gives the transformer init of DeiT / PVT / Twins
    (truncated normal, std .02, for linear layers, class tokens and tables;
    ones/zeros for norms; fan-out normal for convolutions). A ``Pretrained``
    one loads a checkpoint on top (``weights_only``, whatever its scheme),
    converting official / timm ones of ``checkpoint_family``. What a partial
    load (new PEGs) lacks keeps the transformer init; less than half of the
    tensors is refused.

    Arguments are checked against ``ARGS`` when the backbone is built
    (:mod:`mmcpvt.models.checks`); ``forward`` takes a (B, in_channels, H,
    W) tensor of the weights' floating dtype (any, under autocast), at least
    ``min_input_size`` px a side.
    """
    checkpoint_family: str  # each backbone's; see mmcpvt.utils.convert
    # Whether a PEG may shrink the token map (``peg_cfg`` padding below
    # (k-1)/2): only where the backbone threads the new map size through.
    pegs_may_shrink = False
    ARGS = dict(
        **dict.fromkeys(('in_channels', 'patch_size', 'window_size',
                         'mlp_ratio'), Int(1)),
        img_size=Size(), with_cls_token=Flag(none=True),
        **dict.fromkeys(('drop_rate', 'attn_drop_rate', 'drop_path_rate'),
                        Rate()),
        **dict.fromkeys(('with_cp', 'norm_eval', 'qkv_bias', 'final_norm',
                         'norm_after_stage'), Flag()),
        peg_cfg=Cfg(ConditionalPositionEncoding, set_by_owner=(
            'in_channels', 'embed_dims', 'stride', 'num_extra_tokens')),
        rpe_cfg=Cfg(RelativePositionEncoding2d, set_by_owner=('head_dims', )))
    # The arguments of backbones in stages, counted from ``arch`` depths.
    STAGE_ARGS = dict(
        patch_sizes=lambda a: Ints(len(a['arch']['depths'])),
        peg_positions=lambda a: StagePositions(a['arch']['depths']),
        out_indices=lambda a: out_indices(len(a['arch']['depths']), 'stages'),
        frozen_stages=lambda a: Int(-1, len(a['arch']['depths'])))
    # Checked arguments kept as attributes (``arch`` as ``arch_settings``).
    KEPT_ARGS = ('in_channels', 'patch_size', 'patch_sizes', 'img_size',
                 'out_type', 'out_indices', 'peg_positions', 'peg_cfg',
                 'pos_embed_positions', 'frozen_stages', 'norm_eval',
                 'with_cp')

    def __init__(self, values: dict):
        """``values``: the ``locals()`` of the backbone's ``__init__``. The
        arguments that ``ARGS`` names are checked and normalised;
        ``KEPT_ARGS`` become attributes (``arch`` is ``arch_settings``)."""
        super().__init__(init_cfg=values['init_cfg'])
        self._pretrained = None  # the checkpoints init_weights is loading
        self._register_load_state_dict_pre_hook(self._convert_official_keys)
        self._register_load_state_dict_pre_hook(self._check_checkpoint_fits)
        args = check_args(type(self).__name__, values, self.ARGS)
        self.arch_settings = args['arch']
        if 'depths' in self.arch_settings:  # a backbone in stages
            self.num_stages = len(self.arch_settings['depths'])
        for name in set(self.KEPT_ARGS) & set(args):
            setattr(self, name, args[name])

    # -- checkpoints and initialisation -----------------------------------

    def _convert_official_keys(self, state_dict, prefix, *args):
        keys = [k for k in state_dict if k.startswith(prefix)]
        local = unwrap({k[len(prefix):]: state_dict[k] for k in keys})
        if detect_family(local) != self.checkpoint_family:
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
        backbone fewer than half of its tensors: the partial loads people
        mean are far above it (a DeiT into CPVT-Ti: 149 of 151), the
        mistakes far below (another architecture, a wrong prefix: none).

        Outside a ``Pretrained`` init_cfg (``load_from``, ``--resume``, the
        tools, the libraries' inferencers, ``load_state_dict``) the state
        dict must also be of this architecture: no tensor the backbone
        lacks, none of another shape, no block missing beside blocks it
        has (another depth would load without a word from mmengine but its
        generic "do not match"). In a ``Pretrained`` load, where a part is
        normal, what did not fit is one warning line."""
        offered = {k[len(prefix):]: v for k, v in state_dict.items()
                   if k.startswith(prefix)}
        owner = f'the {type(self).__name__} backbone'
        match = check_state_dict_fits(
            self.state_dict(), offered, 0.5, owner=owner, prefix=prefix,
            partial=self._pretrained is not None,
            why='fewer than half is refused, as it would leave the backbone '
            'mostly at random weights.' if self._pretrained is not None else
            'a checkpoint loaded whole must be of this architecture; to load '
            'the part of one that fits (fine-tuning), use model.backbone.'
            'init_cfg=dict(type=\'Pretrained\', checkpoint=..., '
            'prefix=\'backbone.\').')
        unfit = match.unfit_line()
        if self._pretrained is not None and unfit:
            MMLogger.get_current_instance().warning(
                f'{type(self).__name__}: init_cfg Pretrained '
                f'{self._pretrained}: {unfit}')

    def init_weights(self):
        owner = type(self).__name__
        cfgs = self.init_cfg if isinstance(self.init_cfg, list) else [
            self.init_cfg]
        pretrained = [c for c in cfgs
                      if isinstance(c, dict) and c.get('type') == 'Pretrained']
        for cfg in pretrained:
            path = cfg.get('checkpoint') or ''
            if '://' not in path and not osp.isfile(path):
                raise FileNotFoundError(
                    f'{owner}: init_cfg asks for the pretrained checkpoint '
                    f'{path!r}, which does not exist. docs/model_zoo.md '
                    f'("Weights") says where the authors publish ImageNet '
                    f'weights and how to convert them to that name; or point '
                    f'model.backbone.init_cfg.checkpoint at a trained one, or '
                    f'start from random weights with --cfg-options '
                    f'model.backbone.init_cfg=None')
            try:  # named before loading; by URL, the downloaded copy
                check_checkpoint(path, state_dict=True)
            except CheckpointError as e:
                raise type(e)(f'{owner}: init_cfg Pretrained {e}',
                              e.what) from None
        if not self._is_init:
            # The transformer init first, a checkpoint on top: what the
            # checkpoint lacks (new PEGs) keeps this init, not PyTorch's.
            self._default_init()
        # what _check_checkpoint_fits reads: a partial load is normal here
        self._pretrained = ', '.join(repr(c['checkpoint'])
                                     for c in pretrained) or None
        try:
            with weights_only_loads():
                super().init_weights()
        except CheckpointMismatchError as e:
            where = ', '.join(repr(c['checkpoint']) for c in pretrained)
            raise CheckpointMismatchError(
                f'{owner}: init_cfg Pretrained {where}: {e}') from None
        except AssertionError:  # mmengine's: a prefix that no key has
            for cfg in [c for c in pretrained if c.get('prefix')]:
                keys = checkpoint_state_dict(cfg['checkpoint'])
                if not any(k.startswith(cfg['prefix']) for k in keys):
                    raise self._prefix_not_found(cfg, keys) from None
            raise
        finally:
            self._pretrained = None

    def _prefix_not_found(self, cfg, keys) -> CheckpointMismatchError:
        match = KeyMatch(self.state_dict(), keys)
        if detect_family(keys) == self.checkpoint_family or len(
                match.matched) * 2 >= match.total:
            hint = ('its keys are the backbone\'s own, or those of an '
                    'official checkpoint it converts: leave prefix out')
        else:
            hint = '; or '.join(match.likely_causes()) or USUAL_CAUSES
        return CheckpointMismatchError(
            f'{type(self).__name__}: init_cfg Pretrained '
            f'{cfg["checkpoint"]!r}: no key of the checkpoint starts with '
            f'prefix={cfg["prefix"]!r} (it has {len(keys)} tensors, e.g. '
            f'{", ".join(list(keys)[:3])}). Likely: {hint}. Change '
            f'model.backbone.init_cfg.prefix.')

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

    # -- PEGs -------------------------------------------------------------

    def _build_pegs(self, positions, embed_dims: int,
                    num_extra_tokens: int = 0) -> ModuleDict:
        """A PEG per position, keyed as written in the config, so that
        checkpoints read ``pegs.-1.proj.0.weight`` (before the first
        block) or ``pegs.0...`` (after block 0)."""
        pegs = ModuleDict({
            str(p): ConditionalPositionEncoding(
                embed_dims, embed_dims, num_extra_tokens=num_extra_tokens,
                **self.peg_cfg)
            for p in positions
        })
        for peg in pegs.values():
            if peg.padding < peg.kernel_size // 2 and not self.pegs_may_shrink:
                raise ValueError(
                    f'{type(self).__name__}: peg_cfg padding={peg.padding} '
                    f'shrinks the token map (kernel_size {peg.kernel_size} '
                    f'keeps it with padding {peg.kernel_size // 2}), but '
                    f'{type(self).__name__} needs a fixed map size; leave '
                    f'padding out of peg_cfg (or use CPVT)')
        return pegs

    def _find_min_input_size(self):
        """Set ``min_input_size``, the smallest input side (px) at which
        every PEG takes the map it gets (map sides grow with the input),
        and the reason given for a smaller input. ``map_strides`` are those
        of each stage's patch embedding or merging (padding bottom/right)."""
        stages = [self.pegs] if isinstance(self.pegs, ModuleDict) else \
            self.pegs

        def short_peg(side):  # the first PEG whose map is too small, if any
            for stride, pegs in zip(self.map_strides, stages):
                side = -(-side // stride)
                for peg in pegs.values():
                    if side < peg.min_map_size:
                        return peg
                    side = peg.out_hw_shape((side, side))[0]

        size = next((s for s in range(1, 1 << 16) if not short_peg(s)),
                    1 << 16)
        self.min_input_size = size
        self._too_small = 'an image needs at least one pixel a side'
        if size > 1:
            peg = short_peg(size - 1)
            name = next(n for n, m in self.named_modules() if m is peg)
            m = peg.min_map_size
            self._too_small = (
                f'{name} ({peg.extra_repr()}) needs a token map of at least '
                f'{m}x{m}, which inputs of {size}x{size} px or more give; use '
                f'larger inputs, or change kernel_size, padding or '
                f'padding_mode in model.backbone.peg_cfg')

    # -- forward ------------------------------------------------------------

    def _check_input(self, x: torch.Tensor):
        """Refuse an input ``forward`` cannot take, before any layer runs,
        in one branch of comparisons that torch.compile specialises away."""
        if not isinstance(x, torch.Tensor) or x.dim() != 4 or x.shape[
                1] != self.in_channels or min(
                    x.shape[2], x.shape[3]) < self.min_input_size or (
                        x.dtype != next(self.parameters()).dtype and not (
                            x.is_floating_point() and
                            torch.is_autocast_enabled(x.device.type))):
            raise self._bad_input(x)

    def _bad_input(self, x) -> Exception:
        owner, dtype = type(self).__name__, next(self.parameters()).dtype
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
        if x.dtype != dtype and not torch.is_autocast_enabled(x.device.type):
            return TypeError(
                f'{owner} has {dtype} weights, got a {x.dtype} input; convert '
                f'the input (x.to({dtype})) or the model (model.to('
                f'{x.dtype})), or run under torch.autocast')
        return ValueError(f'{owner}: a {shape[2]}x{shape[3]} input is too '
                          f'small: {self._too_small}')

    def _run_block(self, block, x, *args):
        """``block(x, *args)``, checkpointed with ``with_cp`` in training."""
        if self.with_cp and self.training and x.requires_grad:
            return cp.checkpoint(block, x, *args, use_reentrant=False)
        return block(x, *args)

    def _run_stage(self, blocks, pegs, x, hw_shape):
        """``blocks`` on the tokens ``x``, with the PEG of position ``j``
        after block ``j`` (``BEFORE_FIRST_BLOCK``: before block 0)."""
        if str(BEFORE_FIRST_BLOCK) in pegs:
            x = pegs[str(BEFORE_FIRST_BLOCK)](x, hw_shape)
        for j, block in enumerate(blocks):
            x = self._run_block(block, x, hw_shape)
            if str(j) in pegs:
                x = pegs[str(j)](x, hw_shape)
        return x

    # -- freezing -----------------------------------------------------------

    def train(self, mode: bool = True):
        super().train(mode)
        for m in self._frozen_modules():  # each backbone's frozen_stages
            m.requires_grad_(False)
            if isinstance(m, nn.Module):
                m.eval()
        if mode and self.norm_eval:
            for m in self.modules():
                if isinstance(m, _BatchNorm):
                    m.eval()
        return self
