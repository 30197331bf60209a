"""Every file under configs/ resolves with ``Config.fromfile``: the leaf
configs, the demo configs and each ``_base_`` file on its own, including the
bases taken from mmdet, mmseg and mmpretrain (``mmdet::...``), which must be
found in the installed packages. A leaf config names its library's default
scope and imports mmcpvt, and names mmcpvt's hooks (atomic checkpoints,
weights-only loads, epoch seeding, the work-dir lock, the CUDA-ops check),
so that mmdet's and mmseg's own train.py run with them too.
"""
import glob
import os.path as osp

import pytest
from mmengine.config import Config
from tests.utils import ROOT

CONFIG_DIR = osp.join(ROOT, 'configs')
FILES = sorted(
    glob.glob(osp.join(CONFIG_DIR, '**', '*.py'), recursive=True))
IDS = [osp.relpath(p, CONFIG_DIR) for p in FILES]


def test_configs_found():
    assert osp.join(CONFIG_DIR, 'retinanet_pvt_tiny_peg_1x_coco.py') in FILES
    assert any(i.startswith('_base_/') for i in IDS)


@pytest.mark.parametrize('path', FILES, ids=IDS)
def test_config_resolves(path):
    # custom imports are not run here: building is left to the other tests
    cfg = Config.fromfile(path, import_custom_modules=False)
    assert '_base_' not in cfg
    if osp.relpath(path, CONFIG_DIR).startswith('_base_/'):
        return
    assert cfg.default_scope in ('mmpretrain', 'mmdet', 'mmseg')
    assert 'mmcpvt' in cfg.custom_imports['imports']
    assert cfg.custom_imports.get('allow_failed_imports') is False
    hooks = cfg.default_hooks
    assert hooks.checkpoint.backend_args == dict(backend='mmcpvt_atomic')
    for name, hook in (('weights_only_load', 'WeightsOnlyLoadHook'),
                       ('seed', 'SeedHook'),
                       ('work_dir_lock', 'WorkDirLockHook'),
                       ('cuda_ops', 'CudaOpsHook')):
        assert hooks[name].type == f'mmcpvt.{hook}', (name, hooks[name])
