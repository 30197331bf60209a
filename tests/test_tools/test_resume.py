"""``tools/train.py --resume`` after a crash, and ``tools/test.py`` on the
trained checkpoint.

A run killed with SIGKILL in the middle of an epoch and resumed with
``--resume`` ends with the weights of a run that was never interrupted (the
killed epoch is trained again from the checkpoint of the one before, with
the same data order, augmentation and drop-path); both runs' logs are kept.
A damaged latest checkpoint (empty, truncated) is stepped over with a
warning that names it; an explicit damaged ``--resume PATH`` is an error
that names it, and so is a checkpoint of another model.

The model is a tiny CPVT classifier with the real config's random parts
(RepeatAugSampler, RandomResizedCrop, flips, Mixup/CutMix, drop-path) on an
ImageNet-layout set from mmcpvt.datasets.synthetic.imagenet.
"""
import glob
import os
import os.path as osp
import re
import shutil
import signal

import pytest
import torch

import mmcpvt  # noqa: F401  (allow-lists mmengine's checkpoint types)
from mmcpvt.apis import resume
from mmcpvt.datasets.synthetic.imagenet import make_imagenet
from tests.utils import (ROOT, explain, load_script, run_tool, runner_logs,
                         train_killed)

BASE_CONFIG = osp.join(ROOT, 'configs', 'cpvt', 'cpvt-tiny_4xb256_in1k.py')

# 16 training images, batch 4: 4 iterations an epoch
TEST_CONFIG = """\
_base_ = {base!r}

data_root = {data_root!r}
model = dict(
    backbone=dict(
        arch=dict(_delete_=True, embed_dims=32, num_layers=2, num_heads=2,
                  feedforward_channels=64),
        img_size=32, patch_size=8),
    head=dict(num_classes=2, in_channels=32))
data_preprocessor = dict(num_classes=2)
train_pipeline = [
    dict(type='LoadImageFromFile'),
    dict(type='RandomResizedCrop', scale=32, backend='pillow'),
    dict(type='RandomFlip', prob=0.5, direction='horizontal'),
    dict(type='PackInputs'),
]
test_pipeline = [
    dict(type='LoadImageFromFile'),
    dict(type='ResizeEdge', scale=32, edge='short', backend='pillow'),
    dict(type='PackInputs'),
]
loader = dict(batch_size=4, num_workers=0, persistent_workers=False)
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
    dict(type='CosineAnnealingLR', by_epoch=True, begin=1, end=3,
         eta_min=1e-5),
]
train_cfg = dict(max_epochs=3, val_interval=1)
default_hooks = dict(logger=dict(interval=1))
randomness = dict(seed=3, deterministic=True)
"""


@pytest.fixture(scope='module')
def tiny(tmp_path_factory):
    tmp = tmp_path_factory.mktemp('resume')
    data_root = str(tmp / 'imagenet')
    make_imagenet(data_root, num_classes=2, train_per_class=8,
                  val_per_class=2, size=32, seed=0)
    config = tmp / 'cpvt_tiny_resume.py'
    config.write_text(TEST_CONFIG.format(base=BASE_CONFIG,
                                         data_root=data_root))
    return tmp, str(config)


@pytest.fixture(scope='module')
def uninterrupted(tiny):
    """Run A: 3 epochs without interruption; its work dir."""
    tmp, config = tiny
    work_dir = str(tmp / 'uninterrupted')
    proc = run_tool('tools/train.py', config, '--work-dir', work_dir)
    assert proc.returncode == 0, explain(proc)
    return work_dir


def state_dict(path):
    return torch.load(path, map_location='cpu', weights_only=True)[
        'state_dict']


def run_logs(work_dir):
    """The text log of each run in work_dir, oldest first."""
    return [open(p).read() for p in sorted(
        glob.glob(osp.join(work_dir, '2*', '2*.log')))]


def test_kill_mid_epoch_then_resume_gives_uninterrupted_weights(
        tiny, uninterrupted):
    tmp, config = tiny
    work_dir = str(tmp / 'killed')
    # in the middle of epoch 2, after 2 of its 4 iterations
    proc = train_killed(tmp, config, work_dir, after_iter=6)
    assert proc.returncode == -signal.SIGKILL, explain(proc)
    # epoch 1 saved and named in last_checkpoint, epoch 2 not
    with open(osp.join(work_dir, 'last_checkpoint')) as f:
        assert f.read().strip().endswith('epoch_1.pth')
    assert not osp.exists(osp.join(work_dir, 'epoch_2.pth'))
    killed_log, = run_logs(work_dir)
    assert re.search(r'Epoch\(train\)\s+\[2\]\[2/4\]', killed_log)

    proc = run_tool('tools/train.py', config, '--work-dir', work_dir,
                    '--resume')
    assert proc.returncode == 0, explain(proc)

    # both runs' logs are kept, the first one as the kill left it
    first, second = run_logs(work_dir)
    assert first == killed_log
    assert re.search(r'Load checkpoint from \S*epoch_1\.pth', second), \
        second[-3000:]
    assert 'resumed epoch: 1, iter: 4' in second
    assert re.search(r'Epoch\(train\)\s+\[2\]\[1/4\]', second)
    assert not re.search(r'Epoch\(train\)\s+\[1\]', second)

    expected = state_dict(osp.join(uninterrupted, 'epoch_3.pth'))
    resumed = state_dict(osp.join(work_dir, 'epoch_3.pth'))
    assert resumed.keys() == expected.keys()
    delta = max((resumed[k].float() - expected[k].float()).abs().max().item()
                for k in expected)
    print(f'max |delta| of the resumed weights: {delta:.3g}')
    # bitwise on this CPU; the tolerance covers reduction-order noise
    torch.testing.assert_close(resumed, expected, rtol=0, atol=1e-6)
    # not trivially equal: training moved the weights
    start = state_dict(osp.join(work_dir, 'epoch_1.pth'))
    assert any(not torch.equal(start[k], expected[k]) for k in expected)


def test_trained_checkpoint_is_validated_and_refused_deeper(
        tiny, uninterrupted, tmp_path):
    """The run validated; a checkpoint of a deeper model (one encoder more)
    is refused by tools/test.py, not tested on the encoders that fit (it
    reported a top-1). test_dist_train.py tests a checkpoint."""
    _, config = tiny
    assert re.search(r'Epoch\(val\) \[3\]\[\d+/\d+\]\s+accuracy/top1: '
                     r'[\d.]+', runner_logs(uninterrupted))
    ckpt = osp.join(uninterrupted, 'epoch_3.pth')
    state = state_dict(ckpt)
    extra = {k.replace('layers.1.', 'layers.2.'): v
             for k, v in state.items() if '.layers.1.' in k}
    state.update(extra)
    deeper = str(tmp_path / 'deeper.pth')
    torch.save({'state_dict': state}, deeper)
    proc = run_tool('tools/test.py', config, deeper, '--work-dir',
                    str(tmp_path / 'test'))
    assert proc.returncode == 1, explain(proc)
    error = proc.stderr.strip().splitlines()[-1]
    assert error.startswith(f'test.py: error: {deeper}'), explain(proc)
    assert f'{len(extra)} not in the module (backbone.layers.' in error
    assert 'accuracy' not in proc.stdout


DAMAGES = ['empty', 'truncated', 'garbage']


def damage(path, how):
    """Empty the file, cut it to its first half, or overwrite it with bytes
    that are no checkpoint."""
    with open(path, 'rb') as f:
        data = f.read()
    data = dict(empty=b'', truncated=data[:len(data) // 2],
                garbage=b'no checkpoint ' * 300)[how]
    with open(path, 'wb') as f:
        f.write(data)


@pytest.fixture
def resumed(tiny, monkeypatch):
    """``resumed(work_dir, *argv)``: the config that tools/train.py (run
    in-process) trains with ``--work-dir work_dir --resume *argv``, and the
    warnings it logged."""
    train, config, warnings = load_script('tools/train.py'), tiny[1], []
    monkeypatch.setattr(resume, 'print_log',
                        lambda msg, logger=None, level=None:
                        warnings.append(msg))

    def run(work_dir, *argv):
        args = train.parse_args(
            [config, '--work-dir', str(work_dir), '--resume', *argv])
        return train.merge_args(train.Config.fromfile(config), args), warnings

    return run


@pytest.mark.parametrize('how', DAMAGES)
def test_resume_steps_over_damaged_latest(how, uninterrupted, tmp_path,
                                          resumed):
    work_dir = str(tmp_path / 'work')
    shutil.copytree(uninterrupted, work_dir,
                    ignore=shutil.ignore_patterns('2*'))
    with open(osp.join(work_dir, 'last_checkpoint'), 'w') as f:
        f.write(osp.join(work_dir, 'epoch_3.pth'))
    latest = osp.join(work_dir, 'epoch_3.pth')
    damage(latest, how)

    cfg, (warning, ) = resumed(work_dir)
    assert cfg.resume and cfg.load_from == osp.join(work_dir, 'epoch_2.pth')
    assert (f'--resume: the latest checkpoint {latest} (named in '
            f'{work_dir}/last_checkpoint) cannot be loaded: ') in warning
    assert (f'Resuming from {work_dir}/epoch_2.pth, the newest intact '
            'checkpoint of the work dir; the epochs (or iterations) after it '
            'are trained again.') in warning

    # given explicitly, a damaged checkpoint is an error that names it
    with pytest.raises(SystemExit) as error:
        resumed(tmp_path / 'other', latest)
    message = str(error.value)
    assert message.startswith(f'train.py: error: --resume: {latest}: ')
    assert f'({osp.getsize(latest)} bytes' in message
    assert '--resume without a path' in message

    # every checkpoint damaged: an error naming them and what to do
    for name in ('epoch_1.pth', 'epoch_2.pth'):
        damage(osp.join(work_dir, name), how)
    with pytest.raises(SystemExit) as error:
        resumed(work_dir)
    message = str(error.value)
    assert f'no intact checkpoint to resume from in {work_dir}' in message
    for epoch in (1, 2, 3):
        assert f'{work_dir}/epoch_{epoch}.pth: ' in message
    assert 'delete or move the damaged files' in message


@pytest.mark.parametrize('case', ['no record', 'copied', 'first launch'])
def test_resume_finds_the_checkpoint_of_its_work_dir(uninterrupted, tmp_path,
                                                     resumed, case):
    """``last_checkpoint`` missing (the run died before writing it, or it
    was deleted): the newest checkpoint, not a restart that would overwrite
    them. A copied work dir, whose ``last_checkpoint`` (an absolute path)
    names the original's checkpoint: this work dir's copy, never the other
    directory's file. A job that always passes ``--resume`` (preemptible),
    first launch: the config's ``load_from`` (mmengine would drop it and
    start from random weights)."""
    work_dir = str(tmp_path / 'work')
    if case != 'first launch':
        shutil.copytree(uninterrupted, work_dir,
                        ignore=shutil.ignore_patterns('2*'))
    if case == 'no record':
        os.remove(osp.join(work_dir, 'last_checkpoint'))
    pretrained = osp.join(uninterrupted, 'epoch_1.pth')
    cfg, (warning, ) = resumed(work_dir, '--cfg-options',
                               f'load_from={pretrained}')
    if case == 'first launch':
        assert not cfg.resume and cfg.load_from == pretrained
        assert warning == (f'--resume: no checkpoint in {work_dir} yet, '
                           f'training starts from load_from={pretrained}')
        return
    assert cfg.resume and cfg.load_from == osp.join(work_dir, 'epoch_3.pth')
    assert {'no record': 'last_checkpoint is missing',
            'copied': 'outside the work dir'}[case] in warning
    assert work_dir in warning


def test_resume_from_another_model_is_refused(tiny, uninterrupted,
                                              tmp_path):
    """A checkpoint whose tensors do not all fit the model (another number
    of classes) stops the run, where mmengine would load what fits and
    train on with the rest at random (one with tensors the model lacks, a
    deeper one: refused by the same check in tools/test.py, above)."""
    _, config = tiny
    ckpt = osp.join(uninterrupted, 'epoch_1.pth')
    proc = run_tool('tools/train.py', config, '--work-dir',
                    str(tmp_path / 'work'), '--resume', ckpt,
                    '--cfg-options', 'model.head.num_classes=3',
                    'data_preprocessor.num_classes=3')
    assert proc.returncode == 1, explain(proc)
    assert 'Traceback' not in proc.stderr, explain(proc)
    error = proc.stderr.strip().splitlines()[-1]
    assert error.startswith(f'train.py: error: {ckpt}'), explain(proc)
    assert '2 of another shape (head.fc.weight, head.fc.bias)' in error
