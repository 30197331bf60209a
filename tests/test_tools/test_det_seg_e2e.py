"""End to end, detection and segmentation: tools/train.py and tools/test.py
run as a user runs them, on the real configs.

Tiny COCO- and ADE20K-layout sets are generated with
tools/dataset_converters/make_coco.py and make_ade20k.py. A config written
into tmp_path inherits the user's entry point
configs/retinanet_pvt_tiny_peg_1x_coco.py (resp. the Semantic FPN
PVT-T+PEG config) by absolute path and overrides only the data root and
classes, image scale, schedule, batch size, workers, the backbone's
pretrained checkpoint (none here) and the number of classes. Training runs as
a subprocess and evaluates with the libraries' own metrics (pycocotools
CocoMetric, mmseg's IoUMetric); the checkpoint is then tested at another
scale: PEG has no position table tied to the training resolution. The
segmentation run (iteration-based, as every ADE20K schedule) is also killed
between two saves and resumed: every tensor of its later checkpoints, weights
and optimizer state, equals the uninterrupted run's.
"""
import os
import os.path as osp
import re

import pytest
import torch

import mmcpvt  # noqa: F401  (allow-lists mmengine's checkpoint types)
from mmcpvt.datasets.synthetic.ade20k import make_ade20k
from mmcpvt.datasets.synthetic.coco import coco_classes, make_coco
from tests.utils import ROOT, explain, run_tool, runner_logs, train_killed

K = 3
DET_BASE = osp.join(ROOT, 'configs', 'retinanet_pvt_tiny_peg_1x_coco.py')
SEG_BASE = osp.join(ROOT, 'configs', 'pvt_peg',
                    'fpn_pvt-t-peg_4xb4-80k_ade20k-512x512.py')

DET_CONFIG = """\
_base_ = {base!r}

data_root = {data_root!r}
metainfo = dict(classes={classes!r})
# random init, few steps: keep every detection so that COCO mAP is computed
model = dict(
    backbone=dict(init_cfg=None),
    bbox_head=dict(num_classes={k}),
    test_cfg=dict(score_thr=0.0))

train_pipeline = [
    dict(type='LoadImageFromFile'),
    dict(type='LoadAnnotations', with_bbox=True),
    dict(type='RandomResize', scale=[(192, 112), (192, 144)],
         keep_ratio=True),
    dict(type='RandomFlip', prob=0.5),
    dict(type='PackDetInputs'),
]
test_pipeline = [
    dict(type='LoadImageFromFile'),
    dict(type='Resize', scale=(192, 128), keep_ratio=True),
    dict(type='LoadAnnotations', with_bbox=True),
    dict(type='PackDetInputs',
         meta_keys=('img_id', 'img_path', 'ori_shape', 'img_shape',
                    'scale_factor')),
]
loader = dict(batch_size=2, num_workers=0, persistent_workers=False)
data = dict(data_root=data_root, metainfo=metainfo)
train_dataloader = dict(**loader, dataset=dict(**data,
                                               pipeline=train_pipeline))
val_dataloader = dict(**loader, dataset=dict(**data, pipeline=test_pipeline))
test_dataloader = val_dataloader
val_evaluator = dict(ann_file=data_root + 'annotations/instances_val2017.json')
test_evaluator = val_evaluator

train_cfg = dict(max_epochs=2, val_interval=2)
param_scheduler = [
    dict(type='LinearLR', start_factor=0.1, by_epoch=False, begin=0, end=2)
]
default_hooks = dict(logger=dict(interval=1))
randomness = dict(seed=0)
"""

SEG_CONFIG = """\
_base_ = {base!r}

data_root = {data_root!r}
metainfo = dict(classes={classes!r})
crop_size = (96, 96)
model = dict(
    data_preprocessor=dict(size=crop_size),
    backbone=dict(init_cfg=None),
    decode_head=dict(num_classes={k}))

train_pipeline = [
    dict(type='LoadImageFromFile'),
    dict(type='LoadAnnotations', reduce_zero_label=True),
    dict(type='RandomResize', scale=(256, 96), ratio_range=(0.5, 2.0),
         keep_ratio=True),
    dict(type='RandomCrop', crop_size=crop_size, cat_max_ratio=0.75),
    dict(type='RandomFlip', prob=0.5),
    dict(type='PhotoMetricDistortion'),
    dict(type='PackSegInputs'),
]
test_pipeline = [
    dict(type='LoadImageFromFile'),
    dict(type='Resize', scale=(256, 96), keep_ratio=True),
    dict(type='LoadAnnotations', reduce_zero_label=True),
    dict(type='PackSegInputs'),
]
loader = dict(num_workers=0, persistent_workers=False)
data = dict(data_root=data_root, metainfo=metainfo)
train_dataloader = dict(batch_size=2, **loader,
                        dataset=dict(**data, pipeline=train_pipeline))
val_dataloader = dict(batch_size=1, **loader,
                      dataset=dict(**data, pipeline=test_pipeline))
test_dataloader = val_dataloader

train_cfg = dict(max_iters=6, val_interval=6)
param_scheduler = [
    dict(type='PolyLR', eta_min=0., power=0.9, begin=0, end=6,
         by_epoch=False)
]
default_hooks = dict(
    logger=dict(interval=1), checkpoint=dict(interval=2))
randomness = dict(seed=0)
"""


def det_config(tmp_path, num_train, num_val, size):
    """A tiny COCO-layout set under ``tmp_path`` and a RetinaNet config of
    it (DET_CONFIG); the config's path."""
    data_root = str(tmp_path / 'coco') + '/'
    make_coco(data_root, num_train=num_train, num_val=num_val, size=size,
              num_classes=K, seed=0)
    config = tmp_path / 'retinanet_tiny_test.py'
    config.write_text(DET_CONFIG.format(
        base=DET_BASE, data_root=data_root, classes=coco_classes(K), k=K))
    return config


def seg_config(tmp_path, num_train, num_val, size):
    """A tiny ADE20K-layout set under ``tmp_path`` and a Semantic FPN config
    of it (SEG_CONFIG); the config's path."""
    from mmseg.datasets import ADE20KDataset
    info = make_ade20k(str(tmp_path / 'ade'), num_train=num_train,
                       num_val=num_val, size=size, num_classes=K, seed=0)
    config = tmp_path / 'fpn_tiny_test.py'
    config.write_text(SEG_CONFIG.format(
        base=SEG_BASE, data_root=info['data_root'],
        classes=ADE20KDataset.METAINFO['classes'][:K], k=K))
    return config


def test_retinanet_pvt_tiny_peg_train_test(tmp_path):
    config = det_config(tmp_path, 8, 4, 160)
    work_dir = str(tmp_path / 'work_dir')

    proc = run_tool('tools/train.py', str(config), '--work-dir', work_dir)
    assert proc.returncode == 0, explain(proc)
    ckpt = osp.join(work_dir, 'epoch_2.pth')
    assert osp.isfile(ckpt)
    log = runner_logs(work_dir)
    assert 'PVTPEG' in log  # the config's backbone was built
    assert re.search(r'Epoch\(train\)\s+\[2\]\[4/4\]', log), log[-3000:]
    assert re.search(r'Epoch\(val\) \[2\]\[\d+/\d+\]\s+coco/bbox_mAP: '
                     r'[\d.]+', log), log[-3000:]

    # another test scale than training's: nothing is tied to the size
    proc = run_tool(
        'tools/test.py', str(config), ckpt, '--work-dir',
        osp.join(work_dir, 'test'), '--cfg-options',
        'test_dataloader.dataset.pipeline.1.scale=(256,176)')
    assert proc.returncode == 0, explain(proc)
    assert re.search(r'coco/bbox_mAP: [\d.]+', proc.stdout), explain(proc)
    # the runner dumps the config it ran: the test scale was the new one
    from mmengine.config import Config
    ran = Config.fromfile(osp.join(work_dir, 'test', config.name))
    assert ran.test_dataloader.dataset.pipeline[1].scale == (256, 176)


@pytest.fixture(scope='module')
def seg_run(tmp_path_factory):
    """:func:`seg_config` and its uninterrupted 6-iteration run: ``(tmp
    dir, config, work dir)``."""
    tmp = tmp_path_factory.mktemp('seg')
    config = seg_config(tmp, 6, 3, 96)
    work_dir = str(tmp / 'work_dir')
    proc = run_tool('tools/train.py', str(config), '--work-dir', work_dir)
    assert proc.returncode == 0, explain(proc)
    return tmp, str(config), work_dir


def test_semantic_fpn_pvt_tiny_peg_train_test(seg_run):
    _, config, work_dir = seg_run
    ckpt = osp.join(work_dir, 'iter_6.pth')
    assert osp.isfile(ckpt)
    log = runner_logs(work_dir)
    assert re.search(r'Iter\(train\)\s+\[6/6\]', log), log[-3000:]
    assert re.search(r'Iter\(val\) \[\d+/\d+\]\s+aAcc: [\d.]+\s+mIoU: '
                     r'[\d.]+', log), log[-3000:]

    proc = run_tool(
        'tools/test.py', config, ckpt, '--work-dir',
        osp.join(work_dir, 'test'), '--cfg-options',
        'test_dataloader.dataset.pipeline.1.scale=(320,128)')
    assert proc.returncode == 0, explain(proc)
    assert re.search(r'mIoU: [\d.]+', proc.stdout), explain(proc)


def test_semantic_fpn_killed_between_saves_resumes_exactly(seg_run):
    """Killed after iteration 3 (iter_2 saved), resumed with --resume: the
    checkpoints of iterations 4 and 6 equal the uninterrupted run's in every
    tensor, weights and AdamW's moments alike."""
    tmp, config, uninterrupted = seg_run
    work_dir = str(tmp / 'killed')
    proc = train_killed(tmp, config, work_dir, after_iter=3)
    assert proc.returncode == -9, explain(proc)
    assert sorted(p for p in os.listdir(work_dir) if p.endswith('.pth')) \
        == ['iter_2.pth']

    proc = run_tool('tools/train.py', config, '--work-dir', work_dir,
                    '--resume')
    assert proc.returncode == 0, explain(proc)
    assert 'resumed epoch: 0, iter: 2' in runner_logs(work_dir)

    def tensors(path):  # the weights and AdamW's state (its moments)
        checkpoint = torch.load(path, map_location='cpu', weights_only=True)
        return checkpoint['state_dict'], checkpoint['optimizer']['state']

    for name in ('iter_4.pth', 'iter_6.pth'):
        expected = tensors(osp.join(uninterrupted, name))
        assert expected[1], 'no optimizer state'
        torch.testing.assert_close(tensors(osp.join(work_dir, name)),
                                   expected, rtol=0, atol=0)


def test_mmdet_own_train_py_runs_our_hooks(tmp_path):
    """mmdet's own tools/train.py on one of our configs (no mmcpvt tool
    involved): the config names our runner and hooks, so the work-dir lock,
    the whole-model check of load_from and atomic saving are active there
    too."""
    import socket

    import mmdet
    mmdet_train = osp.join(osp.dirname(mmdet.__file__), '.mim', 'tools',
                           'train.py')
    config = det_config(tmp_path, 4, 2, 128)
    work_dir = tmp_path / 'work_dir'
    one_epoch = ['--cfg-options', 'train_cfg.max_epochs=1',
                 'train_cfg.val_interval=1']

    # a training holds the work dir (this process stands for it)
    work_dir.mkdir()
    lock = work_dir / '.train.lock'
    lock.write_text(f'{socket.gethostname()} {os.getpid()}')
    dumped = work_dir / config.name
    dumped.write_text("# the running training's config\n")
    proc = run_tool(mmdet_train, str(config), '--work-dir', str(work_dir),
                    *one_epoch)
    assert proc.returncode != 0, explain(proc)
    assert f'work dir {work_dir} is in use by another training' in \
        proc.stderr, explain(proc)
    # refused before the runner dumps its config (mmcpvt.LockedRunner)
    assert dumped.read_text() == "# the running training's config\n"
    lock.unlink()

    # a load_from of another model is refused before any training step
    other = tmp_path / 'other.pth'
    torch.save({'state_dict': {'backbone.w': torch.ones(1)}}, other)
    proc = run_tool(mmdet_train, str(config), '--work-dir',
                    str(tmp_path / 'other'), *one_epoch, f'load_from={other}')
    assert proc.returncode != 0, explain(proc)
    assert 'CheckpointMismatchError' in proc.stderr, explain(proc)
    assert not list((tmp_path / 'other').glob('*.pth')), explain(proc)

    proc = run_tool(mmdet_train, str(config), '--work-dir', str(work_dir),
                    *one_epoch)
    assert proc.returncode == 0, explain(proc)
    assert sorted(p.name for p in work_dir.glob('*.pth')) == ['epoch_1.pth']
    assert not lock.exists() and not list(work_dir.glob('.*.tmp'))
    log = runner_logs(str(work_dir))
    for hook in ('CheckpointLoadHook', 'SeedHook'):
        assert hook in log, hook
    assert "backend='mmcpvt_atomic'" in (work_dir / config.name).read_text()


@pytest.mark.parametrize('options, maps', [
    (['model.backbone.out_indices=(1,2,3)'], [128, 320, 512]),
    (['model.neck.in_channels=[64,128,320,320]'], [64, 128, 320, 512]),
])
def test_a_neck_that_does_not_fit_the_backbone_is_refused(tmp_path, options,
                                                          maps):
    """mmdet's FPN asserted without a message at the first iteration."""
    config = det_config(tmp_path, 1, 1, 64)
    proc = run_tool('tools/train.py', str(config), '--work-dir',
                    str(tmp_path / 'work'), '--cfg-options', *options)
    assert proc.returncode == 1, explain(proc)
    error = proc.stderr.strip().splitlines()[-1]
    assert error.startswith('train.py: error: model.neck.in_channels is '), \
        explain(proc)
    assert 'but the PVTPEG backbone gives maps of' in error
    assert error.endswith(f'set model.neck.in_channels={maps}')
