import torch

from mmcpvt.models.backbones import CPVT, CPVTQKOnly

TINY = dict(embed_dims=32, num_layers=4, num_heads=2, feedforward_channels=64)


def test_qk_only_peg_changes_queries_and_keys_but_not_values():
    torch.manual_seed(0)
    qk = CPVTQKOnly(TINY, peg_positions=(0, )).eval()
    x = torch.randn(1, 3, 64, 64)
    with torch.no_grad():
        out = qk(x)[0]
        # With the PEG's conv zeroed, F(x) = 0: the plain transformer.
        for p in qk.pegs.parameters():
            p.zero_()
        plain = qk(x)[0]
    assert not torch.allclose(out, plain)
    # The block sees q/k from x + F(x) and v from x: check on the block.
    blk = qk.layers[1]
    tokens = torch.randn(1, 17, 32)
    pos = torch.randn(1, 17, 32)
    ref_attn = blk.attn
    w, b = ref_attn.qkv.weight, ref_attn.qkv.bias
    y = blk.ln1(tokens)
    q, k = ((y + pos) @ w[:64].T + b[:64]).split(32, -1)
    v = y @ w[64:].T + b[64:]

    def heads(t):
        return t.reshape(1, 17, 2, 16).transpose(1, 2)

    a = torch.softmax(heads(q) @ heads(k).transpose(-1, -2) / 4, -1)
    ref = (a @ heads(v)).transpose(1, 2).reshape(1, 17, 32)
    with torch.no_grad():
        got = ref_attn(y, qk_pos=pos)
        ref = ref_attn.proj(ref)
    torch.testing.assert_close(got, ref, atol=1e-5, rtol=1e-5)


def test_qk_only_with_relative_position_encoding():
    torch.manual_seed(0)
    qk = CPVTQKOnly(TINY, peg_positions=(0, ),
                    rpe_cfg=dict(clip_distance=2)).eval()
    with torch.no_grad():
        out = qk(torch.randn(1, 3, 48, 64))[0]
    assert out.shape == (1, 32) and torch.isfinite(out).all()
    # the encoder fed by the PEG adds the relative bias to its logits too
    blk = qk.layers[1]
    y, pos = torch.randn(1, 13, 32), torch.randn(1, 13, 32)
    with torch.no_grad():
        with_rpe = blk.attn(y, (3, 4), qk_pos=pos)
        blk.attn.rpe.relative_key_table.zero_()
        without = blk.attn(y, (3, 4), qk_pos=pos)
    assert not torch.allclose(with_rpe, without)


def test_same_parameters_as_cpvt_and_the_token_stream_bypasses_the_peg():
    torch.manual_seed(0)
    qk = CPVTQKOnly(TINY, peg_positions=(-1, 1)).eval()
    cpvt = CPVT(TINY, peg_positions=(-1, 1)).eval()
    assert qk.state_dict().keys() == cpvt.state_dict().keys()
    cpvt.load_state_dict(qk.state_dict())
    x = torch.randn(1, 3, 48, 48)
    with torch.no_grad():
        assert not torch.allclose(qk(x)[0], cpvt(x)[0])
        # without PEGs both are the plain transformer
        plain = CPVT(TINY, peg_positions=()).eval()
        plain.load_state_dict({k: v for k, v in qk.state_dict().items()
                               if not k.startswith('pegs.')})
        for p in qk.pegs.parameters():
            p.zero_()
        torch.testing.assert_close(qk(x)[0], plain(x)[0])
