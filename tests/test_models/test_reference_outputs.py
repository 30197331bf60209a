"""Every backbone and ablation gives the outputs it gave when
``reference_outputs.json`` was written, and has the same state-dict keys.

Each tensor of the state dict is filled from its key's name (a generator
seeded with ``zlib.crc32(key)``), so the order in which modules are made
does not matter; the model runs in float64 (the same figures on any CPU),
in eval mode, on a square input at the build size and on a larger,
non-square one. To write the file anew (only where a change of the outputs
is meant): ``python -m tests.test_models.test_reference_outputs``.
"""
import json
import os.path as osp
import zlib

import pytest
import torch

import mmcpvt  # noqa: F401
from mmcpvt.registry import MODELS

PATH = osp.join(osp.dirname(__file__), 'reference_outputs.json')
ATOL = 1e-6
INPUTS = [(32, 32), (40, 56)]  # the build size (img_size), then larger

CPVT = dict(type='CPVT', arch=dict(embed_dims=16, num_layers=5, num_heads=2,
                                   feedforward_channels=32),
            patch_size=8, img_size=32)
PVT = dict(type='PVTPEG', arch=dict(embed_dims=[8, 8, 16, 16],
                                    num_heads=[1, 1, 2, 2],
                                    mlp_ratios=[2, 2, 2, 2],
                                    depths=[2, 1, 1, 2],
                                    sr_ratios=[8, 4, 2, 1]), img_size=32)
SWIN = dict(type='SwinPEG', arch=dict(embed_dims=8, depths=[2, 2, 2, 2],
                                      num_heads=[1, 1, 2, 2]), window_size=4)
BN_RELU = dict(norm_cfg=dict(type='BN'), act_cfg=dict(type='ReLU'))

CASES = {
    'cpvt': dict(CPVT),
    'cpvt-gap': dict(CPVT, out_type='avg_featmap'),
    **{f'cpvt-p{p}': dict(CPVT, peg_positions=(p, )) for p in range(-1, 5)},
    'cpvt-p0-4': dict(CPVT, peg_positions=(0, 1, 2, 3, 4)),
    'cpvt-gap-p0-4': dict(CPVT, peg_positions=(0, 1, 2, 3, 4),
                          out_type='avg_featmap'),
    'cpvt-k7': dict(CPVT, peg_cfg=dict(kernel_size=7)),
    'cpvt-dense': dict(CPVT, peg_cfg=dict(depthwise=False)),
    'cpvt-k1-dense-p0-4': dict(CPVT, peg_positions=(0, 1, 2, 3, 4),
                               peg_cfg=dict(kernel_size=1, depthwise=False)),
    'cpvt-2xdw-bn-relu': dict(CPVT, peg_cfg=dict(num_layers=2, **BN_RELU)),
    'cpvt-2xdense-bn-relu': dict(CPVT, peg_cfg=dict(
        num_layers=2, depthwise=False, **BN_RELU)),
    'cpvt-fixed': dict(CPVT, peg_cfg=dict(frozen=True)),
    'cpvt-no-pad': dict(CPVT, peg_cfg=dict(padding=0)),
    'cpvt-no-pad-featmap': dict(CPVT, patch_size=4, peg_positions=(-1, 1),
                                peg_cfg=dict(padding=0), out_type='featmap',
                                out_indices=(1, 4), pos_embed='learned',
                                pos_embed_positions=(-1, 2)),
    'cpvt-circular': dict(CPVT, peg_cfg=dict(padding_mode='circular')),
    'cpvt-peg-learned': dict(CPVT, pos_embed='learned'),
    'deit-learned': dict(CPVT, pos_embed='learned', peg_positions=()),
    'deit-learned-bilinear': dict(CPVT, pos_embed='learned',
                                  peg_positions=(),
                                  pos_embed_interpolation='bilinear'),
    'deit-learned-6': dict(CPVT, pos_embed='learned', peg_positions=(),
                           pos_embed_positions=(-1, 0, 1, 2, 3, 4)),
    'deit-sincos2d': dict(CPVT, pos_embed='sincos2d', peg_positions=()),
    'deit-nope': dict(CPVT, peg_positions=()),
    'deit-gap': dict(CPVT, peg_positions=(), out_type='avg_featmap'),
    'deit-rpe': dict(CPVT, peg_positions=(), rpe_cfg=dict(clip_distance=2)),
    'deit-learned-rpe': dict(CPVT, peg_positions=(), pos_embed='learned',
                             rpe_cfg=dict(clip_distance=2)),
    'cpvt-rpe': dict(CPVT, rpe_cfg=dict(clip_distance=2)),
    'cpvt-featmap': dict(CPVT, out_type='featmap', out_indices=(0, -1),
                         with_cls_token=True),
    'cpvt-qk-only': dict(CPVT, type='CPVTQKOnly', peg_positions=(-1, 0, 2)),
    'cpvt-qk-only-rpe': dict(CPVT, type='CPVTQKOnly',
                             rpe_cfg=dict(clip_distance=2)),
    'pvt-peg': dict(PVT),
    'pvt-peg-out13': dict(PVT, out_indices=(1, 3)),
    'pvt-peg-gap': dict(PVT, out_type='avg_featmap',
                        peg_positions=((-1, 1), (), 0, (0, 1))),
    'pvt-peg-k7-norms': dict(PVT, peg_cfg=dict(kernel_size=7),
                             norm_after_stage=True, out_indices=(2, 3)),
    'pvt-learned-cls': dict(PVT, pos_embed='learned', out_type='cls_token',
                            peg_positions=((), (), (), ())),
    'pvt-learned-gap': dict(PVT, pos_embed='learned',
                            out_type='avg_featmap'),
    'swin-peg': dict(SWIN),
    'swin-peg-out23': dict(SWIN, out_indices=(2, 3)),
    'swin-peg-gap': dict(SWIN, out_type='avg_featmap',
                         peg_positions=(-1, (0, 1), (), 0)),
    'swin': dict(SWIN, out_type='avg_featmap',
                 peg_positions=((), (), (), ())),
}


def fill_from_names(model: torch.nn.Module):
    """Every floating tensor of the state dict drawn from a generator seeded
    with its key: weights of fan-in scale, norms near one, positive running
    variances, small biases and tables."""
    state = {}
    for key, value in model.state_dict().items():
        if not value.is_floating_point():
            state[key] = value
            continue
        g = torch.Generator().manual_seed(zlib.crc32(key.encode()))
        r = torch.randn(value.shape, generator=g, dtype=torch.float64)
        leaf = key.rsplit('.', 1)[-1]
        if leaf == 'running_var':
            r = 1 + 0.25 * r.abs()
        elif leaf in ('running_mean', 'bias'):
            r = 0.1 * r
        elif leaf == 'weight' and value.dim() == 1:  # a norm's
            r = 1 + 0.1 * r
        elif leaf == 'weight':
            r = r / value[0].numel()**0.5
        else:  # class tokens, position and relative tables
            r = 0.2 * r
        state[key] = r
    model.load_state_dict(state)


def outputs(cfg: dict) -> dict:
    """A checksum of the state-dict keys and shapes of the model of
    ``cfg`` (checkpoints and converters depend on them) and its outputs on
    each of ``INPUTS``."""
    model = MODELS.build(cfg).double().eval()
    fill_from_names(model)
    keys = '\n'.join(f'{k} {list(v.shape)}'
                     for k, v in model.state_dict().items())
    result = dict(num_keys=len(model.state_dict()),
                  keys_crc32=zlib.crc32(keys.encode()))
    g = torch.Generator().manual_seed(0)
    for h, w in INPUTS:
        x = torch.randn(1, 3, h, w, generator=g, dtype=torch.float64)
        with torch.no_grad():
            outs = model(x)
        result[f'{h}x{w}'] = [
            dict(shape=list(o.shape),
                 values=[round(v, 8) for v in o.flatten().tolist()])
            for o in outs
        ]
    return result


def load_reference() -> dict:
    with open(PATH) as f:
        return json.load(f)


def test_every_case_has_a_reference():
    assert sorted(load_reference()) == sorted(CASES)


@pytest.mark.parametrize('name', CASES)
def test_outputs_equal_the_reference(name):
    ref, got = load_reference()[name], outputs(CASES[name])
    assert (got['num_keys'], got['keys_crc32']) == (
        ref['num_keys'], ref['keys_crc32']), 'state-dict keys changed'
    for size in (f'{h}x{w}' for h, w in INPUTS):
        assert len(got[size]) == len(ref[size]), size
        for i, (o, r) in enumerate(zip(got[size], ref[size])):
            assert o['shape'] == r['shape'], (size, i)
            torch.testing.assert_close(
                torch.tensor(o['values'], dtype=torch.float64),
                torch.tensor(r['values'], dtype=torch.float64), rtol=0,
                atol=ATOL, msg=lambda m: f'{size} output {i}: {m}')


if __name__ == '__main__':
    torch.set_num_threads(1)
    with open(PATH, 'w') as f:  # a line per case
        f.write('{\n' + ',\n'.join(
            f'{json.dumps(name)}: '
            f'{json.dumps(outputs(cfg), separators=(",", ":"))}'
            for name, cfg in CASES.items()) + '\n}\n')
    print(f'wrote {PATH}')
