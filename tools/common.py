"""What the tools share: their start-up, the ``--cfg-options`` checks, the
paths they write and the runner of the config's library.

Every tool begins with::

    sys.path.insert(0, <this folder>)
    import common  # noqa: E402
    common.setup()

Distributed runs on a machine without a GPU: :mod:`cpu_dist`.
"""
import argparse
import contextlib
import difflib
import inspect
import logging
import os
import os.path as osp
import pickle
import sys
import tempfile
from typing import Dict, List, Optional

from mmengine.config import Config, DictAction
from mmengine.logging import print_log

ROOT = osp.dirname(osp.dirname(osp.abspath(__file__)))


def setup() -> None:
    """``mmcpvt`` importable (from a clone if it is not installed), and
    every ``torch.load`` of this process with ``weights_only=True``
    (``TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD``, which asks for the opposite, is
    unset with a warning: torch refuses both)."""
    try:
        import mmcpvt  # noqa: F401
    except ImportError:  # not installed: run from a clone
        sys.path.insert(0, ROOT)
    from mmcpvt.utils.checkpoint import FORCE, FORCE_OFF
    if os.environ.pop(FORCE_OFF, None) is not None:
        print(f'{osp.basename(sys.argv[0])}: warning: {FORCE_OFF} is '
              'ignored: mmcpvt\'s tools load every checkpoint with '
              'weights_only=True', file=sys.stderr)
    os.environ[FORCE] = '1'


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


def blocking_file(path: str) -> Optional[str]:
    """The file that keeps ``path`` from being made a directory (or from
    holding a file): ``path`` itself or the nearest of its parents that
    exists, if that is a file; None when ``path`` can be written (missing
    directories are made)."""
    while path and not osp.exists(path):
        path = osp.dirname(path)
    return path if path and not osp.isdir(path) else None


def _input_at(path: str, inputs) -> Optional[str]:
    """The one of ``inputs`` (paths) that ``path`` is, also through a link;
    None if it is none of them."""
    return next((i for i in inputs if i and '://' not in str(i)
                 and osp.exists(i) and osp.exists(path)
                 and osp.samefile(i, path)), None)


def _unwritable(path: str) -> Optional[str]:
    """Why no file can be made in the directory ``path`` or in the one of
    its parents that exists (the directories between are made), or None:
    a file is made there and removed (``os.access`` says yes to root on a
    read-only file system)."""
    while not osp.exists(path):
        path = osp.dirname(path)
    try:
        with tempfile.TemporaryFile(dir=path):
            return None
    except OSError as e:
        return f'{path} is not writable ({e.strerror})'


def check_output(option: str, path: str, example: str, inputs=()) -> None:
    """Refuse, before any work, an output file ``path`` (the argument
    ``option``; ``example``: a file name for it) that is a directory, lies
    under a file or in a directory that cannot be written, or is one of the
    run's ``inputs`` (its checkpoint, config, data; also through a link).

    Raises:
        ValueError: naming ``option``, ``path`` and what it takes.
    """
    same = _input_at(path, inputs)
    if same is not None:
        raise ValueError(
            f'{option} {path} is {same}, an input of this run (the same '
            f'file): writing it would overwrite it; give another path')
    if osp.isdir(path):
        raise ValueError(f'{option} {path} is a directory; it takes the file '
                         f'to write, e.g. {osp.join(path, example)}')
    parent = blocking_file(osp.dirname(osp.abspath(path)))
    if parent is not None:
        raise ValueError(f'{option} {path}: {parent} is a file, not a '
                         f'directory; it takes a file path in a directory')
    why = _unwritable(osp.dirname(osp.abspath(path)))
    if why is not None:
        raise ValueError(f'{option} {path}: {why}; give a path you can '
                         f'write')


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


def check_output_dir(option: str, path: str, what: str, inputs=()) -> None:
    """Refuse, before any work, an output directory ``path`` (the argument
    ``option``; ``what``: what goes in it) that is a file, lies under one,
    cannot be written, or is one of the run's ``inputs`` (a data folder).

    Raises:
        ValueError: naming ``option``, ``path`` and what is in the way.
    """
    same = _input_at(path, inputs)
    if same is not None:
        raise ValueError(f'{option} {path} is {same}, an input of this run: '
                         f'{what} written there could overwrite its files; '
                         f'give another directory')
    found = blocking_file(osp.abspath(path))
    if found is not None:
        raise ValueError(f'{option} {path}: {found} is a file; it takes a '
                         f'directory for {what} (made if missing)')
    why = _unwritable(osp.abspath(path))
    if why is not None:
        raise ValueError(f'{option} {path}: {why}; it takes a directory '
                         f'for {what} that you can write')


def require(parser: argparse.ArgumentParser, path: str, what: str) -> None:
    """A usage error naming ``what`` for a local ``path`` that is no file
    (:func:`mmcpvt.utils.checkpoint.require_file`)."""
    from mmcpvt.utils.checkpoint import require_file
    try:
        require_file(path, what)
    except FileNotFoundError as e:
        parser.error(str(e))


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


class CfgOptionsAction(DictAction):
    """mmengine's ``DictAction`` (``--cfg-options key=value ...`` into a
    dict) that refuses an item without ``key=`` with an argparse error,
    not a traceback ("not enough values to unpack"), and takes the value of
    a ``PATHS`` key as it is (mmengine's parsing makes ``a,b.pth`` a list
    and drops the space of ``a b.pth``)."""

    PATHS = ('load_from', )

    def __call__(self, parser, namespace, values, option_string=None):
        for item in values or ():
            if not item.split('=', 1)[0] or '=' not in item:
                raise argparse.ArgumentError(
                    self, f'{item!r} is not a setting: the form is '
                    'key=value, e.g. train_dataloader.batch_size=32 or '
                    'model.backbone.arch=small (no spaces around "=")')
        super().__call__(parser, namespace, values, option_string)
        options = getattr(namespace, self.dest)
        options.update(item.split('=', 1) for item in values
                       if item.split('=', 1)[0] in self.PATHS)


# Top-level keys that mmengine's Runner reads besides the arguments of
# Runner.__init__ (Runner.from_cfg and the runner's cfg.get calls in
# mmengine 0.10), and `runner_type` (build_runner below): a new one of these
# in --cfg-options takes effect although the config does not set it.
_RUNNER_CFG_KEYS = ('runner_type', 'model_wrapper_cfg', 'sync_bn',
                    'find_unused_parameters', 'compile',
                    'activation_checkpointing', 'efficient_conv_bn_eval')

# How close a new key must be to an existing one to be taken for a
# misspelling of it (difflib ratio): 'backbon' of 'backbone' is 0.93,
# 'chekpoint' of 'checkpoint' 0.95; 'drop_path_rate' of 'drop_rate', a new
# argument beside an existing one, 0.78.
_TYPO_CUTOFF = 0.8


def runner_keys() -> List[str]:
    """The top-level config keys that mmengine's runner reads."""
    from mmengine.runner import Runner
    keys = set(inspect.signature(Runner.__init__).parameters) - {'self', 'cfg'}
    return sorted(keys.union(_RUNNER_CFG_KEYS))


def _did_you_mean(key: str, choices, cutoff: float = 0.6) -> str:
    """' Did you mean ...?' with the choices close to ``key``, or ''."""
    matches = difflib.get_close_matches(
        key, sorted({str(c) for c in choices}), n=3, cutoff=cutoff)
    return (' Did you mean ' + ' or '.join(map(repr, matches)) + '?'
            if matches else '')


def check_cfg_options(cfg: Config, options: Dict, config: str) -> None:
    """Refuse ``--cfg-options`` keys that would be ignored or break merging
    (see README.md): on the command line a new key is most often a
    misspelt one, which mmengine adds silently (the run keeps the old
    value). A new top-level key passes only if the runner reads it
    (:func:`runner_keys`); a new nested key only if it does not nearly
    spell a key beside it (else it is a new argument of what the dict
    builds, which its constructor checks). A key below a plain value, or
    below a list other than by an index in range, is refused too.

    Raises:
        ValueError: one line per refused key.
    """
    runner = runner_keys()
    errors = [f'--cfg-options {key}: {error}' for key in options
              if (error := _check_key(cfg, key, runner, config))]
    if errors:
        raise ValueError('\n'.join(errors))


def _check_key(cfg: Config, key: str, runner: List[str],
               config: str) -> Optional[str]:
    """Why ``key`` (a dotted --cfg-options key) is refused, or None."""
    in_child = (f'set it in a config that inherits this one (_base_ = '
                f'{config!r})')
    first, *rest = key.split('.')
    if first not in cfg:
        if first in runner:
            return None
        hint = _did_you_mean(first, list(cfg.keys()) + runner) or (
            f' New top-level keys may be those the runner reads: '
            f'{", ".join(runner)}; to add another on purpose, {in_child}.')
        return (f'the config has no top-level key {first!r}, and the '
                f'runner does not read one of that name: it would be '
                f'ignored.{hint}')
    node, where = cfg[first], first
    for part in rest:
        if isinstance(node, (list, tuple)):
            if not part.isdigit():
                return (f'{where} is a list; address an item by its index '
                        f'(0 to {len(node) - 1}), e.g. {where}.0.{part}.')
            if int(part) >= len(node):
                return (f'{where} has {len(node)} items (0 to '
                        f'{len(node) - 1}), no item {part}.')
            node = node[int(part)]
        elif not isinstance(node, dict):
            return (f'{where} is {node!r} in the config, not a dict, so it '
                    f'has no key {part!r}. Set {where} itself, or, to make '
                    f'it a dict, {in_child}.')
        elif part in node:
            node = node[part]
        else:  # not near a key beside it: a new argument of what it builds
            hint = _did_you_mean(part, node.keys(), _TYPO_CUTOFF)
            return hint and (
                f'{where} has no key {part!r}.{hint} ({where} has: '
                f'{", ".join(map(str, node.keys()))}.) To add {part!r} on '
                f'purpose, {in_child}.')
        where += f'.{part}'
    return None


def _warn_config_variables(cfg: Config, options: Dict) -> None:
    """Warn about --cfg-options on a variable of the config (``data_root``,
    ``train_pipeline``, ``img_size``): the runner does not read it, and the
    settings that used it were filled in when the config was read."""
    runner = set(runner_keys())
    for key in options:
        name = key.split('.')[0]
        if name not in cfg or name in runner:
            continue
        old = _plain(cfg[name])
        # the runner settings that took the variable's value: a copy of it
        # (a pipeline), or a value under a key it names (data_root ->
        # dataset.data_root, dataset_type -> dataset.type)
        users = [
            f'{path}{key[len(name):]}' for path, value in _nodes(cfg._cfg_dict)
            if '.' in path and path.split('.')[0] in runner
            and _plain(value) == old and (
                (isinstance(old, (dict, list)) and len(old) > 0) or
                name == path.split('.')[-1] or
                name.endswith('_' + path.split('.')[-1]))
        ][:6]
        print_log(
            f'--cfg-options {key}: {name} is a variable of the config, not a '
            f'setting the runner reads: the settings that used it were '
            f'filled in when the config was read, and they keep their '
            f'value. ' + (f'Set them instead: {", ".join(users)}.' if users
                          else 'Set those settings instead.'),
            logger='current',
            level=logging.WARNING)


def _plain(value):
    """``value`` without the ``_scope_`` keys that mmengine adds to the
    variables of another library's base config, tuples as lists."""
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items() if k != '_scope_'}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    return value


def _nodes(node, prefix=''):
    """(dotted path, value) of ``node`` and of everything under it."""
    yield prefix, node
    items = (node.items() if isinstance(node, dict) else
             enumerate(node) if isinstance(node, (list, tuple)) else ())
    for k, v in items:
        yield from _nodes(v, f'{prefix}.{k}' if prefix else str(k))


def apply_common_args(cfg: Config, args) -> Config:
    """``--launcher``, ``--cfg-options`` and ``--work-dir`` (CLI > config >
    ``./work_dirs/<config name>``); SystemExit on a ``--cfg-options`` key
    that would be ignored (:func:`check_cfg_options`) or a work dir that is
    a file."""
    prog = osp.basename(sys.argv[0]) or 'mmcpvt'
    cfg.launcher = args.launcher
    if args.cfg_options is not None:
        try:
            check_cfg_options(cfg, args.cfg_options, args.config)
        except ValueError as e:
            raise SystemExit(f'{prog}: error: {e}') from None
        _warn_config_variables(cfg, args.cfg_options)
        cfg.merge_from_dict(args.cfg_options)
    cfg.work_dir = args.work_dir or cfg.get('work_dir', None) or osp.join(
        './work_dirs', osp.splitext(osp.basename(args.config))[0])
    # (the runner's makedirs fails on a file with a traceback)
    try:
        check_output_dir('--work-dir' if args.work_dir else
                         f'work_dir of {args.config}', cfg.work_dir,
                         'logs and checkpoints')
    except ValueError as e:
        raise SystemExit(f'{prog}: error: {e}') from None
    return cfg


def build_runner(cfg: Config):
    """The runner; it switches to ``cfg.default_scope``, which imports the
    registries of mmpretrain, mmdet or mmseg as needed. A distributed run on
    a machine without a GPU gets its gloo process group first
    (:func:`setup_cpu_dist`)."""
    from mmengine.registry import RUNNERS
    from mmengine.runner import Runner

    from cpu_dist import setup_cpu_dist
    setup_cpu_dist(cfg)
    if 'runner_type' not in cfg:
        return Runner.from_cfg(cfg)
    return RUNNERS.build(cfg)
