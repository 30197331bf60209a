import pytest
import torch
import torch.nn.functional as F

from mmcpvt.models.backbones import CPVT
from tests.utils import n_params

TINY = dict(embed_dims=32, num_layers=4, num_heads=2, feedforward_channels=64)


def with_linear_head(backbone, num_classes=1000):
    return n_params(backbone) + backbone.embed_dims * num_classes + num_classes


@pytest.mark.parametrize('arch, published', [
    ('tiny', 5_717_416),
    ('small', 22_050_664),
    ('base', 86_567_656),
])
def test_deit_parameter_counts_are_the_published_ones(arch, published):
    deit = CPVT(arch, pos_embed='learned', peg_positions=())
    assert with_linear_head(deit) == published


@pytest.mark.parametrize('arch, C', [('tiny', 192), ('small', 384),
                                     ('base', 768)])
def test_cpvt_parameter_counts_follow_the_paper_arithmetic(arch, C):
    deit = with_linear_head(CPVT(arch, pos_embed='learned', peg_positions=()))
    table = (14 * 14 + 1) * C  # DeiT's position table, class slot included
    peg = 9 * C + C  # one 3x3 depth-wise conv + bias
    cpvt = with_linear_head(CPVT(arch))
    assert cpvt == deit - table + peg
    dagger = with_linear_head(CPVT(arch, peg_positions=(0, 1, 2, 3, 4)))
    assert dagger == deit - table + 5 * peg
    gap = with_linear_head(
        CPVT(arch, peg_positions=(0, 1, 2, 3, 4), out_type='avg_featmap'))
    assert gap == dagger - C  # CPVT-GAP has no class token
    if arch == 'tiny':  # the paper: "1,728 parameters", "35,904 fewer"
        assert 9 * C == 1728 and 14 * 14 * C - 9 * C == 35904


@pytest.mark.parametrize('out_type', ['cls_token', 'avg_featmap', 'featmap'])
def test_any_input_size_in_one_model(out_type):
    model = CPVT('tiny', peg_positions=(0, 1, 2, 3, 4), out_type=out_type)
    model.eval()
    with torch.no_grad():
        for h, w in [(160, 160), (224, 224), (384, 384), (448, 448),
                     (512, 512), (225, 301)]:
            out, = model(torch.randn(1, 3, h, w))
            if out_type == 'featmap':
                # padded to a multiple of the patch size
                assert out.shape == (1, 192, -(-h // 16), -(-w // 16))
            else:
                assert out.shape == (1, 192)
            assert torch.isfinite(out).all()


def test_learned_table_is_resized_bicubically():
    model = CPVT(TINY, pos_embed='learned', peg_positions=(), img_size=64)
    pe = model.pos_embed
    assert pe.resized((4, 4)) is pe.pos_embed
    resized = pe.resized((6, 5))
    assert resized.shape == (1, 1 + 30, 32)
    assert torch.equal(resized[:, 0], pe.pos_embed[:, 0])
    grid = pe.pos_embed[:, 1:].reshape(1, 4, 4, 32).permute(0, 3, 1, 2)
    ref = F.interpolate(grid, size=(6, 5), mode='bicubic',
                        align_corners=False)
    torch.testing.assert_close(resized[:, 1:],
                               ref.flatten(2).transpose(1, 2))
    assert model(torch.randn(1, 3, 96, 80))[0].shape == (1, 32)


def test_sincos2d_has_no_parameters_and_depends_on_position():
    model = CPVT(TINY, pos_embed='sincos2d', peg_positions=())
    none = CPVT(TINY, pos_embed='none', peg_positions=())
    assert n_params(model) == n_params(none)
    x = torch.zeros(1, 1 + 12, 32)
    out = model.pos_embed(x, (3, 4))
    assert torch.equal(out[:, 0], x[:, 0])  # class token: no encoding
    assert len({tuple(r.tolist()) for r in out[0, 1:]}) == 12


def _call_order(model, x):
    order = []
    for name, m in list(model.layers.named_children()) + [
            ('peg' + k, v) for k, v in model.pegs.items()
    ]:
        m.register_forward_hook(lambda *_, n=name: order.append(n))
    model(x)
    return order


def test_peg_positions_place_pegs_before_and_after_encoders():
    model = CPVT(TINY, peg_positions=(-1, 0, 2))
    order = _call_order(model, torch.randn(1, 3, 64, 64))
    assert order == ['peg-1', '0', 'peg0', '1', '2', 'peg2', '3']
    assert list(CPVT(TINY, peg_positions=()).pegs) == []
    assert list(CPVT(TINY, peg_positions=3).pegs) == ['3']


@pytest.mark.parametrize('kwargs, match', [
    (dict(peg_positions=(4, )), r'-1 .* to 3'),
    (dict(peg_positions=(-2, )), 'peg_positions'),
    (dict(out_type='gap'), "out_type='gap'.*'avg_featmap'"),
    (dict(pos_embed='relative'), 'pos_embed'),
    (dict(out_indices=(7, )), 'out_indices'),
    (dict(out_type='cls_token', with_cls_token=False), 'with_cls_token'),
])
def test_bad_arguments_are_explained(kwargs, match):
    with pytest.raises(ValueError, match=match):
        CPVT(TINY, **kwargs)


@pytest.mark.parametrize('arch, match', [
    ('huge', 'unknown arch'),
    (dict(embed_dims=8), 'lacks the keys'),
])
def test_bad_arch_is_explained(arch, match):
    with pytest.raises(ValueError, match=match):
        CPVT(arch)


def test_frozen_stages_freeze_embedding_encoders_and_their_pegs():
    model = CPVT(TINY, peg_positions=(0, 1, 2), frozen_stages=2,
                 pos_embed='learned')
    model.train()
    frozen = [model.patch_embed, model.pos_embed, model.layers[0],
              model.layers[1], model.pegs['0'], model.pegs['1']]
    for m in frozen:
        assert all(not p.requires_grad for p in m.parameters())
        assert not m.training
    assert not model.cls_token.requires_grad
    for m in [model.layers[2], model.pegs['2'], model.norm]:
        assert all(p.requires_grad for p in m.parameters())
        assert m.training


def test_multi_scale_featmaps_for_dense_tasks():
    model = CPVT(TINY, out_type='featmap', out_indices=(1, 3))
    outs = model(torch.randn(2, 3, 100, 70))
    assert [o.shape for o in outs] == [(2, 32, 7, 5)] * 2
