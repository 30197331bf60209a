"""``tools/train.py --resume [PATH]``: a checkpoint that can be resumed
from, by default the newest intact one of the work dir."""
import logging
import os
import os.path as osp
import re

from mmengine.config import Config
from mmengine.logging import print_log
from mmengine.runner import find_latest_checkpoint

from mmcpvt.utils.checkpoint import (CheckpointError, read_checkpoint,
                                     state_dict_of)


def _warn(message: str) -> None:
    print_log(message, logger='current', level=logging.WARNING)


def checkpoint_problem(path: str):
    """What is wrong with the checkpoint file ``path`` (its tensors mapped,
    not read), or None."""
    try:
        state_dict_of(read_checkpoint(path, mmap=True), path)
    except (CheckpointError, FileNotFoundError) as e:
        return str(e)
    return None


def set_resume(cfg: Config, path: str) -> None:
    """Resume from ``path`` (a file, a URL or 'auto': see
    :func:`resume_latest`); SystemExit for a damaged file."""
    if path == 'auto':
        return resume_latest(cfg)
    problem = None if '://' in path else checkpoint_problem(path)
    if problem is not None:
        raise SystemExit(
            f'train.py: error: --resume: {problem}. Pass another '
            'checkpoint, or --resume without a path to resume from the '
            'newest intact one of the work dir')
    cfg.resume, cfg.load_from = True, path


def resume_latest(cfg: Config) -> None:
    """The checkpoint named in the work dir's ``last_checkpoint`` (the one
    of this work dir if the record names another: a copied or moved work
    dir), else the newest intact ``epoch_N.pth`` / ``iter_N.pth`` (highest
    N: a copied work dir keeps names, not times), with a warning; none at
    all is a fresh start (from ``load_from`` if the config has one)."""
    work_dir, record = cfg.work_dir, osp.join(cfg.work_dir, 'last_checkpoint')
    candidates = [path for _, path in sorted((
        (int(m.group(1)), osp.join(work_dir, name))
        for name in (os.listdir(work_dir) if osp.isdir(work_dir) else [])
        for m in [re.match(r'^(?:epoch|iter)_(\d+)\.pth$', name)] if m),
        reverse=True)]
    why = f'{record} is missing'
    latest = find_latest_checkpoint(work_dir) if osp.isfile(record) else None
    if latest:
        if '://' in latest:
            cfg.resume, cfg.load_from = True, latest
            return
        if osp.realpath(osp.dirname(latest)) != osp.realpath(work_dir):
            _warn(f'--resume: {record} names {latest}, outside the work dir '
                  '(a copied or moved work dir); resuming in this work dir')
            latest = osp.join(work_dir, osp.basename(latest))
        candidates = [latest] + [p for p in candidates if p != latest]
        why = (f'the latest checkpoint {latest} (named in {record}) cannot '
               'be loaded')
    if not candidates:
        start = (f'load_from={cfg.load_from}' if cfg.get('load_from') else
                 'scratch')
        _warn(f'--resume: no checkpoint in {work_dir} yet, training starts '
              f'from {start}')
        cfg.resume = False
        return
    damaged = []
    for path in candidates:
        problem = checkpoint_problem(path)
        if problem is None:
            break
        damaged.append((path, problem))
    listing = '; '.join(w for _, w in damaged)
    if problem is not None:
        raise SystemExit(
            f'train.py: error: --resume: no intact checkpoint to resume from '
            f'in {work_dir}. Damaged: {listing}. To train from scratch, '
            f'delete or move the damaged files and {record}; to resume from a '
            'copy kept elsewhere, pass it: --resume PATH')
    cfg.resume, cfg.load_from = True, path
    if damaged or not osp.isfile(record):
        _warn(f'--resume: {why}{": " + listing if damaged else ""}. Resuming '
              f'from {path}, the newest intact checkpoint of the work dir; '
              'the epochs (or iterations) after it are trained again.')
