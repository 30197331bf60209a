import torch

from mmcpvt.models.backbones import SwinPEG
from mmcpvt.models.backbones.swin_peg import PatchMerging, SwinBlock
from tests.utils import n_params

TINY = dict(embed_dims=16, depths=[2, 2, 2, 1], num_heads=[1, 2, 2, 4])


def test_swin_tiny_size():
    no_peg = SwinPEG('tiny', out_type='avg_featmap',
                     peg_positions=((), ) * 4)
    # timm swin_tiny_patch4_window7_224: 28,288,354 with its 1000-way head
    assert n_params(no_peg) + 768 * 1000 + 1000 == 28_288_354
    peg = SwinPEG('tiny', out_type='avg_featmap')
    assert n_params(peg) - n_params(no_peg) == sum(
        10 * c for c in (96, 192, 384, 768))


def test_window_attention_is_local_without_shift():
    """Without shift, a token only sees its own window: changing a token in
    another window leaves its output unchanged."""
    torch.manual_seed(0)
    blk = SwinBlock(8, 2, 16, window_size=4).eval()
    x = torch.randn(1, 8 * 8, 8)
    y = x.clone()
    y[0, 8 * 7 + 7] += torch.randn(8)  # bottom-right window
    with torch.no_grad():
        a, b = blk(x, (8, 8)), blk(y, (8, 8))
    top_left = [r * 8 + c for r in range(4) for c in range(4)]
    torch.testing.assert_close(a[0, top_left], b[0, top_left])
    assert not torch.allclose(a[0, 63], b[0, 63])


def test_shifted_windows_mix_neighbouring_windows():
    torch.manual_seed(0)
    blk = SwinBlock(8, 2, 16, window_size=4, shift=True).eval()
    x = torch.randn(1, 8 * 8, 8)
    y = x.clone()
    y[0, 4 * 8 + 4] += torch.randn(8)  # first token of the bottom-right window
    with torch.no_grad():
        a, b = blk(x, (8, 8)), blk(y, (8, 8))
    # token (3, 3) shares a shifted window with (4, 4)
    assert not torch.allclose(a[0, 3 * 8 + 3], b[0, 3 * 8 + 3])


def test_window_attention_is_traced_for_any_size():
    """Why the window attention is ours, not mmpretrain's ShiftWindowMSA
    (whose checkpoint keys are w_msa.*, not attn.*): that decides the shift
    and builds the mask from Python ints, which a trace (as an ONNX export
    makes) keeps at the example size. Ours, traced at an 8x8 map, gives
    eager's output at 12x20 (tests/test_tools/test_onnx_export.py exports
    whole backbones)."""
    from mmpretrain.models.utils import ShiftWindowMSA
    torch.manual_seed(0)
    blk = SwinBlock(8, 2, 16, window_size=4, shift=True).eval()
    msa = ShiftWindowMSA(8, 2, window_size=4, shift_size=2).eval()

    def run(attn):  # on the tokens of a map whose H and W are traced
        return lambda f: attn(f.flatten(2).transpose(1, 2), f.shape[2:])

    x, other = torch.randn(1, 8, 8, 8), torch.randn(2, 8, 12, 20)
    errors = []
    with torch.no_grad():
        for attn in (blk.requires_grad_(False)._window_attention,
                     msa.requires_grad_(False)):
            traced = torch.jit.trace(run(attn), (x, ), check_trace=False)
            errors.append(float((traced(other) - run(attn)(other)).abs().max(
            )))
    assert errors[0] < 1e-6 and errors[1] > 0.1, errors


def test_patch_merging_keeps_swins_channel_order():
    """Why the patch merging is ours, not mmcv's PatchMerging (the same
    keys): mmcv's unfold orders the 4C channels (c, dy, dx), Swin's
    checkpoints (dx, dy, c) (x0..x3), so the same weights give other
    outputs there (mmdet's Swin converter permutes them)."""
    from mmcv.cnn.bricks.transformer import PatchMerging as MMCVPatchMerging
    torch.manual_seed(0)
    ours = PatchMerging(8, 16).eval()
    mmcv = MMCVPatchMerging(8, 16).eval()
    mmcv.load_state_dict(ours.state_dict())
    x = torch.randn(2, 6 * 10, 8)
    with torch.no_grad():
        out, hw = ours(x, (6, 10))
        m = x.view(2, 6, 10, 8)
        swin = torch.cat([m[:, 0::2, 0::2], m[:, 1::2, 0::2],
                          m[:, 0::2, 1::2], m[:, 1::2, 1::2]], -1)
        ref = ours.reduction(ours.norm(swin.view(2, 15, 32)))
        torch.testing.assert_close(out, ref)
        assert hw == (3, 5)
        assert not torch.allclose(mmcv(x, (6, 10))[0], out, atol=0.1)


def test_classification_output_and_frozen_stages():
    model = SwinPEG(TINY, out_type='avg_featmap', frozen_stages=1)
    model.train()
    assert model(torch.randn(2, 3, 64, 64))[0].shape == (2, 128)
    assert all(not p.requires_grad for p in model.patch_embed.parameters())
    assert all(not p.requires_grad for p in model.stages[0].parameters())
    assert all(not p.requires_grad for p in model.pegs[0].parameters())
    assert all(p.requires_grad for p in model.stages[1].parameters())
