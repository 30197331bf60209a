"""mmcpvt's FFN: mmcv's parameters and numbers, activation in place only
where autograd records nothing."""
import pytest
import torch
from mmcv.cnn.bricks.transformer import FFN as MMCVFFN

from mmcpvt.models.layers import FFN


def pair(act_cfg, add_identity=False):
    torch.manual_seed(0)
    ours = FFN(embed_dims=8, feedforward_channels=32, act_cfg=act_cfg,
               add_identity=add_identity)
    ref = MMCVFFN(embed_dims=8, feedforward_channels=32, act_cfg=act_cfg,
                  add_identity=add_identity)
    assert ours.state_dict().keys() == ref.state_dict().keys()
    ref.load_state_dict(ours.state_dict())
    return ours, ref


ACTS = [dict(type='GELU'), dict(type='GELU', approximate='tanh'),
        dict(type='ReLU'), dict(type='SiLU'), dict(type='Sigmoid')]


@pytest.mark.parametrize('act_cfg', ACTS)
@pytest.mark.parametrize('add_identity', [False, True])
def test_same_outputs_and_gradients_as_mmcv(act_cfg, add_identity):
    ours, ref = pair(act_cfg, add_identity)
    x = torch.randn(2, 5, 8, requires_grad=True)
    out, out_ref = ours(x), ref(x)
    torch.testing.assert_close(out, out_ref, rtol=0, atol=0)
    grads = torch.autograd.grad(out.square().sum(),
                                [x, ours.layers[0][0].weight])
    grads_ref = torch.autograd.grad(out_ref.square().sum(),
                                    [x, ref.layers[0][0].weight])
    for g, g_ref in zip(grads, grads_ref):
        torch.testing.assert_close(g, g_ref, rtol=0, atol=0)


@pytest.mark.parametrize('act_cfg', ACTS)
def test_no_grad_path_matches_and_keeps_the_input(act_cfg):
    ours, ref = pair(act_cfg)
    x = torch.randn(3, 7, 8)
    x_copy = x.clone()
    with torch.no_grad():
        out = ours(x)
        torch.testing.assert_close(out, ref(x), rtol=0, atol=0)
    with torch.inference_mode():
        torch.testing.assert_close(ours(x), out, rtol=0, atol=0)
    assert torch.equal(x, x_copy)


def test_in_place_activation_saves_the_hidden_allocation(monkeypatch):
    """Without autograd the activation runs in fc1's output (no GELU of
    a new tensor); with autograd it must not (GELU needs its input)."""
    ours, _ = pair(dict(type='GELU'))
    calls = []
    real = torch.ops.aten.gelu_
    monkeypatch.setattr(torch.ops.aten, 'gelu_', lambda *a, **k: calls.append(
        1) or real(*a, **k))
    x = torch.randn(2, 5, 8)
    with torch.no_grad():
        ours(x)
    assert calls == [1]
    ours(x).sum().backward()  # autograd: out of place, backward works
    assert calls == [1]
