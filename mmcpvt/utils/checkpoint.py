"""Checkpoints that load safely and loudly, and are never half-written.

``import mmcpvt`` calls :func:`setup_checkpoint_io`, which sets up four
things for every mmengine runner, tool and ``init_cfg`` of the process:

1. The allow-list. Since torch 2.6, ``torch.load`` defaults to
   ``weights_only=True``, which refuses any global that is not allow-listed.
   mmengine 0.10.7 checkpoints hold a few such objects (the message hub's
   ``HistoryBuffer``, numpy arrays, numpy scalars and dtypes), so ``--resume``
   and ``load_from`` fail with "Unsupported global". Rather than turning
   ``weights_only`` off (arbitrary code execution from a checkpoint), the
   exact types mmengine writes are allow-listed.

   ``HistoryBuffer`` pickles its statistics methods as ``getattr(
   HistoryBuffer, 'mean')``. Allow-listing the builtin ``getattr`` would let
   a checkpoint reach any attribute of any allowed object, so the name
   ``builtins.getattr`` is bound to :func:`_history_buffer_getattr`, which
   resolves only those methods.

2. The loader. mmengine's local loader calls ``torch.load`` without
   ``weights_only``: safe only while torch's default holds (the environment
   variable ``TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD=1`` turns it off), and its
   failures are torch's (an empty file is an ``EOFError`` without a message;
   a refused pickle advises turning the protection off). :func:`
   load_from_local` replaces it in mmengine's ``CheckpointLoader`` (the path
   of ``init_cfg=dict(type='Pretrained')``, ``load_from``, ``--resume`` and
   ``tools/test.py``): ``weights_only=True`` explicitly, and an error that
   names the file and says what to do (:class:`BrokenCheckpointError`,
   :class:`UnsafeCheckpointError`). The other schemes (http, openmmlab://,
   ...) keep mmengine's loaders, with the same errors.

3. Saving. See :class:`AtomicLocalBackend`.

4. Key checks: :func:`check_state_dict_fits`, used by the backbones when
   they load (fewer than half of their tensors fitting is refused) and by
   :class:`CheckpointFitHook` (``tools/test.py``: every tensor of the model).
"""
import contextlib
import functools
import os
import os.path as osp
import pickle
import re
import tempfile
import zipfile
from collections import Counter
from typing import List, Mapping, Optional, Tuple

import numpy as np
import torch
from mmengine.fileio.backends import LocalBackend, register_backend
from mmengine.hooks import Hook

# ------------------------------------------------------------- errors


class CheckpointError(ValueError):
    """A checkpoint that cannot be used; the message says why and what to
    do instead."""


class BrokenCheckpointError(CheckpointError):
    """The file is empty, truncated or damaged (an interrupted save or
    download): another copy, or the previous checkpoint, may be fine."""


class UnsafeCheckpointError(CheckpointError):
    """The file's pickle refers to objects outside the allow-list: loading
    it could run code, so it is refused (nothing in it was run)."""


class CheckpointMismatchError(CheckpointError):
    """The checkpoint's tensors do not fit the model (another architecture,
    a missing prefix, an unconverted official file)."""


# ------------------------------------------------------ 1. allow-list


def _numpy_globals():
    """The numpy objects that pickling arrays, scalars and dtypes refers to."""
    try:  # numpy >= 2
        from numpy._core import multiarray
    except ImportError:  # numpy 1.x
        from numpy.core import multiarray
    found = [multiarray._reconstruct, multiarray.scalar, np.ndarray, np.dtype]
    # Each dtype pickles as its class, e.g. numpy.dtypes.Float64DType.
    found += [type(np.dtype(t)) for t in np.sctypeDict.values()]
    return found


def _history_buffer_getattr(obj, name):
    """``getattr`` restricted to HistoryBuffer's registered statistics."""
    from mmengine.logging import HistoryBuffer
    if obj is HistoryBuffer and name in HistoryBuffer._statistics_methods:
        return getattr(obj, name)
    raise pickle.UnpicklingError(
        f'checkpoint asks for getattr({obj!r}, {name!r}); only '
        f'HistoryBuffer statistics methods are allowed')


def checkpoint_safe_globals():
    """All globals that mmengine checkpoints need, beyond torch's defaults."""
    from mmengine.logging import HistoryBuffer
    HistoryBuffer()  # registers the default statistics methods
    return [HistoryBuffer, (_history_buffer_getattr, 'builtins.getattr')
            ] + _numpy_globals()


def register_checkpoint_safe_globals():
    """Allow-list :func:`checkpoint_safe_globals` for ``torch.load``.

    Idempotent; called when ``mmcpvt`` is imported.
    """
    add = getattr(torch.serialization, 'add_safe_globals', None)
    if add is not None:  # torch < 2.4 has no weights_only default to fix
        add(checkpoint_safe_globals())


# ---------------------------------------------------------- 2. loading

ALLOWED_OBJECTS = ('tensors, numbers, strings, lists, tuples and dicts, and '
                   'the objects mmengine writes into checkpoints (numpy '
                   'arrays, scalars and dtypes, the message hub\'s '
                   'HistoryBuffer; mmcpvt.utils.checkpoint.'
                   'checkpoint_safe_globals)')
# What torch says when the file ends early or its zip layout is damaged.
_BROKEN_MARKERS = ('PytorchStreamReader failed', 'unexpected EOF',
                   'corrupted', 'truncated', 'central directory',
                   'invalid load key', 'ran out of input')
# What torch's weights-only unpickler says when it refuses an object.
_REFUSED_MARKERS = ('Weights only load failed', 'Unsupported global',
                    'HistoryBuffer statistics')


def _describe_size(filename: str) -> str:
    try:
        return f'{osp.getsize(filename)} bytes'
    except (OSError, TypeError):
        return 'size unknown'


def _broken(filename, what: str) -> BrokenCheckpointError:
    return BrokenCheckpointError(
        f'{filename}: the checkpoint is empty or truncated ({what}); the '
        f'save or download that wrote it was probably interrupted. '
        f'Re-download it, re-save it, or use the previous checkpoint.')


def explain_load_error(filename, error: BaseException
                       ) -> Optional[CheckpointError]:
    """The :class:`CheckpointError` that ``error`` (raised by ``torch.load``
    on ``filename``) means, or None when it is none of ours to explain."""
    text = str(error)
    first = text.strip().split('\n')[0].split('. ')[0]
    if isinstance(error, pickle.UnpicklingError) and any(
            m in text for m in _REFUSED_MARKERS) and not any(
                m in text for m in ('truncated', 'ran out of input')):
        found = re.search(r'GLOBAL ([\w.]+)', text)
        what = (f'it refers to {found.group(1)}' if found else next(
            (line.strip() for line in text.split('\n')
             if 'getattr' in line or 'Unsupported' in line),
            'see the allow-list'))
        return UnsafeCheckpointError(
            f'{filename}: refused to load: the checkpoint holds objects that '
            f'are not allowed in a checkpoint ({what}). Unpickling it could '
            f'run code, so nothing in it was run or loaded. mmcpvt loads '
            f'with torch.load(weights_only=True), which allows '
            f'{ALLOWED_OBJECTS}. If you trust where the file comes from, '
            f'load it once where its code may run and re-save its tensors '
            f'alone, e.g. torch.save({{"state_dict": state_dict}}, path).')
    if isinstance(error, EOFError):
        return _broken(filename, f'{_describe_size(filename)}, the data ends '
                       f'early')
    if isinstance(error, (pickle.UnpicklingError, RuntimeError)) and any(
            m in text for m in _BROKEN_MARKERS):
        return _broken(filename, f'{_describe_size(filename)}: {first}')
    return None


def safe_load(filename: str, map_location=None, mmap: Optional[bool] = None):
    """``torch.load(filename, weights_only=True)`` with errors that name the
    file and say what to do.

    Raises:
        BrokenCheckpointError: the file is empty, truncated or damaged.
        UnsafeCheckpointError: the pickle holds objects outside the
            allow-list (nothing in it is run).
    """
    if isinstance(filename, (str, os.PathLike)) and osp.getsize(filename) == 0:
        raise _broken(filename, 'the file has 0 bytes')
    kwargs = {} if mmap is None else dict(mmap=mmap)
    try:
        return torch.load(filename, map_location=map_location,
                          weights_only=True, **kwargs)
    except (pickle.UnpicklingError, EOFError, RuntimeError) as e:
        error = explain_load_error(filename, e)
        if error is None:
            raise
    # raised outside the except clause: torch's message (which advises
    # turning the protection off) does not trail ours
    raise error


WEIGHTS_ONLY_ENV = 'TORCH_FORCE_WEIGHTS_ONLY_LOAD'


@contextlib.contextmanager
def weights_only_loads():
    """Inside, every ``torch.load`` of this process unpickles with
    ``weights_only=True``, whatever its caller passes: torch reads
    ``TORCH_FORCE_WEIGHTS_ONLY_LOAD`` at each call. This covers mmengine's
    loaders of every scheme (a local path, http(s), ``openmmlab://``,
    ``torchvision://``: ``torch.hub.load_state_dict_from_url`` passes
    ``weights_only=False``)."""
    old = os.environ.get(WEIGHTS_ONLY_ENV)
    os.environ[WEIGHTS_ONLY_ENV] = '1'
    try:
        yield
    finally:
        if old is None:
            os.environ.pop(WEIGHTS_ONLY_ENV, None)
        else:
            os.environ[WEIGHTS_ONLY_ENV] = old


def load_from_local(filename, map_location=None):
    """mmengine's local checkpoint loader (same name and contract, so that
    its log reads "Loads checkpoint by local backend") through
    :func:`safe_load`."""
    filename = osp.expanduser(filename)
    if not osp.isfile(filename):
        raise FileNotFoundError(f'{filename} can not be found.')
    return safe_load(filename, map_location)


def _explaining(loader):
    """``loader`` (an mmengine scheme loader) with :func:`
    explain_load_error`'s errors."""

    @functools.wraps(loader)  # keeps __name__: mmengine logs it
    def load(filename, map_location=None, *args, **kwargs):
        try:
            return loader(filename, map_location, *args, **kwargs)
        except (pickle.UnpicklingError, EOFError, RuntimeError) as e:
            error = explain_load_error(filename, e)
            if error is None:
                raise
        raise error

    load.explains_errors = True
    return load


def register_checkpoint_loader():
    """Put :func:`load_from_local` in mmengine's ``CheckpointLoader`` for
    local paths, and :func:`explain_load_error`'s messages on its other
    schemes. Idempotent."""
    from mmengine.runner import CheckpointLoader
    for prefix, loader in list(CheckpointLoader._schemes.items()):
        if prefix == '':
            new = load_from_local
        elif getattr(loader, 'explains_errors', False):
            continue
        else:
            new = _explaining(loader)
        if new is not loader:
            CheckpointLoader.register_scheme(prefix, new, force=True)


def check_checkpoint(path: str) -> None:
    """Raise a clear error if the checkpoint file ``path`` cannot be loaded.

    For ``--resume`` and ``tools/test.py`` to refuse (or step back from) a
    bad file before anything is built. The file is read as loading reads it
    (``torch.load(weights_only=True)`` with mmcpvt's allow-list); a zip-format
    file (``torch.save``'s default) is memory-mapped, so its tensor data is
    not read and the check costs little even for a large file.

    Found: an empty file, a truncated one (the zip directory at its end
    missing, or a legacy-format file ending early), a pickle that refers to
    objects outside the allow-list (nothing in it is run). Not found:
    damage inside a tensor's bytes of a zip whose directory is intact.

    Args:
        path (str): A local checkpoint file.

    Raises:
        FileNotFoundError: ``path`` is not a file.
        BrokenCheckpointError: empty or truncated ("re-download it, re-save
            it, or use the previous checkpoint").
        UnsafeCheckpointError: the file holds objects that are not allowed.
    """
    if not osp.isfile(path):
        raise FileNotFoundError(f'checkpoint file not found: {path}')
    safe_load(path, map_location='cpu', mmap=True if zipfile.is_zipfile(path)
              else None)


# ----------------------------------------------------------- 3. saving

def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


# Read once, at import (setting it is the only way to read it).
_UMASK = _umask()


def atomic_write(data: bytes, filepath) -> None:
    """Write ``data`` to ``filepath`` so that the file under that name is
    either the old one or the complete new one, never a part.

    The bytes go to a temporary file in the same directory (same file
    system), which is flushed to disk (``fsync``) and then renamed over
    ``filepath`` (``os.replace``, atomic on POSIX and Windows). On any
    failure the temporary file is removed and the exception raised. A
    symlink at ``filepath`` is written through, as ``open(filepath, 'wb')``
    would.
    """
    path = osp.realpath(filepath)
    directory = osp.dirname(path)
    os.makedirs(directory, exist_ok=True)
    fd, tmp = tempfile.mkstemp(
        prefix=f'.{osp.basename(path)}.', suffix='.tmp', dir=directory)
    try:
        with os.fdopen(fd, 'wb') as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        # mkstemp makes the file private (0600); open() would give 0666
        # less the umask
        os.chmod(tmp, 0o666 & ~_UMASK)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    if hasattr(os, 'O_DIRECTORY'):  # make the rename itself durable
        with contextlib.suppress(OSError):
            dir_fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
            try:
                os.fsync(dir_fd)
            finally:
                os.close(dir_fd)


class AtomicLocalBackend(LocalBackend):
    """mmengine's ``LocalBackend`` whose writes are atomic.

    Why: mmengine's ``save_checkpoint`` serialises the checkpoint into memory
    and hands the bytes to ``LocalBackend.put``, which opens the final path
    with ``'wb'`` (emptying the file that was there) and then writes. A
    crash, kill, preemption or full disk during that write leaves a
    truncated ``epoch_N.pth`` under its final name, which ``--resume``
    (``last_checkpoint``) then picks and fails on. Here :func:`atomic_write`
    writes a temporary file and renames it: the final name holds the
    previous file or the complete new one.

    :func:`register_atomic_local_backend` makes it the ``'local'`` backend
    (prefix ``''``), so every runner and hook that saves through mmengine's
    file backends uses it, without a config change. ``put_text`` (the
    ``last_checkpoint`` record) too. A process killed mid-write leaves at
    most a hidden ``.epoch_N.pth.<random>.tmp`` beside it, never a file
    under a checkpoint's name.
    """

    def put(self, obj: bytes, filepath) -> None:
        atomic_write(obj, filepath)

    def put_text(self, obj: str, filepath, encoding: str = 'utf-8') -> None:
        atomic_write(obj.encode(encoding), filepath)


def register_atomic_local_backend():
    """Make :class:`AtomicLocalBackend` mmengine's ``'local'`` file backend
    (the one ``save_checkpoint`` uses for local paths). Idempotent."""
    register_backend('local', AtomicLocalBackend, force=True, prefixes='')


def setup_checkpoint_io():
    """The allow-list, the loader and atomic saving for this process (see
    the module's docstring). Idempotent; called when ``mmcpvt`` is
    imported."""
    register_checkpoint_safe_globals()
    register_checkpoint_loader()
    register_atomic_local_backend()


# ------------------------------------------------------ 4. key checks


def _shape(value):
    shape = getattr(value, 'shape', None)
    return None if shape is None else tuple(shape)


def _counted(keys):
    """BatchNorm's step counters are no weights."""
    return [k for k in keys if not k.endswith('num_batches_tracked')]


def _sample(keys, n: int = 3) -> str:
    keys = list(keys)
    return ', '.join(keys[:n]) + (', ...' if len(keys) > n else '')


def _groups(keys) -> str:
    """'neck (16), bbox_head (40)': keys counted by their first name."""
    count = Counter(k.split('.')[0] for k in keys)
    return ', '.join(f'{g} ({n})' for g, n in count.items())


def _guess_prefix(expected, offered) -> Optional[Tuple[str, str, int]]:
    """A prefix that would make the offered keys fit: ``('strip', p, n)``
    when the offered keys carry ``p`` too many, ``('add', p, n)`` when they
    lack it; ``n`` keys would then fit."""
    expected, offered = set(expected), set(offered)
    strip, add = Counter(), Counter()
    for keys, other, count in ((offered, expected, strip),
                               (expected, offered, add)):
        for k in keys:
            parts = k.split('.')
            for i in range(1, len(parts)):
                if '.'.join(parts[i:]) in other:
                    count['.'.join(parts[:i]) + '.'] += 1
                    break
    best = [(how, *c.most_common(1)[0]) for how, c in (('strip', strip),
                                                       ('add', add)) if c]
    return max(best, key=lambda b: b[2]) if best else None


class KeyMatch:
    """How the tensors ``offered`` fit those ``expected`` (both name ->
    tensor): ``matched``, ``missing`` (not offered), ``wrong_shape``
    (offered with another shape) and ``unexpected`` (offered, not expected)
    key lists. BatchNorm step counters are not counted."""

    def __init__(self, expected: Mapping, offered: Mapping):
        self.expected = {k: _shape(v) for k, v in expected.items()
                         if not k.endswith('num_batches_tracked')}
        self.offered = {k: _shape(v) for k, v in offered.items()}
        self.matched: List[str] = []
        self.missing: List[str] = []
        self.wrong_shape: List[str] = []
        for k, shape in self.expected.items():
            if k not in self.offered:
                self.missing.append(k)
            elif self.offered[k] != shape:
                self.wrong_shape.append(k)
            else:
                self.matched.append(k)
        self.unexpected = [k for k in _counted(self.offered)
                           if k not in self.expected]

    @property
    def total(self) -> int:
        return len(self.expected)

    def details(self, prefix: str = '') -> str:
        """The missing, wrong-shape and unexpected keys: counts and a few
        examples, one kind a line."""
        lines = []
        if self.missing:
            lines.append(f'missing {len(self.missing)}: '
                         f'{_groups(self.missing)} (e.g. '
                         f'{_sample(prefix + k for k in self.missing)})')
        if self.wrong_shape:
            shown = ', '.join(
                f'{prefix}{k}: checkpoint {self.offered[k]}, model '
                f'{self.expected[k]}' for k in self.wrong_shape[:2])
            more = ', ...' if len(self.wrong_shape) > 2 else ''
            lines.append(f'of another shape {len(self.wrong_shape)} (e.g. '
                         f'{shown}{more})')
        if self.unexpected:
            lines.append(f'in the checkpoint, not in the model '
                         f'{len(self.unexpected)} (e.g. '
                         f'{_sample(prefix + k for k in self.unexpected)})')
        return '\n'.join('  ' + line for line in lines)

    def likely_causes(self) -> List[str]:
        """What most likely went wrong, and where to change it."""
        from .convert import BACKBONES, TOOLS, detect_family
        found = []
        guess = _guess_prefix(self.expected, self.offered)
        if guess and guess[2] * 2 >= self.total:
            how, p, n = guess
            if how == 'strip':
                found.append(
                    f'the checkpoint\'s keys carry the prefix {p!r} ({n} '
                    f'tensors fit without it): load it with that prefix, '
                    f'e.g. init_cfg=dict(type=\'Pretrained\', checkpoint=..., '
                    f'prefix={p!r})')
            else:
                found.append(
                    f'the checkpoint\'s keys lack the prefix {p!r} ({n} '
                    f'tensors fit with it): it holds only that part of the '
                    f'model; load it into that part, e.g. model.'
                    f'{p}init_cfg=dict(type=\'Pretrained\', checkpoint=...)')
        family = detect_family(self.offered)
        if family in TOOLS:
            found.append(f'it looks like an official / timm {family} '
                         f'checkpoint, which is for {BACKBONES[family]} '
                         f'({TOOLS[family]} converts it)')
        if self.wrong_shape and len(self.wrong_shape) >= len(self.missing):
            found.append('the keys fit but the shapes do not: a checkpoint '
                         'of another size (compare the config\'s arch, '
                         'embed_dims, depths with the checkpoint\'s)')
        fitted = {k.split('.')[0] for k in self.matched}
        unfit = {k.split('.')[0] for k in self.missing + self.wrong_shape}
        if fitted and self.missing and not fitted & unfit:
            parts = ', '.join(sorted(fitted))
            found.append(
                f'the checkpoint holds only the {parts} of this model (a '
                f'classifier or backbone checkpoint, not one of this '
                f'config): to train from it, use model.backbone.init_cfg='
                f'dict(type=\'Pretrained\', checkpoint=..., '
                f'prefix=\'backbone.\'); to test, use a checkpoint that '
                f'training this config wrote (work_dirs/<config>/epoch_N.pth '
                f'or iter_N.pth)')
        return found


USUAL_CAUSES = (
    'Usual causes: a checkpoint of another architecture or size; a missing '
    'or wrong prefix in init_cfg (prefix=\'backbone.\' for a classifier or '
    'detector checkpoint); an official file that '
    'tools/model_converters/*2mmcpvt.py must convert first.')


def _causes(match: 'KeyMatch') -> str:
    found = match.likely_causes()
    if not found:
        return USUAL_CAUSES
    return 'Likely: ' + '; or '.join(found) + '.\n' + USUAL_CAUSES


def check_state_dict_fits(expected: Mapping, offered: Mapping,
                          min_fraction: float = 0.5, owner: str = 'model',
                          prefix: str = '', why: str = '') -> KeyMatch:
    """Raise :class:`CheckpointMismatchError` unless at least
    ``min_fraction`` of the ``expected`` tensors (a state dict) are in
    ``offered`` with their shapes; return the :class:`KeyMatch`.

    ``owner`` names the model in the message, ``prefix`` is put before its
    keys there (``'backbone.'`` for a backbone loaded as part of a
    detector), ``why`` says why the rule is what it is.
    """
    match = KeyMatch(expected, offered)
    if len(match.matched) >= min_fraction * match.total:
        return match
    if not match.matched:
        head = f'none of the {match.total} tensors of {owner}'
    else:
        head = f'only {len(match.matched)} of the {match.total} tensors of ' \
               f'{owner}'
    where = f' (keys {prefix}*)' if prefix else ''
    if not match.offered:
        got = (f'the checkpoint has no tensor under {prefix!r}' if prefix
               else 'the checkpoint has no tensors')
    else:
        got = f'the checkpoint offers {len(match.offered)}'
    raise CheckpointMismatchError(
        f'{head}{where} are in the checkpoint with their shapes ({got}); '
        f'{why}\n{match.details(prefix)}\n{_causes(match)}')


class CheckpointFitHook(Hook):
    """Refuse a ``load_from`` / ``--resume`` checkpoint of which fewer than
    ``min_fraction`` of the model's tensors fit (names and shapes), before
    anything is loaded.

    ``tools/test.py`` registers it with ``min_fraction=1.0``: a model tested
    with some weights left random measures nothing (a classifier checkpoint
    gives a detector mAP 0.000). Checks the checkpoint as
    ``Runner.load_checkpoint`` will load it (``state_dict``, ``module.``
    stripped), in ``after_load_checkpoint``, which the runner calls between
    reading the file and loading it.

    Args:
        min_fraction (float): The share of the model's tensors that must
            fit. Defaults to 1.0.
    """
    priority = 'LOWEST'  # after hooks that rewrite the checkpoint (EMA)

    def __init__(self, min_fraction: float = 1.0):
        self.min_fraction = min_fraction

    def after_load_checkpoint(self, runner, checkpoint: dict) -> None:
        from mmengine.model import is_model_wrapper
        model = runner.model.module if is_model_wrapper(
            runner.model) else runner.model
        state = checkpoint.get('state_dict', checkpoint)
        state = {re.sub(r'^module\.', '', k): v for k, v in state.items()}
        why = ('all of them are needed: the rest would be left at random '
               'weights.' if self.min_fraction >= 1 else
               f'at least {self.min_fraction:.0%} are needed.')
        check_state_dict_fits(model.state_dict(), state, self.min_fraction,
                              owner=type(model).__name__, why=why)


def checkpoint_state_dict(filename: str) -> dict:
    """The state dict of a checkpoint file, read through mmengine's loader
    (for error messages; ``{}`` if it holds none)."""
    from mmengine.runner.checkpoint import _load_checkpoint

    from .convert import unwrap
    state = unwrap(_load_checkpoint(filename, map_location='cpu'))
    return state if isinstance(state, dict) else {}
