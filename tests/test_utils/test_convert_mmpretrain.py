"""mmpretrain's Twins-PCPVT checkpoints convert to PVTPEG and give mmpretrain's
outputs: a parity test against a second, independent implementation.

mmpretrain's own ``PCPVT`` classifiers (built by ``mmpretrain.get_model`` from
the model names it publishes weights under, with random weights: no
download) are saved as mmpretrain saves them (``{'meta', 'state_dict'}``),
converted by ``tools/model_converters/twins2mmcpvt.py`` and loaded strictly.
"""
import pytest
import torch
from mmengine.runner import load_checkpoint
from mmengine.runner.checkpoint import save_checkpoint

import mmcpvt  # noqa: F401
from tests.utils import classifier, convert_tool

# mmpretrain model name -> PVTPEG arch (PCPVT-S/B/L = PVT-S/M/L + PEG + GAP)

MODELS = [('twins-pcpvt-small_3rdparty_8xb128_in1k', 'small'),
          ('twins-pcpvt-base_3rdparty_8xb128_in1k', 'medium'),
          ('twins-pcpvt-large_3rdparty_16xb64_in1k', 'large')]


def mmpretrain_pcpvt(name):
    from mmpretrain import get_model
    torch.manual_seed(0)
    model = get_model(name, pretrained=False).eval()
    with torch.no_grad():  # every tensor matters, none at its init value
        for p in model.parameters():
            p.add_(torch.randn_like(p) * 0.02)
    return model


def logit_diff(ref, ours, size, dtype):
    x = torch.randn(2, 3, size, size, dtype=dtype)
    with torch.no_grad():
        return (ref.to(dtype)(x, mode='tensor') -
                ours.to(dtype)(x, mode='tensor')).abs().max().item()


@pytest.mark.parametrize('name, arch', MODELS)
def test_converted_mmpretrain_pcpvt_gives_its_outputs(tmp_path, name, arch):
    ref = mmpretrain_pcpvt(name)
    src, dst = tmp_path / f'{name}.pth', tmp_path / 'converted.pth'
    save_checkpoint({'meta': {'mmpretrain_version': '1.2.0'},
                     'state_dict': ref.state_dict()}, str(src))
    convert_tool('twins', [str(src), str(dst)])
    ours = classifier(dict(type='PVTPEG', arch=arch,
                           out_type='avg_featmap'), 512)
    load_checkpoint(ours, str(dst), strict=True)

    # As built: mmpretrain's spatial-reduction norms take its blocks'
    # eps (1e-6), ours the authors' 1e-5 (Twins gvt.py, timm).
    fp32 = [logit_diff(ref, ours, size, torch.float32) for size in (224, 320)]
    for mod in [m for n, m in ref.named_modules() if n.endswith('attn.norm')]:
        mod.eps = 1e-5
    fp64 = [logit_diff(ref, ours, size, torch.float64) for size in (224, 320)]
    print(f'{name}: max |logit diff| at 224, 320 px: float32 as built '
          f'{fp32[0]:.1e}, {fp32[1]:.1e}; float64, same eps '
          f'{fp64[0]:.1e}, {fp64[1]:.1e}')
    assert max(fp64) <= 1e-10
    assert max(fp32) <= 1e-4


@pytest.mark.parametrize('prefix', [None, 'backbone.'])
def test_mmpretrain_file_loads_through_init_cfg(tmp_path, prefix):
    """A config can point init_cfg at mmpretrain's file unconverted."""
    from mmcpvt.registry import MODELS as OURS
    from mmcpvt.utils.convert import convert_twins
    ref = mmpretrain_pcpvt(MODELS[0][0])
    path = tmp_path / 'mmpretrain.pth'
    save_checkpoint({'state_dict': ref.state_dict()}, str(path))
    init_cfg = dict(type='Pretrained', checkpoint=str(path))
    if prefix:
        init_cfg['prefix'] = prefix
    model = OURS.build(dict(type='PVTPEG', arch='small', init_cfg=init_cfg))
    model.init_weights()
    expected, report = convert_twins(ref.state_dict(), with_head=False)
    assert set(report.dropped) == {'head.fc.weight', 'head.fc.bias'}
    state = model.state_dict()
    assert all(torch.equal(state[k], v) for k, v in expected.items())


def test_mmpretrain_svt_is_refused_by_name():
    from mmpretrain import get_model
    from mmcpvt.utils.convert import convert_twins
    svt = get_model('twins-svt-small_3rdparty_8xb128_in1k', pretrained=False)
    with pytest.raises(ValueError, match='Twins-SVT'):
        convert_twins(svt.state_dict())
