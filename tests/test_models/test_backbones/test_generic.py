"""Generic checks that run over every registered backbone."""
import pytest
import torch

import mmcpvt  # noqa: F401
from mmcpvt.registry import MODELS

# A small configuration per registered backbone. A new backbone without an
# entry here fails `test_every_backbone_is_covered`.
SMALL = {
    'CPVT': [
        dict(arch=dict(embed_dims=32, num_layers=3, num_heads=2,
                       feedforward_channels=64), peg_positions=(0, 1)),
        dict(arch=dict(embed_dims=32, num_layers=3, num_heads=2,
                       feedforward_channels=64), out_type='avg_featmap',
             pos_embed='learned', peg_positions=(-1, ),
             peg_cfg=dict(num_layers=2, norm_cfg=dict(type='BN'),
                          act_cfg=dict(type='ReLU'))),
    ],
    'PVTPEG': [
        dict(arch=dict(embed_dims=[8, 16, 24, 32], num_heads=[1, 2, 3, 4],
                       mlp_ratios=[2, 2, 2, 2], depths=[1, 2, 1, 1],
                       sr_ratios=[8, 4, 2, 1])),
        dict(arch='tiny', out_type='avg_featmap',
             peg_positions=((-1, 1), (), 0, 1), with_cp=True),
        dict(arch=dict(embed_dims=[8, 16, 24, 32], num_heads=[1, 2, 3, 4],
                       mlp_ratios=[2, 2, 2, 2], depths=[1, 1, 1, 1],
                       sr_ratios=[8, 4, 2, 1]), out_type='cls_token',
             pos_embed='learned', peg_positions=((), (), (), ())),
    ],
    'SwinPEG': [
        dict(arch=dict(embed_dims=8, depths=[2, 2, 2, 2],
                       num_heads=[1, 2, 2, 4])),
        dict(arch=dict(embed_dims=8, depths=[2, 2, 3, 1],
                       num_heads=[1, 2, 2, 4]), out_type='avg_featmap',
             peg_positions=(-1, (0, 1), (), 0), with_cp=True),
    ],
}
BACKBONES = [(name, cfg) for name, cfgs in SMALL.items() for cfg in cfgs]
NON_BACKBONES = {'ConditionalPositionEncoding'}


def test_every_backbone_is_covered():
    registered = set(MODELS.module_dict) - NON_BACKBONES
    assert registered == set(SMALL)


@pytest.mark.parametrize('name, cfg', BACKBONES)
def test_forward_backward_reaches_every_parameter(name, cfg):
    model = MODELS.build(dict(type=name, **cfg))
    model.init_weights()
    model.train()
    outs = model(torch.randn(2, 3, 61, 83))
    loss = sum(o.float().mean() for o in outs)
    assert torch.isfinite(loss)
    loss.backward()
    missing = [n for n, p in model.named_parameters()
               if p.requires_grad and (p.grad is None)]
    assert not missing, f'no gradient reaches {missing}'


@pytest.mark.parametrize('name, cfg', BACKBONES)
@pytest.mark.parametrize('scope', ['mmpretrain', 'mmdet', 'mmseg'])
def test_found_from_every_downstream_scope(name, cfg, scope):
    import importlib

    from mmengine.registry import DefaultScope
    registry = importlib.import_module(f'{scope}.registry').MODELS
    with DefaultScope.overwrite_default_scope(scope):
        for type_name in (name, f'mmcpvt.{name}'):
            model = registry.build(dict(type=type_name, **cfg))
            assert type(model) is MODELS.get(name)


@pytest.mark.parametrize('name, cfg', BACKBONES[:1] + BACKBONES[2:3])
def test_pretrained_init_loads_a_classifier_checkpoint(name, cfg, tmp_path):
    src = MODELS.build(dict(type=name, **cfg))
    src.init_weights()
    state = {f'backbone.{k}': v for k, v in src.state_dict().items()}
    state['head.fc.weight'] = torch.zeros(3, 3)
    path = tmp_path / 'cls.pth'
    torch.save({'state_dict': state, 'meta': {}}, path)
    dst = MODELS.build(
        dict(type=name, **cfg,
             init_cfg=dict(type='Pretrained', checkpoint=str(path),
                           prefix='backbone.')))
    dst.init_weights()
    for k, v in src.state_dict().items():
        assert torch.equal(v, dst.state_dict()[k]), k


def test_missing_pretrained_checkpoint_is_explained(tmp_path):
    name, cfg = BACKBONES[0]
    model = MODELS.build(
        dict(type=name, **cfg,
             init_cfg=dict(type='Pretrained',
                           checkpoint=str(tmp_path / 'none.pth'))))
    with pytest.raises(FileNotFoundError, match='init_cfg=None'):
        model.init_weights()


@pytest.mark.parametrize('name, cfg', BACKBONES)
def test_default_init_is_the_transformer_init(name, cfg):
    model = MODELS.build(dict(type=name, **cfg))
    model.init_weights()
    for n, m in model.named_modules():
        if isinstance(m, torch.nn.Linear):
            assert m.weight.std() < 0.05, n  # trunc normal .02, not kaiming
            if m.bias is not None:
                assert not m.bias.any(), n
        if isinstance(m, torch.nn.LayerNorm):
            assert (m.weight == 1).all() and not m.bias.any(), n


@pytest.mark.parametrize('name, cfg', BACKBONES)
def test_inference_without_autograd_gives_the_same_outputs(name, cfg):
    """Without autograd the PEG adds into the tokens and the FFN activates
    in place: same numbers as with autograd (up to rounding: with an
    attention mask, SDPA may pick another kernel when it records), and the
    input is untouched."""
    torch.manual_seed(0)
    model = MODELS.build(dict(type=name, **cfg))
    model.init_weights()
    model.eval()
    x = torch.randn(2, 3, 61, 83)
    x_copy = x.clone()
    ref = model(x)
    with torch.no_grad():
        outs = model(x)
    with torch.inference_mode():
        outs_inf = model(x)
    assert torch.equal(x, x_copy)
    for o, o_inf, r in zip(outs, outs_inf, ref):
        torch.testing.assert_close(o, r.detach())
        torch.testing.assert_close(o_inf, r.detach())
