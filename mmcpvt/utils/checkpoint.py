"""Loading mmengine checkpoints with torch's ``weights_only`` unpickler.

Since torch 2.6, ``torch.load`` defaults to ``weights_only=True``, which
refuses any global that is not allow-listed. mmengine 0.10.7 checkpoints hold
a few such objects (the message hub's ``HistoryBuffer``, numpy arrays, numpy
scalars and dtypes), so ``--resume`` and ``load_from`` fail with "Unsupported
global". Rather than turning ``weights_only`` off (arbitrary code execution
from a checkpoint), the exact types mmengine writes are allow-listed.

``HistoryBuffer`` pickles its statistics methods as ``getattr(HistoryBuffer,
'mean')``. Allow-listing the builtin ``getattr`` would let a checkpoint reach
any attribute of any allowed object, so the name ``builtins.getattr`` is bound
to :func:`_history_buffer_getattr`, which resolves only those methods.
"""
import pickle

import numpy as np
import torch


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
