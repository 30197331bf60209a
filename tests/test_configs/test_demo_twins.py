"""Each demo model with PEGs and its learned-PE twin (the detector, the
classifier) differ only in the backbone's position encoding: same recipe,
data, seed and every other module."""
import importlib
import os.path as osp
from typing import NamedTuple, Tuple

import pytest
import torch
from mmengine.config import Config

from tests.utils import ROOT

DEMO = osp.join(ROOT, 'configs', 'demo')


class Twins(NamedTuple):
    peg: str  # config with PEGs
    twin: str  # its learned-PE twin
    scope: str  # default scope: the registry that builds them
    pe_keys: frozenset  # backbone arguments that choose the encoding
    train_size: str  # the config variable the table is made for
    table: str  # prefix of the learned table's parameters
    table_shape: Tuple[str, tuple]  # one table parameter and its shape


TWINS = {
    'detector': Twins(
        peg='retinanet_pvt-t-peg_demo_coco.py',
        twin='retinanet_pvt-t-learned-pe_demo_coco.py',
        scope='mmdet',
        pe_keys=frozenset({'peg_positions', 'pos_embed', 'img_size'}),
        train_size='scale',
        table='backbone.pos_embeds.',
        # stage 1 of PVT-T at 192 px: a 48 x 48 table of 64 channels
        table_shape=('backbone.pos_embeds.0.pos_embed', (1, 48 * 48, 64))),
    'classifier': Twins(
        peg='cpvt-tiny-gap_demo_imagenet.py',
        twin='cpvt-tiny-learned-pe_demo_imagenet.py',
        scope='mmpretrain',
        pe_keys=frozenset({'peg_positions', 'pos_embed'}),
        train_size='img_size',
        table='backbone.pos_embed.',
        # 64 px in 8 px patches: 8 x 8 tokens of 96 channels, no class
        # token (GAP)
        table_shape=('backbone.pos_embed.pos_embed', (1, 8 * 8, 96))),
}


def _pair(size):
    return tuple(size) if isinstance(size, (list, tuple)) else (size, size)


def _without_pe(cfg, keys):
    d = cfg.to_dict()
    d['model']['backbone'] = {
        k: v for k, v in d['model']['backbone'].items() if k not in keys}
    return d


@pytest.mark.parametrize('name', TWINS)
def test_twin_configs_differ_only_in_the_position_encoding(name):
    t = TWINS[name]
    peg = Config.fromfile(osp.join(DEMO, t.peg))
    twin = Config.fromfile(osp.join(DEMO, t.twin))
    assert _without_pe(peg, t.pe_keys) == _without_pe(twin, t.pe_keys)
    assert peg.model.backbone.get('pos_embed', 'none') == 'none'
    assert twin.model.backbone.pos_embed == 'learned'
    assert not any(twin.model.backbone.peg_positions)  # () or ((),) * 4
    assert peg.default_scope == twin.default_scope == t.scope
    # the table is made for the training size
    assert _pair(twin.model.backbone.img_size) == _pair(peg[t.train_size])


@pytest.mark.parametrize('name', TWINS)
def test_twin_models_differ_only_in_pegs_and_tables(name):
    import mmcpvt  # noqa: F401
    from mmengine.registry import init_default_scope
    t = TWINS[name]
    registry = importlib.import_module(f'{t.scope}.registry').MODELS
    init_default_scope(t.scope)
    params = {}
    for key, path in (('peg', t.peg), ('twin', t.twin)):
        torch.manual_seed(0)
        model = registry.build(Config.fromfile(osp.join(DEMO, path)).model)
        params[key] = {k: v.shape for k, v in model.named_parameters()}
    peg_only = set(params['peg']) - set(params['twin'])
    twin_only = set(params['twin']) - set(params['peg'])
    assert peg_only and all(k.startswith('backbone.pegs.') for k in peg_only)
    assert twin_only and all(k.startswith(t.table) for k in twin_only)
    shared = set(params['peg']) & set(params['twin'])
    assert all(params['peg'][k] == params['twin'][k] for k in shared)
    table, shape = t.table_shape
    assert params['twin'][table] == shape
