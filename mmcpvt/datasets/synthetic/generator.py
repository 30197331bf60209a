"""The writer that the data set generators (:mod:`.coco`, :mod:`.ade20k`,
:mod:`.imagenet`) share: argument checks, the output directory and its
marker, the progress bar. What they write, replace and refuse:
docs/get_started.md, "Generated data sets".

The marker (``make_coco.json``, ...) holds the arguments and the files
written, before the first image (``"complete": false``) and again at the
end: ``--overwrite`` (and a new run over an interrupted one) deletes only
those, and nothing when others are there; an older marker without the list
has it worked out from its arguments (``files_of``).
"""
import hashlib
import inspect
import json
import os
import os.path as osp
import sys
from typing import Callable, Dict, List, Optional, Tuple

from PIL import Image

from mmcpvt.utils.path import check_output_dir
from mmcpvt.utils.text import some
from . import shapes

# A limit of an argument: (test of a value, what is allowed)
Limit = Tuple[Callable, str]


def at_least(low: float, note: str = '') -> Limit:
    return (lambda value: value >= low), f'>= {low}{note}'


def between(low: float, high: float, note: str = '') -> Limit:
    return (lambda value: low <= value <= high), f'{low} to {high}{note}'


# checked in every generator that has the argument
SHARED_LIMITS = dict(seed=at_least(0), canvas_scale=between(
    1, 8, ' (the image side over --size; objects keep their size)'))


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


def save(path: str, content):
    """Save ``content`` by the extension of ``path``, making its directory:
    text (``.txt``), an object as json (``.json``), or an (H, W, 3) RGB or
    (H, W) label array (mode 'L') as an image, JPEGs at quality 92."""
    os.makedirs(osp.dirname(path), exist_ok=True)
    if path.endswith(('.txt', '.json')):
        with open(path, 'w') as f:
            f.write(content if path.endswith('.txt') else json.dumps(content))
    else:
        Image.fromarray(content).save(path, quality=92)


class Generator:
    """A data set generator: ``tool`` names it in messages (``make_coco.py``)
    and its marker; ``files_of(args)`` lists the files it writes, relative
    to the output directory; ``write(out_dir, args, update)`` writes them
    and returns what it adds to the description."""

    def __init__(self, tool: str, files_of: Callable[[dict], List[str]],
                 write: Callable[[str, dict, Callable], dict],
                 limits: Dict[str, Limit]):
        self.tool, self.files_of, self.write = tool, files_of, write
        self.limits = dict(SHARED_LIMITS, **limits)
        self.marker = tool.replace('.py', '.json')

    def _read(self, out_dir: str) -> Optional[dict]:
        """The marker in ``out_dir``, or None."""
        path = osp.join(out_dir, self.marker)
        if not osp.isfile(path):
            return None
        try:
            with open(path) as f:
                return dict(json.load(f))
        except (ValueError, TypeError) as e:  # not json, or not a dict
            raise FileExistsError(
                f'{path} cannot be read ({e}), so what {self.tool} wrote in '
                f'{out_dir} is not known: nothing is deleted. Delete the '
                f'directory yourself, or choose another --out.') from e

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
        # every file (and link to a directory), relative to out_dir
        present = sorted(
            osp.normpath(osp.join(osp.relpath(dirpath, out_dir), name))
            for dirpath, dirs, files in os.walk(out_dir) for name in files +
            [d for d in dirs if osp.islink(osp.join(dirpath, d))])
        info = self._read(out_dir)
        if info is None:
            raise FileExistsError(
                f'{out_dir} is not empty ({len(present)} files: '
                f'{some(present, 10)}) and was not made by {tool} (it has no '
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
                f'write: {some(foreign, 10)}; nothing is deleted. {again} '
                f'replaces only what {tool} wrote: move those files out, or '
                f'choose another --out.')
        # the marker last: its list stays until the files are gone
        for rel in sorted(set(present) - {marker}) + [marker]:
            os.remove(osp.join(out_dir, rel))
        for folder, _, _ in os.walk(out_dir, topdown=False):
            if folder != out_dir and not os.listdir(folder):
                os.rmdir(folder)  # left empty

    def code_id(self) -> str:
        """A digest of the generator's code (the module of its ``write``,
        :mod:`.shapes` and this one): a set made with another id may hold
        other images for the same arguments."""
        digest = hashlib.sha1()
        for path in (inspect.getsourcefile(self.write), shapes.__file__,
                     __file__):
            with open(path, 'rb') as f:
                digest.update(f.read())
        return digest.hexdigest()[:12]

    def make(self, out_dir: str, overwrite: bool = False,
             progress: bool = False, **args) -> dict:
        """Write the set of ``args`` (the other parameters of a generator's
        function) to ``out_dir`` and return its description, as recorded
        in the marker."""
        check_output_dir('--out', out_dir, 'the data set')
        # as in the marker: lists for tuples, and the code that wrote it
        args = json.loads(json.dumps(dict(args, generator=self.code_id())))
        for name, (ok, allowed) in self.limits.items():
            if name in args and not ok(args[name]):
                raise ValueError(f'--{name.replace("_", "-")} ({name}) must '
                                 f'be {allowed}, got {args[name]}')
        self.prepare(out_dir, overwrite)
        os.makedirs(out_dir, exist_ok=True)
        marker, files = osp.join(out_dir, self.marker), self.files_of(args)

        def mark(info: dict, complete: bool) -> dict:  # atomically
            with open(marker + '.tmp', 'w') as f:
                json.dump(dict(info, complete=complete, files=sorted(files)),
                          f, indent=1)
            os.replace(marker + '.tmp', marker)
            return info

        mark(args, complete=False)
        total = sum(f.endswith(('.jpg', '.JPEG')) for f in files)
        update = progress_bar(total, progress, f'{self.tool}: writing '
                              f'{total} images to {out_dir}')
        return mark(dict(args, **self.write(out_dir, args, update)), True)
