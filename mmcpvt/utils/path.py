"""Checks of the paths a run writes, before any work: an output file or
directory that cannot be made, or that is one of the run's inputs, is
refused (ValueError naming the option, the path and what it takes)."""
import os.path as osp
import tempfile


def _refuse_input(option: str, path: str, inputs, why: str) -> None:
    """Refuse ``path`` if it is one of ``inputs``, also through a link."""
    same = next((i for i in inputs if i and '://' not in str(i)
                 and osp.exists(i) and osp.exists(path)
                 and osp.samefile(i, path)), None)
    if same is not None:
        raise ValueError(f'{option} {path} is {same}, an input of this run'
                         f'{why}')


def _refuse_unwritable(option: str, path: str, directory: str,
                       is_file: str, unwritable: str) -> None:
    """Refuse ``directory`` (made if missing) if it or the nearest existing
    parent is a file or cannot be written: a file is made there and removed
    (``os.access`` says yes to root on a read-only file system)."""
    while directory and not osp.exists(directory):
        directory = osp.dirname(directory)
    if directory and not osp.isdir(directory):
        raise ValueError(f'{option} {path}: {directory} is a file{is_file}')
    try:
        with tempfile.TemporaryFile(dir=directory):
            pass
    except OSError as e:
        raise ValueError(f'{option} {path}: {directory} is not writable '
                         f'({e.strerror}); {unwritable}') from None


def check_output(option: str, path: str, example: str, inputs=()) -> None:
    """Refuse an output file ``path`` (the argument ``option``;
    ``example``: a file name for it) that is one of the run's ``inputs``, a
    directory, or under a file or a directory that cannot be written."""
    _refuse_input(option, path, inputs, ' (the same file): writing it '
                  'would overwrite it; give another path')
    if osp.isdir(path):
        raise ValueError(f'{option} {path} is a directory; it takes the file '
                         f'to write, e.g. {osp.join(path, example)}')
    _refuse_unwritable(option, path, osp.dirname(osp.abspath(path)),
                       ', not a directory; it takes a file path in a '
                       'directory', 'give a path you can write')


def check_output_dir(option: str, path: str, what: str, inputs=()) -> None:
    """Refuse an output directory ``path`` (the argument ``option``;
    ``what``: what goes in it) that is one of the run's ``inputs`` (a data
    folder), a file, under one, or cannot be written."""
    _refuse_input(option, path, inputs, f': {what} written there could '
                  'overwrite its files; give another directory')
    _refuse_unwritable(option, path, osp.abspath(path),
                       f'; it takes a directory for {what} (made if missing)',
                       f'it takes a directory for {what} that you can write')
