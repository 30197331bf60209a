"""The runner our configs name (``runner_type``; ``tools/train.py`` sets it
for a config that names none), so that mmpretrain's, mmdet's and mmseg's
own ``tools/train.py`` build it too. It alone takes the work-dir lock."""
import contextlib
import glob
import logging
import os
import os.path as osp
import socket
import tempfile

from mmengine.logging import print_log
from mmengine.runner import Runner

from mmcpvt.registry import register_runner

LOCK = '.train.lock'


class WorkDirInUseError(RuntimeError):
    """Another training holds the work dir."""


@register_runner
class LockedRunner(Runner):
    """mmengine's Runner that refuses to train in a work dir where another
    training runs (:func:`work_dir_lock`), and writes the config into the
    work dir when it trains, tests or validates, not when it is built
    (mmengine's does): a refused second training leaves the config of the
    one that holds the work dir as it was. Testing needs no lock."""

    def dump_config(self) -> None:
        pass  # called by Runner.__init__; written by train, val and test

    def train(self):
        lock = work_dir_lock(self.work_dir) if self.rank == 0 else \
            contextlib.nullcontext()
        with lock:
            Runner.dump_config(self)
            return super().train()

    def val(self):
        Runner.dump_config(self)
        return super().val()

    def test(self):
        Runner.dump_config(self)
        return super().test()


@contextlib.contextmanager
def work_dir_lock(work_dir: str):
    """Hold ``<work_dir>/.train.lock`` (host and process id) inside.

    Two trainings in one work dir both write ``epoch_N.pth`` and
    ``last_checkpoint``: the second would overwrite the first's. The lock
    file is made whole or not at all (written aside, then linked to its
    name). A lock left by a process that no longer runs on this host (a
    killed run), or empty or unreadable, is taken over with a warning; one
    from another host is refused, as its process cannot be checked. Holding
    it, the run removes the temporary files that a save killed midway left
    (``.epoch_3.pth.<random>.tmp``, :func:`mmcpvt.utils.atomic.atomic_write`).

    Raises:
        WorkDirInUseError: another training may hold it.
    """
    path = osp.join(work_dir, LOCK)
    os.makedirs(work_dir, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f'{LOCK}.', dir=work_dir)
    with os.fdopen(fd, 'w') as f:
        f.write(_me())
    try:
        for _ in range(2):
            with contextlib.suppress(FileExistsError):
                os.link(tmp, path)  # no file of that name: made whole
            if _owner(path) == _me():
                break
            _remove_stale(path)
        else:  # another run took it between the two
            _remove_stale(path)
    finally:
        os.remove(tmp)
    orphans = sorted(glob.glob(osp.join(glob.escape(work_dir), '.*.tmp')))
    for orphan in orphans:
        os.remove(orphan)
    if orphans:
        _warn(f'{work_dir}: removed what saves that did not finish left: '
              f'{", ".join(map(osp.basename, orphans))}')
    try:
        yield path
    finally:
        if _owner(path) == _me():
            with contextlib.suppress(FileNotFoundError):
                os.remove(path)


def _remove_stale(path: str) -> None:
    """Remove the lock at ``path`` if its process is gone or it names none;
    raise if it may still run."""
    host, pid = (_owner(path).split() + ['?', '?'])[:2]
    alive = pid.isdigit()  # else empty or unreadable: stale
    if host == socket.gethostname() and pid.isdigit():
        try:
            os.kill(int(pid), 0)
        except ProcessLookupError:
            alive = False
        except PermissionError:
            pass
    if alive:
        raise WorkDirInUseError(
            f'work dir {osp.dirname(path)} is in use by another training '
            f'(host {host}, process {pid}, lock file {path}): wait for it to '
            f'end, or give this run another --work-dir; if that run is over, '
            f'delete {path}')
    why = (f'process {pid} of {host} has ended without releasing the work '
           f'dir' if pid.isdigit() else
           'it names no process (empty or unreadable)')
    _warn(f'{path}: {why}; taking it over')
    with contextlib.suppress(FileNotFoundError):
        os.remove(path)


def _warn(message: str) -> None:
    print_log(message, logger='current', level=logging.WARNING)


def _me() -> str:
    """What a lock file of this process holds: 'host pid'."""
    return f'{socket.gethostname()} {os.getpid()}'


def _owner(path: str) -> str:
    """The text of the lock file ``path`` ('' if it cannot be read)."""
    try:
        with open(path, errors='replace') as f:
            return f.read().strip()
    except OSError:
        return ''
