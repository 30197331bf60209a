"""The attention maps of mmcpvt.analysis.attention: softmax rows, the
block's own q/k, every kind of block; and their figures."""
import pytest
import torch

import mmcpvt.analysis.attention as vis
from mmcpvt.analysis.attention import attention_maps, default_queries
from mmcpvt.analysis.blocks import block_module
from tests.test_analysis.helpers import PVT_ARCH, SWIN_ARCH, build, images


def test_cpvt_matrix_rows_sum_to_one_and_match_q_k_by_hand():
    model = build(peg_positions=(0, ), out_type='cls_token')
    x = images(2)
    attn = block_module(model, 1).attn
    seen = []
    handle = attn.register_forward_pre_hook(
        lambda m, args: seen.append(args[0]))
    maps = attention_maps(model, x, block=1)
    handle.remove()
    N = 1 + 8 * 8
    assert maps.attn.shape == (2, 2, N, N)
    assert (maps.kind, maps.hw_shape, maps.num_extra_tokens) == (
        'global', (8, 8), 1)
    m = maps.matrix(image=1, head=1, extra_tokens=True)
    assert m.shape == (N, N)
    assert torch.allclose(m.sum(-1), torch.ones(N), atol=1e-5)
    # by default the patch tokens only, as the paper's 196 x 196 figures
    assert torch.equal(maps.matrix(image=1, head=1), m[1:, 1:])
    # by hand from the block's q/k projections (its input captured)
    tokens = seen[0][1]  # image 1: (N, C)
    q, k, _ = attn.qkv(tokens).reshape(N, 3, 2, 16).permute(1, 2, 0, 3)
    by_hand = ((q[1] @ k[1].T) * 16**-0.5).softmax(-1)
    assert torch.allclose(m, by_hand, atol=1e-5)
    # the model's outputs do not change while the weights are captured
    with torch.no_grad(), vis.capture_attention(attn) as store:
        out = model(x)[0]
    assert len(store) == 1 and torch.allclose(out, model(x)[0], atol=1e-6)
    assert 'attend' not in vars(attn)


def test_gap_model_has_no_class_token_row():
    maps = attention_maps(build(out_type='avg_featmap'), images(1), 0)
    assert maps.matrix().shape == (64, 64) and maps.num_extra_tokens == 0
    assert default_queries(maps) == [(4, 4), (0, 0)]
    with pytest.raises(ValueError, match='no class token'):
        maps.query_index('cls')
    with pytest.raises(ValueError, match='outside the 8x8'):
        maps.query_index((8, 0))
    with pytest.raises(ValueError, match='2 heads'):
        maps.matrix(head=2)
    with pytest.raises(ValueError, match='blocks 0 to 2'):
        attention_maps(build(), images(1), 3)


def test_relative_position_encoding_and_a_shrunk_map():
    model = build(peg_positions=(0, ), peg_cfg=dict(padding=0),
                  rpe_cfg=dict(clip_distance=2))
    maps = attention_maps(model, images(2), block=1)
    assert maps.hw_shape == (6, 6) and maps.attn.shape == (2, 2, 37, 37)
    assert torch.allclose(maps.matrix(extra_tokens=True).sum(-1),
                          torch.ones(37), atol=1e-5)


def test_pvt_spatial_reduction_and_swin_windows():
    pvt = build('PVTPEG', arch=PVT_ARCH, drop_path_rate=0.)
    maps = attention_maps(pvt, images(2), block=1)  # stage 1, sr 4
    assert maps.kind == 'spatial-reduction'
    assert maps.attn.shape == (2, 2, 64, 4)
    assert maps.kv_hw_shape == (2, 2) and maps.query_map((0, 0)).shape == (
        2, 2)
    assert torch.allclose(maps.matrix().sum(-1), torch.ones(64), atol=1e-5)
    swin = build('SwinPEG', arch=SWIN_ARCH, window_size=4, drop_path_rate=0.)
    maps = attention_maps(swin, images(2), block=1)  # 16x16, 4x4 windows
    assert maps.kind == 'window'
    assert maps.attn.shape == (2 * 16, 1, 16, 16)
    assert torch.allclose(maps.matrix(image=1).sum(-1), torch.ones(16),
                          atol=1e-5)
    with pytest.raises(ValueError, match='global attention'):
        maps.query_map((0, 0))


def test_figures_and_attention_distance(tmp_path):
    model = build(out_type='cls_token')
    maps = attention_maps(model, images(1), 1)
    uniform = maps.__class__(torch.full((1, 1, 65, 65), 1 / 65), 'global',
                             (8, 8), (8, 8), 1, 8)
    local = torch.eye(65)[None, None] * .9 + .1 / 65
    local = maps.__class__(local / local.sum(-1, keepdim=True), 'global',
                           (8, 8), (8, 8), 1, 8)
    assert vis.mean_attention_distance(
        local) < 0.5 * vis.mean_attention_distance(uniform)
    vis.save_matrix_png(maps.matrix(), str(tmp_path / 'm.png'), 'title')
    rgb = torch.randint(0, 255, (64, 64, 3), dtype=torch.uint8).numpy()
    vis.save_query_overlay(maps, rgb, default_queries(maps) + [(7, 0)],
                           str(tmp_path / 'q.png'))
    assert (tmp_path / 'm.png').stat().st_size > 1000
    assert (tmp_path / 'q.png').stat().st_size > 1000
