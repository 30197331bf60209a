"""Distributed runs on CPUs: a gloo process group.

mmengine 0.10 cannot start a distributed run without an accelerator:
``init_dist`` calls ``torch.cuda.set_device`` for every launcher, and
``Runner.wrap_model`` gives DDP ``device_ids=[LOCAL_RANK]``, which torch
refuses for a CPU module. :func:`setup_cpu_dist` (called by
:func:`.cli.build_runner`) creates the process group itself and sets
``device_ids=None`` in the config, so the dumped config says what ran. See
docs/distributed.md.
"""
import datetime
import logging
import os
import subprocess

import torch.distributed as torch_dist
from mmengine.config import Config
from mmengine.logging import print_log

# backends that exist only with their accelerator; 'gloo' and 'mpi' run on
# CPUs
ACCELERATOR_BACKENDS = ('nccl', 'hccl', 'cncl', 'mccl')
# the environment variables each launcher needs, and how to get them
LAUNCHER_ENV = dict(
    pytorch=(('RANK', 'WORLD_SIZE', 'MASTER_ADDR', 'MASTER_PORT'),
             'start the processes with torchrun (tools/dist_train.sh, '
             'tools/dist_test.sh), or run one process with --launcher none'),
    slurm=(('SLURM_PROCID', 'SLURM_NTASKS', 'SLURM_NODELIST'),
           'start the tasks with srun (tools/slurm_train.sh, '
           'tools/slurm_test.sh)'),
    mpi=(('OMPI_COMM_WORLD_RANK', 'OMPI_COMM_WORLD_SIZE',
          'OMPI_COMM_WORLD_LOCAL_RANK', 'MASTER_ADDR'),
         'start the processes with Open MPI\'s mpirun and set MASTER_ADDR to '
         'the address of rank 0'))
DEFAULT_PORT = '29500'  # torch.distributed's


def has_accelerator() -> bool:
    """Whether mmengine would run on a CUDA, NPU, MLU or MUSA device."""
    from mmengine.device import get_device
    return get_device() in ('cuda', 'npu', 'mlu', 'musa')


def _set_launcher_env(launcher: str, port=None) -> None:
    """RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR and MASTER_PORT as
    mmengine's ``_init_dist_slurm`` / ``_init_dist_mpi`` set them."""
    env = os.environ
    names, hint = LAUNCHER_ENV[launcher]
    missing = [name for name in names if name not in env]
    if missing:
        raise RuntimeError(
            f'--launcher {launcher} needs the environment variables '
            f'{", ".join(names)}, but {", ".join(missing)} '
            f'{"is" if len(missing) == 1 else "are"} not set; {hint}')
    if launcher == 'pytorch':  # torchrun has set them all
        return
    env['RANK'], env['WORLD_SIZE'] = env[names[0]], env[names[1]]
    if launcher == 'slurm':
        env['LOCAL_RANK'] = env.get('SLURM_LOCALID', env['RANK'])
        if 'MASTER_ADDR' not in env:  # the first node of the job
            env['MASTER_ADDR'] = subprocess.getoutput(
                f'scontrol show hostname {env["SLURM_NODELIST"]} | head -n1')
    else:  # mpi
        env['LOCAL_RANK'] = env['OMPI_COMM_WORLD_LOCAL_RANK']
    if port is not None:
        env['MASTER_PORT'] = str(port)
    env.setdefault('MASTER_PORT', DEFAULT_PORT)


def _cpu_model_wrapper(cfg: Config) -> None:
    """``device_ids=None`` for a DDP wrapper (the config's, or the runner's
    default one), where the runner would pass ``[LOCAL_RANK]``."""
    import mmengine.model  # noqa: F401  (registers the wrappers)
    from mmengine.registry import MODEL_WRAPPERS
    from torch.nn.parallel import DistributedDataParallel

    if cfg.get('model_wrapper_cfg', None) is None:
        cfg.model_wrapper_cfg = dict(
            type='MMDistributedDataParallel',
            broadcast_buffers=False,
            find_unused_parameters=cfg.get('find_unused_parameters', False))
    wrapper = cfg.model_wrapper_cfg
    wrapper_type = wrapper.get('type', 'MMDistributedDataParallel')
    if isinstance(wrapper_type, str):
        wrapper_type = MODEL_WRAPPERS.get(wrapper_type)
    if isinstance(wrapper_type, type) and issubclass(
            wrapper_type, DistributedDataParallel):
        wrapper.setdefault('device_ids', None)


def setup_cpu_dist(cfg: Config) -> None:
    """Start ``cfg.launcher``'s process group on CPUs; nothing with an
    accelerator, with ``launcher='none'`` or an existing group."""
    launcher = cfg.get('launcher', 'none')
    if launcher == 'none' or has_accelerator():
        return
    if cfg.get('sync_bn', None) is not None:
        raise ValueError(
            f'sync_bn={cfg.sync_bn!r}: torch\'s SyncBatchNorm runs on GPUs '
            'only, and no GPU is available; remove sync_bn from the config '
            '(--cfg-options sync_bn=None) to train on CPUs')
    _cpu_model_wrapper(cfg)
    if torch_dist.is_available() and torch_dist.is_initialized():
        return

    cfg.env_cfg = cfg.get('env_cfg', None) or {}
    cfg.env_cfg.setdefault('dist_cfg', {})
    dist_cfg = cfg.env_cfg.dist_cfg
    init_backend = dist_cfg.get('init_backend', 'torch')
    if init_backend != 'torch':
        raise ValueError(
            f'env_cfg.dist_cfg.init_backend={init_backend!r} needs a GPU, '
            'and none is available; CPU processes start with '
            "init_backend='torch' (change it in the config's env_cfg)")
    asked = dist_cfg.get('backend', 'nccl')
    if asked in ACCELERATOR_BACKENDS:
        dist_cfg['backend'] = 'gloo'
    # the rest goes to init_process_group, as mmengine's init_dist passes it
    kwargs = {k: v for k, v in dist_cfg.items()
              if k not in ('init_backend', 'port')}
    if kwargs.get('timeout', None) is not None:
        # seconds in the config, as mmengine's init_dist takes it
        kwargs['timeout'] = datetime.timedelta(seconds=kwargs['timeout'])

    _set_launcher_env(launcher, dist_cfg.get('port', None))
    torch_dist.init_process_group(**kwargs)  # env:// from the variables
    if torch_dist.get_rank() == 0:
        switched = asked != dist_cfg['backend']
        print_log(
            f'No GPU: {torch_dist.get_world_size()} CPU processes '
            f'({launcher} launcher, {dist_cfg["backend"]} backend), model '
            'wrapped without device_ids' + (
                f'; env_cfg.dist_cfg.backend={asked!r} needs one, the '
                f'processes use {dist_cfg["backend"]!r} on CPUs instead (set '
                "env_cfg.dist_cfg.backend='gloo' to say so in the config)"
                if switched else ''),
            logger='current',
            level=logging.WARNING if switched else logging.INFO)
