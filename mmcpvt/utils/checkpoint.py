"""Weights, loaded in one place: :func:`load_weights` reads a checkpoint
(:func:`read_checkpoint`: a path or URL, unpickled with
``weights_only=True``), converts official / timm / mmpretrain keys for a
backbone that takes them, and loads what fits into a module: all of it or
nothing (``strict``), or the part that fits with one warning line.
A backbone's ``Pretrained`` init_cfg, the runner hook of ``load_from`` and
``--resume`` (:class:`mmcpvt.engine.CheckpointLoadHook`) and the tools call
it. Saving: :mod:`.atomic`.

``import mmcpvt`` registers, as a library registers its modules, mmengine's
checkpoint types in torch's ``weights_only`` allow-list.
"""
import contextlib
import http.client
import os
import os.path as osp
import pickle
import re
import urllib.parse
import zipfile
from dataclasses import dataclass, field
from typing import Optional, Union

import numpy as np
import torch
import torch.nn as nn
from mmengine.logging import MMLogger

from .convert import CONVERTERS, detect_family
from .text import some


class CheckpointError(ValueError):
    """A checkpoint that cannot be used; the message says why."""


class BrokenCheckpointError(CheckpointError):
    """Empty, truncated, or no torch checkpoint at all."""


class UnsafeCheckpointError(CheckpointError):
    """Its pickle refers to objects outside the allow-list (nothing run)."""


class CheckpointDownloadError(CheckpointError):
    """An address that names no file, or a failed download."""


class CheckpointMismatchError(CheckpointError):
    """The checkpoint's tensors do not fit the module."""


# ------------------------------------------------------------ allow-list


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


# --------------------------------------------------------------- reading

FORCE, FORCE_OFF = ('TORCH_FORCE_WEIGHTS_ONLY_LOAD',
                    'TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD')


@contextlib.contextmanager
def weights_only_loads():
    """Inside, every ``torch.load`` of the process unpickles with
    ``weights_only=True``, whatever its caller passes (torch reads
    ``TORCH_FORCE_WEIGHTS_ONLY_LOAD`` at each call): mmengine's loaders,
    ``torch.hub.load_state_dict_from_url`` (which turns it off) and other
    libraries' ``init_cfg`` loads. ``TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD`` is
    unset meanwhile (torch refuses both at once)."""
    old = {k: os.environ.pop(k, None) for k in (FORCE, FORCE_OFF)}
    os.environ[FORCE] = '1'
    try:
        yield
    finally:
        os.environ.pop(FORCE, None)
        os.environ.update({k: v for k, v in old.items() if v is not None})


def _refusal(path: str, error: Exception) -> CheckpointError:
    """What is wrong with the file ``torch.load(weights_only=True)`` failed
    on, read from the file (never from the text of ``error``)."""
    unsafe, is_zip = [], zipfile.is_zipfile(path)
    if is_zip:
        with zipfile.ZipFile(path) as archive:
            is_torch = any(n.endswith('data.pkl') for n in archive.namelist())
        unsafe = (torch.serialization.get_unsafe_globals_in_checkpoint(path)
                  if is_torch else [])
    else:  # torch's legacy format is a pickle (protocol 2: b'\x80\x02')
        with open(path, 'rb') as f:
            is_torch = f.read(1) == b'\x80'
    if is_torch and isinstance(error, pickle.UnpicklingError) and (
            unsafe or not is_zip):
        refers = f' ({", ".join(unsafe)})' if unsafe else ''
        return UnsafeCheckpointError(
            f'{path}: refused: it holds objects that a weights-only load '
            f'does not allow{refers}; nothing in it was run. If you trust '
            f'it, load it where its code may run and save its tensors alone: '
            f'torch.save({{"state_dict": state_dict}}, path)')
    return BrokenCheckpointError(
        f'{path}: not a readable checkpoint ({osp.getsize(path)} bytes: '
        f'empty, truncated, or not a torch file). Re-download it, re-save '
        f'it, or use another')


def _read_file(path: str, mmap: bool):
    if path.endswith('.safetensors'):  # no pickle in them
        # safetensors' own loader: torch.load reads them from 2.14 on
        from safetensors.torch import load_file
        return load_file(path, device='cpu')
    try:
        with weights_only_loads():  # a TORCH_FORCE_* setting cannot clash
            return torch.load(path, map_location='cpu', weights_only=True,
                              mmap=mmap and zipfile.is_zipfile(path) or None)
    except Exception as e:  # noqa: B902  (the file says what went wrong)
        raise _refusal(path, e) from None


def _read_url(url: str):
    """By torch.hub, into its cache (``<hub dir>/checkpoints``, where
    mmengine's loader finds it too)."""
    name = osp.basename(urllib.parse.urlparse(url).path)
    if not name:  # torch.hub would load its cache folder itself
        raise CheckpointDownloadError(
            f'{url} names no file (its path ends in "/"): give the address '
            f'of the checkpoint file')
    cache = osp.join(torch.hub.get_dir(), 'checkpoints')
    try:
        with weights_only_loads():
            return torch.hub.load_state_dict_from_url(
                url, model_dir=cache, map_location='cpu', progress=False,
                file_name=name, weights_only=True)
    except Exception as e:  # noqa: B902
        copy = osp.join(cache, name)
        if osp.isfile(copy):  # downloaded, not loadable
            refusal = _refusal(copy, e)
            raise type(refusal)(f'{url}, downloaded to {refusal} (delete the '
                                f'copy to download again)') from None
        if not isinstance(e, (OSError, http.client.HTTPException,
                              ValueError)):
            raise
        why = getattr(e, 'reason', e)  # a URLError's: the OSError behind it
        raise CheckpointDownloadError(
            f'{url}: the download failed ({why}): check the address, the '
            f'network and any proxy, or download the file and give its '
            f'path') from None


def read_checkpoint(path: str, mmap: bool = False):
    """The checkpoint object in ``path``: a local file (``.safetensors``
    too; with ``mmap``, a zip-format file's tensors are mapped, not read),
    an ``http(s)://`` address (torch.hub's cache) or another scheme of
    mmengine's ``CheckpointLoader`` (``openmmlab://``, ...), all unpickled
    with ``weights_only=True``.

    Raises:
        FileNotFoundError: a local ``path`` that is no file.
        CheckpointError: a broken or unsafe file, a failed download.
    """
    path = str(path)
    if path.lower().startswith(('http://', 'https://')):
        return _read_url(path)
    if '://' in path:
        from mmengine.runner import CheckpointLoader
        with weights_only_loads():
            return CheckpointLoader.load_checkpoint(path, map_location='cpu')
    if not osp.isfile(path):
        raise FileNotFoundError(f'checkpoint file not found: {path}')
    return _read_file(path, mmap)


def require_file(path, what: str = 'checkpoint') -> None:
    """Refuse a local ``path`` that is no file; a URL is left to its
    loader."""
    if '://' not in str(path) and not osp.isfile(str(path)):
        raise FileNotFoundError(f'{what} file not found: {path}')


def state_dict_of(checkpoint, source: str = 'the checkpoint') -> dict:
    """The state dict in an official, timm or mmengine checkpoint (its
    ``state_dict`` / ``model`` / ``model_ema`` / ``module`` entry, or
    itself), ``module.`` (a DDP wrapper's) stripped from its keys."""
    state = checkpoint
    for key in ('state_dict', 'model', 'model_ema', 'module'):
        if isinstance(checkpoint, dict) and isinstance(
                checkpoint.get(key), dict):
            state = checkpoint[key]
            break
    odd = (sorted(k for k, v in state.items()
                  if not isinstance(v, torch.Tensor))
           if isinstance(state, dict) else [])
    if not isinstance(state, dict) or not state or odd:
        held = (f'entries that are not tensors ({some(odd)})' if odd else
                'no tensors' if isinstance(state, dict) else
                f'a {type(state).__name__}')
        raise CheckpointError(
            f'{source} holds no state dict (name -> tensor), alone or under '
            f'"state_dict" or "model": it holds {held}')
    return {re.sub(r'^module\.', '', k): v for k, v in state.items()}


# --------------------------------------------------------------- fitting


@dataclass
class Fit:
    """How a state dict fits a module: the keys loaded, those of the module
    it lacks (``missing``), has with another shape (``wrong_shape``), and
    those the module lacks (``unexpected``). BatchNorm step counters are
    not counted."""
    loaded: list = field(default_factory=list)
    missing: list = field(default_factory=list)
    wrong_shape: list = field(default_factory=list)
    unexpected: list = field(default_factory=list)

    @property
    def total(self) -> int:
        return len(self.loaded) + len(self.missing) + len(self.wrong_shape)

    def unfit(self) -> str:
        """What did not fit, in one line ('' if all did)."""
        kinds = (('not in the checkpoint', self.missing),
                 ('of another shape', self.wrong_shape),
                 ('not in the module', self.unexpected))
        return '; '.join(f'{len(keys)} {what} ({some(keys)})'
                         for what, keys in kinds if keys)


def _fit(expected: dict, offered: dict) -> Fit:
    fit = Fit()
    for key, value in expected.items():
        if key.endswith('num_batches_tracked'):
            continue
        found = offered.get(key)
        if found is None:
            fit.missing.append(key)
        elif found.shape != value.shape:
            fit.wrong_shape.append(key)
        else:
            fit.loaded.append(key)
    fit.unexpected = [k for k in offered if k not in expected
                      and not k.endswith('num_batches_tracked')]
    return fit


def load_weights(module: nn.Module, checkpoint: Union[str, os.PathLike,
                                                      dict],
                 prefix: Optional[str] = None, strict: bool = True,
                 source: Optional[str] = None) -> Fit:
    """Load ``checkpoint`` (a path, a URL, or a checkpoint already read)
    into ``module``; return the :class:`Fit`.

    The file is read once (:func:`read_checkpoint`), its state dict taken
    (:func:`state_dict_of`), the keys under ``prefix`` kept without it
    (mmengine's prefix loader is private), and an official / timm /
    mmpretrain checkpoint of the module's ``checkpoint_family`` converted
    (:mod:`mmcpvt.utils.convert`). Then, with ``strict``, the checkpoint
    must hold every tensor of ``module`` with its shape and nothing else,
    or nothing loads; without, the tensors that fit load, the rest keep
    their values and are named in one warning line, and a checkpoint of
    which fewer than half of the module's tensors fit is refused (a wrong
    prefix or another model: mostly random weights). ``source`` names the
    checkpoint in messages (default: ``checkpoint`` itself).

    Raises:
        CheckpointMismatchError: the tensors do not fit.
        FileNotFoundError, CheckpointError: see :func:`read_checkpoint`.
    """
    if isinstance(checkpoint, (str, os.PathLike)):
        source = source or str(checkpoint)
        checkpoint = read_checkpoint(checkpoint)
    source = source or 'the checkpoint'

    state = state_dict_of(checkpoint, source)
    name = type(module).__name__
    if prefix:
        if not any(k.startswith(prefix) for k in state):
            raise CheckpointMismatchError(
                f'{source}: no key starts with prefix={prefix!r} (its keys '
                f'are like {some(state)}); change the prefix')
        state = {k[len(prefix):]: v for k, v in state.items()
                 if k.startswith(prefix)}
    family = getattr(module, 'checkpoint_family', None)
    if family is not None and detect_family(state) == family:
        state, report = CONVERTERS[family](state, with_head=False)
        MMLogger.get_current_instance().info(
            f'{source}: converted for {name}: {report.summary()}')
    fit = _fit(module.state_dict(), state)
    unfit = fit.unfit()
    if strict and unfit:
        raise CheckpointMismatchError(
            f'{source} does not fit {name}: {unfit}. Load a checkpoint of '
            f'this model; to load the part of another that fits, give it to '
            f'the backbone: init_cfg=dict(type="Pretrained", checkpoint=..., '
            f'prefix=...)')
    if len(fit.loaded) * 2 < fit.total:
        raise CheckpointMismatchError(
            f'{source}: only {len(fit.loaded)} of the {fit.total} tensors of '
            f'{name} fit: {unfit}. Check the checkpoint and the prefix')
    if unfit:
        MMLogger.get_current_instance().warning(
            f'{source}: loaded {len(fit.loaded)} of the {fit.total} tensors '
            f'of {name}; {unfit}')
    module.load_state_dict({k: state[k] for k in fit.loaded}, strict=False)
    return fit
