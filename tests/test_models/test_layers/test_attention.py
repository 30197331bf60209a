import pytest
import torch

from mmcpvt.models.layers import Attention


@pytest.mark.parametrize('sr_ratio', [1, 2])
def test_fused_and_explicit_paths_agree(sr_ratio):
    torch.manual_seed(0)
    attn = Attention(16, 4, sr_ratio=sr_ratio).eval()
    x = torch.randn(2, 6 * 5, 16)
    fused = attn(x, (6, 5))
    explicit, weights = attn(x, (6, 5), return_attn=True)
    torch.testing.assert_close(fused, explicit, atol=1e-5, rtol=1e-5)
    n_kv = 30 if sr_ratio == 1 else 3 * 2  # 6x5 reduced by 2 (floor)
    assert weights.shape == (2, 4, 30, n_kv)
    torch.testing.assert_close(weights.sum(-1), torch.ones(2, 4, 30))


def test_spatial_reduction_parameters():
    attn = Attention(8, 2, sr_ratio=4)
    names = {n.split('.')[0] for n, _ in attn.named_parameters()}
    assert names == {'q', 'kv', 'sr', 'norm', 'proj'}
    assert 'qkv' in dict(Attention(8, 2).named_children())


def test_heads_must_divide_dims():
    with pytest.raises(ValueError, match='embed_dims 10 must be '
                       'divisible by num_heads 3'):
        Attention(10, 3)


def test_relative_position_bias_on_fused_and_explicit_paths():
    torch.manual_seed(0)
    attn = Attention(16, 4, rpe_cfg=dict(clip_distance=2)).eval()
    x = torch.randn(2, 1 + 6 * 5, 16)  # a class token and a 6x5 map
    fused = attn(x, (6, 5))
    explicit, weights = attn(x, (6, 5), return_attn=True)
    torch.testing.assert_close(fused, explicit, atol=1e-5, rtol=1e-5)
    # the logits are q.k / sqrt(d) plus the relative bias
    q, k, _ = attn._split_heads(attn.qkv(x), 3).unbind(0)
    bias = attn.rpe(q, (6, 5))
    ref = ((q @ k.transpose(-2, -1)) * attn.scale + bias).softmax(-1)
    torch.testing.assert_close(weights, ref)
    # another bias (Swin's kind) adds to it
    extra = torch.randn(31, 31)
    _, weights = attn(x, (6, 5), attn_bias=extra, return_attn=True)
    ref = ((q @ k.transpose(-2, -1)) * attn.scale + bias + extra).softmax(-1)
    torch.testing.assert_close(weights, ref)
