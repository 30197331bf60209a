"""tools/deployment/pytorch2onnx.py: a file exported at 64x64 (batch 1)
gives PyTorch's outputs for a batch of two at 64x64 and at 45x83, which no
patch size, stride or window divides, so that a padding, reshape or window
decision frozen at the export size shows. Tiny backbones in-process; a tiny
classifier config through the command line."""
import contextlib
import json
import math
import os.path as osp
import re

import numpy as np
import onnx
import onnxruntime as ort
import pytest
import torch
import torch.nn.functional as F
from mmcv.cnn.bricks.transformer import AdaptivePadding

from mmcpvt.models.layers import ROPE_TYPES, RotaryPositionEmbedding2d
from mmcpvt.registry import MODELS
from tests.utils import ROOT, explain, load_script, run_tool

TOOL = 'tools/deployment/pytorch2onnx.py'
EXPORT_SIZE, OTHER_SIZE = (64, 64), (45, 83)
ATOL = 1e-4  # the largest max |delta| accepted (float32)

p2o = load_script(TOOL)

# One PEG model per backbone family, shrunk, and CPVT with each 2-D RoPE
# (its grid traced: tools/deployment/pytorch2onnx.py, traced_rope). SwinPEG's
# window of 4 makes the two sizes differ in the shift decision: stage 2 is
# 4x4 at 64x64 (one window, not shifted) and 3x6 at 45x83 (two windows,
# shifted).
CPVT_TINY = dict(type='CPVT', arch=dict(embed_dims=32, num_layers=3,
                                        num_heads=2, feedforward_channels=64),
                 out_type='featmap', out_indices=(0, -1), with_cls_token=True)
BACKBONES = {
    'CPVT': dict(CPVT_TINY, peg_positions=(0, 1)),
    **{f'CPVT-RoPE-{t}': dict(CPVT_TINY, rope_cfg=dict(type=t),
                              peg_positions=(0, ) if t == 'mixed' else ())
       for t in ROPE_TYPES},
    'PVTPEG': dict(type='PVTPEG', arch=dict(embed_dims=[8, 16, 24, 32],
                             num_heads=[1, 2, 3, 4], mlp_ratios=[2, 2, 2, 2],
                             depths=[1, 2, 1, 1], sr_ratios=[8, 4, 2, 1])),
    'SwinPEG': dict(type='SwinPEG', window_size=4,
                    arch=dict(embed_dims=8, depths=[2, 2, 2, 2],
                              num_heads=[1, 2, 2, 4])),
}


def run_onnx(path, x: torch.Tensor):
    options = ort.SessionOptions()
    options.log_severity_level = 3
    sess = ort.InferenceSession(path, options,
                                providers=['CPUExecutionProvider'])
    return sess.run(None, {'input': x.numpy()})


def test_swin_sizes_flip_the_shift_decision():
    """The premise of the SwinPEG case below: some stage fits in one window
    at one size and not at the other (stage maps: ceil divisions)."""
    def fits(size, patch=4):
        return [max(math.ceil(s / patch / 2**i) for s in size) <=
                BACKBONES['SwinPEG']['window_size'] for i in range(4)]

    assert fits(EXPORT_SIZE) != fits(OTHER_SIZE)


@pytest.mark.parametrize('name', list(BACKBONES))
def test_backbone_export_is_dynamic(name, tmp_path):
    """Symbolic batch, height and width in and out; the norms single
    LayerNormalization nodes (opset 17)."""
    torch.manual_seed(0)
    backbone = MODELS.build(BACKBONES[name])
    backbone.init_weights()
    module = p2o.BackboneFeatures(backbone).eval()
    n = len(module(torch.zeros(1, 3, *EXPORT_SIZE)))
    names = [f'feat{i}' for i in range(n)]
    path = str(tmp_path / f'{name}.onnx')
    p2o.export(module, path, EXPORT_SIZE, 17, True, names, [True] * n)

    model = onnx.load(path)
    onnx.checker.check_model(model)
    assert model.opset_import[0].version == 17
    ops = {node.op_type for node in model.graph.node}
    assert 'LayerNormalization' in ops
    for value in [*model.graph.input, *model.graph.output]:
        dims = value.type.tensor_type.shape.dim
        assert len(dims) == 4 and all(dims[i].dim_param for i in (0, 2, 3)
                                      ), (value.name, dims)
    assert model.graph.input[0].type.tensor_type.shape.dim[1].dim_value == 3

    for size in (EXPORT_SIZE, OTHER_SIZE):
        x = torch.randn(2, 3, *size)
        with torch.no_grad():
            expected = module(x)
        got = run_onnx(path, x)
        assert len(got) == len(expected) == n
        for i, (o, e) in enumerate(zip(got, expected)):
            assert o.shape == tuple(e.shape), (size, i)
            delta = np.abs(o - e.numpy()).max()
            assert delta <= ATOL, f'{name} at {size}, feat{i}: {delta:.2e}'


@pytest.mark.parametrize('padding', ['corner', 'same'])
@pytest.mark.parametrize('kernel, stride', [(4, 4), (3, 2), (7, 4)])
def test_traced_padding_equals_mmcv(padding, kernel, stride):
    """The export's AdaptivePadding pads eagerly exactly as mmcv's."""
    ours = p2o.TracedAdaptivePadding(kernel, stride, 1, padding)
    theirs = AdaptivePadding(kernel, stride, 1, padding)
    for size in ((16, 16), (15, 17), (1, 2), (9, 4)):
        x = torch.randn(1, 2, *size)
        assert torch.equal(ours(x), theirs(x)), size


@pytest.mark.parametrize('rope_type', ROPE_TYPES)
def test_traced_rope_equals_timm(rope_type):
    """The export's RoPE tables are timm's, eagerly, on any map."""
    torch.manual_seed(0)
    rope = RotaryPositionEmbedding2d(32, 2, 3, rope_type)
    for hw in ((1, 1), (3, 5), (4, 4), (7, 2)):
        torch.testing.assert_close(p2o.traced_rope(rope, hw), rope(hw),
                                   rtol=0, atol=0)


CLS_CONFIG = """\
_base_ = {base!r}
model = dict(
    backbone=dict(
        arch=dict(_delete_=True, embed_dims=32, num_layers=2, num_heads=2,
                  feedforward_channels=64),
        img_size=64),
    head=dict(num_classes=5, in_channels=32))
data_preprocessor = dict(num_classes=5)
"""


def tiny_config(tmp_path, name='cpvt'):
    config = tmp_path / f'{name}_tiny.py'
    config.write_text(CLS_CONFIG.format(base=osp.join(
        ROOT, 'configs', 'cpvt', f'{name}-tiny_4xb256_in1k.py')))
    return str(config)


@pytest.fixture(scope='module')
def classifier(tmp_path_factory):
    """A tiny CPVT-Ti classifier config, a checkpoint of its weights
    (randomised so that the logits are not near zero), and the model."""
    tmp_path = tmp_path_factory.mktemp('classifier')
    config = tiny_config(tmp_path)
    model, _, _ = p2o.build_model(config)
    torch.manual_seed(0)
    with torch.no_grad():
        for p in model.head.parameters():
            p.normal_(0, 1)
    checkpoint = tmp_path / 'tiny.pth'
    torch.save(dict(state_dict=model.state_dict()), checkpoint)
    return config, checkpoint, model


def test_classifier_cli_verify(classifier, tmp_path, monkeypatch):
    """The command line exports a classifier config with its checkpoint
    given by URL (put in torch.hub's cache beforehand: nothing is
    downloaded; the refusal of an unsafe one: test_url_checkpoints.py);
    --verify passes at both sizes, and the file's ``scores`` at 45x83 are
    the softmax of the PyTorch classifier's logits; the normalisation it
    expects is stored in the file."""
    config, checkpoint, model = classifier
    monkeypatch.setenv('TORCH_HOME', str(tmp_path / 'torch'))
    cached = tmp_path / 'torch' / 'hub' / 'checkpoints'
    cached.mkdir(parents=True)
    (cached / 'tiny.pth').write_bytes(checkpoint.read_bytes())
    out = str(tmp_path / 'cls.onnx')
    proc = run_tool(TOOL, config, 'https://example.invalid/tiny.pth',
                    '--output-file', out, '--shape', '64', '64', '--verify',
                    '--verify-shape', '45', '83')
    assert proc.returncode == 0, explain(proc)
    assert 'classifier ImageClassifier (CPVT backbone)' in proc.stdout
    assert '64x64: max |delta| scores' in proc.stdout, explain(proc)
    assert '45x83: max |delta| scores' in proc.stdout, explain(proc)
    assert 'FAILED' not in proc.stdout

    x = torch.randn(3, 3, *OTHER_SIZE)
    with torch.no_grad():
        expected = F.softmax(model(x, mode='tensor'), dim=-1).numpy()
    (scores, ) = run_onnx(out, x)
    assert scores.shape == (3, 5)
    assert np.abs(scores - expected).max() <= ATOL
    # log-scores: the logits up to a constant, at their own scale
    assert np.abs(np.log(scores) - np.log(expected)).max() <= ATOL

    meta = {p.key: p.value for p in onnx.load(out).metadata_props}
    norm = json.loads(meta['mmcpvt_normalisation'])
    assert norm == dict(mean=[123.675, 116.28, 103.53],
                        std=[58.395, 57.12, 57.375], to_rgb=True)


def test_learned_table_is_traced_for_any_size(tmp_path, capsys):
    """DeiT's learned table, exported at its own size (where eager adds it
    as it is), is resized in the graph: the tool, which verifies such models
    on its own, finds the file right at 45x83 too. --static fixes the input
    to 1x3x64x64."""
    out = str(tmp_path / 'deit.onnx')
    args = [tiny_config(tmp_path, 'deit'), '--output-file', out, '--shape',
            '64']
    p2o.main(args + ['--verify-shape', '45', '83'])
    printed = capsys.readouterr().out
    for size in ('64x64', '45x83'):
        assert re.search(rf'at {size}: max \|delta\| .* ok', printed), printed
    p2o.main(args + ['--static'])
    dims = onnx.load(out).graph.input[0].type.tensor_type.shape.dim
    assert [d.dim_value for d in dims] == [1, 3, 64, 64]


def test_verify_catches_a_size_frozen_in_the_graph(classifier, tmp_path,
                                                   monkeypatch, capsys):
    """Without the traced patch-embedding padding, the padding of 64x64
    (none) is frozen into the graph: --verify passes at 64x64, fails at
    45x83 and the tool exits with an error."""
    monkeypatch.setattr(p2o, 'traceable',
                        lambda module: contextlib.nullcontext())
    config, checkpoint, _ = classifier
    with pytest.raises(SystemExit, match='does not reproduce PyTorch'):
        p2o.main([config, str(checkpoint), '--output-file',
                  str(tmp_path / 'cls.onnx'), '--shape', '64', '--verify',
                  '--verify-shape', '45', '83'])
    printed = capsys.readouterr().out
    assert re.search(r'at 64x64: max \|delta\| .* ok', printed), printed
    assert re.search(r'45x83: .*(FAILED|failed)', printed), printed


@pytest.mark.parametrize('case, atol, says', [
    ('directory', '1e-4', '--output-file {out} is a directory; it takes the '
     'file to write, e.g. {out}/cpvt_tiny.onnx'),
    ('config', '1e-4', '--output-file {out} is {out}, an input of this run '
     '(the same file)'),
    ('m.onnx', '-1', 'argument --atol: must be >= 0, got -1')])
def test_options_are_checked_before_the_model_is_built(
        tmp_path, monkeypatch, capsys, case, atol, says):
    """An --output-file that is a directory or the config, and an --atol
    below 0, are refused before anything is built, naming the option, the
    value and what it takes."""
    monkeypatch.setattr(p2o, 'build_model',
                        lambda *a, **k: pytest.fail('built'))
    config = tiny_config(tmp_path)
    out = {'directory': str(tmp_path), 'config': config}.get(
        case, str(tmp_path / case))
    with pytest.raises(SystemExit):
        p2o.main([config, '--output-file', out, '--atol', atol])
    assert says.format(out=out) in capsys.readouterr().err


def test_an_input_past_the_attention_limit_is_refused(classifier, tmp_path,
                                                      monkeypatch, capsys):
    """CPVT-Ti at 10000 px (390,625 tokens: 1.5e11 pairs a head, past the
    1.7e10 of Attention.max_pairs) ran on with nothing printed; here the
    limit is lowered below the 4x4 tokens of 64 px."""
    from mmcpvt.models.layers import Attention
    monkeypatch.setattr(Attention, 'max_pairs', 16 * 16 - 1)
    config, checkpoint, _ = classifier
    with pytest.raises(SystemExit):
        p2o.main([config, str(checkpoint), '--output-file',
                  str(tmp_path / 'cls.onnx'), '--shape', '64'])
    error = capsys.readouterr().err.strip().splitlines()[-1]
    assert error.startswith('__main__.py: error: attention of 17 tokens '
                            'over 17 keys'), error  # 16 and the class token
    assert error.endswith('Attention.max_pairs = None')
