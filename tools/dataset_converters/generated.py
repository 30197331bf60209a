"""What the data set generators (``make_coco.py``, ``make_ade20k.py``,
``make_imagenet.py``) share besides the renderer (``shapes.py``): argument
checks, the output directory and its marker, the progress bar and the
command line. What they write, replace and refuse: docs/get_started.md,
"Generated data sets".

A generator keeps in ``--out`` a marker (``make_coco.json``, ...) with its
arguments and the files it writes, written before the first image
(``"complete": false``) and again at the end. ``--overwrite`` (and a new run
over an interrupted one) deletes only the listed files, and nothing when
others are there; for an older marker without the list, ``files_of`` works
it out from the arguments.
"""
import argparse
import inspect
import json
import math
import os
import os.path as osp
import re
import sys
from typing import Callable, Dict, List, Optional, Tuple

import numpy as np
from PIL import Image

# name: (low, high, note): the range of each argument a generator checks
Limits = Dict[str, Tuple[float, float, str]]
AT_LEAST_0, AT_LEAST_1 = (0, math.inf, ''), (1, math.inf, '')
TEST_SET = (0, math.inf, ' (0: a test set)')
CANVAS_SCALE = (1, 8, ' (the image side over --size; objects keep their '
                'size)')


def _some(paths: List[str], shown: int = 10) -> str:
    more = f' (and {len(paths) - shown} more)' if len(paths) > shown else ''
    return ', '.join(paths[:shown]) + more


def _files_under(out_dir: str) -> List[str]:
    """Every file (and link to a directory) under ``out_dir``, relative to
    it, sorted."""
    return sorted(
        osp.normpath(osp.join(osp.relpath(dirpath, out_dir), name))
        for dirpath, dirs, files in os.walk(out_dir) for name in files +
        [d for d in dirs if osp.islink(osp.join(dirpath, d))])


def check_out_dir(out_dir: str):
    """FileExistsError naming ``--out`` unless ``out_dir`` is a directory or
    can be made one."""
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


def bad_arg(name: str, value, allowed: str) -> ValueError:
    """The error for argument ``name``: the option, the value, what is
    allowed."""
    return ValueError(f'--{name.replace("_", "-")} ({name}) must be '
                      f'{allowed}, got {value}')


def check_args(args: dict, limits: Limits, checks=()):
    """:func:`bad_arg` for the first of ``args`` out of its ``limits``, then
    for the first ``(name, value, ok, allowed)`` of ``checks`` not ``ok``."""
    for name, (low, high, note) in limits.items():
        if not low <= args[name] <= high:
            allowed = f'>= {low}' if high == math.inf else f'{low} to {high}'
            raise bad_arg(name, args[name], allowed + note)
    for name, value, ok, allowed in checks:
        if not ok:
            raise bad_arg(name, value, allowed)


def progress_bar(total: int, enabled: bool, title: str) -> Callable:
    """An ``update()`` for mmengine's ``ProgressBar`` over ``total`` items
    on stdout, after a ``title`` line, redrawn at most 100 times (a log that
    captures it gets one short line); a no-op unless ``enabled``."""
    if not enabled or total <= 0:
        return lambda: None
    from mmengine.utils import ProgressBar
    print(title, flush=True)
    bar, step = ProgressBar(total, file=sys.stdout), max(1, total // 100)
    done = 0

    def update():
        nonlocal done
        done += 1
        if done % step == 0 or done == total:
            bar.update(done - bar.completed)
        if done == total:
            print(flush=True)

    return update


def save_image(path: str, array: np.ndarray):
    """Save an (H, W, 3) RGB or (H, W) label array (mode 'L'), making its
    directory; JPEGs at quality 92."""
    os.makedirs(osp.dirname(path), exist_ok=True)
    Image.fromarray(array).save(path, quality=92)


def save_json(path: str, obj, indent: int = None):
    """Save ``obj`` as json, making its directory."""
    os.makedirs(osp.dirname(path), exist_ok=True)
    with open(path, 'w') as f:
        json.dump(obj, f, indent=indent)


class Generator:
    """A data set generator: its name (``make_coco.py``, for messages), its
    marker (``make_coco.json``), ``files_of(args)``, the files it writes
    for the arguments in a marker, relative to the output directory, and
    the ``limits`` of its arguments (:func:`check_args`)."""

    def __init__(self, tool: str, files_of: Callable[[dict], List[str]],
                 limits: Limits):
        self.tool, self.files_of, self.limits = tool, files_of, limits
        self.marker = tool.replace('.py', '.json')

    def _read(self, out_dir: str) -> Optional[dict]:
        """The marker in ``out_dir``, None if there is none;
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
        """The description of the complete set this generator made in
        ``out_dir`` (without its file list), or None if there is none."""
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
        ours = set(info['files'] if 'files' in info else self.files_of(info))
        ours |= {marker, marker + '.tmp'}  # .tmp: a marker write cut short
        foreign = [p for p in present if p not in ours]
        if foreign:
            again = '--overwrite' if complete else 'A new run'
            raise FileExistsError(
                f'{out_dir} holds {len(foreign)} files that {tool} did not '
                f'write: {_some(foreign)}; nothing is deleted. {again} '
                f'replaces only what {tool} wrote: move those files out, or '
                f'choose another --out.')
        # the marker last: its list stays until the files are gone
        for rel in sorted(set(present) - {marker}) + [marker]:
            os.remove(osp.join(out_dir, rel))
        for folder, _, _ in os.walk(out_dir, topdown=False):
            if folder != out_dir and not os.listdir(folder):
                os.rmdir(folder)  # left empty

    def write(self, out_dir: str, args: dict, overwrite: bool,
              progress: bool, total: int, write: Callable[[Callable], dict],
              checks=()) -> dict:
        """Check ``--out``, then ``args`` (:func:`check_args`), make way
        (:meth:`prepare`), record the files of ``args``, call
        ``write(update)`` to write them (``update()`` after each of the
        ``total`` images) and return ``args`` updated with what it returns,
        as recorded in the marker."""
        check_out_dir(out_dir)
        check_args(args, self.limits, checks)
        self.prepare(out_dir, overwrite)
        marker, files = osp.join(out_dir, self.marker), self.files_of(args)

        def mark(info: dict, complete: bool) -> dict:  # atomically
            save_json(marker + '.tmp', dict(info, complete=complete,
                                            files=sorted(files)), indent=1)
            os.replace(marker + '.tmp', marker)
            return info

        mark(args, complete=False)
        info = dict(args, **write(progress_bar(
            total, progress,
            f'{self.tool}: writing {total} images to {out_dir}')))
        return mark(info, complete=True)

    def main(self, make: Callable, doc: str, metavars: dict = None,
             argv: List[str] = None) -> Tuple[dict, str]:
        """Run ``make`` from the command line (``--help``: ``doc``); return
        its result and ``--out``. Its parameters are the options, with their
        defaults (a tuple: that many values, named by ``metavars[name]``)
        and their text in ``make``'s ``Args:`` as help; ``--no-progress``
        hides the bar. A refusal of ``make`` ends it with one line."""
        parser = argparse.ArgumentParser(
            description=doc,
            formatter_class=argparse.RawDescriptionHelpFormatter)
        docs = _arg_docs(make)
        out, *params = inspect.signature(make).parameters.values()
        parser.add_argument('--out', required=True, help=docs[out.name])
        for name, default in ((p.name, p.default) for p in params):
            if name == 'progress':
                continue
            many = isinstance(default, tuple)
            kwargs = dict(action='store_true') if isinstance(
                default, bool) else dict(
                    type=type(default[0] if many else default),
                    default=default, nargs=len(default) if many else None,
                    metavar=(metavars or {}).get(name))
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
    docstring (``name (type): text``), for ``--help``."""
    section = inspect.getdoc(func).split('Args:\n')[1].split('\n\n')[0]
    docs = {}
    for line in section.splitlines():
        match = re.match(r'    (\w+) \(.*?\): (.*)', line)
        if match:
            name, docs[match[1]] = match[1], match[2]
        else:
            docs[name] += ' ' + line.strip()
    return {k: v.replace('%', '%%') for k, v in docs.items()}
