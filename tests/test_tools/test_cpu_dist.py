"""mmcpvt.apis.cpu_dist: the process group of a distributed run on CPUs.

The machine is made one without an accelerator (``has_accelerator`` patched
to False), so these run the CPU path on any machine. Each launcher starts a
one-process gloo group from its own environment variables;
tests/test_tools/test_dist_train.py runs two processes through torchrun.
"""
import os
import stat

import pytest
import torch.distributed as torch_dist
from mmengine.config import Config

from mmcpvt.apis import cpu_dist as dist_utils
from tests.utils import free_port

DIST_VARS = ('RANK', 'WORLD_SIZE', 'LOCAL_RANK', 'MASTER_ADDR',
             'MASTER_PORT')


@pytest.fixture
def cpu_only(monkeypatch):
    """No accelerator, none of the launchers' variables; the environment and
    the process group are cleaned up afterwards."""
    saved = dict(os.environ)
    monkeypatch.setattr(dist_utils, 'has_accelerator', lambda: False)
    for name in list(os.environ):
        if name in DIST_VARS or name.startswith(('SLURM_', 'OMPI_')):
            del os.environ[name]
    yield
    if torch_dist.is_initialized():
        torch_dist.destroy_process_group()
    os.environ.clear()
    os.environ.update(saved)


LAUNCHER_ENVS = {
    'pytorch': dict(RANK='0', WORLD_SIZE='1', LOCAL_RANK='0',
                    MASTER_ADDR='127.0.0.1', MASTER_PORT='{port}'),
    'slurm': dict(SLURM_PROCID='0', SLURM_NTASKS='1', SLURM_LOCALID='0',
                  SLURM_NODELIST='node[1-2]', MASTER_ADDR='127.0.0.1'),
    'mpi': dict(OMPI_COMM_WORLD_RANK='0', OMPI_COMM_WORLD_SIZE='1',
                OMPI_COMM_WORLD_LOCAL_RANK='0', MASTER_ADDR='127.0.0.1'),
}


@pytest.mark.parametrize('launcher', sorted(LAUNCHER_ENVS))
def test_gloo_group_from_launcher_env(launcher, cpu_only):
    """A config asking for nccl gets a gloo group on the CPU, says so in
    the config, and a DDP wrapper that the runner's call builds."""
    from mmengine.registry import MODEL_WRAPPERS
    from torch import nn

    port = free_port()
    for name, value in LAUNCHER_ENVS[launcher].items():
        os.environ[name] = value.format(port=port)
    dist_cfg = dict(backend='nccl', timeout=60)
    if launcher != 'pytorch':
        dist_cfg['port'] = port  # mmengine's slurm option; mpi takes it too
    cfg = Config(dict(launcher=launcher, env_cfg=dict(dist_cfg=dist_cfg)))

    dist_utils.setup_cpu_dist(cfg)
    assert torch_dist.is_initialized()
    assert torch_dist.get_backend() == 'gloo'
    assert (torch_dist.get_rank(), torch_dist.get_world_size()) == (0, 1)
    assert cfg.env_cfg.dist_cfg.backend == 'gloo'
    assert (os.environ['RANK'], os.environ['WORLD_SIZE'],
            os.environ['LOCAL_RANK']) == ('0', '1', '0')
    assert os.environ['MASTER_PORT'] == str(port)
    # Runner.wrap_model passes device_ids=[LOCAL_RANK] as a default
    wrapper = MODEL_WRAPPERS.build(
        cfg.model_wrapper_cfg,
        default_args=dict(module=nn.Linear(2, 2), device_ids=[0]))
    assert wrapper.device_ids is None
    assert not wrapper.broadcast_buffers

    # a second call (tools/test.py after training in one process, say)
    # keeps the group
    dist_utils.setup_cpu_dist(cfg)
    assert torch_dist.get_world_size() == 1


def test_slurm_master_is_first_node(cpu_only, tmp_path):
    """Without MASTER_ADDR, the first host of SLURM_NODELIST (scontrol
    expands it), as mmengine does; MASTER_PORT defaults to torch's."""
    scontrol = tmp_path / 'scontrol'
    scontrol.write_text('#!/bin/sh\n[ "$3" = "node[3-4]" ] && '
                        'printf "node3\\nnode4\\n"\n')
    scontrol.chmod(scontrol.stat().st_mode | stat.S_IEXEC)
    os.environ['PATH'] = f'{tmp_path}{os.pathsep}{os.environ["PATH"]}'
    os.environ.update(SLURM_PROCID='5', SLURM_NTASKS='8', SLURM_LOCALID='1',
                      SLURM_NODELIST='node[3-4]')
    dist_utils._set_launcher_env('slurm')
    assert {name: os.environ[name] for name in DIST_VARS} == dict(
        RANK='5', WORLD_SIZE='8', LOCAL_RANK='1', MASTER_ADDR='node3',
        MASTER_PORT='29500')


def test_nothing_to_do(cpu_only, monkeypatch):
    """One process, or a machine with a GPU: mmengine's own path."""
    cfg = Config(dict(launcher='none'))
    dist_utils.setup_cpu_dist(cfg)
    assert 'model_wrapper_cfg' not in cfg and 'env_cfg' not in cfg
    monkeypatch.setattr(dist_utils, 'has_accelerator', lambda: True)
    cfg = Config(dict(launcher='pytorch'))
    dist_utils.setup_cpu_dist(cfg)
    assert 'model_wrapper_cfg' not in cfg and not torch_dist.is_initialized()


def test_model_wrapper_cfg_of_the_config(cpu_only):
    """The config's own wrapper settings stay; a DDP wrapper gets
    device_ids=None, another wrapper (FSDP) nothing."""
    os.environ.update(RANK='0', WORLD_SIZE='1', MASTER_ADDR='127.0.0.1',
                      MASTER_PORT=str(free_port()))
    cfg = Config(
        dict(launcher='pytorch',
             env_cfg=dict(dist_cfg=dict(backend='gloo')),
             model_wrapper_cfg=dict(type='MMDistributedDataParallel',
                                    find_unused_parameters=True)))
    dist_utils.setup_cpu_dist(cfg)
    assert cfg.model_wrapper_cfg == dict(type='MMDistributedDataParallel',
                                         find_unused_parameters=True,
                                         device_ids=None)
    cfg = Config(
        dict(launcher='pytorch',
             model_wrapper_cfg=dict(type='MMFullyShardedDataParallel')))
    dist_utils.setup_cpu_dist(cfg)
    assert cfg.model_wrapper_cfg == dict(type='MMFullyShardedDataParallel')


@pytest.mark.parametrize('cfg, message', [
    (dict(launcher='pytorch'), 'are not set; start the processes with '
     'torchrun'),
    (dict(launcher='slurm'), 'SLURM_PROCID, SLURM_NTASKS, SLURM_NODELIST'),
    (dict(launcher='mpi'), 'set MASTER_ADDR to the address of rank 0'),
    (dict(launcher='pytorch', sync_bn='torch'), 'remove sync_bn'),
    (dict(launcher='pytorch',
          env_cfg=dict(dist_cfg=dict(init_backend='deepspeed'))),
     "init_backend='deepspeed' needs a GPU"),
])
def test_errors_say_what_to_change(cpu_only, cfg, message):
    with pytest.raises((RuntimeError, ValueError), match=message):
        dist_utils.setup_cpu_dist(Config(cfg))
    assert not torch_dist.is_initialized()
