"""End to end: tools/train.py and tools/test.py run as a user runs them.

A tiny ImageNet-layout set is generated with
tools/dataset_converters/make_imagenet.py; a config that inherits the real
CPVT-GAP config by path overrides only the data root, sizes, batch, schedule
and a small arch; training runs as a subprocess for 2 epochs, resumes to 3,
and the last checkpoint is tested.
"""
import os
import os.path as osp
import re
import socket

import pytest
import torch

import mmcpvt  # noqa: F401  (allow-lists mmengine's checkpoint types)
from mmcpvt.datasets.synthetic.imagenet import make_imagenet
from tests.utils import ROOT, explain, run_tool, runner_logs

TOOLS = osp.join(ROOT, 'tools')
BASE_CONFIG = osp.join(ROOT, 'configs', 'cpvt',
                       'cpvt-tiny-gap-p0-4_4xb256_in1k.py')

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
    assert re.search(r'Load checkpoint from \S*epoch_2\.pth', log), \
        log[-3000:]
    assert 'resumed epoch: 2, iter: ' in log
    assert osp.isfile(osp.join(work_dir, 'epoch_3.pth'))
    assert re.search(r'Epoch\(train\)\s+\[3\]', log)
    assert not re.search(r'Epoch\(train\)\s+\[1\]', log.split(
        'resumed epoch: 2')[-1]), 'the resumed run started again at epoch 1'

    # testing needs no lock: it runs beside a training of its work dir
    # (this process stands for it) and leaves the training's lock alone
    test_dir = osp.join(work_dir, 'test')
    os.makedirs(test_dir)
    lock = osp.join(test_dir, '.train.lock')
    with open(lock, 'w') as f:
        f.write(f'{socket.gethostname()} {os.getpid()}')
    proc = run_tool('tools/test.py', config,
                    osp.join(work_dir, 'epoch_3.pth'), '--work-dir', test_dir)
    assert proc.returncode == 0, explain(proc)
    assert re.search(r'accuracy/top1: [\d.]+', proc.stdout), explain(proc)
    with open(lock) as f:
        assert f.read() == f'{socket.gethostname()} {os.getpid()}'
    os.remove(lock)

    # a checkpoint of a deeper model (one encoder more) is refused, not
    # tested on the encoders that fit (it reported a top-1)
    state = torch.load(osp.join(work_dir, 'epoch_3.pth'), map_location='cpu',
                       weights_only=True)['state_dict']
    state.update({k.replace('layers.4.', 'layers.5.'): v
                  for k, v in state.items() if '.layers.4.' in k})
    deeper = osp.join(work_dir, 'deeper.pth')
    torch.save({'state_dict': state}, deeper)
    proc = run_tool('tools/test.py', config, deeper, '--work-dir',
                    osp.join(work_dir, 'test'))
    assert proc.returncode == 1, explain(proc)
    assert (f'test.py: error: {deeper} does not fit the model of {config}: '
            'the checkpoint is not one of the CPVT backbone (keys '
            'backbone.*): it has 12 tensors that the CPVT backbone lacks'
            ) in proc.stderr, explain(proc)
    assert 'a checkpoint of another depth: the checkpoint has layers.5 ' \
        'that the model lacks' in proc.stderr
    assert 'accuracy' not in proc.stdout


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
