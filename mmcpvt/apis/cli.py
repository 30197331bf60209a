"""What the command-line tools share: their start-up, the checks of their
option values, the hooks and the runner of the config's library. The tools
build their own parsers; a ValueError of these functions is a usage error
there (``parser.error(str(e))``). A tool calls :func:`setup` first."""
import contextlib
import os.path as osp
import sys
from typing import Callable, List, Optional

from mmengine.config import Config

from mmcpvt.engine import CheckpointLoadHook
from mmcpvt.utils.checkpoint import CheckpointError, read_checkpoint
from mmcpvt.utils.path import check_output_dir
from .cfg_options import merge_cfg_options

# The hooks of mmcpvt.engine that every config of ours names in
# default_hooks; tools/train.py adds those a config lacks.
MMCPVT_HOOKS = dict(
    checkpoint_load=dict(type='mmcpvt.CheckpointLoadHook'),
    seed=dict(type='mmcpvt.SeedHook'),
    cuda_ops=dict(type='mmcpvt.CudaOpsHook'))
# what a run that tests a checkpoint needs of them
TEST_HOOKS = ('checkpoint_load', 'cuda_ops')


def add_mmcpvt_hooks(cfg: Config, names=tuple(MMCPVT_HOOKS)) -> None:
    """The hooks ``names`` of :data:`MMCPVT_HOOKS` and atomic checkpoint
    saving, where ``cfg`` does not set them (a user's own config)."""
    cfg.setdefault('default_hooks', {})
    hooks = cfg.default_hooks  # (Config.setdefault returns a copy)
    for name in names:
        hooks.setdefault(name, MMCPVT_HOOKS[name])
    checkpoint = hooks.get('checkpoint', None)
    if checkpoint is not None and checkpoint.get('backend_args') is None:
        checkpoint['backend_args'] = dict(backend='mmcpvt_atomic')


@contextlib.contextmanager
def checkpoint_errors(prog: str, runner):
    """A checkpoint that the run cannot use ends the tool with one line,
    not a traceback: refused by our loading (:class:`CheckpointError`), or
    failing in the runner's own reader (mmengine's), which
    :func:`read_checkpoint` then names from the file."""
    hooks = [h for h in runner.hooks if isinstance(h, CheckpointLoadHook)]
    try:
        yield
    except CheckpointError as e:
        raise SystemExit(f'{prog}: error: {e}') from None
    except Exception:  # noqa: B902  (the file says what went wrong)
        pending = [h.checkpoint for h in hooks if h.checkpoint]
        if not pending:
            raise
        try:
            read_checkpoint(pending[0])
        except (CheckpointError, FileNotFoundError) as e:
            raise SystemExit(f'{prog}: error: {e}') from None
        raise
    finally:  # a run that failed called no after_run
        for hook in hooks:
            hook.release()


def checked(cast, ok, rule: str) -> Callable:
    """A check of an option's value: ``cast(value)``, refused (ValueError)
    with ``rule`` and the value unless ``ok`` of it."""

    def check(value):
        value = cast(value)
        if not ok(value):
            raise ValueError(f'{rule}, got {value}')
        return value

    return check


# checks of numbers that the parser has read (type=int or float)
positive = checked(lambda v: v, lambda v: v > 0, 'must be > 0')
non_negative = checked(lambda v: v, lambda v: v >= 0, 'must be >= 0')


def check_options(check: Callable, **options) -> None:
    """``check`` of each value of ``options`` (``name=value``; a list: each
    item; None: not given); the ValueError names the option."""
    for name, values in options.items():
        for value in values if isinstance(values, list) else [values]:
            try:
                value is None or check(value)
            except ValueError as e:
                raise ValueError(f'argument --{name.replace("_", "-")}: '
                                 f'{e}') from None


def apply_common_args(cfg: Config, config: str, work_dir: Optional[str],
                      launcher: str = 'none',
                      cfg_options: Optional[dict] = None) -> Config:
    """``launcher``, ``cfg_options`` and the work dir (``work_dir`` >
    config > ``./work_dirs/<config name>``) of the run of ``config``;
    SystemExit on a refused ``--cfg-options`` key or a work dir that is a
    file."""
    cfg.launcher = launcher
    try:
        merge_cfg_options(cfg, cfg_options, config)
        cfg.work_dir = work_dir or cfg.get('work_dir', None) or osp.join(
            './work_dirs', osp.splitext(osp.basename(config))[0])
        # (the runner's makedirs fails on a file with a traceback)
        check_output_dir('--work-dir' if work_dir else
                         f'work_dir of {config}', cfg.work_dir,
                         'logs and checkpoints')
    except ValueError as e:
        raise SystemExit(f'{osp.basename(sys.argv[0]) or "mmcpvt"}: '
                         f'error: {e}') from None
    return cfg


def build_runner(cfg: Config):
    """The runner (as mmengine's tools build it), after the gloo process
    group of a distributed run without a GPU (:mod:`.cpu_dist`)."""
    from mmengine.registry import RUNNERS
    from mmengine.runner import Runner

    from .cpu_dist import setup_cpu_dist
    setup_cpu_dist(cfg)
    runner = (Runner.from_cfg(cfg) if 'runner_type' not in cfg else
              RUNNERS.build(cfg))
    try:
        check_neck(runner.model)
    except ValueError as e:
        raise SystemExit(f'{osp.basename(sys.argv[0]) or "mmcpvt"}: error: '
                         f'{e}') from None
    return runner


def check_neck(model) -> None:
    """Refuse a neck whose ``in_channels`` are not the channels of the maps
    that our backbone gives it (mmdet's and mmseg's FPN assert, without a
    message, at the first iteration)."""
    from mmengine.model import is_model_wrapper

    from mmcpvt.models.backbones.base import BaseBackbone
    model = model.module if is_model_wrapper(model) else model
    backbone = getattr(model, 'backbone', None)
    channels = getattr(getattr(model, 'neck', None), 'in_channels', None)
    if not isinstance(backbone, BaseBackbone) or getattr(
            backbone, 'out_type', None) != 'featmap' or not isinstance(
                channels, (list, tuple)):
        return
    dims = backbone.embed_dims  # per stage, or CPVT's one width
    maps = [dims[i] if isinstance(dims, (list, tuple)) else dims
            for i in backbone.out_indices]
    if list(channels) != maps:
        raise ValueError(
            f'model.neck.in_channels is {list(channels)}, but the '
            f'{type(backbone).__name__} backbone gives maps of {maps} '
            f'channels (out_indices {backbone.out_indices}): set '
            f'model.neck.in_channels={maps}')


def text_table(heads: List[str], rows: List[List[str]]) -> str:
    """``rows`` under ``heads``, columns as wide as their widest cell, the
    first left-aligned, the others right-aligned."""
    rows = [heads] + rows
    widths = [max(len(r[i]) for r in rows) for i in range(len(heads))]
    return '\n'.join(f'{r[0]:<{widths[0]}}  ' + '  '.join(
        f'{c:>{w}}' for c, w in zip(r[1:], widths[1:])) for r in rows)


def stderr_progress(what: str) -> Callable[[int, int], None]:
    """A ``progress(done, total)`` printing ``what: done/total`` on
    stderr."""
    return lambda done, total: print(f'{what}: {done}/{total}',
                                     file=sys.stderr, flush=True)
