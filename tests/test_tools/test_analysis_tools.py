"""The analysis tools: get_flops, benchmark and train_step_check.

get_flops is checked against published figures (mmpretrain's DeiT numbers,
the paper's PVT-S+PEG+GAP and Swin-T+PEG), in-process and as a user runs it;
benchmark and train_step_check run as subprocesses on tiny settings, and
benchmark's pairing (same input, interleaved rounds) is checked in-process.
"""
import argparse
import glob
import importlib.util
import os.path as osp
import re

import pytest
import torch
import torch.nn as nn

from tests import utils
from tests.utils import ROOT

TOOLS = osp.join(ROOT, 'tools', 'analysis_tools')


def load_tool(name):
    """Import tools/analysis_tools/<name>.py by path (tools is no package)."""
    spec = importlib.util.spec_from_file_location(
        f'_analysis_{name}', osp.join(TOOLS, f'{name}.py'))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def run_tool(name, *args, timeout=300):
    """tools/analysis_tools/<name>.py run as a user runs it."""
    return utils.run_tool(osp.join(TOOLS, f'{name}.py'), *args,
                          timeout=timeout)


@pytest.fixture(autouse=True, scope='module')
def one_thread():
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


# --------------------------------------------------------------- get_flops
# (config, params in M or None, FLOPs in G, decimals the figure is given to)
PUBLISHED = {
    'DeiT-Ti': ('configs/cpvt/deit-tiny_4xb256_in1k.py', 5.72, 1.26, 2),
    'DeiT-S': ('configs/cpvt/deit-small_4xb256_in1k.py', 22.05, 4.61, 2),
    'DeiT-B': ('configs/cpvt/deit-base_4xb256_in1k.py', 86.57, 17.58, 2),
    # paper, Table "comparison with other methods": 3.8G / 4.5G
    'PVT-S+PEG+GAP': ('configs/pvt_peg/pvt-s-peg-gap_8xb128_in1k.py', None,
                      3.8, 1),
    'Swin-T+PEG': ('configs/swin_peg/swin-t-peg_16xb64_in1k.py', None, 4.5,
                   1),
}


@pytest.fixture(scope='module')
def get_flops():
    from mmengine.logging import MMLogger
    module = load_tool('get_flops')
    MMLogger.get_instance('mmengine').setLevel('ERROR')
    return module


@pytest.mark.parametrize('name', list(PUBLISHED))
def test_count_matches_published(get_flops, name):
    config, params_m, flops_g, decimals = PUBLISHED[name]
    params, flops = get_flops.count(osp.join(ROOT, config), (224, 224))
    assert round(flops / 1e9, decimals) == flops_g, (name, flops)
    if params_m is not None:
        assert round(params / 1e6, 2) == params_m, (name, params)


def test_get_flops_cli_one_config():
    config = 'configs/cpvt/deit-tiny_4xb256_in1k.py'
    out = run_tool('get_flops', config)
    assert out.returncode == 0, out.stderr
    assert (f'{config}: input 224x224, params 5.72 M, FLOPs 1.26 G'
            in out.stdout.splitlines()), out.stdout


def test_get_flops_cli_all_markdown():
    out = run_tool('get_flops', '--all', 'configs/cpvt', '--markdown')
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert lines[:2] == ['| config | input | params (M) | FLOPs (G) |',
                         '|---|---|---|---|']
    rows = {}
    for line in lines[2:]:
        cells = [c.strip() for c in line.strip('|').split('|')]
        assert len(cells) == 4, line
        rows[cells[0]] = cells[1:]
    expected = sorted(
        osp.relpath(p, ROOT)
        for p in glob.glob(osp.join(ROOT, 'configs', 'cpvt', '*.py')))
    assert sorted(rows) == expected
    for config, (size, params, flops) in rows.items():
        assert size == '224x224', config
        assert float(params) > 0 and float(flops) > 0, config
    assert rows['configs/cpvt/deit-base_4xb256_in1k.py'] == [
        '224x224', '86.57', '17.58']
    # a PEG adds a few parameters and almost no FLOPs to the same ViT
    for arch in ('tiny', 'small', 'base'):
        cpvt = rows[f'configs/cpvt/cpvt-{arch}_4xb256_in1k.py']
        deit = rows[f'configs/cpvt/deit-{arch}_4xb256_in1k.py']
        assert abs(float(cpvt[2]) - float(deit[2])) <= 0.01, arch
        assert float(cpvt[1]) < float(deit[1]), arch  # no learned PE


def test_get_flops_missing_config():
    out = run_tool('get_flops', 'configs/cpvt/no-such-config.py')
    assert out.returncode != 0
    assert 'configs/cpvt/no-such-config.py' in out.stdout + out.stderr


# --------------------------------------------------------------- benchmark
NUMBER = r'([0-9]+(?:\.[0-9]+)?)'


def test_benchmark_cli_pair():
    out = run_tool('benchmark', '--pairs', 'cpvt-tiny:deit-tiny@mmpretrain',
                   '--sizes', '64', '--batch', '2', '--rounds', '2',
                   '--warmup', '1', '--train', '--latency', '--threads', '1')
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    for what, unit in (('forward', 'img/s'), ('train', 'img/s'),
                       ('latency', 'ms')):
        found = [line for line in lines if line.startswith(what)]
        assert len(found) == 1, (what, out.stdout)
        match = re.search(
            rf'64px\s+(?:b2\s+)?cpvt-tiny\s+{NUMBER} {unit}\s+vs\s+'
            rf'deit-tiny@mmpretrain\s+{NUMBER} {unit}\s+ratio {NUMBER}',
            found[0])
        assert match, found[0]
        if unit == 'img/s':  # throughput lines name the batch they ran
            assert ' b2 ' in found[0], found[0]
        ours, theirs, ratio = map(float, match.groups())
        assert ours > 0 and theirs > 0 and ratio > 0, found[0]
        # the ratio is one ABBA block's time ratio theirs / ours: near the
        # ratio of the medians
        assert 0.5 < ratio / (ours / theirs if unit == 'img/s' else
                              theirs / ours) < 2, found[0]


def test_benchmark_cli_reports_page_faults_and_retains_memory():
    # six rounds: the page-fault figure is a median over calls, and one
    # call may still fault in a page for Python's own objects
    out = run_tool('benchmark', '--pairs', 'cpvt-tiny:cpvt-tiny-nopeg',
                   '--sizes', '64', '--batch', '2', '--rounds', '6',
                   '--warmup', '2', '--threads', '1', '--malloc', 'retain',
                   '--profile', '1')
    assert out.returncode == 0, out.stderr
    for name in ('cpvt-tiny', 'cpvt-tiny-nopeg'):  # the operator tables
        assert re.search(rf'profile {name}, 64px b2, 1 forwards, '
                         rf'{NUMBER} page faults per forward', out.stdout)
    tables = out.stdout.split('\nprofile ')[1:]
    assert len(tables) == 2, out.stdout
    for table in tables:  # rows per operator and input shapes
        assert 'Input Shapes' in table and 'aten::addmm' in table, table
        assert '[[192], [34, 768], [768, 192]' in table, table  # fc2, b2
    assert 'malloc retain' in out.stdout.splitlines()[0], out.stdout
    match = re.search(rf'ratio {NUMBER} \[{NUMBER}, {NUMBER}\]\s+\(page '
                      rf'faults/call {NUMBER} vs {NUMBER}\)', out.stdout)
    assert match, out.stdout
    # with freed memory retained, a warmed-up forward faults nothing in
    ratio, lo, hi, faults_ours, faults_theirs = map(float, match.groups())
    assert lo <= ratio <= hi, out.stdout
    assert faults_ours == 0 and faults_theirs == 0, out.stdout


def test_benchmark_cli_memory():
    out = run_tool('benchmark', '--memory', 'cpvt-tiny', '--sizes', '64',
                   '--batch', '2', '--threads', '1')
    assert out.returncode == 0, out.stderr
    match = re.search(rf'memory\s+cpvt-tiny\s+64px\s+peak\s+{NUMBER} MiB',
                      out.stdout)
    assert match, out.stdout
    assert float(match.group(1)) > 0


@pytest.mark.parametrize('flag', [
    ['--pairs', 'nosuchmodel:deit-tiny@mmpretrain'],
    ['--memory', 'nosuchmodel']])
def test_benchmark_unknown_model(flag):
    out = run_tool('benchmark', *flag)
    assert out.returncode != 0
    assert "unknown model 'nosuchmodel'" in out.stderr, out.stderr
    assert 'cpvt-tiny' in out.stderr  # says what is known
    assert 'img/s' not in out.stdout and 'MiB' not in out.stdout


def bench_args(**kwargs):
    args = dict(device='cpu', bf16=False, compile=False, with_cp=False,
                batch=2, warmup=1, rounds=4)
    args.update(kwargs)
    return argparse.Namespace(**args)


@pytest.fixture(scope='module')
def benchmark():
    import mmcpvt  # noqa: F401
    return load_tool('benchmark')


def test_every_benchmark_model_builds(benchmark):
    from mmdet.models.backbones import SwinTransformer

    from mmcpvt.models.layers import ConditionalPositionEncoding
    built = {name: build() for name, build in benchmark.MODELS.items()}
    for name, model in built.items():
        assert sum(p.numel() for p in model.parameters()) > 1e6, name

    def pegs(name):
        return [m for m in built[name].modules()
                if isinstance(m, ConditionalPositionEncoding)]

    assert len(pegs('cpvt-tiny')) == 1 and pegs('cpvt-tiny')[0].fused
    assert len(pegs('cpvt-tiny-p0-4-unfused')) == 5
    assert not any(m.fused for m in pegs('cpvt-tiny-p0-4-unfused'))
    assert not pegs('cpvt-tiny-nopeg')
    # the RetinaNet pairs differ in their backbones only
    for ours, theirs in (('retinanet-pvt-tiny-peg', 'retinanet-pvt-tiny@mmdet'),
                         ('retinanet-swin-tiny-peg',
                          'retinanet-swin-tiny@mmdet')):
        assert pegs(ours) and not pegs(theirs)
        for part in ('neck', 'bbox_head'):
            assert (str(getattr(built[ours], part)) ==
                    str(getattr(built[theirs], part))), (ours, part)
    assert isinstance(built['retinanet-swin-tiny@mmdet'].backbone,
                      SwinTransformer)


def test_benchmark_runners_share_input(benchmark):
    # building a model draws random numbers; the input must not depend on it
    args = bench_args()
    ours = benchmark.Runner('cpvt-tiny', args, 64, 2)
    theirs = benchmark.Runner('deit-tiny@mmpretrain', args, 64, 2)
    assert ours.data.shape == (2, 3, 64, 64)
    assert torch.equal(ours.data, theirs.data)


def test_benchmark_compare_interleaves(benchmark, monkeypatch):
    # two models that draw different amounts of random numbers when built
    monkeypatch.setitem(benchmark.MODELS, 'small', lambda: nn.Conv2d(3, 4, 3))
    monkeypatch.setitem(benchmark.MODELS, 'wide', lambda: nn.Sequential(
        nn.Linear(8, 8), nn.Conv2d(3, 16, 5)))
    calls, inputs = [], {}
    seconds = {'small': [1., 3., 2., 9.], 'wide': [5., 4., 6., 0.]}

    def timed(self, what):
        calls.append((self.name, what))
        inputs.setdefault(self.name, self.data)
        n = sum(name == self.name for name, _ in calls) - 2  # -1: warm-up
        return seconds[self.name][n] if n >= 0 else 100.

    monkeypatch.setattr(benchmark.Runner, 'timed', timed)
    result = benchmark.compare('small', 'wide', 'train', 16, bench_args())
    # warm-up of each, then rounds alternating the order: ab ba ab ba
    assert [name for name, _ in calls] == [
        'small', 'wide', 'small', 'wide', 'wide', 'small', 'small', 'wide',
        'wide', 'small']
    assert {what for _, what in calls} == {'train'}
    assert torch.equal(inputs['small'], inputs['wide'])
    # medians over rounds, warm-up left out; then the median of the ABBA
    # block ratios wide / small: (5 + 4) / (1 + 3) and (6 + 0) / (2 + 9)
    assert result[:2] == (2.5, 4.5)
    assert result[2] == pytest.approx((9 / 4 + 6 / 11) / 2)
    assert result[3] == pytest.approx((6 / 11, 9 / 4))  # spread: min, max
    assert len(result[4]) == 2  # page faults per call of each


@pytest.mark.parametrize('n, lo, hi', [(5, 1, 5), (12, 3, 10), (20, 6, 15),
                                       (30, 10, 21)])
def test_median_interval_is_the_binomial_order_statistic(benchmark, n, lo,
                                                        hi):
    # the standard distribution-free 95 % intervals of a median (e.g.
    # n = 12: 3rd to 10th value; n = 20: 6th to 15th)
    values = [float(v) for v in range(n, 0, -1)]  # any order
    assert benchmark.median_interval(values) == (lo, hi)


# -------------------------------------------------------- train_step_check
def test_train_step_check_cpu():
    out = run_tool('train_step_check', '--device', 'cpu', '--amp', 'bf16',
                   '--size', '32', '--batch', '2', '--steps', '1', '--cases',
                   'cpvt-tiny-gap', 'swin-tiny-peg-gap')
    assert out.returncode == 0, out.stdout + out.stderr
    lines = out.stdout.splitlines()
    assert lines[-1] == '0 failed', out.stdout
    ok = [line for line in lines if line.startswith('[ok]')]
    # two cases, each fp32, fp32 + with_cp and bf16
    assert len(ok) == 6, out.stdout
    assert sum('cpvt-tiny-gap' in line for line in ok) == 3
    assert sum('swin-tiny-peg-gap' in line for line in ok) == 3
    assert sum('bf16' in line for line in ok) == 2
    # fp32 without checkpointing also compares no-grad and autograd outputs
    same = [line for line in ok if 'no-grad forward = autograd forward' in
            line]
    assert len(same) == 2 and all('fp32 ' in line and 'with_cp' not in line
                                  for line in same), out.stdout


def test_train_step_check_cases_selects_nothing():
    out = run_tool('train_step_check', '--device', 'cpu', '--cases',
                   'no-such-case')
    assert out.returncode == 2
    assert 'no-such-case' in out.stderr and 'cpvt-tiny' in out.stderr
