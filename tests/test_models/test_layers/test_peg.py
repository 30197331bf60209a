import pytest
import torch
import torch.nn.functional as F

from mmcpvt.models.layers import ConditionalPositionEncoding as PEG
from mmcpvt.models.layers import nchw_to_nlc, nlc_to_nchw
from tests.utils import n_params


def test_default_peg_is_depthwise_3x3_zero_padded_plus_identity():
    C, H, W = 8, 5, 7
    peg = PEG(C, C)
    assert n_params(peg) == 9 * C + C  # the paper's "9C weights + C bias"
    x = torch.randn(2, H * W, C)
    out = peg(x, (H, W))
    conv = peg.proj[0]
    feat = x.transpose(1, 2).reshape(2, C, H, W)
    ref = F.conv2d(feat, conv.weight, conv.bias, padding=1, groups=C) + feat
    torch.testing.assert_close(out, ref.flatten(2).transpose(1, 2))


def test_class_token_bypasses_peg():
    C, H, W = 4, 3, 3
    peg = PEG(C, C, num_extra_tokens=1)
    x = torch.randn(2, 1 + H * W, C)
    out = peg(x, (H, W))
    assert torch.equal(out[:, 0], x[:, 0])
    no_cls = PEG(C, C)
    no_cls.load_state_dict(peg.state_dict())
    torch.testing.assert_close(out[:, 1:], no_cls(x[:, 1:], (H, W)))


def test_zero_padding_reveals_absolute_position():
    """A constant map stays constant under circular padding but not under
    zero padding: the zeros are what tell border tokens where they are."""
    C, H, W = 4, 6, 6
    x = torch.ones(1, H * W, C)
    with torch.no_grad():
        zero = PEG(C, C)(x, (H, W)).reshape(H, W, C)
        circ = PEG(C, C, padding_mode='circular')(x, (H, W)).reshape(H, W, C)
    assert not torch.allclose(zero[0, 0], zero[3, 3])
    assert torch.allclose(circ, circ[3, 3].expand_as(circ))


@pytest.mark.parametrize('k', [3, 7, 27])
def test_kernel_sizes_keep_token_count(k):
    C = 4
    peg = PEG(C, C, kernel_size=k, num_extra_tokens=1)
    assert n_params(peg) == k * k * C + C
    assert peg(torch.randn(2, 1 + 10 * 3, C), (10, 3)).shape == (2, 31, C)


def test_dense_and_stacked_variants():
    C = 6
    dense = PEG(C, C, depthwise=False)
    assert n_params(dense) == 9 * C * C + C
    stacked = PEG(C, C, num_layers=4, norm_cfg=dict(type='BN'),
                  act_cfg=dict(type='ReLU'))
    types = [type(m).__name__ for m in stacked.proj]
    assert types == ['Conv2d', 'BatchNorm2d', 'ReLU'] * 4
    assert stacked.proj[0].bias is None  # BN follows: no conv bias
    assert stacked(torch.randn(2, 12, C), (3, 4)).shape == (2, 12, C)


def test_frozen_peg_has_no_trainable_parameters_and_keeps_bn_stats():
    C = 4
    peg = PEG(C, C, frozen=True, num_layers=2, norm_cfg=dict(type='BN'))
    assert all(not p.requires_grad for p in peg.parameters())
    peg.train()
    assert not peg.proj[1].training
    before = peg.proj[1].running_mean.clone()
    peg(torch.randn(2, 9, C) * 5 + 3, (3, 3))
    assert torch.equal(before, peg.proj[1].running_mean)


def test_strided_peg_has_no_identity():
    peg = PEG(4, 8, stride=2, depthwise=False)
    assert not peg.with_identity
    assert peg(torch.randn(1, 36, 4), (6, 6)).shape == (1, 9, 8)


def test_no_padding_shrinks_the_map_and_drops_the_skip_connection():
    """padding=0: F(x) alone (the authors' answer, Meituan-AutoML/CPVT
    issue #3), the map k-1 smaller on each axis."""
    C, H, W = 4, 6, 9
    peg = PEG(C, C, padding=0, num_extra_tokens=1)
    assert not peg.with_identity
    assert n_params(peg) == n_params(PEG(C, C))  # the same convolution
    assert peg.out_hw_shape((H, W)) == (H - 2, W - 2)
    x = torch.randn(2, 1 + H * W, C)
    out = peg(x, (H, W))
    assert out.shape == (2, 1 + (H - 2) * (W - 2), C)
    assert torch.equal(out[:, 0], x[:, 0])  # the class token bypasses it
    conv = peg.proj[0]
    feat = x[:, 1:].transpose(1, 2).reshape(2, C, H, W)
    ref = F.conv2d(feat, conv.weight, conv.bias, groups=C)  # no identity
    torch.testing.assert_close(out[:, 1:], ref.flatten(2).transpose(1, 2))


@pytest.mark.parametrize('k, padding, num_layers, shrink', [
    (3, None, 1, 0),
    (3, 1, 1, 0),
    (7, 0, 1, 6),
    (7, 2, 1, 2),  # padding between 0 and (k-1)/2
    (3, 0, 2, 4),  # each stacked convolution shrinks the map
])
def test_padding_sets_the_output_map(k, padding, num_layers, shrink):
    C, H, W = 3, 9, 11
    peg = PEG(C, C, kernel_size=k, padding=padding, num_layers=num_layers)
    assert peg.out_hw_shape((H, W)) == (H - shrink, W - shrink)
    out = peg(torch.randn(1, H * W, C), (H, W))
    assert out.shape == (1, (H - shrink) * (W - shrink), C)
    with torch.no_grad():  # F = 0: the identity if the map keeps its size
        for p in peg.parameters():
            p.zero_()
    x = torch.randn(1, H * W, C)
    expected = x if shrink == 0 else torch.zeros_like(out)
    assert torch.equal(peg(x, (H, W)), expected)


def test_depthwise_needs_equal_channels_as_torch_says():
    with pytest.raises(ValueError, match='in_channels must be divisible by '
                       'groups'):
        PEG(4, 8)


def test_layout_helpers_round_trip_without_copies():
    x = torch.randn(2, 3 * 5, 4)
    feat = nlc_to_nchw(x, (3, 5))
    assert feat.shape == (2, 4, 3, 5) and feat.data_ptr() == x.data_ptr()
    assert torch.equal(feat[1, 2, 1, 4], x[1, 1 * 5 + 4, 2])
    back = nchw_to_nlc(feat)
    assert torch.equal(back, x) and back.data_ptr() == x.data_ptr()
    with pytest.raises(RuntimeError, match=r"shape '\[2, 4, 4, 4\]' is "
                       r'invalid for input of size 120'):
        nlc_to_nchw(x, (4, 4))
