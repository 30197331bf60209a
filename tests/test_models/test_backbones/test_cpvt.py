import pytest
import torch
import torch.nn.functional as F

from mmcpvt.models.backbones import CPVT
from mmcpvt.models.layers import LearnedPositionEmbedding
from tests.utils import assert_compiles_at_two_sizes, n_params

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


def test_learned_table_is_resized_in_a_trace():
    """Why the table is resized by our code, not by mmpretrain's
    resize_pos_embed: that returns the table as it is at its own size, so a
    trace there (as an ONNX export makes) adds the 4x4 table at any size."""
    from mmpretrain.models.utils import resize_pos_embed
    pe = LearnedPositionEmbedding(32, (4, 4), 0).requires_grad_(False)

    def ours(feat):  # the tokens of a map whose H and W are traced
        return pe(feat.flatten(2).transpose(1, 2), feat.shape[2:])

    def theirs(feat):
        return feat.flatten(2).transpose(1, 2) + resize_pos_embed(
            pe.pos_embed, (4, 4), feat.shape[2:], num_extra_tokens=0)

    x, other = torch.randn(1, 32, 4, 4), torch.randn(1, 32, 5, 7)
    with torch.no_grad():
        traced = torch.jit.trace(ours, (x, ), check_trace=False)
        torch.testing.assert_close(traced(other), ours(other))
        with pytest.raises(RuntimeError, match=r'size of tensor a \(35\) '
                           r'must match the size of tensor b \(16\)'):
            torch.jit.trace(theirs, (x, ), check_trace=False)(other)


def test_sincos2d_has_no_parameters_and_depends_on_position():
    model = CPVT(TINY, pos_embed='sincos2d', peg_positions=())
    none = CPVT(TINY, pos_embed='none', peg_positions=())
    assert n_params(model) == n_params(none)
    x = torch.zeros(1, 1 + 12, 32)
    out = model.pos_embed(x, (3, 4))
    assert torch.equal(out[:, 0], x[:, 0])  # class token: no encoding
    assert len({tuple(r.tolist()) for r in out[0, 1:]}) == 12


def test_pegs_and_tables_follow_their_encoders_in_order():
    """PEGs and tables at -1 (before the first encoder) and after encoders
    0 and 2; a table before the PEG at the same place."""
    model = CPVT(TINY, pos_embed='learned', pos_embed_positions=(-1, 0, 2),
                 peg_positions=(-1, 0, 2), img_size=64)
    order = []
    hooks = [('pe-1', model.pos_embed), *model.layers.named_children()]
    hooks += [('pe' + k, v) for k, v in model.pos_embeds.items()]
    hooks += [('peg' + k, v) for k, v in model.pegs.items()]
    for name, m in hooks:
        m.register_forward_hook(lambda *_, n=name: order.append(n))
    model(torch.randn(1, 3, 64, 80))  # resized with the input: 4x5 tokens
    assert order == ['pe-1', 'peg-1', '0', 'pe0', 'peg0', '1', '2', 'pe2',
                     'peg2', '3']
    assert list(CPVT(TINY, peg_positions=()).pegs) == []
    assert list(CPVT(TINY, peg_positions=3).pegs) == ['3']


def test_frozen_stages_freeze_embedding_encoders_pegs_and_tables():
    model = CPVT(TINY, peg_positions=(0, 1, 2), frozen_stages=2,
                 pos_embed='learned', pos_embed_positions=(-1, 0, 2))
    model.train()
    frozen = [model.patch_embed, model.pos_embed, model.layers[0],
              model.layers[1], model.pegs['0'], model.pegs['1'],
              model.pos_embeds['0']]
    for m in frozen:
        assert all(not p.requires_grad for p in m.parameters())
        assert not m.training
    assert not model.cls_token.requires_grad
    for m in [model.layers[2], model.pegs['2'], model.pos_embeds['2'],
              model.norm]:
        assert all(p.requires_grad for p in m.parameters())
        assert m.training


def test_multi_scale_featmaps_for_dense_tasks():
    model = CPVT(TINY, out_type='featmap', out_indices=(1, 3))
    outs = model(torch.randn(2, 3, 100, 70))
    assert [o.shape for o in outs] == [(2, 32, 7, 5)] * 2


def test_learned_tables_in_six_blocks():
    """The paper's "LE not only at the beginning but also in the next 5
    layers": DeiT's table keeps its checkpoint key, five more follow
    encoders 0-4."""
    deit = CPVT('tiny', pos_embed='learned', peg_positions=())
    six = CPVT('tiny', pos_embed='learned', peg_positions=(),
               pos_embed_positions=(-1, 0, 1, 2, 3, 4))
    keys = [k for k in six.state_dict() if 'pos_embed' in k]
    assert keys == ['pos_embed.pos_embed'] + [
        f'pos_embeds.{i}.pos_embed' for i in range(5)]
    assert [k for k in deit.state_dict() if 'pos_embed' in k] == [
        'pos_embed.pos_embed']
    assert n_params(six) - n_params(deit) == 5 * 197 * 192
    # a DeiT checkpoint loads into the first table
    missing, unexpected = six.load_state_dict(deit.state_dict(),
                                              strict=False)
    assert not unexpected and sorted(missing) == keys[1:]
    assert torch.equal(six.pos_embed.pos_embed, deit.pos_embed.pos_embed)


def test_unpadded_peg_shrinks_the_map_for_what_follows():
    """padding=0: the map after each PEG is k-1 smaller per axis; the
    encoders, the tables and the featmaps after it take that size."""
    model = CPVT(TINY, out_type='featmap', out_indices=(0, 1, 3),
                 peg_positions=(-1, 1), peg_cfg=dict(padding=0),
                 pos_embed='learned', pos_embed_positions=(-1, 2),
                 img_size=128)
    # 8x8 tokens at img_size, 6x6 after the PEG at -1, 4x4 after the one at 1
    assert model.pos_embed.grid_size == (8, 8)
    assert model.pos_embeds['2'].grid_size == (4, 4)
    outs = model(torch.randn(2, 3, 160, 112))  # 10x7 tokens
    assert [o.shape for o in outs] == [(2, 32, 8, 5), (2, 32, 6, 3),
                                       (2, 32, 6, 3)]
    # with a class token: the class token stays, the map shrinks
    cls = CPVT(TINY, peg_cfg=dict(padding=0), rpe_cfg=dict(clip_distance=2))
    assert cls(torch.randn(1, 3, 64, 64))[0].shape == (1, 32)
    with pytest.raises(RuntimeError, match=r'\(1 x 1\)\. Kernel size: '
                       r"\(3 x 3\)\. Kernel size can't be greater"):
        cls(torch.randn(1, 3, 16, 16))  # 1x1 tokens


def test_relative_position_encoding_in_every_encoder():
    model = CPVT(TINY, peg_positions=(), rpe_cfg=dict(clip_distance=8))
    tables = [layer.attn.rpe.relative_key_table for layer in model.layers]
    assert len(tables) == 4 and len({t.data_ptr() for t in tables}) == 4
    assert all(t.shape == (17**2 + 1, 16) for t in tables)
    assert CPVT(TINY).layers[0].attn.rpe is None


def test_new_options_compile_in_one_graph():
    """The map size threaded through unpadded PEGs, tables at several
    positions and the relative encoding trace in one graph."""
    torch.manual_seed(0)
    model = CPVT(TINY, out_type='featmap', out_indices=(0, -1),
                 pos_embed='learned', pos_embed_positions=(-1, 0, 1),
                 peg_cfg=dict(padding=0), rpe_cfg=dict(clip_distance=2),
                 img_size=64).eval()
    assert_compiles_at_two_sizes(model)
