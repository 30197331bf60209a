"""Runner hooks that a config names (``default_hooks`` of our configs;
``tools/train.py`` adds them to any config), so that mmdet's and mmseg's
own ``tools/train.py`` get them too."""
import contextlib
import logging
import random

import numpy as np
import torch
from mmengine.hooks import Hook
from mmengine.logging import print_log
from mmengine.runner import (EpochBasedTrainLoop, find_latest_checkpoint,
                             set_random_seed)

from mmcpvt.registry import register_hook
from mmcpvt.utils.checkpoint import load_weights, weights_only_loads


@register_hook
class CheckpointLoadHook(Hook):
    """Every ``torch.load`` of the run with ``weights_only=True``, and the
    runner's checkpoint (``load_from``, ``resume``) loaded whole or not at
    all.

    From ``before_run`` until the loop starts (``before_train``, ``_val``,
    ``_test``) torch unpickles weights-only
    (:func:`mmcpvt.utils.checkpoint.weights_only_loads`): mmengine's loader
    of ``http(s)://`` checkpoints (``torch.hub``, which turns it off) and
    other libraries' ``init_cfg`` loads included. A run that fails before
    its loop calls no hook: the tools then call :meth:`release`. In
    ``after_load_checkpoint``, which the runner calls between reading the
    file and loading it, the checkpoint goes into the model by
    :func:`mmcpvt.utils.checkpoint.load_weights` with ``strict``: one of
    another model (mmengine would load what fits and train or test the
    rest at random weights) is refused, naming what does not fit. mmengine
    then loads the same tensors again. ``checkpoint``: the file the runner
    is about to load, until it has read it (for a tool's error message).
    """

    priority = 'VERY_HIGH'  # before hooks that copy the weights (EMA)

    def __init__(self):
        self._loads = None
        self.checkpoint = None

    def before_run(self, runner) -> None:
        if self._loads is None:
            self._loads = contextlib.ExitStack()
            self._loads.enter_context(weights_only_loads())
        self.checkpoint = runner.cfg.get('load_from', None)
        if self.checkpoint is None and runner.cfg.get('resume', False):
            self.checkpoint = find_latest_checkpoint(runner.work_dir)

    def after_load_checkpoint(self, runner, checkpoint: dict) -> None:
        load_weights(_bare_model(runner), checkpoint, source=self.checkpoint
                     or 'the checkpoint the runner loads')
        self.checkpoint = None

    def release(self, runner=None) -> None:
        """End the weights-only loads: loading is over."""
        if self._loads is not None:
            self._loads.close()
            self._loads = None

    before_train = before_val = before_test = after_run = release


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

    def before_train(self, runner) -> None:
        loader = runner.train_dataloader
        if runner.iter and isinstance(runner.train_loop, EpochBasedTrainLoop) \
                and getattr(loader, 'persistent_workers', False):
            # workers made anew each epoch are seeded from it; persistent
            # ones carry their generators over, which no checkpoint holds
            print_log(
                f'resumed at iteration {runner.iter} with persistent data '
                f'workers: their random state is not in the checkpoint, so '
                f'the augmentation, and the weights, will differ from the '
                f'uninterrupted run\'s; train_dataloader.persistent_workers='
                f'False makes a resume exact', logger='current',
                level=logging.WARNING)

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


def _bare_model(runner):
    """The runner's model without its DDP / FSDP wrapper."""
    from mmengine.model import is_model_wrapper
    return runner.model.module if is_model_wrapper(
        runner.model) else runner.model


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
