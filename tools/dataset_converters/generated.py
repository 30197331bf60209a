"""What the data set generators share besides the renderer: checking
their arguments, the output directory, the record of what a generator wrote
there, the loop that writes a set with its progress, and the command line.

Nothing can be downloaded here, so tests and the demo train on synthetic
sets in the real sets' layouts. Every image is seeded from ``(seed, split,
index)`` (and its class, for ImageNet): the same arguments give
byte-identical files.

``make_coco.py``, ``make_ade20k.py`` and ``make_imagenet.py`` each write a
data set into a directory (``--out``) and keep there a marker file
(``make_coco.json``, ...) with their arguments and the list of the files
they write, relative to ``--out``. The list is written before the first
image (``"complete": false``) and again once the set is complete. So:

- ``--out`` naming a file, or a path under a file, is refused first, before
  the other arguments are looked at;
- an existing, non-empty directory is refused unless it holds a set the
  same generator made and ``--overwrite`` is given;
- ``--overwrite`` deletes only the files in the list (and the directories
  that held them, once empty); a directory that also holds other files is
  refused, with those files named, and nothing is deleted;
- what an interrupted run left (its marker is not ``complete``) is replaced
  without ``--overwrite``, under the same rule: only listed files.

Markers written before the list existed hold the arguments only: the list
is then worked out from them (``files_of``).

Example (a generator ``make_x.py`` of function ``make_x``)::

    GENERATOR = Generator('make_x.py', x_files)
    # in make_x(out_dir, ...): check, make way, write, record
    info = GENERATOR.write(out_dir, args, checks, overwrite, progress,
                           total, write_images)
    # in main(): the options are make_x's parameters
    info, out = GENERATOR.main(make_x, __doc__)
"""
import argparse
import inspect
import json
import os
import os.path as osp
import re
import sys
from typing import Callable, Iterable, List, Optional, Tuple

import numpy as np
from PIL import Image

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


def check_out_dir(out_dir: str):
    """``out_dir`` is a directory or can be made one; else FileExistsError
    naming ``--out``, the path and what is allowed."""
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


def check_args(*checks: Tuple[str, object, bool, str]):
    """Raise ValueError for the first check that fails.

    Each check is ``(name, value, ok, allowed)``: a parameter (its option is
    ``--`` and the name with dashes), its value, whether the value is
    allowed, and what is allowed, e.g. ``('size', size, size >= 8, '>= 8
    pixels')``."""
    for name, value, ok, allowed in checks:
        if not ok:
            if isinstance(value, (list, tuple)):
                value = tuple(value)
            raise ValueError(f'--{name.replace("_", "-")} ({name}) must be '
                             f'{allowed}, got {value}')


def save_image(path: str, array: np.ndarray):
    """Save an (H, W, 3) RGB or (H, W) label array (mode 'L'), making its
    directory; JPEGs at quality 92."""
    os.makedirs(osp.dirname(path), exist_ok=True)
    Image.fromarray(array).save(path, quality=92)


class Generator:
    """A data set generator: its name (``make_coco.py``), its marker file
    (``make_coco.json``) and the files it writes for given arguments.

    Args:
        tool (str): The generator's file name, for messages.
        files_of (callable): The files written for the arguments in a
            marker (a dict), relative to the output directory; used for
            markers without a file list.
    """

    def __init__(self, tool: str, files_of: Callable[[dict], List[str]]):
        self.tool, self.files_of = tool, files_of
        self.marker = tool.replace('.py', '.json')

    def _read(self, out_dir: str) -> Optional[dict]:
        """The marker in ``out_dir`` as written, or None if there is none;
        FileExistsError if it cannot be read."""
        path = osp.join(out_dir, self.marker)
        if not osp.isfile(path):
            return None
        try:
            with open(path) as f:
                info = json.load(f)
            if not isinstance(info, dict):
                raise ValueError(f'a {type(info).__name__}, not a dict')
        except ValueError as e:
            raise FileExistsError(
                f'{path} cannot be read ({e}), so what {self.tool} wrote in '
                f'{out_dir} is not known: nothing is deleted. Delete the '
                f'directory yourself, or choose another --out.') from e
        return info

    def read_info(self, out_dir: str) -> Optional[dict]:
        """The description this generator wrote into ``out_dir`` (without
        its file list), or None if ``out_dir`` holds no complete set made by
        it."""
        info = self._read(out_dir)
        if info is None or not info.pop('complete', True):
            return None
        info.pop('files', None)
        return info

    def prepare(self, out_dir: str, overwrite: bool):
        """Make way for a set at ``out_dir`` (see the module's docstring);
        raise FileExistsError with what to do otherwise."""
        if not osp.isdir(out_dir) or not os.listdir(out_dir):
            return
        tool, marker = self.tool, self.marker
        present = _files_under(out_dir)
        info = self._read(out_dir)
        if info is None:
            raise FileExistsError(
                f'{out_dir} is not empty ({len(present)} files: '
                f'{_some(present)}) and was not made by {tool} (it has no '
                f'{marker}): refusing to delete anything in it. Choose '
                f'another --out: --overwrite only replaces a set that {tool} '
                f'made.')
        complete = info.get('complete', True)  # old markers: at the end
        if complete and not overwrite:
            raise FileExistsError(
                f'{out_dir} holds a data set that {tool} made; pass '
                f'--overwrite (overwrite=True) to replace it, or choose '
                f'another --out.')
        try:
            ours = set(info['files'] if 'files' in info else
                       self.files_of(info))
        except (KeyError, TypeError, ValueError) as e:
            raise FileExistsError(
                f'{osp.join(out_dir, marker)} lists no files and they cannot '
                f'be worked out from it ({e!r}); nothing is deleted. Delete '
                f'the directory yourself, or choose another --out.') from e
        ours |= {marker, marker + '.tmp'}  # .tmp: a marker write cut short
        foreign = [p for p in present if p not in ours]
        if foreign:
            again = ('--overwrite replaces' if complete else
                     'A new run replaces')
            raise FileExistsError(
                f'{out_dir} holds {len(foreign)} files that {tool} did not '
                f'write: {_some(foreign)}; nothing is deleted. {again} only '
                f'what {tool} wrote: move those files out, or choose another '
                f'--out.')
        _delete(out_dir, [p for p in present if p != marker])
        # the marker last: its list stays until the files are gone
        os.remove(osp.join(out_dir, marker))

    def _mark(self, out_dir: str, info: dict, files: List[str],
              complete: bool) -> dict:
        """Write ``info`` and the ``files`` written (relative to
        ``out_dir``) to the marker, atomically; return ``info``. Called with
        ``complete=False`` before the first file is written and with
        ``complete=True`` when the set is complete."""
        os.makedirs(out_dir, exist_ok=True)
        path = osp.join(out_dir, self.marker)
        with open(path + '.tmp', 'w') as f:
            json.dump(dict(info, complete=complete, files=sorted(files)), f,
                      indent=1)
        os.replace(path + '.tmp', path)
        return info

    def write(self, out_dir: str, args: dict, checks: list, overwrite: bool,
              progress: bool, total: int, write: Callable[[Progress], dict],
              what: str = None) -> dict:
        """Check ``--out``, then ``checks`` (see :func:`check_args`), make
        way (:meth:`prepare`), record the files of ``args``, call
        ``write(bar)`` to write them and return ``args`` updated with what
        it returns, as recorded in the marker. The progress bar's title
        says ``writing {total} {what}`` (``images to {out_dir}``)."""
        check_out_dir(out_dir)
        check_args(*checks)
        self.prepare(out_dir, overwrite)
        files = self.files_of(args)
        self._mark(out_dir, args, files, complete=False)
        what = what or f'images to {out_dir}'
        with Progress(total, progress,
                      f'{self.tool}: writing {total} {what}') as bar:
            info = dict(args, **write(bar))
        return self._mark(out_dir, info, files, complete=True)

    def main(self, make: Callable, doc: str, metavars: dict = None,
             argv: List[str] = None) -> Tuple[dict, str]:
        """Run ``make`` from the command line; return its result and
        ``--out``.

        ``--help`` shows ``doc`` (the generator's module docstring). The
        options are ``make``'s parameters: the first is ``--out``; every
        other but ``progress`` is ``--name-with-dashes``, with ``make``'s
        default, that default's type (a tuple: that many values, named by
        ``metavars[name]``) and the text of the ``Args:`` section of
        ``make``'s docstring as its help; ``--no-progress`` hides the bar.
        A refusal of ``make`` ends the program with one line."""
        parser = argparse.ArgumentParser(
            description=doc,
            formatter_class=argparse.RawDescriptionHelpFormatter)
        docs = _arg_docs(make)
        out, *params = inspect.signature(make).parameters.values()
        parser.add_argument('--out', required=True, help=docs[out.name])
        for param in params:
            name, default = param.name, param.default
            many = isinstance(default, tuple)
            if name == 'progress':
                continue
            if isinstance(default, bool):
                kwargs = dict(action='store_true')
            else:
                kwargs = dict(type=type(default[0] if many else default),
                              default=default, nargs=len(default) if many
                              else None, metavar=(metavars or {}).get(name))
            parser.add_argument('--' + name.replace('_', '-'),
                                help=docs[name], **kwargs)
        parser.add_argument('--no-progress', action='store_true',
                            help='no progress bar (none is shown either when '
                            'stdout is not a terminal)')
        args = vars(parser.parse_args(argv))
        out = args.pop('out')
        show = not args.pop('no_progress') and sys.stdout.isatty()
        try:
            return make(out, progress=show, **args), out
        except (ValueError, OSError) as e:
            raise SystemExit(f'{self.tool}: error: {e}')


def _arg_docs(func: Callable) -> dict:
    """The text of each argument in the ``Args:`` section of ``func``'s
    docstring (OpenMMLab style: ``name (type): text``), for ``--help``."""
    section = inspect.getdoc(func).split('Args:\n')[1].split('\n\n')[0]
    docs = {}
    for line in section.splitlines():
        match = re.match(r'    (\w+) \(.*?\): (.*)', line)
        if match:
            name, docs[match[1]] = match[1], match[2]
        else:
            docs[name] += ' ' + line.strip()
    return {k: v.replace('%', '%%') for k, v in docs.items()}
