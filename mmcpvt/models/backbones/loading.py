"""How a backbone's weights are made and loaded: the transformer init, and a
``Pretrained`` init_cfg or a whole state dict loaded on top, official and
timm checkpoints converted at load time."""
import math
import os.path as osp

import torch.nn as nn
from mmengine.logging import MMLogger
from mmengine.model import BaseModule
from mmengine.model.weight_init import (constant_init, normal_init,
                                        trunc_normal_, trunc_normal_init)
from torch.nn.modules.batchnorm import _BatchNorm

from mmcpvt.utils.checkpoint import (CheckpointError, CheckpointMismatchError,
                                     check_checkpoint,
                                     checkpoint_state_dict, weights_only_loads)
from mmcpvt.utils.convert import CONVERTERS, detect_family, unwrap
from mmcpvt.utils.state_dict import (USUAL_CAUSES, KeyMatch,
                                     check_state_dict_fits)

# Parameters initialised like a Linear weight (truncated normal, std .02).
TRUNC_NORMAL_PARAMS = ('cls_token', 'pos_embed',
                       'relative_position_bias_table', 'relative_key_table')


class CheckpointLoading(BaseModule):
    """``init_cfg=None`` gives the transformer init of DeiT / PVT / Twins
    (truncated normal, std .02, for linear layers, class tokens and tables;
    ones/zeros for norms; fan-out normal for convolutions). A ``Pretrained``
    one loads a checkpoint on top (``weights_only``, whatever its scheme),
    converting official / timm ones of ``checkpoint_family``. What a partial
    load (new PEGs) lacks keeps the transformer init; less than half of the
    tensors is refused."""
    checkpoint_family = None  # see mmcpvt.utils.convert; None: converts none

    def __init__(self, init_cfg=None):
        super().__init__(init_cfg=init_cfg)
        self._pretrained = None  # the checkpoints init_weights is loading
        self._register_load_state_dict_pre_hook(self._convert_official_keys)
        self._register_load_state_dict_pre_hook(self._check_checkpoint_fits)

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
        backbone fewer than half of its tensors (a DeiT into CPVT-Ti: 149 of
        151; another architecture or a wrong prefix: none). Outside a
        ``Pretrained`` init_cfg it must also be of this architecture (no
        tensor it lacks, none of another shape, no block missing beside
        blocks it has); in one, what did not fit is one warning line."""
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
