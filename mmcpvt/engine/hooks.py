"""Runner hooks that a config names (``default_hooks`` of our configs;
``tools/train.py`` adds them to any config), so that mmdet's and mmseg's
own ``tools/train.py`` get them too."""
import contextlib
import glob
import logging
import os
import os.path as osp
import random
import re
import socket
import tempfile

import numpy as np
import torch
from mmengine.hooks import Hook
from mmengine.logging import print_log
from mmengine.runner import find_latest_checkpoint, set_random_seed

from mmcpvt.registry import register_hook
from mmcpvt.utils.checkpoint import check_checkpoint, weights_only_loads
from mmcpvt.utils.state_dict import check_state_dict_fits


@register_hook
class WeightsOnlyLoadHook(Hook):
    """From ``before_run`` to ``after_run``, every ``torch.load`` of the
    process uses ``weights_only=True``
    (:func:`mmcpvt.utils.checkpoint.weights_only_loads`): the runner's
    ``load_from`` and ``resume`` and the models' ``init_cfg`` Pretrained
    loads all run after ``before_run``, by a local path or a URL alike. The
    checkpoint the runner is about to load (by http(s): its download) is
    checked first: an empty, truncated or unsafe file is refused."""

    priority = 'VERY_HIGH'

    def __init__(self):
        self._loads = None

    def before_run(self, runner) -> None:
        if self._loads is None:
            self._loads = contextlib.ExitStack()
            self._loads.enter_context(weights_only_loads())
        load_from = runner.cfg.get('load_from', None)
        if load_from is None and runner.cfg.get('resume', False):
            load_from = find_latest_checkpoint(runner.work_dir)
        # by URL, rank 0 downloads and checks; the others load its copy
        if load_from is not None and ('://' not in str(load_from)
                                      or runner.rank == 0):
            check_checkpoint(load_from, state_dict=True, setting='resume from'
                             if runner.cfg.get('resume', False) else
                             'load_from')

    def after_run(self, runner) -> None:
        if self._loads is not None:
            self._loads.close()
            self._loads = None


def _seed(seed: int, stream: int, index: int) -> int:
    """A 32-bit seed from the run's seed, a stream (epochs 0, steps 1) and
    an index in it: no two (stream, index) share one, whatever the seed
    (with ``randomness.diff_rank_seed``, rank r runs with seed + r)."""
    return int(np.random.SeedSequence((seed, stream, index)).generate_state(
        1)[0])


def _generator_states():
    """The states of ``random``, numpy's and torch's CPU generators."""
    return random.getstate(), np.random.get_state(), torch.get_rng_state()


def _set_generator_states(states) -> None:
    random.setstate(states[0])
    np.random.set_state(states[1])
    torch.set_rng_state(states[2])


@register_hook
class SeedHook(Hook):
    """Draw a training run's random numbers from the seed, the epoch and the
    iteration alone, so that a resumed run, epoch- or iteration-based,
    trains as the uninterrupted one.

    mmengine seeds the generators once, when the runner is built, and saves
    none of their states in checkpoints. Here:

    - each training epoch starts from the seed and the epoch (``random``,
      numpy, torch): an epoch trained again after a crash draws its data
      order and augmentation as it did the first time;
    - each training step (forward and backward: drop path, dropout, batch
      augmentation such as Mixup) is seeded from the seed and the iteration,
      and puts the generators back as it found them afterwards; so does
      validation. The data loaded in the main process (``num_workers=0``)
      is then one stream from the start of the epoch that nothing else
      moves.

    Resumed at iteration k, an iteration-based loop (mmseg's schedules)
    loads and skips k batches first (mmengine's ``IterBasedTrainLoop``),
    which draws that stream again, up to where the uninterrupted run was;
    data workers replay theirs (mmengine seeds them from the seed, the rank
    and the worker). Nothing about the generators is saved: the
    checkpoint's iteration and the seed say it all. ``runner.seed`` is the
    configured seed or, without one, the seed mmengine drew and saved in the
    checkpoint's meta (the sampler and the workers, built before resuming,
    then draw another: configure one).
    """

    # first: seeded before any hook draws (none of mmengine's, mmpretrain's,
    # mmdet's or mmseg's draws after a step, where the stream is put back)
    priority = 'VERY_HIGH'

    EPOCH, STEP = 0, 1

    def __init__(self):
        self._stream = None  # the main-process data stream during a step

    def before_train_epoch(self, runner) -> None:
        set_random_seed(_seed(runner.seed, self.EPOCH, runner.epoch))

    def before_train_iter(self, runner, batch_idx: int,
                          data_batch=None) -> None:
        self._stream = _generator_states()
        set_random_seed(_seed(runner.seed, self.STEP, runner.iter))

    def after_train_iter(self, runner, batch_idx: int, data_batch=None,
                         outputs=None) -> None:
        _set_generator_states(self._stream)

    def before_val_epoch(self, runner) -> None:
        self._stream = _generator_states()

    def after_val_epoch(self, runner, metrics=None) -> None:
        _set_generator_states(self._stream)


@register_hook
class WorkDirLockHook(Hook):
    """Refuse to train in a work dir where another training runs.

    Two trainings in one work dir both write ``epoch_N.pth`` and
    ``last_checkpoint``: the second overwrites the first's checkpoints. The
    first holds ``<work_dir>/.train.lock`` (its host and process id) from
    ``before_train`` to ``after_train``; ``tools/train.py`` takes it before
    it builds the runner, which writes the config into the work dir. The
    lock file is made whole or not at all (written aside, then linked to its
    name). A lock left by a process that no longer runs on this host (a
    killed run), or empty or unreadable, is taken over with a warning; one
    from another host is refused, as its process cannot be checked. Holding
    the lock, a run removes the temporary files that a save killed midway
    left in the work dir (``.epoch_3.pth.<random>.tmp``,
    :func:`mmcpvt.utils.atomic.atomic_write`). Only rank 0 locks.
    """

    NAME = '.train.lock'

    def __init__(self):
        self._path = None

    @classmethod
    def acquire(cls, work_dir: str) -> str:
        """Take the lock of ``work_dir`` for this process (kept if it holds
        it already), remove orphaned temporary files; the lock's path.

        Raises:
            RuntimeError: another training may hold it.
        """
        path = osp.join(work_dir, cls.NAME)
        os.makedirs(work_dir, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f'{cls.NAME}.', dir=work_dir)
        with os.fdopen(fd, 'w') as f:
            f.write(_me())
        try:
            for _ in range(2):
                with contextlib.suppress(FileExistsError):
                    os.link(tmp, path)  # no file of that name: made whole
                if _owner(path) == _me():
                    break
                cls._check_stale(path)
            else:  # another run took it between the two
                cls._check_stale(path)
        finally:
            os.remove(tmp)
        orphans = sorted(glob.glob(osp.join(glob.escape(work_dir), '.*.tmp')))
        for orphan in orphans:
            os.remove(orphan)
        if orphans:
            print_log(f'{work_dir}: removed what saves that did not finish '
                      f'left: {", ".join(map(osp.basename, orphans))}',
                      logger='current', level=logging.WARNING)
        return path

    @staticmethod
    def release(path: str) -> None:
        """Remove the lock at ``path`` if this process holds it."""
        if _owner(path) == _me():
            with contextlib.suppress(FileNotFoundError):
                os.remove(path)

    @staticmethod
    def _check_stale(path: str) -> None:
        """Remove the lock at ``path`` if its process is gone or it names
        none; raise if it may still run."""
        host, pid = (_owner(path).split() + ['?', '?'])[:2]
        alive = pid.isdigit()  # else empty or unreadable: stale
        if host == socket.gethostname() and pid.isdigit():
            try:
                os.kill(int(pid), 0)
            except ProcessLookupError:
                alive = False
            except PermissionError:
                pass
        if alive:
            raise RuntimeError(
                f'work dir {osp.dirname(path)} is in use by another training '
                f'(host {host}, process {pid}, lock file {path}): a second '
                f'run would overwrite its checkpoints. Wait for it to end, '
                f'stop it, or give this run another work dir (--work-dir); '
                f'if that run is over, delete {path}.')
        why = (f'process {pid} of {host} has ended without releasing the '
               f'work dir' if pid.isdigit() else
               'it names no process (empty or unreadable)')
        print_log(f'{path}: {why}; taking it over', logger='current',
                  level=logging.WARNING)
        with contextlib.suppress(FileNotFoundError):
            os.remove(path)

    def before_train(self, runner) -> None:
        if runner.rank == 0:
            self._path = self.acquire(runner.work_dir)

    def after_train(self, runner) -> None:
        if self._path is not None:
            self.release(self._path)
            self._path = None


def _me() -> str:
    """What a lock file of this process holds: 'host pid'."""
    return f'{socket.gethostname()} {os.getpid()}'


def _owner(path: str) -> str:
    """The text of the lock file ``path`` ('' if it cannot be read)."""
    try:
        with open(path, errors='replace') as f:
            return f.read().strip()
    except OSError:
        return ''


def _bare_model(runner):
    """The runner's model without its DDP / FSDP wrapper."""
    from mmengine.model import is_model_wrapper
    return runner.model.module if is_model_wrapper(
        runner.model) else runner.model


@register_hook
class CheckpointFitHook(Hook):
    """Refuse a ``load_from`` / ``resume`` checkpoint of which fewer than
    ``min_fraction`` of the model's tensors fit (names and shapes), before
    anything is loaded.

    ``tools/test.py`` registers it with ``min_fraction=1.0``: a model tested
    with some weights left random measures nothing (a classifier checkpoint
    gives a detector mAP 0.000); ``tools/train.py --resume`` too (mmengine
    would load the tensors that fit and train on with the rest at random).
    Checks the checkpoint as ``Runner.load_checkpoint`` will load it
    (``state_dict``, ``module.`` stripped), in ``after_load_checkpoint``,
    which the runner calls between reading the file and loading it.

    Args:
        min_fraction (float): The share of the model's tensors that must
            fit. Defaults to 1.0.
    """
    priority = 'LOWEST'  # after hooks that rewrite the checkpoint (EMA)

    def __init__(self, min_fraction: float = 1.0):
        self.min_fraction = min_fraction

    def after_load_checkpoint(self, runner, checkpoint: dict) -> None:
        model = _bare_model(runner)
        state = checkpoint.get('state_dict', checkpoint)
        state = {re.sub(r'^module\.', '', k): v for k, v in state.items()}
        why = ('all of them are needed: the rest would be left at random '
               'weights.' if self.min_fraction >= 1 else
               f'at least {self.min_fraction:.0%} are needed.')
        check_state_dict_fits(model.state_dict(), state, self.min_fraction,
                              owner=type(model).__name__, why=why)


def _on_cuda(model) -> bool:
    return any(p.is_cuda for p in model.parameters())


def mmcv_ops_run_on(device) -> bool:
    """Whether mmcv's compiled ops run on ``device``: one NMS of one box
    there. An mmcv built without CUDA ops raises (its dispatcher finds no
    CUDA implementation); mmcv-lite has no ops at all. Not mmcv's
    ``get_compiling_cuda_version()``: in an mmcv 2.1.0 built on a GPU
    machine (torch 2.11, Python 3.12) it ended the process with a
    segmentation fault, while the ops ran (docs/get_started.md)."""
    try:
        from mmcv.ops import nms
        box = torch.tensor([[0., 0., 1., 1.]], device=device)
        nms(box, torch.ones(1, device=device), 0.5)
    except (ImportError, RuntimeError):
        return False
    return True


def mmcv_cuda_op_calls(model):
    """``(module path, mmcv op)`` for each mmcv op that ``model`` calls on
    CUDA tensors: mmcv.ops modules, mmdet's and mmseg's ``FocalLoss``
    (mmcv's ``sigmoid_focal_loss`` on CUDA, the Python loss on the CPU) and
    a head's ``test_cfg.nms`` (``mmcv.ops.batched_nms``)."""
    for name, m in model.named_modules():
        if type(m).__module__.startswith('mmcv.ops'):
            yield name, f'mmcv.ops.{type(m).__name__}'
        elif (type(m).__name__ == 'FocalLoss'
              and not getattr(m, 'activated', False)):
            yield name, 'mmcv.ops.sigmoid_focal_loss'
        test_cfg = getattr(m, 'test_cfg', None)
        if name and isinstance(test_cfg, dict) and test_cfg.get('nms'):
            op = test_cfg['nms'].get('type', 'nms')
            yield f'{name}.test_cfg.nms', f'mmcv.ops.{op}'


@register_hook
class CudaOpsHook(Hook):
    """Refuse, in ``before_run`` (before any checkpoint is loaded and the
    first iteration), a model on CUDA that calls mmcv ops
    (:func:`mmcv_cuda_op_calls`) when they do not run there
    (:func:`mmcv_ops_run_on`: mmcv built with ``FORCE_CUDA=0``, as
    ``tools/install/build_mmcv.sh`` does without a GPU and nvcc, or mmcv
    without ops). Otherwise RetinaNet stops at its first loss, inside mmcv.
    Models without mmcv ops (classifiers, Semantic FPN) pass."""

    priority = 'VERY_HIGH'

    def before_run(self, runner) -> None:
        model = _bare_model(runner)
        if not _on_cuda(model):
            return
        calls = dict(mmcv_cuda_op_calls(model))
        if not calls or mmcv_ops_run_on(next(model.parameters()).device):
            return
        import mmcv
        raise RuntimeError(
            f'{type(model).__name__} runs on CUDA and calls mmcv ops that '
            f'mmcv {mmcv.__version__} was built without (it has CPU ops only)'
            ': ' + ', '.join(f'{k} -> {v}' for k, v in calls.items()) +
            f'. Build mmcv with its CUDA ops: put the nvcc of CUDA '
            f'{torch.version.cuda} (torch\'s) on the PATH or set CUDA_HOME, '
            f'and run `tools/install/build_mmcv.sh python`; or install '
            f'OpenMMLab\'s prebuilt mmcv, `mim install mmcv==2.1.0`, with a '
            f'torch it publishes wheels for (e.g. torch 2.1 with CUDA 11.8 '
            f'or 12.1). See docs/get_started.md, "Install on a GPU machine".')
