"""What every mmcpvt backbone shares: initialisation, freezing, norm_eval."""
import math
import os.path as osp
from typing import Optional

import torch.nn as nn
import torch.utils.checkpoint as cp
from mmengine.logging import MMLogger
from mmengine.model import BaseModule
from mmengine.model.weight_init import trunc_normal_
from torch.nn.modules.batchnorm import _BatchNorm

from mmcpvt.utils.convert import CONVERTERS, detect_family, unwrap

# Parameters initialised like a Linear weight (truncated normal, std .02).
TRUNC_NORMAL_PARAMS = ('cls_token', 'pos_embed', 'relative_position_bias_table')


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

    Subclasses implement ``_freeze_stages``; ``norm_eval`` (if set) keeps
    BatchNorm layers in eval mode during training.
    """
    norm_eval = False
    checkpoint_family: Optional[str] = None  # see mmcpvt.utils.convert

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

    def _run_stage(self, blocks, pegs, x, hw_shape):
        """Run ``blocks`` on the tokens ``x``, with a PEG after block ``j``
        where ``pegs`` has the key ``str(j)`` ('-1': before the first)."""
        if '-1' in pegs:
            x = pegs['-1'](x, hw_shape, inplace=True)
        for j, block in enumerate(blocks):
            if self.with_cp and self.training and x.requires_grad:
                x = cp.checkpoint(block, x, hw_shape, use_reentrant=False)
            else:
                x = block(x, hw_shape)
            if str(j) in pegs:
                x = pegs[str(j)](x, hw_shape, inplace=True)
        return x

    def _freeze_stages(self):
        """Put frozen parts in eval mode without gradients."""

    def train(self, mode: bool = True):
        super().train(mode)
        self._freeze_stages()
        if mode and self.norm_eval:
            for m in self.modules():
                if isinstance(m, _BatchNorm):
                    m.eval()
        return self
