"""mmcv without CUDA ops on a GPU machine: the install builds or warns, the
runner refuses before the first iteration.

- :class:`mmcpvt.engine.CudaOpsHook`, with the model faked onto CUDA
  (this machine has no GPU): the RetinaNet PVT-T+PEG entry config is
  refused with the op and the module that calls it; a classifier is not;
  an mmcv built with CUDA ops passes.
- ``tools/install/build_mmcv.sh --plan PY`` decides the build (cpu or
  cu<version>) from a stand-in Python that reports torch's CUDA and GPU and
  a stand-in ``nvcc``.
"""
import os
import os.path as osp
import stat
import subprocess
import sys
from types import SimpleNamespace

import mmcv.ops
import pytest
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


def test_retinanet_refused_without_cuda_ops(detector, on_cuda):
    assert mmcv.ops.get_compiling_cuda_version() == 'not available'
    with pytest.raises(RuntimeError) as e:
        CudaOpsHook().before_run(detector)
    msg = str(e.value)
    print(msg)
    for part in ('bbox_head.loss_cls -> mmcv.ops.sigmoid_focal_loss',
                 'bbox_head.test_cfg.nms -> mmcv.ops.nms', 'nvcc',
                 'mim install mmcv==2.1.0', 'build_mmcv.sh python'):
        assert part in msg


def test_retinanet_on_cpu_or_with_cuda_ops_passes(detector, on_cuda,
                                                  monkeypatch):
    monkeypatch.setattr(mmcv.ops, 'get_compiling_cuda_version',
                        lambda: '13.0')
    CudaOpsHook().before_run(detector)
    monkeypatch.undo()
    CudaOpsHook().before_run(detector)  # parameters on the CPU


def test_classifier_passes(on_cuda):
    CudaOpsHook().before_run(build(CLS))


def test_configs_and_train_py_name_the_hook():
    """The three runtime bases (mmpretrain, mmdet, mmseg) name it;
    tools/train.py adds it to a user's config."""
    sys.path.insert(0, osp.join(ROOT, 'tools'))
    import common
    assert common.MMCPVT_HOOKS['cuda_ops'] == dict(type='mmcpvt.CudaOpsHook')
    seg = osp.join(ROOT, 'configs', 'pvt_peg',
                   'fpn_pvt-t-peg_4xb4-80k_ade20k-512x512.py')
    for path in (DET, CLS, seg):
        cfg = Config.fromfile(path, import_custom_modules=False)
        assert cfg.default_hooks.cuda_ops.type == 'mmcpvt.CudaOpsHook', path


def fake_python(tmp_path, torch_cuda, gpu, installed='-'):
    """A stand-in for the venv's Python: it answers build_mmcv.sh's one
    question (torch version, Python tag, torch's CUDA, a GPU seen, the
    installed mmcv build)."""
    py = tmp_path / 'python'
    py.write_text(f'#!/bin/sh\necho 2.14.1 cp311 {torch_cuda} {gpu} '
                  f'{installed}\n')
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


def plan(tmp_path, py, cuda_home=None, **extra):
    env = {k: v for k, v in os.environ.items()
           if k not in ('CUDA_HOME', 'FORCE_CUDA')}
    env.update(MMCPVT_CACHE=str(tmp_path / 'cache'), PATH='/usr/bin:/bin',
               **extra)
    if cuda_home:
        env['CUDA_HOME'] = cuda_home
    proc = subprocess.run(['bash', BUILD, '--plan', py], env=env,
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout + proc.stderr


@pytest.mark.parametrize('torch_cuda,gpu,nvcc,build,warns', [
    ('13.0', 0, '13.0', 'cpu', False),  # no GPU seen: CPU ops
    ('none', 0, None, 'cpu', False),  # a CPU-only torch
    ('13.0', 1, '13.0', 'cu130', False),
    ('12.1', 1, '12.4', 'cu124', False),  # same major: compatible
    ('13.0', 1, None, 'cpu', True),  # a GPU, no nvcc
    ('13.0', 1, '12.8', 'cpu', True),  # nvcc of another major
])
def test_build_plan(tmp_path, torch_cuda, gpu, nvcc, build, warns):
    home = fake_nvcc(tmp_path, nvcc) if nvcc else None
    out = plan(tmp_path, fake_python(tmp_path, torch_cuda, gpu), home)
    assert f'build: {build}\n' in out, out
    key = f'mmcv-2.1.0_torch-2.14.1_cp311_{build}'
    assert f'cache: {tmp_path}/cache/{key}\n' in out, out
    assert ('warning' in out) == warns, out
    if warns:
        assert f'nvcc of CUDA {torch_cuda}' in out
        assert 'mim install mmcv==2.1.0' in out
        assert 'sigmoid_focal_loss' in out


def test_force_cuda_0_builds_cpu_ops(tmp_path):
    home = fake_nvcc(tmp_path, '13.0')
    out = plan(tmp_path, fake_python(tmp_path, '13.0', 1), home,
               FORCE_CUDA='0')
    assert 'build: cpu\n' in out and 'warning' not in out, out


def test_old_cpu_cache_still_found(tmp_path):
    """A CPU wheel cached before the key named the build is used."""
    old = tmp_path / 'cache' / 'mmcv-2.1.0_torch-2.14.1_cp311'
    old.mkdir(parents=True)
    (old / 'mmcv-2.1.0-cp311-cp311-linux_x86_64.whl').write_text('')
    out = plan(tmp_path, fake_python(tmp_path, '13.0', 0))
    assert f'cache: {old}\n' in out, out
