"""Checkpoints that load safely and loudly (saving: :mod:`.atomic`).

``import mmcpvt`` registers, as a library registers its modules, mmengine's
checkpoint types in torch's ``weights_only`` allow-list. Loading safely is
explicit: :func:`safe_load`, :func:`weights_only_loads` around mmengine's
loaders, and ``TORCH_FORCE_WEIGHTS_ONLY_LOAD=1``, which our tools set for
their process.
A file that cannot be loaded is diagnosed from the file itself, never from
torch's error text. Loading into a model: :mod:`mmcpvt.utils.state_dict`.
"""
import contextlib
import http.client
import io
import os
import os.path as osp
import pickle
import pickletools
import urllib.error
import urllib.parse
import zipfile
from typing import List, Optional, Tuple

import numpy as np
import torch

from .text import some

# ------------------------------------------------------------- errors


class CheckpointError(ValueError):
    """The message says why and what to do instead, ``what`` in a few words
    what is wrong."""

    def __init__(self, message: str, what: Optional[str] = None):
        super().__init__(message)
        self.what = what or message


class BrokenCheckpointError(CheckpointError):
    """Empty, truncated, damaged, or no checkpoint at all."""


class UnsafeCheckpointError(CheckpointError):
    """Its pickle refers to objects outside the allow-list (not run)."""


class CheckpointDownloadError(CheckpointError):
    """A scheme no loader of mmengine takes, an address that names no file,
    or a failed download."""


class CheckpointMismatchError(CheckpointError):
    """The checkpoint's tensors do not fit the model."""


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
    """``getattr`` restricted to HistoryBuffer's registered statistics.

    HistoryBuffer pickles its statistics methods as ``getattr(HistoryBuffer,
    'mean')``; allow-listing the builtin ``getattr`` would let a checkpoint
    reach any attribute of any allowed object, so the name
    ``builtins.getattr`` is bound to this function instead."""
    from mmengine.logging import HistoryBuffer
    if obj is HistoryBuffer and name in HistoryBuffer._statistics_methods:
        return getattr(obj, name)
    raise pickle.UnpicklingError(
        f'checkpoint asks for getattr({obj!r}, {name!r}); only '
        f'HistoryBuffer statistics methods are allowed')


def register_checkpoint_safe_globals():
    """Allow-list the globals that mmengine checkpoints hold beyond torch's
    defaults (the message hub's ``HistoryBuffer``, numpy arrays, scalars and
    dtypes), without which ``--resume`` and ``load_from`` fail with
    "Unsupported global"; idempotent."""
    from mmengine.logging import HistoryBuffer
    HistoryBuffer()  # registers the default statistics methods
    torch.serialization.add_safe_globals(
        [HistoryBuffer, (_history_buffer_getattr, 'builtins.getattr')] +
        _numpy_globals())


# ---------------------------------------------------------- 2. loading

ALLOWED_OBJECTS = ('tensors, numbers, strings, lists, tuples and dicts, and '
                   'the objects mmengine writes into checkpoints (numpy '
                   'arrays, scalars and dtypes, the message hub\'s '
                   'HistoryBuffer)')
RETRY = 'Re-download it, re-save it, or use the previous checkpoint.'
FORCE = 'TORCH_FORCE_WEIGHTS_ONLY_LOAD'
FORCE_OFF = 'TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD'


@contextlib.contextmanager
def weights_only_loads():
    """Inside, every ``torch.load`` of this process unpickles with
    ``weights_only=True``, whatever its caller passes: torch reads
    ``TORCH_FORCE_WEIGHTS_ONLY_LOAD`` at each call. This covers mmengine's
    loaders of every scheme (a local path, http(s), ``openmmlab://``,
    ``torchvision://``: ``torch.hub.load_state_dict_from_url`` passes
    ``weights_only`` off). ``TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD`` is unset
    meanwhile (torch refuses both at once)."""
    old = {k: os.environ.pop(k, None) for k in (FORCE, FORCE_OFF)}
    os.environ[FORCE] = '1'
    try:
        yield
    finally:
        os.environ.pop(FORCE, None)
        os.environ.update({k: v for k, v in old.items() if v is not None})


# Globals a weights-only load takes (torch's own, and ours above), by
# prefix: only to name, in an error, what else a refused file refers to.
_TAKEN = ('torch.', 'collections.OrderedDict', '_codecs.encode', 'numpy.',
          'mmengine.logging.history_buffer.', 'builtins.getattr')
# A legacy (non-zip) torch.save file: magic number, protocol, system info,
# the object, the storage keys; raw storage bytes follow.
_LEGACY_PICKLES = 5


def unwrap(checkpoint) -> dict:
    """The state dict inside an official, timm or mmengine checkpoint
    (``{'model': ...}`` in the DeiT / Swin / Twins releases)."""
    for key in ('state_dict', 'model', 'model_ema', 'module'):
        if isinstance(checkpoint, dict) and isinstance(
                checkpoint.get(key), dict):
            return checkpoint[key]
    return checkpoint


def _pickle_globals(filename: str, is_zip: bool) -> Tuple[List[str], bool]:
    """The ``module.name`` globals the checkpoint's pickles refer to, read
    as opcodes (nothing is run), and whether every pickle is complete.
    Not torch's ``get_unsafe_globals_in_checkpoint``: it reads zip files
    only, and raises on a pickle that ends early; legacy files (``torch.save
    (..., _use_new_zipfile_serialization=False)``) are named here too
    (test_checkpoint_safety.py::test_code_in_a_checkpoint_never_runs)."""
    if is_zip:
        with zipfile.ZipFile(filename) as archive:
            data = archive.read(next(n for n in archive.namelist()
                                     if n.endswith('data.pkl')))
    else:
        with open(filename, 'rb') as f:
            data = f.read()
    stream, found, strings = io.BytesIO(data), [], []
    try:
        for _ in range(1 if is_zip else _LEGACY_PICKLES):
            for op, arg, _pos in pickletools.genops(stream):
                if op.name in ('GLOBAL', 'INST'):
                    found.append(arg.replace(' ', '.'))
                elif op.name == 'STACK_GLOBAL' and len(strings) >= 2:
                    found.append('.'.join(strings[-2:]))
                elif isinstance(arg, str):
                    strings.append(arg)
    except Exception:  # noqa: B902  (pickletools: ValueError, EOF, ...)
        return found, False
    return found, True


def _diagnose(filename: str, error: Exception) -> CheckpointError:
    """The error for a file that ``torch.load(weights_only=True)`` failed
    on, from the file itself (never from the text of ``error``)."""
    size = osp.getsize(filename)
    with open(filename, 'rb') as f:
        head = f.read(4)
    is_zip = zipfile.is_zipfile(filename)
    members = []
    if is_zip:
        with zipfile.ZipFile(filename) as archive:
            members = archive.namelist()
    if size == 0:
        what = 'the file has 0 bytes'
    elif not is_zip and head.startswith(b'PK'):
        what = (f'{size} bytes: a zip archive without its directory at the '
                f'end, so it ends early')
    elif not is_zip and not head.startswith(b'\x80'):
        return BrokenCheckpointError(
            f'{filename}: not a checkpoint: its {size} bytes are neither a '
            f'zip archive (torch.save\'s format) nor a pickle (they start '
            f'with {head!r}). Check the path. {RETRY}', 'not a checkpoint')
    elif is_zip and not any(n.endswith('data.pkl') for n in members):
        return BrokenCheckpointError(
            f'{filename}: not a checkpoint: a zip archive that is not a torch '
            f'file (members: {some(members)}). Check the path.',
            'not a checkpoint')
    else:
        names, complete = _pickle_globals(filename, is_zip)
        other = sorted({n for n in names if not n.startswith(_TAKEN)})
        refers = ', '.join(other) or 'objects outside the allow-list'
        # refused by the unpickler, not cut short: what it refers to
        if isinstance(error, pickle.UnpicklingError) and (other or complete):
            return UnsafeCheckpointError(
                f'{filename}: refused to load: the checkpoint holds objects '
                f'that are not allowed in a checkpoint (it refers to '
                f'{refers}). Unpickling it could run code, so nothing in it '
                f'was run or loaded. mmcpvt loads with torch.load('
                f'weights_only=True), which allows {ALLOWED_OBJECTS}. If you '
                f'trust where the file comes from, load it once where its '
                f'code may run and re-save its tensors alone, e.g. '
                f'torch.save({{"state_dict": state_dict}}, path).',
                f'it holds objects that could run code ({refers})')
        what = (f'{size} bytes, the data ends early' if not complete else
                f'{size} bytes that torch cannot read: '
                f'{type(error).__name__}')
    return BrokenCheckpointError(
        f'{filename}: the checkpoint is empty or truncated ({what}); the save '
        f'or download that wrote it was probably interrupted. {RETRY}',
        f'empty or truncated: {what}')


def safe_load(filename: str, map_location=None, mmap: bool = False):
    """``torch.load(filename, weights_only=True)``; a file it fails on is
    named, with what is wrong and what to do.

    Raises:
        FileNotFoundError: ``filename`` is not a file.
        BrokenCheckpointError: empty, truncated, damaged or no checkpoint.
        UnsafeCheckpointError: the pickle refers to objects outside the
            allow-list (nothing in it is run).
    """
    if not osp.isfile(filename):
        raise FileNotFoundError(f'checkpoint file not found: {filename}')
    try:
        if filename.endswith('.safetensors'):  # no pickle in them
            # safetensors' own loader: torch.load reads them from 2.14 on
            from safetensors.torch import load_file
            return load_file(filename, device=str(map_location or 'cpu'))
        with weights_only_loads():  # a TORCH_FORCE_* setting cannot clash
            return torch.load(filename, map_location=map_location,
                              weights_only=True, mmap=mmap or None)
    except Exception as e:  # noqa: B902  (the file says what went wrong)
        raise _diagnose(filename, e) from None  # torch's text not added


def _held(obj) -> str:
    """What ``obj`` is, for an error message: 'a list of 2 items', ..."""
    if isinstance(obj, torch.Tensor):
        return f'a tensor of shape {tuple(obj.shape)}'
    if isinstance(obj, dict):
        odd = [f'{k!r} ({type(v).__name__})' for k, v in obj.items()
               if not isinstance(v, torch.Tensor)]
        return (f'a dict with entries that are not tensors: {some(odd)}'
                if obj else 'an empty dict')
    size = f' of {len(obj)} items' if isinstance(obj, (list, tuple)) else ''
    return f'a {type(obj).__name__}{size}'


def state_dict_of(checkpoint, path: str) -> dict:
    """The state dict in ``checkpoint`` (read from ``path``; see
    :func:`unwrap`), or a :class:`CheckpointError`
    naming the file, what it holds and what is expected."""
    state = unwrap(checkpoint)
    if isinstance(state, dict) and state and all(
            isinstance(v, torch.Tensor) for v in state.values()):
        return state
    held = _held(state)
    if state is not checkpoint:  # found under a key
        key = next(k for k, v in checkpoint.items() if v is state)
        held = f'a dict whose {key!r} entry is {held}'
    raise CheckpointError(
        f'{path} is not a state dict: it holds {held}. Expected a dict of '
        f'tensors (name -> tensor), or a dict whose \'state_dict\' or '
        f'\'model\' entry is one.')


def _check_url(url: str) -> None:
    """Refuse, before anything is fetched, an address that mmengine's
    ``CheckpointLoader`` would read as a local file name (``HTTP://``,
    ``file://``, ``htps://``: it matches its schemes in lower case) or that
    names no file for torch.hub's cache (a path ending in ``/``)."""
    from mmengine.runner.checkpoint import CheckpointLoader, load_from_local

    def read_as_file(address):  # the maintained table of schemes, through
        # a private classmethod: mmengine has no public one
        return CheckpointLoader._get_checkpoint_loader(
            address) is load_from_local

    scheme, rest = url.split('://', 1)
    path = urllib.parse.urlparse(url).path
    if read_as_file(url) and not osp.exists(url):  # (a file named a://b)
        lower = f'{scheme.lower()}://{rest}'
        fix = (f'write {lower}' if not read_as_file(lower) else
               f'give the file\'s path, {path}' if scheme.lower() == 'file'
               else 'give a local path or an http(s):// address')
        raise CheckpointDownloadError(
            f'{url}: no checkpoint loader of mmengine takes the scheme '
            f'{scheme}:// (they match http://, https://, openmmlab://, ... '
            f'in lower case), so it would be read as a local file name: '
            f'{fix}', f'unknown scheme {scheme}://')
    if scheme in ('http', 'https') and not osp.basename(path):
        raise CheckpointDownloadError(
            f'{url} names no file (its path ends in "/"): torch.hub caches '
            f'a download under the last part of the path. Give the address '
            f'of the checkpoint file itself, e.g. {url.rstrip("/")}'
            f'/model.pth', 'the address names no file')


def download(url: str) -> str:
    """The copy of the http(s) checkpoint ``url`` in torch.hub's cache
    (``<hub dir>/checkpoints/<file name>``), where mmengine's loader
    (``torch.hub.load_state_dict_from_url``) finds it; downloaded unless
    it is there. A failed download leaves no file behind and raises a
    :class:`CheckpointDownloadError`."""
    _check_url(url)
    copy = osp.join(torch.hub.get_dir(), 'checkpoints',
                    osp.basename(urllib.parse.urlparse(url).path))
    if osp.isfile(copy):
        return copy
    os.makedirs(osp.dirname(copy), exist_ok=True)
    try:  # torch writes <copy>.<uuid>.partial and removes it on failure
        torch.hub.download_url_to_file(url, copy, progress=False)
    except (OSError, ValueError, http.client.HTTPException) as e:
        # urllib's errors are OSErrors; a bad port is http.client's
        # InvalidURL (a ValueError), a cut connection its IncompleteRead
        why = e if isinstance(e, urllib.error.HTTPError) else getattr(
            e, 'reason', e)  # a URLError's reason: the OSError behind it
        raise CheckpointDownloadError(
            f'{url}: the download failed ({why}). Check the address (open '
            f'it with curl or a browser), the network and any proxy '
            f'(https_proxy); or download the file yourself and give its '
            f'local path instead of the URL.', f'download failed: {why}'
        ) from None  # urllib's traceback not added
    return copy


def check_checkpoint(path: str, state_dict: bool = False,
                     setting: Optional[str] = None) -> None:
    """Raise a clear error if the checkpoint ``path`` cannot be loaded,
    before anything is built; with ``state_dict``, also if it holds no state
    dict (a list, a tensor, ``{'state_dict': 'text'}``). ``setting`` (e.g.
    ``'load_from'``) names where ``path`` was given, at the start of the
    error. A zip-format file is memory-mapped: its tensor data is not read,
    so the check costs little even for a large file (and does not find
    damage inside a tensor's bytes).

    An ``http(s)://`` address is downloaded (:func:`download`) and that copy
    checked; an address that mmengine would read as a local file name
    (``HTTP://``, ``file://``) is refused; other schemes (``openmmlab://``,
    ...) are left to their loader, under :func:`weights_only_loads`.
    """
    path = str(path)
    try:
        if path.startswith(('http://', 'https://')):
            copy = download(path)
            try:
                return check_checkpoint(copy, state_dict)
            except CheckpointError as e:
                raise type(e)(
                    f'{path}, downloaded to {e} (torch.hub loads that copy '
                    f'again rather than download anew: delete it to '
                    f'download again)', e.what) from None
        if '://' in path:
            return _check_url(path)
        checkpoint = safe_load(path, map_location='cpu',
                               mmap=zipfile.is_zipfile(path))
        if state_dict:
            state_dict_of(checkpoint, path)
    except CheckpointError as e:
        if setting is None:
            raise
        raise type(e)(f'{setting} {e}', e.what) from None


def require_file(path, what: str = 'checkpoint') -> None:
    """Refuse a local ``path`` that is no file; a URL is left to its
    loader."""
    if '://' not in str(path) and not osp.isfile(str(path)):
        raise FileNotFoundError(f'{what} file not found: {path}')
