"""End to end: tools/train.py and tools/test.py run as a user runs them.

A tiny ImageNet-layout set is generated with
tools/dataset_converters/make_imagenet.py; a config that inherits the real
CPVT-GAP config by path overrides only the data root, sizes, batch, schedule
and a small arch; training runs as a subprocess for 2 epochs, resumes to 3,
and the last checkpoint is tested.
"""
import os.path as osp
import re
import sys

import pytest

from tests.utils import ROOT, explain, run_tool, runner_logs

TOOLS = osp.join(ROOT, 'tools')
BASE_CONFIG = osp.join(ROOT, 'configs', 'cpvt',
                       'cpvt-tiny-gap-p0-4_4xb256_in1k.py')
sys.path.insert(0, osp.join(TOOLS, 'dataset_converters'))
from make_imagenet import make_imagenet  # noqa: E402

NUM_CLASSES = 4
SIZE = 48

TEST_CONFIG = """\
_base_ = {base!r}

data_root = {data_root!r}
model = dict(
    backbone=dict(
        arch=dict(_delete_=True, embed_dims=32, num_layers=5, num_heads=2,
                  feedforward_channels=64),
        img_size={size}),
    head=dict(num_classes={k}, in_channels=32))
data_preprocessor = dict(num_classes={k})

train_pipeline = [
    dict(type='LoadImageFromFile'),
    dict(type='RandomResizedCrop', scale={size}, backend='pillow'),
    dict(type='RandomFlip', prob=0.5, direction='horizontal'),
    dict(type='PackInputs'),
]
test_pipeline = [
    dict(type='LoadImageFromFile'),
    dict(type='ResizeEdge', scale={resize}, edge='short', backend='pillow'),
    dict(type='CenterCrop', crop_size={size}),
    dict(type='PackInputs'),
]
loader = dict(batch_size=8, num_workers=0, persistent_workers=False)
train_dataloader = dict(
    **loader, dataset=dict(data_root=data_root, pipeline=train_pipeline))
val_dataloader = dict(
    **loader, dataset=dict(data_root=data_root, pipeline=test_pipeline))
test_dataloader = val_dataloader
val_evaluator = dict(type='Accuracy', topk=(1, ))
test_evaluator = val_evaluator

param_scheduler = [
    dict(type='LinearLR', start_factor=0.1, by_epoch=True, begin=0, end=1,
         convert_to_iter_based=True),
    dict(type='CosineAnnealingLR', by_epoch=True, begin=1),
]
train_cfg = dict(max_epochs=2, val_interval=1)
default_hooks = dict(logger=dict(interval=1))
randomness = dict(seed=0)
"""


@pytest.fixture(scope='module')
def tiny_setup(tmp_path_factory):
    tmp = tmp_path_factory.mktemp('e2e')
    data_root = str(tmp / 'imagenet')
    make_imagenet(data_root, num_classes=NUM_CLASSES, train_per_class=8,
                  val_per_class=4, size=SIZE, seed=0)
    config = tmp / 'cpvt-gap_tiny_test.py'
    config.write_text(
        TEST_CONFIG.format(base=BASE_CONFIG, data_root=data_root, size=SIZE,
                           resize=SIZE * 8 // 7, k=NUM_CLASSES))
    return str(config), str(tmp / 'work_dir')


def test_make_imagenet_layout(tmp_path):
    """The generator writes what mmpretrain's ImageNet reads, reproducibly."""
    from mmpretrain.datasets import ImageNet
    root = str(tmp_path / 'a')
    info = make_imagenet(root, num_classes=3, train_per_class=2,
                         val_per_class=2, size=16, seed=1)
    assert info['wnids'] == sorted(info['wnids'])
    for split, n in (('train', 6), ('val', 6)):
        ds = ImageNet(data_root=root, split=split, lazy_init=False)
        assert len(ds) == n
        assert sorted({ds.get_data_info(i)['gt_label']
                       for i in range(n)}) == [0, 1, 2]
    train = ImageNet(data_root=root, split='train')
    wnid = info['wnids'][1]
    first = train.get_data_info(2)
    assert first['img_path'] == osp.join(root, 'train', wnid,
                                         f'{wnid}_1.JPEG')
    assert first['gt_label'] == 1
    # same seed, same bytes
    make_imagenet(str(tmp_path / 'b'), num_classes=3, train_per_class=2,
                  val_per_class=2, size=16, seed=1)
    for rel in ('meta/val.txt', f'train/{wnid}/{wnid}_2.JPEG',
                'val/ILSVRC2012_val_00000003.JPEG'):
        assert (tmp_path / 'a' / rel).read_bytes() == \
            (tmp_path / 'b' / rel).read_bytes()
    with pytest.raises(FileExistsError, match='overwrite'):
        make_imagenet(root, num_classes=3)


def test_train_resume_test(tiny_setup):
    config, work_dir = tiny_setup

    proc = run_tool('tools/train.py', config, '--work-dir', work_dir)
    assert proc.returncode == 0, explain(proc)
    assert osp.isfile(osp.join(work_dir, 'epoch_2.pth'))
    log = runner_logs(work_dir)
    assert re.search(r'Epoch\(val\) \[2\]\[\d+/\d+\]\s+accuracy/top1: '
                     r'[\d.]+', log), log[-3000:]

    # --resume without a value: the latest checkpoint of work_dir (epoch 2)
    proc = run_tool('tools/train.py', config, '--work-dir', work_dir,
                    '--resume', '--cfg-options', 'train_cfg.max_epochs=3')
    assert proc.returncode == 0, explain(proc)
    log = runner_logs(work_dir)
    assert re.search(r'Auto resumed from the latest checkpoint \S*epoch_2'
                     r'\.pth', log), log[-3000:]
    assert 'resumed epoch: 2, iter: ' in log
    assert osp.isfile(osp.join(work_dir, 'epoch_3.pth'))
    assert re.search(r'Epoch\(train\)\s+\[3\]', log)
    assert not re.search(r'Epoch\(train\)\s+\[1\]', log.split(
        'resumed epoch: 2')[-1]), 'the resumed run started again at epoch 1'

    proc = run_tool('tools/test.py', config,
                    osp.join(work_dir, 'epoch_3.pth'), '--work-dir',
                    osp.join(work_dir, 'test'))
    assert proc.returncode == 0, explain(proc)
    assert re.search(r'accuracy/top1: [\d.]+', proc.stdout), explain(proc)


@pytest.mark.parametrize('tool', ['train.py', 'test.py'])
def test_missing_config_is_named(tool, tmp_path):
    missing = str(tmp_path / 'no_such_config.py')
    args = [missing] if tool == 'train.py' else [missing, 'x.pth']
    proc = run_tool(f'tools/{tool}', *args, timeout=120)
    assert proc.returncode != 0
    assert f'config file not found: {missing}' in proc.stderr
    assert 'Traceback' not in proc.stderr


def test_missing_checkpoint_is_named(tiny_setup, tmp_path):
    config, _ = tiny_setup
    missing = str(tmp_path / 'no_such.pth')
    proc = run_tool('tools/test.py', config, missing, timeout=120)
    assert proc.returncode != 0
    assert f'checkpoint file not found: {missing}' in proc.stderr
    assert 'Traceback' not in proc.stderr


def _demo():
    sys.path.insert(0, TOOLS)
    import demo
    return demo


def _apply(cfg, options):
    """``cfg`` with ``--cfg-options`` applied as tools/train.py does."""
    import argparse

    from mmengine.config import DictAction
    parser = argparse.ArgumentParser()
    parser.add_argument('--cfg-options', nargs='+', action=DictAction)
    cfg = cfg.copy()
    cfg.merge_from_dict(
        parser.parse_args(['--cfg-options', *options]).cfg_options)
    return cfg


def test_demo_config_builds_and_resizes():
    """The classification demo's config builds a model that classifies its
    training size and the larger test sizes; the demo finds the test resize
    to change."""
    import torch
    from mmengine.registry import init_default_scope
    from mmpretrain.registry import MODELS

    import mmcpvt  # noqa: F401  (registers CPVT)
    demo = _demo()
    cfg = demo.load_config(demo.TASKS['cls'].config)
    assert demo.cls_test_size(cfg, 96) == [
        'test_dataloader.dataset.pipeline.1.scale=110',
        'test_dataloader.dataset.pipeline.2.crop_size=96'
    ]
    init_default_scope('mmpretrain')
    model = MODELS.build(cfg.model).eval()
    for size in (cfg.img_size, cfg.img_size * 2):
        with torch.no_grad():
            out = model(torch.rand(2, 3, size, size), mode='tensor')
        assert out.shape == (2, cfg.num_classes)


@pytest.mark.parametrize('name', ['det', 'cls'])
def test_demo_task_table(name, tmp_path, capsys):
    """One table drives every demo task: its config exists and builds, and
    the options the flow derives from the table (data root, test size,
    --quick schedule) land on keys the config has."""
    import importlib

    import torch
    from mmengine.registry import init_default_scope

    import mmcpvt  # noqa: F401
    demo = _demo()
    assert set(demo.TASKS) == {'det', 'cls'}
    task = demo.TASKS[name]
    for path in (task.config, task.parent):
        assert osp.isfile(osp.join(ROOT, path)), path
    cfg = demo.load_config(task.config)
    size = task.train_size(cfg)
    sizes = [round(size * s) for s in task.test_scales]
    assert sizes[0] == size and sizes == sorted(sizes)

    root = str(tmp_path / 'data')
    applied = _apply(cfg, task.data_options(cfg, root) +
                     task.test_size_options(cfg, sizes[-1]) +
                     demo.schedule_options(cfg, task.quick_epochs))
    for loader in ('train', 'val', 'test'):
        dataset = applied[f'{loader}_dataloader'].dataset
        assert dataset.data_root.rstrip('/') == root
    assert applied.train_cfg.max_epochs == task.quick_epochs
    pipeline = str(applied.test_dataloader.dataset.pipeline)
    assert str(sizes[-1]) in pipeline and pipeline != str(
        cfg.test_dataloader.dataset.pipeline)
    for scheduler in applied.param_scheduler:
        if scheduler.get('by_epoch', True):
            assert scheduler.end <= task.quick_epochs

    # the generator takes the table's arguments (fewer, smaller images);
    # a second run finds the same set and keeps it
    spec = dict(demo.data_spec(task, cfg, quick=True), size=48,
                **{k: 1 for k in task.quick_data})
    info = demo.ensure_data(task, str(tmp_path / 'tiny'), spec)
    assert info['num_classes'] == task.num_classes(cfg)
    assert 'data: wrote' in capsys.readouterr().out
    again = demo.ensure_data(task, str(tmp_path / 'tiny'), spec)
    assert again['num_train'] == info['num_train']
    assert 'data: reusing' in capsys.readouterr().out

    init_default_scope(cfg.default_scope)
    registry = importlib.import_module(f'{cfg.default_scope}.registry')
    model = registry.MODELS.build(cfg.model).eval()
    for s in sizes:
        with torch.no_grad():
            out = model(torch.rand(1, 3, s, s), mode='tensor')
        out = out[0] if isinstance(out, tuple) else [out]
        assert all(torch.isfinite(o).all() for o in out)


def test_demo_train_progress():
    """The runner's training log lines become iteration and time-left
    lines, about ten over the run; its validation results one line each."""
    demo = _demo()
    progress = demo.TrainProgress(max_epochs=2)
    line = ('11/26 12:00:00 - mmengine - INFO - Epoch(train) [{e}][{i:3d}/'
            '100]  base_lr: 1.0e-04 lr: 1.0e-04  eta: 0:01:00  time: 0.5000'
            '  data_time: 0.0100  memory: 0  loss: 1.2500  loss_cls: 0.9')
    shown = [progress(line.format(e=e, i=i)) for e in (1, 2)
             for i in range(10, 101, 10)]
    assert shown[0] == ('[demo] train: iter 10/200 (epoch 1/2), loss 1.250, '
                        '0.50 s/iter, ~1.6 min left')
    assert shown[-1].startswith('[demo] train: iter 200/200 (epoch 2/2)')
    assert 5 <= sum(s is not None for s in shown) <= 11
    # validation: its results in one line, its progress lines not at all
    assert progress('Epoch(val) [2][ 5/10]    eta: 0:00:05  time: 0.5') is None
    assert progress(
        'Epoch(val) [2][10/10]    coco/bbox_mAP: 0.5000  coco/bbox_mAP_50: '
        '0.9000  coco/bbox_mAP_75: 0.6000  coco/bbox_mAP_s: -1.0000  '
        'data_time: 0.01  time: 0.4') == (
            '[demo] train: validation after epoch 2: coco/bbox_mAP 0.500, '
            'coco/bbox_mAP_50 0.900, coco/bbox_mAP_75 0.600')


def test_demo_cls_quick(tmp_path):
    """``tools/demo.py --task cls --quick`` end to end: data, training with
    progress lines, tests at two sizes, the summary."""
    data_root, work_dir = str(tmp_path / 'data'), str(tmp_path / 'work')
    proc = run_tool('tools/demo.py', '--task', 'cls', '--quick',
                    '--data-root', data_root, '--work-dir', work_dir,
                    '--test-sizes', '64,96', timeout=600)
    assert proc.returncode == 0, explain(proc)
    out = proc.stdout
    assert re.search(r'\[demo\] train: iter \d+/\d+ \(epoch \d+/10\).*'
                     r'min left', out), out[-3000:]
    assert '[demo] (4/4) test the trained model at 96x96' in out
    assert re.search(r'trained\s+96x96\s+top1 +[\d.]+%  top5 +[\d.]+%\s+'
                     r'\(1\.5x, never seen in training\)', out), out[-3000:]
    for name in ('demo_train.out', 'demo_test_trained_64.json',
                 'demo_test_trained_96.out', 'epoch_10.pth'):
        assert osp.isfile(osp.join(work_dir, name)), name
