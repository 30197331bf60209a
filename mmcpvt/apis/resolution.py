"""A config's test pipeline rewritten for one test size, its untrained
model saved, and its test run: for tools/analysis_tools/eval_resolutions.py
(whose docstring says what a size means in each protocol) and demo/demo.py.
Only the transforms of :data:`SIZE_TRANSFORMS` change."""
import copy
import gc
from contextlib import redirect_stderr, redirect_stdout
from typing import List, Optional

import torch

from .cli import TEST_HOOKS, add_mmcpvt_hooks, build_runner
from .model import build_model

TASKS = {'mmpretrain': 'classification', 'mmdet': 'detection',
         'mmseg': 'segmentation'}
# the first protocol of each task is its default
PROTOCOLS = {'classification': ('resize-crop', 'resize'),
             'detection': ('short-side', ), 'segmentation': ('short-side', )}
SIZE_TRANSFORMS = {'classification': ('ResizeEdge', 'CenterCrop', 'Resize'),
                   'detection': ('Resize', ), 'segmentation': ('Resize', )}


def config_task(cfg) -> str:
    """The task of the config's ``default_scope``."""
    scope = cfg.get('default_scope', None)
    if scope not in TASKS:
        raise ValueError(
            f'the config\'s default_scope is {scope!r}; the test size can be '
            f'set for {", ".join(sorted(TASKS))} configs')
    return TASKS[scope]


def transform_name(transform: dict) -> str:
    """``'mmdet.Resize'`` (or the class) -> ``'Resize'``."""
    kind = transform.get('type')
    if isinstance(kind, str):
        return kind.rsplit('.', 1)[-1]
    return getattr(kind, '__name__', str(kind))


def resized_pipeline(pipeline: List[dict], size: int, task: str,
                     protocol: Optional[str] = None) -> List[dict]:
    """A copy of the test ``pipeline`` with its resize and crop rewritten
    for ``size`` by ``protocol`` (None: the task's default).
    Classification: its ResizeEdge, CenterCrop and Resize replaced at the
    place of the first, keeping the resize's backend and interpolation.
    Detection, segmentation: every Resize's scale times ``size /
    min(scale)``, its other arguments kept."""
    if size <= 0:
        raise ValueError(f'the test size must be positive, got {size}')
    protocols = PROTOCOLS[task]
    protocol = protocol or protocols[0]
    if protocol not in protocols:
        raise ValueError(
            f'--protocol {protocol} is not one of {task}: '
            f'{", ".join(protocols)}')
    known = SIZE_TRANSFORMS[task]
    names = [transform_name(t) for t in pipeline]
    found = [i for i, n in enumerate(names) if n in known]
    if not found:
        raise ValueError(
            f'the test pipeline of this {task} config has none of the '
            f'transforms that set the test size ({", ".join(known)}); its '
            f'transforms are: {", ".join(names) or "none"}. Add one to '
            'test_dataloader.dataset.pipeline')
    pipeline = [copy.deepcopy(dict(t)) for t in pipeline]
    if task != 'classification':
        for i in found:
            scale = pipeline[i].get('scale')
            if scale is None:
                raise ValueError(
                    f'test pipeline step {i} ({pipeline[i]["type"]}) resizes '
                    f'by scale_factor={pipeline[i].get("scale_factor")}, not '
                    'to a scale: there is no size to set; give it a scale in '
                    'the config')
            pipeline[i]['scale'] = size if isinstance(scale, int) else tuple(
                round(s * size / min(scale)) for s in scale)
        return pipeline
    # the config's resampling, where its first resize sets one
    resize = next((pipeline[i] for i in found if names[i] != 'CenterCrop'),
                  {})
    resample = {k: resize[k] for k in ('backend', 'interpolation')
                if k in resize}
    if protocol == 'resize-crop':
        new = [
            dict(type='ResizeEdge', scale=size * 256 // 224, edge='short',
                 **resample),
            dict(type='CenterCrop', crop_size=size)
        ]
    else:  # 'resize'
        new = [dict(type='Resize', scale=(size, size), **resample)]
    rest = [t for i, t in enumerate(pipeline) if i not in found]
    return rest[:found[0]] + new + rest[found[0]:]


def _dataset(cfg, loader: str) -> dict:  # the one with a pipeline, or {}
    dataset = (cfg.get(loader, None) or {}).get('dataset') or {}
    while dataset and 'pipeline' not in dataset:  # a wrapper's
        dataset = dataset.get('dataset') or {}
    return dataset


def set_test_size(cfg, size: int, protocol: Optional[str] = None) -> list:
    """:func:`resized_pipeline` in place in ``cfg``'s test dataset."""
    dataset = _dataset(cfg, 'test_dataloader')
    if not dataset:
        raise ValueError('test_dataloader.dataset (or a dataset it wraps) '
                         'has no pipeline')
    dataset.pipeline = resized_pipeline(dataset.pipeline, size,
                                        config_task(cfg), protocol)
    return dataset.pipeline


def training_size(cfg, task: str) -> Optional[int]:
    """The side trained at where the config says it (a classifier's square
    RandomResizedCrop or backbone ``img_size``, the shorter side of a fixed
    training Resize), else None."""
    steps = {transform_name(t): t
             for t in _dataset(cfg, 'train_dataloader').get('pipeline', [])}
    if task != 'classification':
        scale = steps.get('Resize', {}).get('scale')
        return min(scale) if isinstance(scale, (list, tuple)) else scale
    scale = steps.get('RandomResizedCrop', {}).get('scale') or cfg.model.get(
        'backbone', {}).get('img_size')
    if isinstance(scale, (list, tuple)):
        return int(scale[0]) if len(set(scale)) == 1 else None
    return scale


def describe(pipeline: List[dict], task: str) -> str:
    """E.g. ``ResizeEdge(scale=438, edge=short) CenterCrop(crop_size=384)``."""
    keys = ('scale', 'edge', 'crop_size', 'keep_ratio')
    return ' '.join(
        f'{transform_name(t)}('
        + ', '.join(f'{k}={t[k]}' for k in keys if k in t) + ')'
        for t in pipeline if transform_name(t) in SIZE_TRANSFORMS[task])


def save_untrained(cfg, path: str, log: str, seed: int = 0) -> None:
    """The model of ``cfg`` as initialised (seeded; ``Pretrained`` init_cfg
    loaded, as training would) saved at ``path``; its init table to
    ``log``."""
    with open(log, 'w') as f, redirect_stdout(f), redirect_stderr(f):
        model, _, _ = build_model(cfg, seed=seed, pretrained=True)
    torch.save({'state_dict': model.state_dict(), 'meta': {}}, path)


def run_test(cfg, console_path: str) -> dict:
    """The metrics (plain numbers) of ``runner.test()`` of ``cfg`` in this
    process, with the test hooks of ``tools/test.py``; the console output
    goes to ``console_path``."""
    add_mmcpvt_hooks(cfg, TEST_HOOKS)
    with open(console_path, 'w') as console, redirect_stdout(console), \
            redirect_stderr(console):
        runner = build_runner(cfg)
        try:
            metrics = runner.test()
        finally:
            # the logger outlives the runner: detach it from the file
            for handler in list(runner.logger.handlers):
                if getattr(handler, 'stream', None) is console:
                    runner.logger.removeHandler(handler)
            del runner
            gc.collect()  # the runner's loader workers, its model
    return {k: v.item() if hasattr(v, 'item') else v
            for k, v in metrics.items()}
