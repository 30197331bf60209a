"""2-D rotary embeddings (timm's) in the one Attention: relative in both
axes on any map, the class token unrotated, one table per block, and the
option's guarantees on CPVT (sizes, compile, checkpoints: also
tests/test_models/test_backbones/test_generic.py; ONNX:
tests/test_tools/test_onnx_export.py)."""
import subprocess
import sys

import pytest
import torch

from mmcpvt.models.backbones import CPVT, CPVTQKOnly
from mmcpvt.models.layers import (ROPE_TYPES, RotaryPositionEmbedding2d,
                                  apply_rope)
from tests.utils import assert_compiles_at_two_sizes

TINY = dict(embed_dims=32, num_layers=3, num_heads=2, feedforward_channels=64)


def logits(rope_type, hw, block=0):
    """Attention logits (heads, 1 + H*W, 1 + H*W) of one query and one key
    vector, the same at every token, after a class token."""
    torch.manual_seed(0)
    rope = RotaryPositionEmbedding2d(32, 2, 3, rope_type)(hw)[block]
    n = 1 + hw[0] * hw[1]
    q = torch.randn(1, 2, 1, 16).expand(1, 2, n, 16)
    k = torch.randn(1, 2, 1, 16).expand(1, 2, n, 16)
    return (apply_rope(q, rope) @ apply_rope(k, rope).transpose(-1, -2))[0]


@pytest.mark.parametrize('rope_type', ROPE_TYPES)
@pytest.mark.parametrize('hw', [(3, 5), (6, 2)])
def test_logits_depend_on_the_offset_in_both_axes(rope_type, hw):
    """Between patch tokens, the logit is a function of the (dy, dx)
    offset alone, on a map of any shape: the table follows the row-major
    token order; offsets along either axis and either way are told apart."""
    H, W = hw
    grid = logits(rope_type, hw)[:, 1:, 1:].reshape(2, H, W, H, W)
    by_offset = {}
    for y in range(H):
        for x in range(W):
            for y2 in range(H):
                for x2 in range(W):
                    by_offset.setdefault((y2 - y, x2 - x), []).append(
                        grid[:, y, x, y2, x2])
    for offset, values in by_offset.items():
        for v in values[1:]:
            torch.testing.assert_close(v, values[0], msg=str(offset))
    # (0, 1), (1, 0), (0, -1), (-1, 0) and (0, 0) differ from each other
    firsts = [by_offset[o][0] for o in ((0, 1), (1, 0), (0, -1), (-1, 0),
                                        (0, 0))]
    assert all((a - b).abs().max() > 1e-3 for i, a in enumerate(firsts)
               for b in firsts[i + 1:])


@pytest.mark.parametrize('rope_type', ROPE_TYPES)
def test_class_token_is_not_rotated(rope_type):
    torch.manual_seed(0)
    rope = RotaryPositionEmbedding2d(32, 2, 3, rope_type)((4, 3))[2]
    x = torch.randn(2, 2, 1 + 12, 16)
    out = apply_rope(x, rope)
    assert torch.equal(out[:, :, 0], x[:, :, 0])
    assert not torch.allclose(out[:, :, 1:], x[:, :, 1:])
    # a rotation: every pair of channels keeps its length
    pairs = lambda t: t.unflatten(-1, (8, 2)).norm(dim=-1)  # noqa: E731
    torch.testing.assert_close(pairs(out), pairs(x))


def test_tables_per_block_only_with_mixed():
    """RoPE-Mixed learns frequencies per block and head; the others share
    one table."""
    hw = (4, 5)
    mixed = RotaryPositionEmbedding2d(32, 2, 3, 'mixed')
    assert mixed(hw).shape == (3, 2, 20, 32)
    assert not torch.allclose(mixed(hw)[0], mixed(hw)[1])
    assert [n for n, _ in mixed.named_parameters()] == ['embed.freqs']
    for rope_type in ('axial', 'dinov3'):
        rope = RotaryPositionEmbedding2d(32, 2, 3, rope_type)
        assert rope(hw).shape == (3, 20, 32)
        assert torch.equal(rope(hw)[0], rope(hw)[2])
        assert not list(rope.parameters()) and not rope.state_dict()


def test_dinov3_coordinates_span_the_map_at_any_size():
    """DINOv3's coordinates are normalised to the map: token (0, 0) of a
    4x4 map and token (1, 1) of a 12x12 one, both centred 1/8 of the side
    from the corner, get the same rotation; the axial ones count tokens."""
    for rope_type, same in (('dinov3', True), ('axial', False)):
        rope = RotaryPositionEmbedding2d(32, 2, 1, rope_type)
        small, large = rope((4, 4))[0], rope((12, 12))[0]
        assert torch.allclose(small[0], large[13]) is same, rope_type


@pytest.mark.parametrize('rope_type', ROPE_TYPES)
def test_cpvt_with_rope_at_any_size_and_compiled(rope_type):
    """Odd sizes, a 1x1 map, with a PEG and a class token; the whole
    backbone in one graph at two sizes."""
    torch.manual_seed(0)
    model = CPVT(TINY, rope_cfg=dict(type=rope_type), out_type='featmap',
                 with_cls_token=True).eval()
    for size, hw in (((45, 83), (3, 6)), ((16, 16), (1, 1)),
                     ((64, 64), (4, 4))):
        assert model(torch.randn(2, 3, *size))[0].shape == (2, 32, *hw)
    assert_compiles_at_two_sizes(model)


def test_rope_changes_the_output_and_mixed_frequencies_learn():
    torch.manual_seed(0)
    plain = CPVT(TINY, peg_positions=())
    torch.manual_seed(0)
    rope = CPVT(TINY, peg_positions=(), rope_cfg=dict(type='mixed'))
    rope.train()
    x = torch.randn(2, 3, 48, 48)
    assert not torch.allclose(plain(x)[0], rope(x)[0])
    rope(x)[0].square().sum().backward()
    assert rope.rope.embed.freqs.grad.abs().sum() > 0
    rope.frozen_stages = 3
    rope.train()  # all encoders frozen: the frequencies too
    assert not rope.rope.embed.freqs.requires_grad


def test_bad_rope_configs_are_explained():
    with pytest.raises(ValueError, match=r"one of \('axial', 'mixed', "
                       r"'dinov3'\), got 'sincos'"):
        CPVT(TINY, rope_cfg=dict(type='sincos'))
    with pytest.raises(ValueError, match='multiple of 4'):
        CPVT(dict(TINY, embed_dims=24, num_heads=4),
             rope_cfg=dict(type='axial'))
    with pytest.raises(ValueError, match='keep the map size'):
        CPVT(TINY, rope_cfg=dict(type='axial'), peg_cfg=dict(padding=0))
    with pytest.raises(ValueError, match='CPVTQKOnly takes no rope_cfg'):
        CPVTQKOnly(TINY, rope_cfg=dict(type='axial'))


def test_timm_is_imported_only_for_a_rope_model():
    code = ('import sys, mmcpvt; from mmcpvt.models.backbones import CPVT; '
            'CPVT({!r}); assert "timm" not in sys.modules; '
            'CPVT({!r}, rope_cfg=dict(type="axial")); '
            'assert "timm" in sys.modules').format(TINY, TINY)
    proc = subprocess.run([sys.executable, '-c', code], capture_output=True,
                          text=True)
    assert proc.returncode == 0, proc.stderr
