import pytest
import torch

from mmcpvt.models.backbones import PVTPEG
from tests.utils import n_params

TINY = dict(embed_dims=[16, 32, 48, 64], num_heads=[1, 2, 3, 4],
            mlp_ratios=[2, 2, 2, 2], depths=[2, 1, 1, 1],
            sr_ratios=[8, 4, 2, 1])


@pytest.mark.parametrize('arch, millions', [('tiny', 12.85), ('small', 24.11),
                                            ('medium', 43.83),
                                            ('large', 60.99)])
def test_gap_classifier_sizes_match_pcpvt(arch, millions):
    # PVT+PEG+GAP = Twins' PCPVT: 24.1M / 43.8M / 60.9M with the head
    model = PVTPEG(arch, out_type='avg_featmap')
    assert round((n_params(model) + 512 * 1000 + 1000) / 1e6, 2) == millions


def test_pvt_baseline_is_the_same_code():
    # PVT-tiny v1 (learned tables, class token): 13.2M
    pvt = PVTPEG('tiny', pos_embed='learned', peg_positions=((), ) * 4,
                 out_type='cls_token')
    assert round((n_params(pvt) + 512 * 1000 + 1000) / 1e6, 1) == 13.2
    assert pvt(torch.randn(1, 3, 256, 192))[0].shape == (1, 512)


def test_pegs_follow_the_first_block_of_each_stage_by_default():
    model = PVTPEG(TINY)
    assert [list(p) for p in model.pegs] == [['0']] * 4
    order = []
    for i, stage in enumerate(model.stages):
        for j, blk in enumerate(stage):
            blk.register_forward_hook(
                lambda *_, n=f'b{i}.{j}': order.append(n))
        for k, peg in model.pegs[i].items():
            peg.register_forward_hook(
                lambda *_, n=f'p{i}.{k}': order.append(n))
    model(torch.randn(1, 3, 64, 64))
    assert order[:3] == ['b0.0', 'p0.0', 'b0.1']
    custom = PVTPEG(TINY, peg_positions=((-1, 1), (), 0, (0, )))
    assert [sorted(p) for p in custom.pegs] == [['-1', '1'], [], ['0'],
                                                ['0']]


def test_out_indices_and_gap():
    model = PVTPEG(TINY, out_indices=(1, 3))
    assert [o.shape[1] for o in model(torch.randn(1, 3, 64, 64))] == [32, 64]
    gap = PVTPEG(TINY, out_type='avg_featmap')
    assert gap(torch.randn(2, 3, 64, 64))[0].shape == (2, 64)


def test_frozen_stages_and_norm_eval():
    model = PVTPEG(TINY, frozen_stages=2, norm_eval=True,
                   peg_cfg=dict(num_layers=2, norm_cfg=dict(type='BN')))
    model.train()
    for i in range(2):
        for m in (model.patch_embeds[i], model.stages[i], model.pegs[i]):
            assert all(not p.requires_grad for p in m.parameters())
    assert all(p.requires_grad for p in model.stages[2].parameters())
    bns = [m for m in model.modules() if isinstance(m, torch.nn.BatchNorm2d)]
    assert bns and not any(m.training for m in bns)
