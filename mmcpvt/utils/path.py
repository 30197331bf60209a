"""Checks of the paths a run writes, before any work: an output file or
directory that cannot be made, or that is one of the run's inputs, is
refused with what to give instead."""
import os.path as osp
import tempfile
from typing import Optional


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
