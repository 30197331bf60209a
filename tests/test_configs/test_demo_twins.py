"""Each demo model with PEGs and its learned-PE twin (the detector, the
classifier) differ only in the backbone's position encoding: same recipe,
data, seed and every other module."""
import importlib
import os.path as osp

import pytest
import torch

from tests.utils import ROOT, load_config

DEMO = osp.join(ROOT, 'configs', 'demo')
# config with PEGs, its learned-PE twin, default scope, the backbone
# arguments that choose the encoding, the config variable the table is made
# for, the prefix of the table's parameters, and one of them with its shape
TWINS = {
    'detector': (
        'retinanet_pvt-t-peg_demo_coco.py',
        'retinanet_pvt-t-learned-pe_demo_coco.py', 'mmdet',
        {'peg_positions', 'pos_embed', 'img_size'}, 'scale',
        'backbone.pos_embeds.',
        # stage 1 of PVT-T at 192 px: a 48 x 48 table of 64 channels
        ('backbone.pos_embeds.0.pos_embed', (1, 48 * 48, 64))),
    'classifier': (
        'cpvt-tiny-gap_demo_imagenet.py',
        'cpvt-tiny-learned-pe_demo_imagenet.py', 'mmpretrain',
        {'peg_positions', 'pos_embed'}, 'img_size', 'backbone.pos_embed.',
        # 64 px in 8 px patches: 8 x 8 tokens of 96 channels, no class
        # token (GAP)
        ('backbone.pos_embed.pos_embed', (1, 8 * 8, 96))),
}


def _pair(size):
    return tuple(size) if isinstance(size, (list, tuple)) else (size, size)


def _without_pe(cfg, keys):
    d = cfg.to_dict()
    d['model']['backbone'] = {
        k: v for k, v in d['model']['backbone'].items() if k not in keys}
    return d


@pytest.mark.parametrize('name', TWINS)
def test_twins_differ_only_in_the_position_encoding(name):
    """The configs differ only in the backbone's encoding arguments; the
    models only in the PEGs and the tables."""
    import mmcpvt  # noqa: F401
    from mmengine.registry import init_default_scope
    *paths, scope, pe_keys, train_size, table, (param, shape) = TWINS[name]
    peg, twin = (load_config(osp.join(DEMO, p)) for p in paths)
    assert _without_pe(peg, pe_keys) == _without_pe(twin, pe_keys)
    assert peg.model.backbone.get('pos_embed', 'none') == 'none'
    assert twin.model.backbone.pos_embed == 'learned'
    assert not any(twin.model.backbone.peg_positions)  # () or ((),) * 4
    assert peg.default_scope == twin.default_scope == scope
    # the table is made for the training size
    assert _pair(twin.model.backbone.img_size) == _pair(peg[train_size])

    registry = importlib.import_module(f'{scope}.registry').MODELS
    init_default_scope(scope)
    params = []
    for cfg in (peg, twin):
        torch.manual_seed(0)
        model = registry.build(cfg.model)
        params.append({k: v.shape for k, v in model.named_parameters()})
    peg, twin = params
    peg_only, twin_only = set(peg) - set(twin), set(twin) - set(peg)
    assert peg_only and all(k.startswith('backbone.pegs.') for k in peg_only)
    assert twin_only and all(k.startswith(table) for k in twin_only)
    assert all(peg[k] == twin[k] for k in set(peg) & set(twin))
    assert twin[param] == shape
