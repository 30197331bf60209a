"""What every mmcpvt backbone shares: PEG placement, gradient checkpointing
and freezing, written once (weights: :mod:`.loading`)."""
from abc import abstractmethod

import torch
import torch.nn as nn
import torch.utils.checkpoint as cp
from mmcv.cnn.bricks.transformer import PatchEmbed
from torch.nn.modules.batchnorm import _BatchNorm

from ..checks import (Cfg, Flag, Int, Ints, Rate, Size, StagePositions,
                      check_args, out_indices)
from ..layers import (ConditionalPositionEncoding, PEGs,
                      RelativePositionEncoding2d)
from .loading import CheckpointLoading

# The PEG position "before the first block" in ``peg_positions``.
BEFORE_FIRST_BLOCK = -1


def patch_embed(in_channels: int, embed_dims: int, patch_size: int,
                **kwargs) -> PatchEmbed:
    """A patch embedding that pads the bottom/right to a multiple of the
    patch size, so that any input size works."""
    return PatchEmbed(in_channels=in_channels, embed_dims=embed_dims,
                      conv_type='Conv2d', kernel_size=patch_size,
                      stride=patch_size, padding='corner', **kwargs)


class BaseBackbone(CheckpointLoading):
    """Base of the CPVT / PVTPEG / SwinPEG backbones. A backbone provides:
    its PEGs built by :meth:`build_pegs` and, in ``forward``, the line
    ``x, hw = pegs(j, x, hw)`` after ``x = self.run_block(block, x, hw)``;
    :meth:`frozen_modules`; and ``self.train(self.training)`` last in
    ``__init__``.

    Arguments they share, besides the usual OpenMMLab ones (``in_channels``,
    ``qkv_bias``, ``drop_rate``, ``attn_drop_rate``, ``drop_path_rate``,
    ``norm_cfg``, ``out_indices``, ``norm_eval``, ``with_cp``): PEGs go at
    ``peg_positions`` (-1: before the first block, ``i``: after block ``i``;
    in stages, an entry per stage, ``()`` for none) and take ``peg_cfg``
    (extra :class:`ConditionalPositionEncoding` arguments);
    ``frozen_stages`` (-1: none) freezes the patch embedding and the first
    ``n`` encoders or stages with their PEGs.

    ``init_cfg``: see :class:`CheckpointLoading`.

    Arguments are checked against ``ARGS`` when the backbone is built
    (:mod:`mmcpvt.models.checks`); ``forward`` takes a (B, in_channels, H,
    W) tensor of the weights' floating dtype (any, under autocast), at least
    ``min_input_size`` px a side.
    """
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
        args = check_args(type(self).__name__, values, self.ARGS)
        self.arch_settings = args['arch']
        if 'depths' in self.arch_settings:  # a backbone in stages
            self.num_stages = len(self.arch_settings['depths'])
        for name in set(self.KEPT_ARGS) & set(args):
            setattr(self, name, args[name])

    # -- PEGs -------------------------------------------------------------

    def build_pegs(self, positions, embed_dims: int,
                   num_extra_tokens: int = 0) -> PEGs:
        """The PEGs of one stage, at ``positions``, with ``peg_cfg``."""
        pegs = PEGs(positions, embed_dims, num_extra_tokens=num_extra_tokens,
                    **self.peg_cfg)
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
        stages = [self.pegs] if isinstance(self.pegs, PEGs) else self.pegs

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

    def run_block(self, block, x, *args):
        """``block(x, *args)``, checkpointed with ``with_cp`` in training."""
        if self.with_cp and self.training and x.requires_grad:
            return cp.checkpoint(block, x, *args, use_reentrant=False)
        return block(x, *args)

    # -- freezing -----------------------------------------------------------

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
