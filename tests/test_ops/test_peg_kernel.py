"""The fused PEG kernel (mmcpvt/ops/csrc/peg.cpp) against PyTorch's
convolution, and where ConditionalPositionEncoding uses it."""
import copy
import importlib.machinery
import os
import os.path as osp
import platform
import sys

import pytest
import torch
import torch.nn.functional as F

import mmcpvt.models.layers.peg as peg_module
import mmcpvt.ops
from mmcpvt.models.layers import ConditionalPositionEncoding as PEG
from mmcpvt.ops import fused_ops_available, peg_depthwise_
from mmcpvt.registry import MODELS

from tests.test_models.test_backbones.test_generic import BACKBONES
from tests.utils import ROOT


def reference(x, weight, bias, hw_shape):
    """x + dwconv(x) on the map of the last H*W tokens, out of place."""
    B, N, C = x.shape
    H, W = hw_shape
    extra, tokens = x[:, :N - H * W], x[:, N - H * W:]
    feat = tokens.transpose(1, 2).reshape(B, C, H, W)
    out = feat + F.conv2d(feat, weight, bias, padding=weight.shape[-1] // 2,
                          groups=C)
    return torch.cat((extra, out.flatten(2).transpose(1, 2)), dim=1)


def test_the_kernels_are_built_unless_switched_off():
    # `make install` builds them; MMCPVT_WITH_OPS=0 pip install ... does not
    built = os.getenv('MMCPVT_WITH_OPS', '1') != '0'
    assert fused_ops_available() == built, (
        'mmcpvt/_ext*.so is missing or did not load: rebuild with '
        '`pip install --no-build-isolation -e .`')


# (batch, leading tokens, H, W, channels, kernel size): channel counts below,
# at and around the kernel's 64-channel blocks (k = 3 on a full block takes
# its register path, anything else the generic loop); maps down to one
# token; kernels larger than the map (the paper's 27x27 ablation)
CASES = [
    (2, 1, 14, 14, 192, 3),
    (3, 0, 5, 7, 100, 3),
    (1, 2, 9, 4, 64, 7),
    (2, 1, 6, 6, 8, 27),
    (2, 1, 1, 1, 5, 3),
    (1, 0, 2, 13, 320, 3),
    (2, 0, 7, 3, 65, 1),
]


@pytest.mark.parametrize('B, extra, H, W, C, k', CASES)
@pytest.mark.parametrize('with_bias', [True, False])
def test_kernel_matches_pytorch(B, extra, H, W, C, k, with_bias):
    torch.manual_seed(0)
    x = torch.randn(B, extra + H * W, C)
    weight = torch.randn(C, 1, k, k)
    bias = torch.randn(C) if with_bias else None
    ref = reference(x, weight, bias, (H, W))
    x_in = x.clone()
    out = peg_depthwise_(x_in, weight, bias, (H, W))
    assert out is x_in  # in place
    assert torch.equal(out[:, :extra], x[:, :extra])  # class tokens untouched
    torch.testing.assert_close(out, ref, rtol=1e-5, atol=1e-5 * k)


def _instruction_sets():
    """The -march of each single-target build to test: on x86-64 the AVX2
    level (where the CPU has it) and the baseline, which the installed
    library carries as clones beside AVX-512; elsewhere the default."""
    if platform.machine() not in ('x86_64', 'AMD64'):
        return [None]
    with open('/proc/cpuinfo') as f:
        flags = f.read()
    return (['x86-64-v3'] if ' avx2 ' in flags and ' fma ' in flags
            else []) + ['x86-64']


@pytest.fixture(scope='module', params=_instruction_sets())
def single_target_op(request, tmp_path_factory):
    """The kernel compiled for one instruction set only, as its own
    operator namespace."""
    from torch.utils.cpp_extension import load
    arch = request.param
    tag = (arch or 'default').replace('-', '_')
    with pytest.MonkeyPatch.context() as mp:
        # the environment's ninja (requirements/build.txt), also where its
        # bin/ is not on PATH
        mp.setenv('PATH', osp.dirname(sys.executable) + os.pathsep +
                  os.environ.get('PATH', ''))
        load(name=f'mmcpvt_peg_{tag}',
             sources=[osp.join(ROOT, 'mmcpvt', 'ops', 'csrc', 'peg.cpp')],
             extra_cflags=['-O3', '-fopenmp', '-DMMCPVT_SINGLE_TARGET',
                           f'-DMMCPVT_OPS_NAMESPACE=mmcpvt_{tag}'] +
             ([f'-march={arch}'] if arch else []),
             extra_ldflags=['-fopenmp'], is_python_module=False,
             build_directory=str(tmp_path_factory.mktemp(tag)))
    return getattr(torch.ops, f'mmcpvt_{tag}').peg_depthwise_


@pytest.mark.parametrize('B, extra, H, W, C, k', CASES)
def test_every_instruction_set_matches_pytorch(single_target_op, B, extra,
                                               H, W, C, k):
    torch.manual_seed(0)
    x = torch.randn(B, extra + H * W, C)
    weight, bias = torch.randn(C, 1, k, k), torch.randn(C)
    ref = reference(x, weight, bias, (H, W))
    out = single_target_op(x.clone(), weight, bias, H, W)
    torch.testing.assert_close(out, ref, rtol=1e-5, atol=1e-5 * k)


def test_kernel_reads_tokens_with_any_batch_stride():
    # the patch tokens of a slice of a larger buffer: each image is dense,
    # the images are not adjacent
    buf = torch.randn(3, 2 + 16, 24)
    x = buf[:, 1:]
    weight, bias = torch.randn(24, 1, 3, 3), torch.randn(24)
    ref = reference(x.clone(), weight, bias, (4, 4))
    peg_depthwise_(x, weight, bias, (4, 4))
    torch.testing.assert_close(x, ref)


def test_kernel_gives_the_same_result_on_any_thread_count():
    x = torch.randn(5, 1 + 10 * 12, 130)
    weight, bias = torch.randn(130, 1, 3, 3), torch.randn(130)
    threads = torch.get_num_threads()
    outs = []
    try:
        for n in (1, 2, 3):
            torch.set_num_threads(n)
            outs.append(peg_depthwise_(x.clone(), weight, bias, (10, 12)))
    finally:
        torch.set_num_threads(threads)
    # each output element is computed by one task in one order
    assert torch.equal(outs[0], outs[1]) and torch.equal(outs[0], outs[2])


@pytest.mark.parametrize('bad, match', [
    (lambda x, w: (x.double(), w, (4, 4)), 'float32 CPU tokens'),
    (lambda x, w: (x[0], w, (4, 4)), r'tokens \(B, N, C\)'),
    (lambda x, w: (x, w[:7], (4, 4)), r'\(C, 1, k, k\) weight .* C = 8'),
    (lambda x, w: (x, torch.randn(8, 1, 2, 2), (4, 4)), 'odd k'),
    (lambda x, w: (x, w, (5, 4)), '17 tokens for a 5x4 map'),
    (lambda x, w: (x.transpose(0, 1).contiguous().transpose(0, 1), w,
                   (4, 4)), 'tokens of an image must be dense'),
])
def test_kernel_refuses_what_it_cannot_compute(bad, match):
    x, w = torch.randn(2, 17, 8), torch.randn(8, 1, 3, 3)
    x, w, hw = bad(x, w)
    with pytest.raises(RuntimeError, match=match):
        peg_depthwise_(x, w, None, hw)


@pytest.fixture
def kernel_calls(monkeypatch):
    """Counts the PEG's calls of the fused kernel."""
    calls = []

    def counting(*args):
        calls.append(args[0].shape)
        return peg_depthwise_(*args)

    monkeypatch.setattr(peg_module, 'peg_depthwise_', counting)
    return calls


class InPlace(torch.nn.Module):
    """An in-place PEG call on a copy of the input, to trace."""

    def __init__(self, peg, hw_shape):
        super().__init__()
        self.peg, self.hw_shape = peg, hw_shape

    def forward(self, x):
        return self.peg(x.clone(), self.hw_shape, inplace=True)


@pytest.mark.filterwarnings('ignore::FutureWarning',
                            'ignore::torch.jit.TracerWarning')
def test_peg_runs_the_kernel_only_where_it_applies(kernel_calls):
    C, hw = 8, (4, 4)
    x = torch.randn(2, 1 + 16, C)

    def run(peg, x=x, inplace=True):
        return peg(x.clone(), hw, inplace=inplace)

    peg = PEG(C, C)
    with torch.no_grad():
        run(peg)
        assert len(kernel_calls) == 1
        run(peg, inplace=False)  # the caller may still need x
        run(copy.deepcopy(peg).double(), x=x.double())
        run(copy.deepcopy(peg).bfloat16(), x=x.bfloat16())
        for cfg in (dict(fused=False), dict(num_layers=2),
                    dict(depthwise=False), dict(padding_mode='reflect'),
                    dict(norm_cfg=dict(type='BN')),
                    dict(act_cfg=dict(type='ReLU'))):
            run(PEG(C, C, **cfg).eval())
        with torch.autocast('cpu', dtype=torch.bfloat16):
            run(peg)
        graph = str(torch.jit.trace(InPlace(peg, hw), x,
                                    check_trace=False).inlined_graph)
        assert 'aten::_convolution' in graph and 'mmcpvt::' not in graph
    assert len(kernel_calls) == 1
    run(peg)  # autograd records the PEG's weights
    assert len(kernel_calls) == 1
    with torch.inference_mode():
        run(peg)
    frozen = PEG(C, C, frozen=True)
    run(frozen)  # nothing to record
    assert len(kernel_calls) == 3
    run(frozen, x=x.requires_grad_())
    assert len(kernel_calls) == 3


def test_flop_counters_see_the_convolution_without_autograd():
    # mmengine's counter (tools/analysis_tools/get_flops.py) traces the
    # model; a kernel call would be an operator it does not know
    from mmengine.analysis import FlopAnalyzer
    B, C, H, W = 2, 8, 4, 5
    x = torch.randn(B, 1 + H * W, C)
    with torch.no_grad():
        flops = FlopAnalyzer(InPlace(PEG(C, C), (H, W)), (x, )).total()
    assert flops == B * C * H * W * 9  # one multiply-add per tap



def test_peg_runs_pytorch_without_the_kernels(kernel_calls, monkeypatch):
    peg = PEG(8, 8)
    x = torch.randn(2, 17, 8)
    ref = peg(x, (4, 4))
    monkeypatch.setattr(peg_module, 'fused_ops_available', lambda: False)
    with torch.no_grad():
        out = peg(x.clone(), (4, 4), inplace=True)
    assert not kernel_calls
    torch.testing.assert_close(out, ref, rtol=0, atol=0)


def test_a_library_that_does_not_load_is_reported(tmp_path, monkeypatch):
    suffix = importlib.machinery.EXTENSION_SUFFIXES[0]
    (tmp_path / f'_ext{suffix}').write_bytes(b'not a shared library')
    monkeypatch.setattr(mmcpvt.ops, '_LIBRARY', str(tmp_path / '_ext'))
    with pytest.warns(UserWarning, match=r'could not load .*_ext.*'
                      r'pip install --no-build-isolation -e \.'):
        assert mmcpvt.ops._load() is False
    monkeypatch.setattr(mmcpvt.ops, '_LIBRARY', str(tmp_path / 'absent'))
    assert mmcpvt.ops._load() is False


@pytest.mark.parametrize('name, cfg', BACKBONES)
def test_every_backbone_runs_its_pegs_fused_at_inference(
        name, cfg, kernel_calls):
    """Each default PEG of a backbone runs the kernel once per forward
    without autograd, with the outputs of the autograd forward."""
    torch.manual_seed(0)
    model = MODELS.build(dict(type=name, **cfg))
    model.init_weights()
    model.eval()
    pegs = [m for m in model.modules() if isinstance(m, PEG) and m.fused]
    x = torch.randn(2, 3, 61, 83)
    ref = model(x)
    assert not kernel_calls
    with torch.no_grad():
        outs = model(x)
    assert len(kernel_calls) == len(pegs)
    for o, r in zip(outs, ref):
        torch.testing.assert_close(o, r.detach())
