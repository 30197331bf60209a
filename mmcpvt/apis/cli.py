"""What the command-line tools share: their start-up, argparse types and
usage errors, the checks of the paths they write
(:mod:`mmcpvt.utils.path`), the options and the runner of the config's
library (``--cfg-options``: :mod:`.cfg_options`; distributed runs without
a GPU: :mod:`.cpu_dist`).

A tool imports it and calls :func:`setup` first::

    from mmcpvt.apis import cli
    cli.setup()
"""
import argparse
import contextlib
import os
import os.path as osp
import pickle
import sys
from typing import Callable, List, Optional

from mmengine.config import Config

from mmcpvt.utils.checkpoint import FORCE, FORCE_OFF, require_file
from mmcpvt.utils.path import (check_output,  # noqa: F401 (for the tools)
                               check_output_dir)
from .cfg_options import CfgOptionsAction, merge_cfg_options


def setup() -> None:
    """Every ``torch.load`` of this process with ``weights_only=True``
    (``TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD``, which asks for the opposite, is
    unset with a warning: torch refuses both)."""
    if os.environ.pop(FORCE_OFF, None) is not None:
        print(f'{osp.basename(sys.argv[0])}: warning: {FORCE_OFF} is '
              'ignored: mmcpvt\'s tools load every checkpoint with '
              'weights_only=True', file=sys.stderr)
    os.environ[FORCE] = '1'


def error(text: str) -> SystemExit:
    """``prog: error: text``, the end of a tool that cannot go on."""
    return SystemExit(f'{osp.basename(sys.argv[0]) or "mmcpvt"}: error: '
                      f'{text}')


@contextlib.contextmanager
def usage_errors(parser: argparse.ArgumentParser,
                 errors=(ValueError, FileNotFoundError)):
    """``errors`` raised inside end the tool as usage errors of ``parser``
    (exit status 2, the message after the usage line)."""
    try:
        yield
    except errors as e:
        parser.error(str(e))


# The hooks of mmcpvt.engine that every config of ours names in
# default_hooks; tools/train.py adds those a config lacks.
MMCPVT_HOOKS = dict(
    weights_only_load=dict(type='mmcpvt.WeightsOnlyLoadHook'),
    seed=dict(type='mmcpvt.SeedHook'),
    work_dir_lock=dict(type='mmcpvt.WorkDirLockHook'),
    cuda_ops=dict(type='mmcpvt.CudaOpsHook'))


def add_mmcpvt_hooks(cfg: Config) -> None:
    """Atomic checkpoint saving and :data:`MMCPVT_HOOKS`, where ``cfg``
    does not set them (a user's own config)."""
    cfg.setdefault('default_hooks', {})
    hooks = cfg.default_hooks  # (Config.setdefault returns a copy)
    for name, hook in MMCPVT_HOOKS.items():
        hooks.setdefault(name, hook)
    checkpoint = hooks.get('checkpoint', None)
    if checkpoint is not None and checkpoint.get('backend_args') is None:
        checkpoint['backend_args'] = dict(backend='mmcpvt_atomic')


@contextlib.contextmanager
def checkpoint_errors(prog: str, cfg: Config, given: Optional[str] = None,
                      hint: str = ''):
    """A checkpoint that the run cannot use ends the tool with a message,
    not a traceback: a damaged one, one that torch's weights-only unpickler
    refuses (by URL above all: a local file is checked before the run), and
    one of another model (``given``: how the user gave the checkpoint;
    ``hint``: what else to do)."""
    from mmcpvt.utils.checkpoint import (CheckpointError,
                                         CheckpointMismatchError)
    try:
        yield
    except CheckpointError as e:
        if given is None or not isinstance(e, CheckpointMismatchError):
            raise SystemExit(f'{prog}: error: {e}') from None
        raise SystemExit(f'{prog}: error: {given} does not fit the model of '
                         f'{cfg.filename}: {e}{hint}') from None
    except pickle.UnpicklingError:
        raise SystemExit(
            f'{prog}: error: a checkpoint of this run (load_from='
            f'{cfg.get("load_from", None)}, or a model\'s init_cfg) was '
            f'refused by torch\'s weights-only unpickler: it holds objects '
            f'that could run code (nothing was run), or it is damaged. Use '
            f'one of tensors only: torch.save({{"state_dict": sd}}, path).'
        ) from None


def check_out_dir(parser: argparse.ArgumentParser, option: str, path: str,
                  what: str = 'the results') -> None:
    """:func:`check_output_dir` as a usage error of ``parser``."""
    with usage_errors(parser, ValueError):
        check_output_dir(option, path, what)


def checked(cast, ok, rule: str):
    """An argparse type: ``cast(text)``, refused with ``rule`` and the text
    given unless ``ok`` of it; the one check of the tools' option values."""

    def parse(text: str):
        value = cast(text)
        if not ok(value):
            raise argparse.ArgumentTypeError(f'{rule}, got {text}')
        return value

    parse.__name__ = cast.__name__  # argparse's "invalid int value"
    return parse


def positive(cast):
    """:func:`checked` ``cast`` of the text, > 0."""
    return checked(cast, lambda value: value > 0, 'must be > 0')


def require(parser: argparse.ArgumentParser, path: str, what: str) -> None:
    """A usage error naming ``what`` for a local ``path`` that is no file
    (:func:`mmcpvt.utils.checkpoint.require_file`)."""
    with usage_errors(parser, FileNotFoundError):
        require_file(path, what)


def parse_args(parser: argparse.ArgumentParser, argv=None):
    """``parser`` (its ``config`` argument first) with the options every
    runner tool takes: ``--cfg-options``, ``--launcher``, ``--local-rank``;
    the parsed arguments, the config file checked."""
    parser.add_argument(
        '--cfg-options', nargs='+', action=CfgOptionsAction,
        help='override settings in the config: key=value pairs, e.g. '
        'train_dataloader.batch_size=32; a list is key="[a,b]". New keys '
        'that nobody would read (misspelt ones) are refused.')
    parser.add_argument('--launcher', default='none',
                        choices=['none', 'pytorch', 'slurm', 'mpi'])
    # torchrun passes --local-rank (torch >= 2.0), older launchers
    # --local_rank
    parser.add_argument('--local_rank', '--local-rank', type=int, default=0)
    args = parser.parse_args(argv)
    os.environ.setdefault('LOCAL_RANK', str(args.local_rank))
    require(parser, args.config, 'config')
    return args


def apply_common_args(cfg: Config, args) -> Config:
    """``--launcher``, ``--cfg-options`` and ``--work-dir`` (CLI > config >
    ``./work_dirs/<config name>``); SystemExit on a ``--cfg-options`` key
    that would be ignored (:func:`.cfg_options.check_cfg_options`) or a
    work dir that is a file."""
    cfg.launcher = args.launcher
    try:
        merge_cfg_options(cfg, args.cfg_options, args.config)
        cfg.work_dir = args.work_dir or cfg.get('work_dir', None) or osp.join(
            './work_dirs', osp.splitext(osp.basename(args.config))[0])
        # (the runner's makedirs fails on a file with a traceback)
        check_output_dir('--work-dir' if args.work_dir else
                         f'work_dir of {args.config}', cfg.work_dir,
                         'logs and checkpoints')
    except ValueError as e:
        raise error(e) from None
    return cfg


def build_runner(cfg: Config):
    """The runner; it switches to ``cfg.default_scope``, which imports the
    registries of mmpretrain, mmdet or mmseg as needed. A distributed run on
    a machine without a GPU gets its gloo process group first
    (:func:`.cpu_dist.setup_cpu_dist`)."""
    from mmengine.registry import RUNNERS
    from mmengine.runner import Runner

    from .cpu_dist import setup_cpu_dist
    setup_cpu_dist(cfg)
    if 'runner_type' not in cfg:
        return Runner.from_cfg(cfg)
    return RUNNERS.build(cfg)


def text_table(heads: List[str], rows: List[List[str]]) -> str:
    """``rows`` of cells under ``heads``, each column as wide as its widest
    cell, the first left-aligned, the others right-aligned."""
    rows = [heads] + rows
    widths = [max(len(r[i]) for r in rows) for i in range(len(heads))]
    return '\n'.join(f'{r[0]:<{widths[0]}}  ' + '  '.join(
        f'{c:>{w}}' for c, w in zip(r[1:], widths[1:])) for r in rows)


def stderr_progress(what: str) -> Callable[[int, int], None]:
    """A ``progress(done, total)`` that prints ``what: done/total`` on
    stderr."""
    return lambda done, total: print(f'{what}: {done}/{total}',
                                     file=sys.stderr, flush=True)
