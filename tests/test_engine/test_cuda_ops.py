"""mmcv without CUDA ops on a GPU machine: the install builds or warns, the
runner refuses before the first iteration.

- :class:`mmcpvt.engine.CudaOpsHook`, with the model faked onto CUDA
  (this machine has no GPU): the RetinaNet PVT-T+PEG entry config is
  refused with the op and the module that calls it; a classifier is not;
  an mmcv built with CUDA ops passes.
- ``tools/install/build_mmcv.sh --plan PY`` decides the build (cpu or
  cu<version>), its CUDA architectures, the CPATH additions and the cache
  key from a stand-in Python that reports torch's CUDA, GPU and wheel
  include folders and a stand-in ``nvcc``.

Every test fakes its condition (no GPU here; the installed mmcv may be built
with or without CUDA ops).
"""
import os
import os.path as osp
import stat
import subprocess
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


def test_retinanet_on_cpu_or_with_cuda_ops_passes(detector, on_cuda,
                                                  monkeypatch):
    # the probe runs for real, on the device of the parameters (the CPU)
    assert hooks.mmcv_ops_run_on('cpu')
    monkeypatch.delattr(mmcv.ops, 'get_compiling_cuda_version')
    CudaOpsHook().before_run(detector)
    monkeypatch.undo()
    monkeypatch.setattr(mmcv.ops, 'nms', cpu_ops_only)
    CudaOpsHook().before_run(detector)  # parameters on the CPU


def test_classifier_passes(on_cuda):
    CudaOpsHook().before_run(build(CLS))


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


def fake_python(tmp_path, torch_cuda, gpu, installed='-', arch='-',
                include='-'):
    """A stand-in for the venv's Python: it answers build_mmcv.sh's one
    question (torch version, Python tag, torch's CUDA, a GPU seen, its
    architecture, the installed mmcv build, torch's nvidia include
    folders)."""
    py = tmp_path / 'python'
    py.write_text(f'#!/bin/sh\necho 2.14.1 cp311 {torch_cuda} {gpu} {arch} '
                  f'{installed} {include}\n')
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


def plan(tmp_path, py, cuda_home=None, rc=0, **extra):
    env = {k: v for k, v in os.environ.items() if k not in (
        'CUDA_HOME', 'FORCE_CUDA', 'TORCH_CUDA_ARCH_LIST')}
    env.update(MMCPVT_CACHE=str(tmp_path / 'cache'), PATH='/usr/bin:/bin',
               **extra)
    if cuda_home:
        env['CUDA_HOME'] = cuda_home
    proc = subprocess.run(['bash', BUILD, '--plan', py], env=env,
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == rc, proc.stdout + proc.stderr
    return proc.stdout + proc.stderr


@pytest.mark.parametrize('torch_cuda,gpu,nvcc,build,warns', [
    ('13.0', 0, '13.0', 'cpu', False),  # no GPU seen: CPU ops
    ('none', 0, None, 'cpu', False),  # a CPU-only torch
    ('13.0', 1, '13.0', 'cu130_sm90', False),  # the GPU's architecture
    ('12.1', 1, '12.4', 'cu124_sm90', False),  # same major: compatible
    ('13.0', 1, None, 'cpu', True),  # a GPU, no nvcc
    ('13.0', 1, '12.8', 'cpu', True),  # nvcc of another major
])
def test_build_plan(tmp_path, torch_cuda, gpu, nvcc, build, warns):
    home = fake_nvcc(tmp_path, nvcc) if nvcc else None
    arch = '9.0' if gpu else '-'
    out = plan(tmp_path, fake_python(tmp_path, torch_cuda, gpu, arch=arch),
               home, TORCH_CUDA_ARCH_LIST='8.0')  # the GPU's own wins
    assert f'build: {build.split("_")[0]}\n' in out, out
    key = f'mmcv-2.1.0_torch-2.14.1_cp311_{build}'
    assert f'cache: {tmp_path}/cache/{key}\n' in out, out
    assert ('warning' in out) == warns, out
    if warns:
        assert f'nvcc of CUDA {torch_cuda}' in out
        assert 'mim install mmcv==2.1.0' in out
        assert 'sigmoid_focal_loss' in out


@pytest.mark.parametrize('arch_list,archs,key', [
    (None, "8.0;8.6;8.9;9.0;10.0;12.0+PTX (the default)",
     'sm80-86-89-90-100-120+PTX'),
    ('9.0', '9.0 (TORCH_CUDA_ARCH_LIST)', 'sm90'),
    ('8.0 9.0', '8.0 9.0 (TORCH_CUDA_ARCH_LIST)', 'sm80-90'),
])
def test_force_cuda_1_without_gpu(tmp_path, arch_list, archs, key):
    """A login node (nvcc, no GPU): FORCE_CUDA=1 builds the CUDA ops for
    TORCH_CUDA_ARCH_LIST, else the default architectures, with torch's
    nvidia include folders on CPATH; the cache key names both."""
    home = fake_nvcc(tmp_path, '13.0')
    include = '/site/nvidia/cu13/include:/site/nvidia/cudnn/include'
    extra = dict(FORCE_CUDA='1')
    if arch_list:
        extra['TORCH_CUDA_ARCH_LIST'] = arch_list
    out = plan(tmp_path, fake_python(tmp_path, '13.0', 0, include=include),
               home, **extra)
    assert 'build: cu130\n' in out, out
    assert f'architectures: {archs}\n' in out, out
    assert f'CPATH added: {include}\n' in out, out
    assert f'cache: {tmp_path}/cache/mmcv-2.1.0_torch-2.14.1_cp311_cu130_' \
        f'{key}\n' in out, out


def test_pip_nvcc_beside_torchs_nvidia_wheels(tmp_path):
    """No CUDA_HOME and no nvcc on the PATH: pip's nvcc (nvidia-cuda-nvcc)
    in the folder of torch's nvidia wheels is used."""
    home = fake_nvcc(tmp_path, '13.0')  # <tmp>/cuda/bin/nvcc
    (tmp_path / 'cuda' / 'include').mkdir()
    include = f'{tmp_path}/nvidia/cudnn/include:{home}/include'
    out = plan(tmp_path, fake_python(tmp_path, '13.0', 0, include=include),
               FORCE_CUDA='1', TORCH_CUDA_ARCH_LIST='9.0')
    assert f'nvcc: {home}/bin/nvcc (CUDA 13.0)\n' in out, out
    assert 'build: cu130\n' in out, out


@pytest.mark.parametrize('torch_cuda,nvcc,message', [
    ('13.0', None, 'no nvcc of CUDA 13.0'),
    ('13.0', '12.8', 'CUDA 12.8, another major version'),
    ('none', None, 'this torch is a CPU build'),
])
def test_force_cuda_1_refused_without_means(tmp_path, torch_cuda, nvcc,
                                            message):
    home = fake_nvcc(tmp_path, nvcc) if nvcc else None
    out = plan(tmp_path, fake_python(tmp_path, torch_cuda, 0), home, rc=2,
               FORCE_CUDA='1')
    assert message in out and 'FORCE_CUDA=1' in out, out


def test_help_prints_the_usage():
    proc = subprocess.run(['bash', BUILD, '--help'], capture_output=True,
                          text=True, timeout=60)
    assert proc.returncode == 0 and proc.stderr == '', proc.stderr
    assert 'usage: tools/install/build_mmcv.sh [--plan] PYTHON' in proc.stdout
    assert 'FORCE_CUDA=1' in proc.stdout


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
