"""Every file under configs/, ``_base_`` files included, resolves with its
``mmdet::``-style bases found in the installed packages. A leaf config names
its default scope, imports mmcpvt and names mmcpvt's hooks, so that mmdet's
and mmseg's own train.py run with them too; its data is checked
(mmcpvt/datasets): ``CheckSegMap`` after every ``LoadAnnotations`` of a
segmentation config, ``CheckedCocoDataset`` in a detection config.
"""
import glob
import os.path as osp

import pytest
from tests.utils import ROOT, load_config

CONFIG_DIR = osp.join(ROOT, 'configs')
FILES = sorted(
    glob.glob(osp.join(CONFIG_DIR, '**', '*.py'), recursive=True))
IDS = [osp.relpath(p, CONFIG_DIR) for p in FILES]


def test_configs_found():
    assert osp.join(CONFIG_DIR, 'retinanet_pvt_tiny_peg_1x_coco.py') in FILES
    assert any(i.startswith('_base_/') for i in IDS)
    leaves = [i for i in IDS if not i.startswith('_base_/')]
    assert sum('ade20k' in i for i in leaves) >= 6
    assert sum('coco' in i for i in leaves) >= 14  # pvt, swin, entry, demo


@pytest.mark.parametrize('path', FILES, ids=IDS)
def test_config_resolves(path):
    # custom imports are not run here: building is left to the other tests
    cfg = load_config(path, import_custom_modules=False)
    assert '_base_' not in cfg
    if osp.relpath(path, CONFIG_DIR).startswith('_base_/'):
        return
    assert cfg.default_scope in ('mmpretrain', 'mmdet', 'mmseg')
    assert 'mmcpvt' in cfg.custom_imports['imports']
    assert cfg.custom_imports.get('allow_failed_imports') is False
    hooks = cfg.default_hooks
    assert hooks.checkpoint.backend_args == dict(backend='mmcpvt_atomic')
    for name, hook in (('checkpoint_load', 'CheckpointLoadHook'),
                       ('seed', 'SeedHook'), ('cuda_ops', 'CudaOpsHook')):
        assert hooks[name].type == f'mmcpvt.{hook}', (name, hooks[name])
    loaders = [cfg[f'{s}_dataloader'] for s in ('train', 'val', 'test')]
    if cfg.default_scope == 'mmseg':  # each pipeline, TTA's included
        pipelines = [loader.dataset.pipeline for loader in loaders] + [
            [t for group in cfg.tta_pipeline[1].transforms for t in group]]
        for types in ([t['type'] for t in p] for p in pipelines):
            after = types[types.index('LoadAnnotations') + 1]
            assert after == 'mmcpvt.CheckSegMap', types
    elif cfg.default_scope == 'mmdet':
        assert {loader.dataset.type for loader in loaders} == {
            'mmcpvt.CheckedCocoDataset'}
