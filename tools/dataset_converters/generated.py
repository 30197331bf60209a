"""What the data set generators share besides the renderer: the output
directory, the record of what a generator wrote there, and progress.

``make_coco.py``, ``make_ade20k.py`` and ``make_imagenet.py`` each write a
data set into a directory (``--out``) and keep there a marker file
(``make_coco.json``, ...) with their arguments and the list of the files
they write, relative to ``--out``. The list is written before the first
image (``"complete": false``) and again once the set is complete. So:

- ``--out`` naming a file, or a path under a file, is refused;
- an existing, non-empty directory is refused unless it holds a set the
  same generator made and ``--overwrite`` is given;
- ``--overwrite`` deletes only the files in the list (and the directories
  that held them, once empty); a directory that also holds other files is
  refused, with those files named, and nothing is deleted;
- what an interrupted run left (its marker is not ``complete``) is replaced
  without ``--overwrite``, under the same rule: only listed files.

Markers written before the list existed hold the arguments only: the list
is then worked out from them (``files_of``).
"""
import json
import os
import os.path as osp
import sys
from typing import Callable, Iterable, List, Optional

SHOWN = 10  # paths named in a message


def _some(paths: List[str]) -> str:
    more = (f' (and {len(paths) - SHOWN} more)'
            if len(paths) > SHOWN else '')
    return ', '.join(paths[:SHOWN]) + more


def _files_under(out_dir: str) -> List[str]:
    """Every file (and link) under ``out_dir``, relative to it, sorted."""
    found = []
    for dirpath, dirnames, filenames in os.walk(out_dir):
        rel = osp.relpath(dirpath, out_dir)
        links = [d for d in dirnames if osp.islink(osp.join(dirpath, d))]
        for name in filenames + links:
            found.append(osp.normpath(osp.join(rel, name)))
    return sorted(found)


def _check_is_dir(out_dir: str):
    """``out_dir`` is a directory or can be made one."""
    if osp.exists(out_dir) and not osp.isdir(out_dir):
        raise FileExistsError(
            f'--out {out_dir} is a file, not a directory. Give a '
            f'directory for the data set (it is made if missing).')
    parent = osp.dirname(osp.abspath(out_dir))
    while not osp.exists(parent):
        parent = osp.dirname(parent)
    if not osp.isdir(parent):
        raise FileExistsError(
            f'--out {out_dir} lies under {parent}, which is a file, '
            f'not a directory. Give a directory for the data set.')


def _read_raw(out_dir: str, marker: str, tool: str) -> Optional[dict]:
    path = osp.join(out_dir, marker)
    if not osp.isfile(path):
        return None
    try:
        with open(path) as f:
            info = json.load(f)
        if not isinstance(info, dict):
            raise ValueError(f'a {type(info).__name__}, not a dict')
    except ValueError as e:
        raise FileExistsError(
            f'{path} cannot be read ({e}), so what {tool} wrote in '
            f'{out_dir} is not known: nothing is deleted. Delete the '
            f'directory yourself, or choose another --out.') from e
    return info


def prepare_out_dir(out_dir: str, marker: str, overwrite: bool, tool: str,
                    files_of: Optional[Callable[[dict], List[str]]] = None):
    """Make way for a generated data set at ``out_dir`` (see the module's
    docstring); raise FileExistsError with what to do otherwise.

    Args:
        out_dir (str): The generator's ``--out``.
        marker (str): The generator's marker file name.
        overwrite (bool): ``--overwrite``: replace a set the generator made.
        tool (str): The generator's name, for messages.
        files_of (callable, optional): The files of a set from the
            arguments in its marker, for markers without a file list.
    """
    _check_is_dir(out_dir)
    if not osp.isdir(out_dir) or not os.listdir(out_dir):
        return
    present = _files_under(out_dir)
    info = _read_raw(out_dir, marker, tool)
    if info is None:
        raise FileExistsError(
            f'{out_dir} is not empty ({len(present)} files: '
            f'{_some(present)}) and was not made by {tool} (it has no '
            f'{marker}): refusing to delete anything in it. Choose another '
            f'--out: --overwrite only replaces a set that {tool} made.')
    complete = info.get('complete', True)  # old markers: written at the end
    if complete and not overwrite:
        raise FileExistsError(
            f'{out_dir} holds a data set that {tool} made; pass '
            f'--overwrite (overwrite=True) to replace it, or choose another '
            f'--out.')
    if 'files' in info:
        ours = set(info['files'])
    elif files_of is not None:
        try:
            ours = set(files_of(info))
        except (KeyError, TypeError, ValueError) as e:
            raise FileExistsError(
                f'{osp.join(out_dir, marker)} lists no files and '
                f'they cannot be worked out from it ({e!r}); nothing is '
                f'deleted. Delete the directory yourself, or choose another '
                f'--out.') from e
    else:
        ours = set()
    ours |= {marker, marker + '.tmp'}  # .tmp: a marker write cut short
    foreign = [p for p in present if p not in ours]
    if foreign:
        raise FileExistsError(
            f'{out_dir} holds {len(foreign)} files that {tool} did '
            f'not write: {_some(foreign)}; nothing is deleted. '
            f'{"--overwrite replaces" if complete else "A new run replaces"}'
            f' only what {tool} wrote: move those files out, or choose '
            f'another --out.')
    _delete(out_dir, [p for p in present if p != marker])
    # the marker last: its list stays until the files are gone
    os.remove(osp.join(out_dir, marker))


def _delete(out_dir: str, paths: Iterable[str]):
    """Delete ``paths`` (relative to ``out_dir``), then the directories
    that held them, deepest first, where they are left empty."""
    dirs = set()
    for rel in paths:
        os.remove(osp.join(out_dir, rel))
        parent = osp.dirname(rel)
        while parent:
            dirs.add(parent)
            parent = osp.dirname(parent)
    for rel in sorted(dirs, key=lambda d: d.count(os.sep), reverse=True):
        path = osp.join(out_dir, rel)
        if osp.isdir(path) and not os.listdir(path):
            os.rmdir(path)


def write_marker(out_dir: str, marker: str, info: dict,
                 files: List[str], complete: bool) -> dict:
    """Write a generator's ``info`` and the ``files`` it writes (relative
    to ``out_dir``) to ``out_dir/marker``, atomically; return ``info``.

    Call it with ``complete=False`` before writing the first file and with
    ``complete=True`` when the set is complete."""
    os.makedirs(out_dir, exist_ok=True)
    path = osp.join(out_dir, marker)
    tmp = path + '.tmp'
    with open(tmp, 'w') as f:
        json.dump(dict(info, complete=complete, files=sorted(files)), f,
                  indent=1)
    os.replace(tmp, path)
    return info


def read_marker(out_dir: str, marker: str) -> Optional[dict]:
    """The description a generator wrote into ``out_dir/marker`` (without
    its file list), or None if ``out_dir`` holds no complete set made by
    it."""
    path = osp.join(out_dir, marker)
    if not osp.isfile(path):
        return None
    with open(path) as f:
        info = json.load(f)
    if not info.pop('complete', True):
        return None
    info.pop('files', None)
    return info


class Progress:
    """A progress bar (mmengine's ``ProgressBar``) over ``total`` images,
    on stdout, updated at most 100 times: a log file that captures it gets
    one short line, not one per image. Nothing is shown when ``enabled`` is
    False.

    Example::

        with Progress(250, enabled=True, title='Writing 250 images') as bar:
            for ...:
                bar.update()
    """

    def __init__(self, total: int, enabled: bool, title: str = ''):
        self.total, self.enabled, self.title = total, enabled, title
        self.step = max(1, total // 100)
        self.done = self.shown = 0
        self.bar = None

    def __enter__(self):
        if self.enabled and self.total > 0:
            from mmengine.utils import ProgressBar
            if self.title:
                print(self.title, flush=True)
            self.bar = ProgressBar(self.total, file=sys.stdout)
        return self

    def update(self):
        self.done += 1
        if self.bar is not None and (self.done - self.shown >= self.step
                                     or self.done == self.total):
            self.bar.update(self.done - self.shown)
            self.shown = self.done

    def __exit__(self, *exc):
        if self.bar is not None:
            self.bar.file.write('\n')
            self.bar.file.flush()
        return False
