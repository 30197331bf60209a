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
    with pytest.raises(ValueError, match='divisible'):
        Attention(10, 3)
