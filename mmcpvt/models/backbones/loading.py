"""How a backbone's weights are made and loaded: the transformer init, then
``Pretrained`` init_cfg checkpoints on top by
:func:`mmcpvt.utils.state_dict.load_checkpoint`; every state dict a backbone
receives (ours, the runner's ``load_from`` / ``resume``, mmengine's
``load_checkpoint``) is converted and fitted by :meth:`_fit_checkpoint`."""
import math

import torch.nn as nn
from mmengine.logging import MMLogger
from mmengine.model import BaseModule
from mmengine.model.weight_init import (constant_init, normal_init,
                                        trunc_normal_, trunc_normal_init)
from torch.nn.modules.batchnorm import _BatchNorm

from mmcpvt.utils.checkpoint import unwrap
from mmcpvt.utils.convert import CONVERTERS, detect_family
from mmcpvt.utils.state_dict import check_state_dict_fits, load_checkpoint

# Parameters initialised like a Linear weight (truncated normal, std .02).
TRUNC_NORMAL_PARAMS = ('cls_token', 'pos_embed',
                       'relative_position_bias_table', 'relative_key_table')


class CheckpointLoading(BaseModule):
    """``init_cfg=None`` gives the transformer init of DeiT / PVT / Twins
    (truncated normal, std .02, for linear layers, class tokens and tables;
    ones/zeros for norms; fan-out normal for convolutions). A ``Pretrained``
    one loads a checkpoint on top, official / timm ones of
    ``checkpoint_family`` converted. What a partial load (new PEGs) lacks
    keeps the transformer init; less than half of the tensors is refused."""
    checkpoint_family = None  # see mmcpvt.utils.convert; None: converts none

    def __init__(self, init_cfg=None):
        super().__init__(init_cfg=init_cfg)
        self._pretrained = None  # the Pretrained checkpoint being loaded
        # as mmpretrain adapts old checkpoints: at load time, on every path
        self._register_load_state_dict_pre_hook(self._fit_checkpoint)

    def _fit_checkpoint(self, state_dict, prefix, *args):
        """Convert an official / timm checkpoint of ``checkpoint_family``,
        then refuse, before anything is copied, a state dict that gives this
        backbone fewer than half of its tensors (a DeiT into CPVT-Ti: 149 of
        151; another architecture or a wrong prefix: none). Outside a
        ``Pretrained`` init_cfg it must also be of this architecture (no
        tensor it lacks, none of another shape, no block missing beside
        blocks it has); in one, what did not fit is one warning line and
        tensors of another shape keep their init."""
        keys = [k for k in state_dict if k.startswith(prefix)]
        offered = unwrap({k[len(prefix):]: state_dict.pop(k) for k in keys})
        name = type(self).__name__
        if detect_family(offered) == self.checkpoint_family:
            offered, report = CONVERTERS[self.checkpoint_family](
                offered, with_head=False)
            MMLogger.get_current_instance().info(
                f'{name}: converted an official checkpoint at load time\n'
                f'{report.summary()}')
        match = check_state_dict_fits(
            self.state_dict(), offered, 0.5, owner=f'the {name} backbone',
            prefix=prefix, partial=self._pretrained is not None,
            why='fewer than half is refused, as it would leave the backbone '
            'mostly at random weights.' if self._pretrained is not None else
            'a checkpoint loaded whole must be of this architecture; to load '
            'the part of one that fits (fine-tuning), use model.backbone.'
            'init_cfg=dict(type=\'Pretrained\', checkpoint=..., '
            'prefix=\'backbone.\').')
        if self._pretrained is not None and match.unfit_line():
            MMLogger.get_current_instance().warning(
                f'{name}: init_cfg Pretrained {self._pretrained}: '
                f'{match.unfit_line()}')
            for key in match.wrong_shape:
                del offered[key]
        state_dict.update({prefix + k: v for k, v in offered.items()})

    def init_weights(self):
        """The transformer init, mmengine's for the other init_cfg entries,
        then each ``Pretrained`` checkpoint by ``load_checkpoint`` (not
        mmengine's ``PretrainedInit``, which asserts on a prefix no key has
        and loads any file without checking it first)."""
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
        setting = f'{type(self).__name__}: init_cfg Pretrained'
        for cfg in pretrained if first else []:
            self._pretrained = repr(cfg.get('checkpoint'))
            try:
                load_checkpoint(self, cfg.get('checkpoint') or '',
                                cfg.get('prefix'), setting)
            except FileNotFoundError as e:
                raise FileNotFoundError(
                    f'{e}. docs/model_zoo.md ("Weights") says where the '
                    f'authors publish ImageNet weights and how to convert '
                    f'them; or point model.backbone.init_cfg.checkpoint at '
                    f'a trained one, or start from random weights with '
                    f'--cfg-options model.backbone.init_cfg=None') from None
            finally:
                self._pretrained = None

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
