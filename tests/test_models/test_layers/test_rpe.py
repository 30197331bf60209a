import torch

from mmcpvt.models.backbones import CPVT
from mmcpvt.models.layers import (RelativePositionEncoding2d,
                                  relative_position_index)
from tests.utils import n_params

TINY = dict(embed_dims=32, num_layers=3, num_heads=2, feedforward_channels=64)


def _coords(index, W, n=1):
    """(y, x) on a W-wide map of token ``index`` after ``n`` extra ones."""
    return divmod(index - n, W)


def test_index_is_the_clipped_offset_and_the_class_row():
    H, W, K = 4, 11, 3
    index = relative_position_index((H, W), 1, K)
    assert index.shape == (1 + H * W, 1 + H * W)
    extra = (2 * K + 1)**2
    # every pair with the class token, either way round, uses the extra row
    assert (index[0] == extra).all() and (index[:, 0] == extra).all()
    for i in range(1, 1 + H * W):
        yi, xi = _coords(i, W)
        for j in range(1, 1 + H * W):
            yj, xj = _coords(j, W)
            dy = max(-K, min(K, yj - yi))
            dx = max(-K, min(K, xj - xi))
            assert index[i, j] == (dy + K) * (2 * K + 1) + dx + K
    assert index[1:, 1:].max() < extra


def _rpe_and_queries(H, W, K=2, head_dims=8, n=1, seed=0):
    torch.manual_seed(seed)
    rpe = RelativePositionEncoding2d(head_dims, clip_distance=K)
    q = torch.randn(2, 3, n + H * W, head_dims)
    return rpe, q


def test_bias_is_the_scaled_query_times_its_offset_row():
    H, W = 3, 5
    rpe, q = _rpe_and_queries(H, W)
    bias = rpe(q, (H, W))
    assert bias.shape == (2, 3, 1 + H * W, 1 + H * W)
    index = relative_position_index((H, W), 1, rpe.clip_distance)
    rows = rpe.relative_key_table[index]  # (N, N, head_dims)
    ref = torch.einsum('bhid,ijd->bhij', q, rows) * 8**-0.5
    torch.testing.assert_close(bias, ref)


def test_bias_is_translation_equivariant_and_inductive():
    """A query-key pair keeps its bias when both move together, in a larger
    map than any seen before: the bias knows offsets, not positions."""
    H, W, K = 3, 4, 2
    (H2, W2), (oy, ox) = (7, 9), (3, 4)
    rpe, q_small = _rpe_and_queries(H, W, K=K, n=0)
    q_big = torch.randn(2, 3, H2 * W2, q_small.shape[-1])
    # the small map's queries placed at offset (oy, ox) of the big map
    big = q_big.view(2, 3, H2, W2, -1)
    big[:, :, oy:oy + H, ox:ox + W] = q_small.view(2, 3, H, W, -1)
    q_big = big.view(2, 3, H2 * W2, -1)
    bias_small = rpe(q_small, (H, W))
    bias_big = rpe(q_big, (H2, W2))
    inside = torch.tensor([(y + oy) * W2 + x + ox for y in range(H)
                           for x in range(W)])
    torch.testing.assert_close(bias_big[..., inside[:, None], inside],
                               bias_small)


def test_parameter_count_and_init():
    rpe = RelativePositionEncoding2d(64)
    assert n_params(rpe) == (17**2 + 1) * 64 == 18_560  # K = 8, DeiT-Ti
    assert 0 < rpe.relative_key_table.std() < 0.05  # trunc normal .02
    model = CPVT('tiny', peg_positions=(), rpe_cfg=dict(clip_distance=8))
    tables = [n for n, _ in model.named_parameters() if 'rpe' in n]
    assert tables == [f'layers.{i}.attn.rpe.relative_key_table'
                      for i in range(12)]
    plain = CPVT('tiny', peg_positions=())
    assert n_params(model) - n_params(plain) == 12 * 18_560


def test_rpe_changes_the_output_and_is_trained():
    torch.manual_seed(0)
    model = CPVT(TINY, peg_positions=(), rpe_cfg=dict(clip_distance=2))
    x = torch.randn(2, 3, 48, 64)
    (model(x)[0] * torch.randn(2, 32)).sum().backward()
    # (not the last encoder: only its class-token query reaches the output,
    # and that query's bias is one value for every key, which the softmax
    # ignores)
    for layer in model.layers[:-1]:
        assert layer.attn.rpe.relative_key_table.grad.abs().sum() > 0
    with torch.no_grad():
        ref = model.eval()(x)[0]
        for layer in model.layers:
            layer.attn.rpe.relative_key_table.zero_()
        plain = CPVT(TINY, peg_positions=()).eval()
        plain.load_state_dict({k: v for k, v in model.state_dict().items()
                               if '.rpe.' not in k})
        # a zero table adds nothing: the model without relative encoding
        torch.testing.assert_close(model(x)[0], plain(x)[0])
        assert not torch.allclose(ref, plain(x)[0])
