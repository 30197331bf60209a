"""The demo's PEG detector and its learned-PE twin differ only in the
backbone's position encoding: same recipe, data, seed and every other
module."""
import os.path as osp

import torch
from mmengine.config import Config

from tests.utils import ROOT

PEG = osp.join(ROOT, 'configs', 'demo', 'retinanet_pvt-t-peg_demo_coco.py')
TWIN = osp.join(ROOT, 'configs', 'demo',
                'retinanet_pvt-t-learned-pe_demo_coco.py')
# the backbone arguments that choose the position encoding
PE_KEYS = {'peg_positions', 'pos_embed', 'img_size'}


def _without_pe(cfg):
    d = cfg.to_dict()
    d['model']['backbone'] = {
        k: v for k, v in d['model']['backbone'].items() if k not in PE_KEYS}
    return d


def test_twin_configs_differ_only_in_the_position_encoding():
    peg, twin = Config.fromfile(PEG), Config.fromfile(TWIN)
    assert _without_pe(peg) == _without_pe(twin)
    assert peg.model.backbone.get('pos_embed', 'none') == 'none'
    assert twin.model.backbone.pos_embed == 'learned'
    # the table is made for the training size
    assert tuple(twin.model.backbone.img_size) == tuple(peg.scale)


def test_twin_models_differ_only_in_pegs_and_tables():
    import mmcpvt  # noqa: F401
    from mmdet.registry import MODELS
    from mmengine.registry import init_default_scope
    init_default_scope('mmdet')
    params = {}
    for name, path in (('peg', PEG), ('twin', TWIN)):
        torch.manual_seed(0)
        model = MODELS.build(Config.fromfile(path).model)
        params[name] = {k: v.shape for k, v in model.named_parameters()}
    peg_only = set(params['peg']) - set(params['twin'])
    twin_only = set(params['twin']) - set(params['peg'])
    assert peg_only and all(k.startswith('backbone.pegs.') for k in peg_only)
    assert twin_only and all(
        k.startswith('backbone.pos_embeds.') for k in twin_only)
    shared = set(params['peg']) & set(params['twin'])
    assert all(params['peg'][k] == params['twin'][k] for k in shared)
    # stage 1 of PVT-T at 192 px: a 48 x 48 table of 64 channels
    assert params['twin']['backbone.pos_embeds.0.pos_embed'] == (1, 48 * 48,
                                                                  64)
