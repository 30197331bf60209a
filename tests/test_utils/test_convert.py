"""Converted timm checkpoints give timm's logits in our models.

timm is the reference implementation; its models are built with random
weights (no download), converted, and loaded with strict keys.
"""
import os
import subprocess
import sys

import numpy as np
import pytest
import timm
import torch

import mmcpvt  # noqa: F401
from mmcpvt.utils.convert import (convert_deit, convert_swin, convert_twins,
                                  detect_family)
from tests.utils import ROOT, classifier, convert_tool


def timm_model(name):
    torch.manual_seed(0)
    model = timm.create_model(name, pretrained=False).eval()
    # timm zero-initialises some layers (e.g. heads): randomise everything
    # so that every converted tensor matters.
    with torch.no_grad():
        for p in model.parameters():
            p.add_(torch.randn_like(p) * 0.02)
    return model


def max_diff(ref, ours, sizes):
    """The largest logit difference, in float64: what is left is a
    difference of the computation (an eps, an op), not of rounding."""
    ref, ours = ref.double(), ours.double()
    diffs = []
    for size in sizes:
        x = torch.randn(2, 3, size, size, dtype=torch.float64)
        with torch.no_grad():
            diffs.append((ref(x) - ours(x, mode='tensor')).abs().max().item())
    return max(diffs)


def cpvt(arch):
    return dict(type='CPVT', arch=arch, pos_embed='learned', peg_positions=())


def pvt(arch):
    return dict(type='PVTPEG', arch=arch, out_type='avg_featmap')


@pytest.mark.parametrize('name, convert, backbone, dims, sizes', [
    ('twins_pcpvt_small', convert_twins, pvt('small'), 512, [224, 256]),
    ('twins_pcpvt_base', convert_twins, pvt('medium'), 512, [224, 256]),
    ('twins_pcpvt_large', convert_twins, pvt('large'), 512, [224, 256]),
    ('deit_tiny_patch16_224', convert_deit, cpvt('tiny'), 192, [224]),
    ('deit_small_patch16_224', convert_deit, cpvt('small'), 384, [224]),
    ('deit_base_patch16_224', convert_deit, cpvt('base'), 768, [224]),
    ('swin_tiny_patch4_window7_224', convert_swin,
     dict(type='SwinPEG', arch='tiny', out_type='avg_featmap',
          peg_positions=((), ) * 4), 768, [224]),
])
def test_converted_logits_match(name, convert, backbone, dims, sizes):
    ref = timm_model(name)
    converted, report = convert(ref.state_dict())
    ours = classifier(backbone, dims)
    ours.load_state_dict(converted, strict=True)
    diff = max_diff(ref, ours, sizes)
    print(f'{name}: max |logit diff| {diff:.2e}')
    assert diff <= 1e-10
    assert not report.dropped


def test_deit_without_position_table_is_a_cpvt_warm_start():
    ref = timm_model('deit_tiny_patch16_224')
    converted, report = convert_deit(ref.state_dict(), drop_pos_embed=True)
    assert 'pos_embed' in report.dropped
    cpvt = classifier(dict(type='CPVT', arch='tiny'), 192)
    missing, unexpected = cpvt.load_state_dict(converted, strict=False)
    assert sorted(missing) == ['backbone.pegs.0.proj.0.bias',
                               'backbone.pegs.0.proj.0.weight']
    assert not unexpected


def test_swin_layouts_convert_alike_and_pegs_are_new():
    """The official code keeps patch merging at the end of stage i, timm at
    the start of stage i + 1: both become downsamples.i."""
    sd = timm_model('swin_tiny_patch4_window7_224').state_dict()
    official = {}
    for k, v in sd.items():
        if '.downsample.' in k:
            i = int(k.split('.')[1])
            k = k.replace(f'layers.{i}.', f'layers.{i - 1}.')
        official[k] = v
    a, _ = convert_swin(sd)
    b, _ = convert_swin(official)
    assert a.keys() == b.keys()
    assert all(torch.equal(a[k], b[k]) for k in a)
    with_peg = classifier(dict(type='SwinPEG', arch='tiny',
                               out_type='avg_featmap'), 768)
    missing, unexpected = with_peg.load_state_dict(a, strict=False)
    assert not unexpected
    assert missing and all('.pegs.' in k for k in missing)


@pytest.mark.parametrize('name', ['timm.pth', 'release.pth',
                                  'model.safetensors'])
def test_official_files_convert_and_load_through_init_cfg(tmp_path, name):
    """timm's files hold the state dict, its hub files are
    ``model.safetensors``, the releases hold {'model': state_dict}."""
    from mmcpvt.registry import MODELS
    from safetensors.torch import save_file
    ref = timm_model('twins_pcpvt_small')
    src, dst = tmp_path / name, tmp_path / 'dst.pth'
    if name == 'model.safetensors':
        save_file(ref.state_dict(), str(src))
    else:
        torch.save({'model': ref.state_dict()} if name == 'release.pth'
                   else ref.state_dict(), src)
    convert_tool('twins', [str(src), str(dst)])
    ours = classifier(pvt('small'), 512)
    ours.load_state_dict(torch.load(dst, weights_only=True)['state_dict'],
                         strict=True)
    model = MODELS.build(dict(pvt('small'), init_cfg=dict(
        type='Pretrained', checkpoint=str(src))))
    model.init_weights()
    expected, _ = convert_twins(ref.state_dict(), with_head=False)
    state = model.state_dict()
    assert all(torch.equal(state[k], v) for k, v in expected.items())


def test_cli_reports_with_a_progress_bar_for_large_files(
        tmp_path, monkeypatch, capsys):
    import mmcpvt.apis.convert as convert_cli
    src, dst = tmp_path / 'src.pth', tmp_path / 'dst.pth'
    torch.save({'model': timm_model('twins_pcpvt_small').state_dict()}, src)
    out = subprocess.run(
        [sys.executable, 'tools/model_converters/twins2mmcpvt.py', str(src),
         str(dst)], cwd=ROOT, capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert 'twins: mapped' in out.stdout and 'dropped 0' in out.stdout
    assert 'task/s' not in out.stdout
    a = torch.load(dst, weights_only=True)['state_dict']
    assert detect_family(a) == 'mmcpvt'
    monkeypatch.setattr(convert_cli, 'PROGRESS_MIN_BYTES',
                        src.stat().st_size)
    convert_tool('twins', [str(src), str(tmp_path / 'b.pth')])
    large = capsys.readouterr().out
    assert 'task/s' in large and 'twins: mapped' in large
    b = torch.load(tmp_path / 'b.pth', weights_only=True)['state_dict']
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)


@pytest.mark.parametrize('name, write', [
    ('weights.txt', lambda p: p.write_text('conv1.weight 0.1 0.2\n')),
    ('weights.npz', lambda p: np.savez(p, w=np.ones(2))),
])
def test_other_files_are_refused(tmp_path, name, write):
    """Damaged files and the other refusals of every loader:
    test_checkpoint_safety.py."""
    src = tmp_path / name
    write(src)
    with pytest.raises(SystemExit) as e:
        convert_tool('twins', [str(src), str(tmp_path / 'dst.pth')])
    assert f'{src}: ' in str(e.value)
    assert f'({src.stat().st_size} bytes' in str(e.value)
    assert not (tmp_path / 'dst.pth').exists()


def small_twins():
    """A complete (one stage, one block) Twins PCPVT state dict."""
    return timm.models.twins.Twins(
        embed_dims=(8, ), num_heads=(1, ), mlp_ratios=(2, ), depths=(1, ),
        sr_ratios=(1, ), num_classes=10).state_dict()


@pytest.mark.parametrize('how', ['same', 'relative', 'symlink', 'hardlink',
                                 'directory', 'under a file'])
def test_a_destination_it_cannot_write_is_refused_before_reading(
        tmp_path, monkeypatch, how):
    """The source itself (also through a link), a directory or a path
    under a file: refused before the source is read (it used to fail after
    the conversion, or overwrite the source)."""
    import mmcpvt.apis.convert as convert_cli
    monkeypatch.setattr(convert_cli, 'read_checkpoint',
                        lambda path: pytest.fail('read'))
    src = tmp_path / 'pcpvt.pth'
    torch.save({'model': small_twins()}, src)
    before = src.read_bytes()
    dst = {'same': str(src), 'relative': './pcpvt.pth',
           'directory': str(tmp_path),
           'under a file': str(src / 'out' / 'dst.pth')
           }.get(how, str(tmp_path / 'out.pth'))
    if how == 'relative':
        monkeypatch.chdir(tmp_path)
    elif how in ('symlink', 'hardlink'):
        (os.symlink if how == 'symlink' else os.link)(src, dst)
    with pytest.raises(SystemExit) as e:
        convert_tool('twins', [str(src), dst])
    assert str(e.value) == {
        'directory': f'error: dst {dst} is a directory; it takes the file '
                     f'to write, e.g. {tmp_path / "pcpvt_mmcpvt.pth"}',
        'under a file': f'error: dst {dst}: {src} is a file, not a '
                        f'directory; it takes a file path in a directory',
    }.get(how, f'error: dst {dst} is {src}, an input of this run (the same '
               f'file): writing it would overwrite it; give another path')
    assert src.read_bytes() == before


@pytest.mark.parametrize('family, edit, found', [
    ('deit', lambda sd: sd, 'looks like twins; use tools/model_converters/'
     'twins2mmcpvt.py'),
    ('swin', lambda sd: {'blocks.0.attn.qkv.weight': torch.zeros(24, 8)},
     'looks like deit; use tools/model_converters/deit2mmcpvt.py'),
    ('twins', lambda sd: {
        'layers.0.blocks.0.attn.qkv.weight': torch.zeros(24, 8)},
     'looks like swin; use tools/model_converters/swin2mmcpvt.py'),
    # the file of the issue: a PEG signature, no patch embeddings (it used
    # to end in "max() arg is an empty sequence")
    ('twins', lambda sd: {k: v for k, v in sd.items()
                          if not k.startswith('patch_embeds.')},
     "lacks the patch embeddings (one per stage): expected keys like "
     "'patch_embeds.0.proj.weight'"),
    ('twins', lambda sd: dict(sd, **{
        'blocks.0.0.attn.qkv.weight': torch.zeros(24, 8)}),
     'Twins-SVT (ALTGVT)'),
    ('swin', lambda sd: {
        'patch_embed.proj.weight': torch.zeros(8, 3, 4, 4),
        'layers.0.blocks.0.attn.qkv.weight': torch.zeros(24, 8),
        'layers.0.blocks.0.attn.logit_scale': torch.zeros(2, 1, 1)},
     'Swin V2'),
    ('deit', lambda sd: {
        'patch_embed.proj.weight': torch.zeros(8, 3, 16, 16),
        'blocks.0.attn.qkv.weight': torch.zeros(24, 8),
        'blocks.0.ls1.gamma': torch.zeros(8)},
     'layer scale'),
])
def test_files_not_of_the_family_they_claim_are_refused(tmp_path, family,
                                                        edit, found):
    src = tmp_path / 'src.pth'
    torch.save(edit(small_twins()), src)
    with pytest.raises(SystemExit) as e:
        convert_tool(family, [str(src), str(tmp_path / 'dst.pth')])
    msg = str(e.value)
    assert found in msg and 'the file has' in msg, msg
    assert not (tmp_path / 'dst.pth').exists()
