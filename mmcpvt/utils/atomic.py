"""Checkpoints never half-written: :func:`atomic_write` and the
``'mmcpvt_atomic'`` file backend, which ``import mmcpvt`` registers by name
only (mmengine's ``'local'`` stays the default)."""
import contextlib
import os
import os.path as osp
import secrets

from mmengine.fileio.backends import LocalBackend, register_backend


def atomic_write(data: bytes, filepath) -> None:
    """Write ``data`` to ``filepath`` so that the file under that name is
    either the old one or the complete new one, never a part: a temporary
    file in the same directory (same file system), flushed to disk, then
    renamed over it (``os.replace``, atomic on POSIX and Windows). A symlink
    at ``filepath`` is written through, as ``open(filepath, 'wb')`` would.
    """
    path = osp.realpath(filepath)
    directory = osp.dirname(path)
    os.makedirs(directory, exist_ok=True)
    tmp = osp.join(directory,
                   f'.{osp.basename(path)}.{secrets.token_hex(8)}.tmp')
    try:
        with open(tmp, 'xb') as f:  # mode 0666 less the umask, as 'wb' gives
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except OSError as e:  # a full disk: name the file and what is kept
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise OSError(e.errno, f'{e.strerror}: could not write {path} (the '
                      f'file there, if any, is kept whole)') from e
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    with contextlib.suppress(OSError):  # make the rename itself durable
        dir_fd = os.open(directory, os.O_RDONLY)  # (not on Windows)
        try:
            os.fsync(dir_fd)
        finally:
            os.close(dir_fd)


@register_backend('mmcpvt_atomic')
class AtomicLocalBackend(LocalBackend):
    """mmengine's ``LocalBackend`` whose writes are atomic.

    Why: mmengine's ``save_checkpoint`` serialises the checkpoint into memory
    and hands the bytes to ``LocalBackend.put``, which opens the final path
    with ``'wb'`` (emptying the file that was there) and then writes. A
    crash, kill, preemption or full disk during that write leaves a
    truncated ``epoch_N.pth`` under its final name, which ``--resume``
    then picks and fails on. Here :func:`atomic_write` writes a temporary
    file and renames it: the final name holds the previous file or the
    complete new one (``put_text``, the ``last_checkpoint`` record, too).
    Configs select it with ``default_hooks.checkpoint.backend_args=dict(
    backend='mmcpvt_atomic')``; ``tools/train.py`` adds that to any config.
    """

    def put(self, obj: bytes, filepath) -> None:
        atomic_write(obj, filepath)

    def put_text(self, obj: str, filepath, encoding: str = 'utf-8') -> None:
        atomic_write(obj.encode(encoding), filepath)
