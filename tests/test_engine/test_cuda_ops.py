"""mmcv without CUDA ops on a GPU machine: the runner refuses before the
first iteration (:class:`mmcpvt.engine.CudaOpsHook`, the model faked onto
CUDA), and ``tools/install/build_mmcv.sh --plan`` decides the build from a
stand-in Python and a stand-in ``nvcc``. Every test fakes its condition (no
GPU here; the installed mmcv may be built with or without CUDA ops).
"""
import importlib.machinery
import os
import os.path as osp
import stat
import subprocess
import sys
from types import SimpleNamespace

import mmcv.ops
import pytest
import torch
from mmengine.config import Config
from mmengine.registry import init_default_scope

from mmcpvt.engine import CudaOpsHook, hooks
from tests.utils import ROOT

DET = osp.join(ROOT, 'configs', 'retinanet_pvt_tiny_peg_1x_coco.py')
CLS = osp.join(ROOT, 'configs', 'cpvt', 'cpvt-tiny_4xb256_in1k.py')
BUILD = osp.join(ROOT, 'tools', 'install', 'build_mmcv.sh')


def build(path):
    cfg = Config.fromfile(path)
    cfg.model.backbone.init_cfg = None
    init_default_scope(cfg.default_scope)
    registry = __import__(f'{cfg.default_scope}.registry',
                          fromlist=['MODELS'])
    return SimpleNamespace(model=registry.MODELS.build(cfg.model))


@pytest.fixture(scope='module')
def detector():
    return build(DET)


@pytest.fixture
def on_cuda(monkeypatch):
    monkeypatch.setattr(hooks, '_on_cuda', lambda model: True)


def cpu_ops_only(boxes, scores, iou_threshold):
    """mmcv.ops.nms of an mmcv built without CUDA ops, given CUDA tensors
    (its dispatcher's error)."""
    raise RuntimeError('nms_impl: implementation for device cuda:0 not '
                       'found.')


def test_retinanet_refused_without_cuda_ops(detector, on_cuda, monkeypatch):
    monkeypatch.setattr(mmcv.ops, 'nms', cpu_ops_only)
    # mmcv's version query is not asked: it crashed a GPU machine's build
    monkeypatch.delattr(mmcv.ops, 'get_compiling_cuda_version')
    with pytest.raises(RuntimeError) as e:
        CudaOpsHook().before_run(detector)
    msg = str(e.value)
    print(msg)
    for part in ('bbox_head.loss_cls -> mmcv.ops.sigmoid_focal_loss',
                 'bbox_head.test_cfg.nms -> mmcv.ops.nms', 'nvcc',
                 'mim install mmcv==2.1.0', 'build_mmcv.sh python'):
        assert part in msg


def test_on_cpu_or_with_cuda_ops_passes(detector, on_cuda, monkeypatch):
    """A classifier calls no mmcv op; the probe runs for real, on the device
    of the parameters (the CPU), and mmcv's version query is not asked (it
    crashed a GPU machine's build)."""
    CudaOpsHook().before_run(build(CLS))
    assert hooks.mmcv_ops_run_on('cpu')
    monkeypatch.delattr(mmcv.ops, 'get_compiling_cuda_version')
    CudaOpsHook().before_run(detector)
    monkeypatch.undo()
    monkeypatch.setattr(mmcv.ops, 'nms', cpu_ops_only)
    CudaOpsHook().before_run(detector)  # parameters on the CPU


def test_configs_and_train_py_name_the_hook():
    """The three runtime bases (mmpretrain, mmdet, mmseg) name it;
    tools/train.py adds it to a user's config."""
    from mmcpvt.apis.cli import MMCPVT_HOOKS
    assert MMCPVT_HOOKS['cuda_ops'] == dict(type='mmcpvt.CudaOpsHook')
    seg = osp.join(ROOT, 'configs', 'pvt_peg',
                   'fpn_pvt-t-peg_4xb4-80k_ade20k-512x512.py')
    for path in (DET, CLS, seg):
        cfg = Config.fromfile(path, import_custom_modules=False)
        assert cfg.default_hooks.cuda_ops.type == 'mmcpvt.CudaOpsHook', path


def fake_python(tmp_path, torch_cuda, gpu, arch='-', include='-'):
    """A stand-in for the venv's Python: it answers build_mmcv.sh's one
    question (torch version, Python tag, torch's CUDA, a GPU seen, its
    architecture, the installed mmcv build, torch's nvidia include
    folders)."""
    py = tmp_path / 'python'
    py.write_text(f'#!/bin/sh\necho 2.14.1 cp311 {torch_cuda} {gpu} {arch} '
                  f'- {include}\n')
    py.chmod(py.stat().st_mode | stat.S_IEXEC)
    return str(py)


def fake_nvcc(tmp_path, release):
    bin_ = tmp_path / 'cuda' / 'bin'
    bin_.mkdir(parents=True)
    nvcc = bin_ / 'nvcc'
    nvcc.write_text('#!/bin/sh\necho "Cuda compilation tools, release '
                    f'{release}, V{release}.1"\n')
    nvcc.chmod(nvcc.stat().st_mode | stat.S_IEXEC)
    return str(tmp_path / 'cuda')


KEY = 'cache: {tmp}/cache/mmcv-2.1.0_torch-2.14.1_cp311_'
NO_GPU_WARNING = ['warning', 'nvcc of CUDA 13.0', 'mim install mmcv==2.1.0',
                  'sigmoid_focal_loss']
ARCHS = '8.0;8.6;8.9;9.0;10.0;12.0+PTX (the default)'
# (torch's CUDA, a GPU, nvcc: its release on CUDA_HOME, 'pip' (beside
# torch's nvidia include folders) or None, environment, exit code, what the
# plan says)
PLANS = {
    # no GPU seen, a CPU-only torch: CPU ops
    'no GPU': ('13.0', 0, '13.0', {}, 0, ['build: cpu\n', KEY + 'cpu\n']),
    'cpu torch': ('none', 0, None, {}, 0, ['build: cpu\n', KEY + 'cpu\n']),
    # the GPU's architecture wins over TORCH_CUDA_ARCH_LIST
    'GPU': ('13.0', 1, '13.0', dict(TORCH_CUDA_ARCH_LIST='8.0'), 0,
            ['build: cu130\n', KEY + 'cu130_sm90\n']),
    'same major': ('12.1', 1, '12.4', {}, 0,
                   ['build: cu124\n', KEY + 'cu124_sm90\n']),
    'GPU, no nvcc': ('13.0', 1, None, {}, 0,
                     ['build: cpu\n', KEY + 'cpu\n', *NO_GPU_WARNING]),
    'nvcc of another major': ('13.0', 1, '12.8', {}, 0,
                              ['build: cpu\n', *NO_GPU_WARNING]),
    'FORCE_CUDA=0': ('13.0', 1, '13.0', dict(FORCE_CUDA='0'), 0,
                     ['build: cpu\n']),
    # a login node (nvcc, no GPU): TORCH_CUDA_ARCH_LIST, else the default
    # architectures, torch's nvidia include folders on CPATH
    'FORCE_CUDA=1': ('13.0', 0, '13.0', dict(FORCE_CUDA='1'), 0, [
        'build: cu130\n', f'architectures: {ARCHS}\n',
        'CPATH added: /site/nvidia/cu13/include\n',
        KEY + 'cu130_sm80-86-89-90-100-120+PTX\n']),
    'FORCE_CUDA=1 archs': ('13.0', 0, '13.0', dict(
        FORCE_CUDA='1', TORCH_CUDA_ARCH_LIST='8.0 9.0'), 0, [
        'architectures: 8.0 9.0 (TORCH_CUDA_ARCH_LIST)\n',
        KEY + 'cu130_sm80-90\n']),
    # no CUDA_HOME, no nvcc on the PATH: pip's (nvidia-cuda-nvcc)
    "pip's nvcc": ('13.0', 0, 'pip', dict(
        FORCE_CUDA='1', TORCH_CUDA_ARCH_LIST='9.0'), 0, [
        'nvcc: {tmp}/cuda/bin/nvcc (CUDA 13.0)\n', 'build: cu130\n']),
    'FORCE_CUDA=1, no nvcc': ('13.0', 0, None, dict(FORCE_CUDA='1'), 2,
                              ['no nvcc of CUDA 13.0', 'FORCE_CUDA=1']),
    'FORCE_CUDA=1, other major': ('13.0', 0, '12.8', dict(FORCE_CUDA='1'), 2,
                                  ['CUDA 12.8, another major version']),
    'FORCE_CUDA=1, cpu torch': ('none', 0, None, dict(FORCE_CUDA='1'), 2,
                                ['this torch is a CPU build']),
}


def plan(tmp_path, py, **extra):
    """``build_mmcv.sh --plan py``, with ``extra`` in the environment."""
    env = {k: v for k, v in os.environ.items() if k not in (
        'CUDA_HOME', 'FORCE_CUDA', 'TORCH_CUDA_ARCH_LIST')}
    env.update(MMCPVT_CACHE=str(tmp_path / 'cache'), PATH='/usr/bin:/bin',
               **extra)
    return subprocess.run(['bash', BUILD, '--plan', py], env=env,
                          capture_output=True, text=True, timeout=60)


@pytest.mark.parametrize('case', list(PLANS))
def test_build_plan(tmp_path, case):
    torch_cuda, gpu, nvcc, extra, rc, expected = PLANS[case]
    include = '/site/nvidia/cu13/include'
    if nvcc == 'pip':
        home = fake_nvcc(tmp_path, '13.0')  # <tmp>/cuda/bin/nvcc
        (tmp_path / 'cuda' / 'include').mkdir()
        include += f':{home}/include'
    elif nvcc:
        extra = dict(extra, CUDA_HOME=fake_nvcc(tmp_path, nvcc))
    proc = plan(tmp_path, fake_python(tmp_path, torch_cuda, gpu,
                                      '9.0' if gpu else '-', include),
                **extra)
    out = proc.stdout + proc.stderr
    assert proc.returncode == rc, out
    for part in expected:
        assert part.format(tmp=tmp_path) in out, (part, out)
    assert ('warning' in out) == ('warning' in expected), out


def test_help_and_old_cpu_cache(tmp_path):
    """--help prints the usage; a CPU wheel cached before the key named the
    build is used."""
    proc = subprocess.run(['bash', BUILD, '--help'], capture_output=True,
                          text=True, timeout=60)
    assert proc.returncode == 0 and proc.stderr == '', proc.stderr
    assert 'usage: tools/install/build_mmcv.sh [--plan] PYTHON' in proc.stdout
    assert 'FORCE_CUDA=1' in proc.stdout
    old = tmp_path / 'cache' / 'mmcv-2.1.0_torch-2.14.1_cp311'
    old.mkdir(parents=True)
    (old / 'mmcv-2.1.0-cp311-cp311-linux_x86_64.whl').write_text('')
    proc = plan(tmp_path, fake_python(tmp_path, '13.0', 0))
    assert f'cache: {old}\n' in proc.stdout, proc.stdout + proc.stderr


@pytest.mark.parametrize('links_cudart', [False, True])
def test_plan_reads_the_installed_build_off_the_compiled_ops(tmp_path,
                                                           links_cudart):
    """The installed build is whether mmcv's compiled ops link the CUDA
    runtime, not mmcv's version query (which crashed a GPU build)."""
    fake = tmp_path / 'site' / 'mmcv'
    fake.mkdir(parents=True)
    (fake / '__init__.py').write_text("__version__ = '2.1.0'\n")
    ext = fake / ('_ext' + importlib.machinery.EXTENSION_SUFFIXES[0])
    ext.write_bytes(b'\x7fELF' + b'\0libcudart.so.13\0' * links_cudart)
    proc = plan(tmp_path, sys.executable, PYTHONPATH=str(tmp_path / 'site'))
    built = ('cu' + torch.version.cuda.replace('.', '') if links_cudart
             else 'cpu')
    assert f'installed: {built}\n' in proc.stdout, proc.stdout + proc.stderr


def test_plan_refuses_a_python_it_cannot_build_for(tmp_path):
    """It said '...: Is a directory', or showed a ModuleNotFoundError."""
    bare = tmp_path / 'bare-python'  # this Python without site-packages
    bare.write_text(f'#!/bin/sh\nexec {sys.executable} -S "$@"\n')
    bare.chmod(bare.stat().st_mode | stat.S_IEXEC)
    for given, error in ((tmp_path / 'none', 'no such Python interpreter'),
                         (tmp_path, 'no such Python interpreter'),
                         (bare, 'has no torch: mmcv compiles against torch')):
        proc = plan(tmp_path, str(given))
        assert proc.returncode != 0, proc.stdout + proc.stderr
        last = proc.stderr.strip().splitlines()[-1]
        assert last.startswith(f'[mmcv] {given}') and error in last, last
