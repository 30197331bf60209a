"""Train a model from an mmpretrain, mmdet or mmseg config.

One entry for the three libraries: the config's ``default_scope``
('mmpretrain', 'mmdet' or 'mmseg') decides which one the runner builds
from, so this script imports none of them itself. It imports ``mmcpvt``,
which registers the CPVT modules and allow-lists mmengine's checkpoint
types for torch's ``weights_only`` loader (needed by ``--resume``).

Examples::

    python tools/train.py configs/cpvt/cpvt-tiny_4xb256_in1k.py
    python tools/train.py CONFIG --resume                 # latest in work_dir
    python tools/train.py CONFIG --resume work_dirs/x/epoch_2.pth
    bash tools/dist_train.sh CONFIG 8 --amp

Resuming gives the weights of an uninterrupted run: the runner restores the
model, optimizer, schedulers, epoch and sampler from the checkpoint, and
:class:`EpochSeedHook` seeds the random generators at each epoch from the
seed and the epoch alone, so that the data augmentation and drop-path of
an epoch trained again after a crash are those of the first time. With a
GPU, bitwise equality also needs ``randomness=dict(seed=S,
deterministic=True)``; dataloader workers must not be persistent
(``persistent_workers=False``), or they carry their random state across
epochs. A run killed in the middle of an epoch resumes from the checkpoint
of the last finished epoch and trains the killed epoch again. (An
iteration-based loop resumed from an ``iter_N.pth`` restores its data
position but not its random state: close to, not equal to, the
uninterrupted run.)
"""
import argparse
import logging
import os
import os.path as osp
import re
import sys
from typing import List, Optional

from mmengine.config import Config
from mmengine.hooks import Hook
from mmengine.logging import print_log
from mmengine.runner import find_latest_checkpoint, set_random_seed

try:
    import mmcpvt  # noqa: F401  (registers modules, checkpoint allow-list)
except ImportError:  # not installed: run from a clone
    sys.path.insert(0, osp.dirname(osp.dirname(osp.abspath(__file__))))
    import mmcpvt  # noqa: F401
from mmcpvt.utils.checkpoint import (CheckpointError,  # noqa: E402
                                     CheckpointFitHook,
                                     CheckpointMismatchError,
                                     check_checkpoint)
from mmcpvt.utils.dist import has_accelerator  # noqa: E402
from mmcpvt.utils.runner import (CfgOptionsAction,  # noqa: E402
                                 apply_common_args, build_runner)


def parse_args(argv=None):
    parser = argparse.ArgumentParser(
        description='Train a model (mmpretrain, mmdet or mmseg config)')
    parser.add_argument('config', help='train config file path')
    parser.add_argument(
        '--work-dir',
        help='the dir to save logs and models; defaults to the config\'s '
        'work_dir, else ./work_dirs/<config name>')
    parser.add_argument(
        '--resume',
        nargs='?',
        type=str,
        const='auto',
        help='resume from this checkpoint; without a value, resume from '
        'the latest checkpoint in the work directory (the newest intact '
        'one if the latest is damaged; a fresh start if there is none)')
    parser.add_argument(
        '--amp',
        action='store_true',
        help='enable automatic mixed precision training (needs a GPU)')
    parser.add_argument(
        '--auto-scale-lr',
        action='store_true',
        help='scale the learning rate by the actual total batch size over '
        'the config\'s auto_scale_lr.base_batch_size')
    parser.add_argument(
        '--no-validate',
        action='store_true',
        help='do not evaluate checkpoints during training')
    parser.add_argument(
        '--cfg-options',
        nargs='+',
        action=CfgOptionsAction,
        help='override settings in the config: key=value pairs, merged '
        'into the config, e.g. train_dataloader.batch_size=32. A list is '
        'key="[a,b]" or key=a,b; nested lists/tuples key="[(a,b),(c,d)]". '
        'The quotation marks are necessary and no white space is allowed. '
        'A top-level key the config does not have (unless the runner reads '
        'it, e.g. custom_hooks) and a near-misspelling of an existing key '
        'are refused.')
    parser.add_argument(
        '--launcher',
        choices=['none', 'pytorch', 'slurm', 'mpi'],
        default='none',
        help='job launcher')
    # torch.distributed.launch / torchrun pass --local-rank (torch >= 2.0)
    # or --local_rank (older).
    parser.add_argument('--local_rank', '--local-rank', type=int, default=0)
    args = parser.parse_args(argv)
    if 'LOCAL_RANK' not in os.environ:
        os.environ['LOCAL_RANK'] = str(args.local_rank)

    if not osp.isfile(args.config):
        parser.error(f'config file not found: {args.config}')
    if (args.resume not in (None, 'auto') and '://' not in args.resume
            and not osp.isfile(args.resume)):
        parser.error(f'--resume checkpoint not found: {args.resume}')
    return args


def merge_args(cfg: Config, args) -> Config:
    """Apply the command line to ``cfg``; SystemExit on unusable options."""
    cfg = apply_common_args(cfg, args)

    if args.no_validate:
        cfg.val_cfg = None
        cfg.val_dataloader = None
        cfg.val_evaluator = None

    if args.amp:
        if not has_accelerator():
            raise SystemExit(
                'train.py: error: --amp needs a CUDA (or NPU/MLU/MUSA) '
                'device and none is available; train without --amp on '
                'the CPU')
        wrapper = cfg.optim_wrapper.get('type', 'OptimWrapper')
        if wrapper == 'AmpOptimWrapper':
            print_log('--amp: the config already uses AmpOptimWrapper',
                      logger='current', level=logging.WARNING)
        elif wrapper != 'OptimWrapper':
            raise SystemExit(
                f'train.py: error: --amp replaces optim_wrapper.type '
                f'"OptimWrapper" by "AmpOptimWrapper", but {args.config} '
                f'sets optim_wrapper.type="{wrapper}"; set '
                'optim_wrapper.type=AmpOptimWrapper in the config instead')
        else:
            cfg.optim_wrapper.type = 'AmpOptimWrapper'
            cfg.optim_wrapper.setdefault('loss_scale', 'dynamic')

    if args.auto_scale_lr:
        if 'base_batch_size' not in cfg.get('auto_scale_lr', {}):
            raise SystemExit(
                'train.py: error: --auto-scale-lr needs '
                'auto_scale_lr=dict(base_batch_size=N) in the config '
                f'({args.config} has none); add it, or pass --cfg-options '
                'auto_scale_lr.base_batch_size=N')
        cfg.auto_scale_lr.enable = True

    # resume: an explicit checkpoint > the latest one in work_dir
    if args.resume == 'auto':
        _resume_latest(cfg)
    elif args.resume is not None:
        if '://' not in args.resume:
            problem = _checkpoint_problem(args.resume)
            if problem is not None:
                raise SystemExit(
                    f'train.py: error: --resume {args.resume}: cannot '
                    f'resume from it: {problem}. Pass another checkpoint '
                    '(e.g. the previous one of its work dir), or --resume '
                    'without a path to resume from the newest intact '
                    'checkpoint of the work dir')
        cfg.resume = True
        cfg.load_from = args.resume
    return cfg


def _checkpoint_problem(path: str) -> Optional[str]:
    """Why the checkpoint file ``path`` cannot be resumed from (empty,
    truncated, unsafe, missing), in a few words, or None when it loads."""
    try:
        check_checkpoint(path)
    except FileNotFoundError:
        return 'the file does not exist'
    except CheckpointError as e:
        # "PATH: what (detail); why. What to do." -> "what (detail)"
        text = str(e).strip()
        if text.startswith(f'{path}: '):
            text = text[len(path) + 2:]
        return text.split(';')[0].split('\n')[0].split('. ')[0].rstrip('.')
    except Exception as e:  # noqa: B902  (garbage: the unpickler's KeyError)
        first = str(e).strip().split('\n')[0][:200]
        return f'it cannot be loaded ({type(e).__name__}: {first})'
    return None


_CHECKPOINT_NAME = re.compile(r'^(?:epoch|iter)_(\d+)\.pth$')


def _numbered_checkpoints(directories) -> List[str]:
    """The ``epoch_N.pth`` / ``iter_N.pth`` files of ``directories``,
    highest N first (names rather than modification times: a copied work
    dir keeps its names, not its times)."""
    found = {}
    for directory in directories:
        if not osp.isdir(directory):
            continue
        for name in os.listdir(directory):
            match = _CHECKPOINT_NAME.match(name)
            path = osp.join(directory, name)
            if match and osp.isfile(path):
                found[osp.realpath(path)] = (int(match.group(1)), path)
    return [path for _, path in sorted(found.values(), reverse=True)]


def _resume_latest(cfg: Config) -> None:
    """``--resume`` without a path: set ``cfg.resume`` and ``cfg.load_from``.

    - ``work_dir/last_checkpoint`` names a checkpoint that loads: the runner
      resumes from it ("Auto resumed from the latest checkpoint").
    - It is damaged (empty, truncated) or missing: the newest intact
      ``epoch_N.pth`` / ``iter_N.pth`` beside it, with a warning naming the
      damaged file; SystemExit, naming them all, when none is intact.
    - No checkpoint yet (the first launch of a job that always passes
      ``--resume``): a fresh start, from the config's ``load_from`` if it
      has one (mmengine would drop it and start from random weights).
    """
    work_dir = cfg.work_dir
    record = osp.join(work_dir, 'last_checkpoint')
    latest = find_latest_checkpoint(work_dir) if osp.isfile(record) else None
    directories = [work_dir]
    if latest is not None and osp.dirname(latest) not in ('', work_dir):
        directories.insert(0, osp.dirname(latest))  # CheckpointHook.out_dir
    candidates = _numbered_checkpoints(directories)
    if latest is None and not candidates:
        start = (f'from load_from={cfg.load_from}' if cfg.get('load_from')
                 else 'from scratch')
        print_log(
            f'--resume: no checkpoint in {work_dir} yet, training starts '
            f'{start}',
            logger='current',
            level=logging.WARNING)
        cfg.resume = False
        return
    cfg.resume = True
    cfg.load_from = _intact_checkpoint(latest, candidates, record)


def _intact_checkpoint(latest: Optional[str], candidates: List[str],
                       record: str) -> Optional[str]:
    """None if ``latest`` (named in ``record``) loads, else the newest
    intact one of ``candidates``, with a warning; SystemExit if none."""
    if latest is not None and '://' in latest:
        return None  # a remote out_dir: mmengine's loader reports on it
    work_dir = osp.dirname(record)

    damaged = []  # (path, problem), newest first
    if latest is not None:
        problem = _checkpoint_problem(latest)
        if problem is None:
            return None
        damaged.append((latest, problem))
        why = (f'the latest checkpoint {latest} (named in {record}) cannot '
               f'be loaded: {problem}')
    else:
        why = (f'{record} is missing (deleted, or the run was stopped '
               'before it was written)')
    for path in candidates:
        if latest is not None and osp.realpath(path) == osp.realpath(latest):
            continue
        problem = _checkpoint_problem(path)
        if problem is None:
            again = ('; the epochs (or iterations) after it are trained '
                     'again' if damaged else '')
            print_log(
                f'--resume: {why}. Resuming from {path}, the newest intact '
                f'checkpoint of the work dir{again}.',
                logger='current',
                level=logging.WARNING)
            return path
        damaged.append((path, problem))
    listing = '; '.join(f'{path}: {problem}' for path, problem in damaged)
    raise SystemExit(
        f'train.py: error: --resume: no intact checkpoint to resume from in '
        f'{work_dir}. Damaged: {listing}. To train from scratch, delete or '
        f'move the damaged files and {record}; to resume from a copy kept '
        'elsewhere, pass it: --resume PATH')


class EpochSeedHook(Hook):
    """Seed ``random``, numpy and torch at the start of each training epoch
    from the run's seed and the epoch alone.

    mmengine seeds the generators once, when the runner is built, and does
    not save their state in checkpoints; a resumed run would augment its
    data (and drop paths) differently from the run it continues. Seeded per
    epoch, an epoch trained again after a crash draws what it drew the
    first time, and validation between epochs (whose data loader draws from
    torch's generator) does not shift the next epoch. ``runner.seed`` is the
    configured seed or, without one, the random seed mmengine drew and
    saved in the checkpoint's meta.
    """

    priority = 'VERY_HIGH'  # before any hook that draws random numbers

    # a prime stride: with randomness.diff_rank_seed, rank r uses seed + r,
    # and no rank's epoch stream is another's
    STRIDE = 1_000_003

    def before_train_epoch(self, runner) -> None:
        set_random_seed((runner.seed + runner.epoch * self.STRIDE) % 2**32)


class ResumeFitHook(CheckpointFitHook):
    """Refuse to resume from a checkpoint of another model (another config,
    size or number of classes): every tensor of the model must be in it
    with its shape. mmengine would load the tensors that fit, warn about
    the others, and train on with them at random."""

    def __init__(self, filename: str, config: str):
        super().__init__(min_fraction=1.0)
        self.filename = filename
        self.config = config

    def after_load_checkpoint(self, runner, checkpoint: dict) -> None:
        try:
            super().after_load_checkpoint(runner, checkpoint)
        except CheckpointMismatchError as e:
            raise SystemExit(
                f'train.py: error: --resume {self.filename}: it is not a '
                f'checkpoint of the model of {self.config}: {e}\nResume '
                'with the config it was trained with; to start this config '
                'from the tensors that fit (fine-tuning), pass --cfg-options '
                f'load_from={self.filename} instead of --resume') from None


def main(argv=None):
    args = parse_args(argv)
    cfg = Config.fromfile(args.config)
    cfg = merge_args(cfg, args)
    if cfg.get('randomness', {}).get('deterministic', False):
        # mmengine then calls torch.use_deterministic_algorithms(True), with
        # which cuBLAS (CUDA >= 10.2) refuses to run without this setting,
        # read when CUDA starts (PyTorch's "Reproducibility" notes)
        os.environ.setdefault('CUBLAS_WORKSPACE_CONFIG', ':4096:8')

    runner = build_runner(cfg)
    runner.register_hook(EpochSeedHook())
    if cfg.get('resume', False):
        record = osp.join(cfg.work_dir, 'last_checkpoint')
        resume_from = cfg.load_from or (find_latest_checkpoint(cfg.work_dir)
                                        if osp.isfile(record) else None)
        if resume_from is not None:
            runner.register_hook(ResumeFitHook(resume_from, args.config))
    runner.train()


if __name__ == '__main__':
    main()
