"""The launch scripts, run as a user runs them.

``bash tools/dist_train.sh CONFIG 2`` trains with two gloo processes on the
CPU, two images each, and must follow one process of ``tools/train.py`` with
four images per iteration: the same losses and weights up to float
rounding. (DefaultSampler(shuffle=False) gives rank r the samples r, r + 2,
... of the global order; the loss is a mean over the batch and DDP averages
the ranks' gradients; the model has no BatchNorm, dropout, drop path or
random augmentation.) ``tools/dist_test.sh`` with two processes predicts
what one process predicts, in the data set's order. Also: every shell
script parses, the Slurm scripts hand srun (a fake) what mmdet's do, and the
scripts' choice of python.
"""
import glob
import os
import os.path as osp
import pickle
import re
import shutil
import socket
import stat
import subprocess
import sys

import pytest

from mmcpvt.datasets.synthetic.imagenet import make_imagenet
from tests.utils import ROOT, explain, free_port, run_tool

BASE_CONFIG = osp.join(ROOT, 'configs', 'cpvt',
                       'cpvt-tiny-gap-p0-4_4xb256_in1k.py')
NUM_CLASSES = 4
SIZE = 32
GLOBAL_BATCH = 4

# Deterministic training: no Mixup/CutMix (model.train_cfg), no random
# transform, no drop path, plain cross-entropy, SGD at a constant rate, a
# fixed sample order. env_cfg.dist_cfg.backend stays the base's 'nccl': on
# CPUs mmcpvt must switch to gloo. log_level DEBUG makes every rank write its
# own log; window_size=1 logs each iteration's loss, num_digits=8 all of its
# float32 digits.
TEST_CONFIG = """\
_base_ = {base!r}

data_root = {data_root!r}
model = dict(
    backbone=dict(
        arch=dict(_delete_=True, embed_dims=32, num_layers=2, num_heads=2,
                  feedforward_channels=64),
        img_size={size}, peg_positions=(0, ), drop_path_rate=0.),
    head=dict(num_classes={k}, in_channels=32,
              loss=dict(_delete_=True, type='CrossEntropyLoss')),
    train_cfg=None)
data_preprocessor = dict(num_classes={k})

pipeline = [dict(type='LoadImageFromFile'), dict(type='PackInputs')]
loader = dict(num_workers=0, persistent_workers=False)
train_dataloader = dict(
    **loader, batch_size={batch},
    sampler=dict(_delete_=True, type='DefaultSampler', shuffle=False),
    dataset=dict(data_root=data_root, pipeline=pipeline))
test_dataloader = dict(
    **loader, batch_size=4,
    dataset=dict(data_root=data_root, pipeline=pipeline))
test_evaluator = dict(type='Accuracy', topk=(1, ))
val_cfg = None
val_dataloader = None
val_evaluator = None

optim_wrapper = dict(
    _delete_=True, optimizer=dict(type='SGD', lr=0.1, momentum=0.9))
param_scheduler = []
train_cfg = dict(max_epochs=2, val_interval=100)
default_hooks = dict(logger=dict(interval=1), checkpoint=dict(interval=1))
log_processor = dict(window_size=1, num_digits=8)
log_level = 'DEBUG'
randomness = dict(seed=0)
"""

# float32 rounding: the 2-process gradient is the mean of two means over two
# images, the 1-process one a mean over four; 8 SGD steps with momentum
# (measured max |delta|: see the report printed by the test)
ATOL = 1e-5


def _env(**extra):
    """The environment of a user with the virtual env activated, one thread
    a process, and no GPU visible (the CPU path on any machine)."""
    env = dict(os.environ, OMP_NUM_THREADS='1', MKL_NUM_THREADS='1',
               CUDA_VISIBLE_DEVICES='')
    env.pop('PYTHON', None)
    env['PATH'] = osp.dirname(sys.executable) + os.pathsep + env['PATH']
    env.update(extra)
    return env


def _bash(script, *args, env=None, timeout=300, cwd=ROOT):
    return subprocess.run(['bash', script, *args], cwd=cwd,
                          env=env if env is not None else _env(),
                          capture_output=True, text=True, timeout=timeout)


def _rank_losses(work_dir):
    """{rank: [loss of each iteration]} from the text log of every rank."""
    losses = {}
    for path in sorted(glob.glob(osp.join(work_dir, '*', '*.log'))):
        match = re.search(r'_rank(\d+)\.log$', path)
        rank = int(match.group(1)) if match else 0
        with open(path) as f:
            losses[rank] = [
                float(loss) for loss in re.findall(
                    r'Epoch\(train\) +\[\d+\]\[ *\d+/\d+\].*\sloss: (\S+)',
                    f.read())
            ]
    return losses


def _weights(path):
    import torch

    import mmcpvt  # noqa: F401  (allow-lists mmengine's checkpoint types)
    return torch.load(path, map_location='cpu',
                      weights_only=True)['state_dict']


def _max_delta(a, b):
    assert a.keys() == b.keys()
    return max((a[k].double() - b[k].double()).abs().max().item() for k in a)


@pytest.fixture(scope='module')
def runs(tmp_path_factory):
    """One process (tools/train.py, batch 4) and two processes
    (tools/dist_train.sh, batch 2 each) on the same config."""
    tmp = tmp_path_factory.mktemp('dist')
    data_root = str(tmp / 'imagenet')
    make_imagenet(data_root, num_classes=NUM_CLASSES, train_per_class=4,
                  val_per_class=3, size=SIZE, seed=0)
    config = tmp / 'cpvt_tiny_dist_test.py'
    config.write_text(
        TEST_CONFIG.format(base=BASE_CONFIG, data_root=data_root, size=SIZE,
                           k=NUM_CLASSES, batch=GLOBAL_BATCH))
    config = str(config)
    one, two = str(tmp / 'one'), str(tmp / 'two')

    proc = run_tool('tools/train.py', config, '--work-dir', one)
    assert proc.returncode == 0, explain(proc)
    proc = _bash('tools/dist_train.sh', config, '2', '--work-dir', two,
                 '--cfg-options',
                 f'train_dataloader.batch_size={GLOBAL_BATCH // 2}',
                 env=_env(PORT=str(free_port())))
    assert proc.returncode == 0, explain(proc)
    return dict(config=config, one=one, two=two, train_output=proc.stdout)


def test_dist_train_on_cpu_matches_one_process(runs):
    one, two = runs['one'], runs['two']
    # the config's nccl was replaced, and said so
    assert "backend='nccl' needs one, the processes use 'gloo'" in \
        runs['train_output']
    assert '2 CPU processes (pytorch launcher, gloo backend)' in \
        runs['train_output']

    # 16 images, 4 a step: 4 iterations an epoch, 2 epochs
    losses_one, losses_two = _rank_losses(one), _rank_losses(two)
    assert sorted(losses_one) == [0] and sorted(losses_two) == [0, 1]
    assert len(losses_one[0]) == 8, losses_one
    assert len(losses_two[0]) == len(losses_two[1]) == 8, losses_two
    # each rank logs the loss of its own two images; their mean is the loss
    # of the four
    mean_two = [(a + b) / 2 for a, b in zip(losses_two[0], losses_two[1])]
    loss_delta = max(abs(a - b) for a, b in zip(losses_one[0], mean_two))
    # not vacuous: the ranks did see different images
    assert max(abs(a - b) for a, b in zip(losses_two[0], losses_two[1])) \
        > 100 * ATOL

    weight_deltas = {}
    for epoch in (1, 2):
        ckpt = f'epoch_{epoch}.pth'
        weight_deltas[epoch] = _max_delta(
            _weights(osp.join(one, ckpt)), _weights(osp.join(two, ckpt)))
    # not vacuous: training moved the weights far more than the tolerance
    moved = _max_delta(_weights(osp.join(one, 'epoch_1.pth')),
                       _weights(osp.join(one, 'epoch_2.pth')))
    print(f'\n1 vs 2 processes: max |delta| of the losses {loss_delta:.3g}, '
          f'of the weights {weight_deltas[1]:.3g} (epoch 1), '
          f'{weight_deltas[2]:.3g} (epoch 2); weights moved {moved:.3g} in '
          'epoch 2')
    assert loss_delta < ATOL, (losses_one, mean_two)
    assert max(weight_deltas.values()) < ATOL, weight_deltas
    assert moved > 100 * ATOL


def test_dist_test_on_cpu_matches_one_process(runs, tmp_path):
    """Two processes predict what one process of tools/test.py predicts,
    in the data set's order: the results gathered from the ranks are put
    back in order. Beside a training of their work dir (this process stands
    for it), they leave its lock alone."""
    config, ckpt = runs['config'], osp.join(runs['two'], 'epoch_2.pth')
    preds, me = {}, f'{socket.gethostname()} {os.getpid()}'
    for n in (1, 2):
        out, work_dir = str(tmp_path / f'preds{n}.pkl'), tmp_path / f'test{n}'
        work_dir.mkdir()
        (work_dir / '.train.lock').write_text(me)
        args = [config, ckpt, '--work-dir', str(work_dir), '--out', out]
        proc = (run_tool('tools/test.py', *args) if n == 1 else
                _bash('tools/dist_test.sh', *args[:2], '2', *args[2:],
                      env=_env(PORT=str(free_port()))))
        assert proc.returncode == 0, explain(proc)
        assert re.search(r'accuracy/top1: [\d.]+', proc.stdout), explain(proc)
        assert (work_dir / '.train.lock').read_text() == me
        with open(out, 'rb') as f:
            preds[n] = pickle.load(f)
    assert len(preds[2]) == NUM_CLASSES * 3
    assert [p['sample_idx'] for p in preds[2]] == list(range(len(preds[2])))
    for two, one in zip(preds[2], preds[1]):
        assert (two['pred_score'] - one['pred_score']).abs().max() < ATOL


SCRIPTS = ('dist_train.sh', 'dist_test.sh', 'slurm_train.sh',
           'slurm_test.sh', 'find_python.sh')


def test_shell_scripts_parse():
    scripts = glob.glob(osp.join(ROOT, 'tools', '**', '*.sh'),
                        recursive=True)
    assert {osp.basename(s) for s in scripts} >= set(SCRIPTS)
    for script in scripts:
        proc = subprocess.run(['bash', '-n', script], capture_output=True,
                              text=True)
        assert proc.returncode == 0, f'{script}: {proc.stderr}'


def _fake_srun(tmp_path):
    """A srun on PATH that writes its arguments, one a line, and the
    PYTHONPATH it was given to $SRUN_LOG."""
    bin_dir = tmp_path / 'bin'
    bin_dir.mkdir()
    srun = bin_dir / 'srun'
    srun.write_text('#!/bin/sh\nprintf "%s\\n" "$@" > "$SRUN_LOG"\n'
                    'echo "PYTHONPATH=$PYTHONPATH" >> "$SRUN_LOG"\n')
    srun.chmod(srun.stat().st_mode | stat.S_IEXEC)
    return str(bin_dir)


@pytest.mark.parametrize('tool', ['train', 'test'])
def test_slurm_script_arguments(tool, tmp_path):
    log = str(tmp_path / 'srun.log')
    env = _env(SRUN_LOG=log, GPUS='4', GPUS_PER_NODE='2', CPUS_PER_TASK='3',
               SRUN_ARGS='--qos=low --time=10', PYTHON=sys.executable)
    env['PATH'] = _fake_srun(tmp_path) + os.pathsep + env['PATH']
    fourth = 'work_dirs/x' if tool == 'train' else 'x.pth'
    proc = _bash(f'tools/slurm_{tool}.sh', 'part', 'job', 'cfg.py', fourth,
                 '--cfg-options', 'a=1', env=env, timeout=60)
    assert proc.returncode == 0, explain(proc)
    with open(log) as f:
        args = f.read().splitlines()
    script_args = (['cfg.py', '--work-dir=work_dirs/x'] if tool == 'train'
                   else ['cfg.py', 'x.pth'])
    assert args[:-1] == [
        '-p', 'part', '--job-name=job', '--gres=gpu:2', '--ntasks=4',
        '--ntasks-per-node=2', '--cpus-per-task=3', '--kill-on-bad-exit=1',
        '--qos=low', '--time=10', sys.executable, '-u',
        osp.join('tools', f'{tool}.py'), *script_args, '--launcher=slurm',
        '--cfg-options', 'a=1'
    ]
    assert args[-1].startswith('PYTHONPATH=tools/..')


def _executable(path, text):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    path.chmod(path.stat().st_mode | stat.S_IEXEC)


def test_python_choice(tmp_path):
    """PYTHON, else `python` on PATH if it has torch, else the repository's
    .venv/bin/python, else an error that says what to do."""
    repo = tmp_path / 'repo'
    _executable(repo / 'tools' / 'which.sh',
                'source "$(dirname "$0")/find_python.sh"\necho "$PYTHON"\n')
    shutil.copy(osp.join(ROOT, 'tools', 'find_python.sh'), repo / 'tools')
    no_torch = tmp_path / 'no_torch' / 'python'
    _executable(no_torch, '#!/bin/sh\nexit 1\n')
    system, without = '/usr/bin:/bin', f'{no_torch.parent}:/usr/bin:/bin'
    venv_python = repo / '.venv' / 'bin' / 'python'

    def which(path, **extra):
        proc = subprocess.run(['bash', str(repo / 'tools' / 'which.sh')],
                              env=dict(PATH=path, **extra),
                              capture_output=True, text=True)
        return proc.returncode, proc.stdout.strip() or proc.stderr

    # an activated environment with torch
    assert which(osp.dirname(sys.executable) + ':' + system) == (0, 'python')
    # `python` without torch and no .venv: what to do
    code, err = which(without)
    assert code == 1 and 'no python with torch' in err
    assert 'source .venv/bin/activate' in err
    assert 'PYTHON=/path/to/python' in err
    # ... with the repository's .venv
    _executable(venv_python, f'#!/bin/sh\nexec {sys.executable} "$@"\n')
    assert which(without) == (0, str(venv_python))
    # PYTHON is used when set, and never replaced when it has no torch
    assert which(system, PYTHON=sys.executable) == (0, sys.executable)
    code, err = which(system, PYTHON=str(no_torch))
    assert code == 1 and f'PYTHON={no_torch} cannot import torch' in err


NODE_RANK = ('dist_train.sh: NODE_RANK={}: the rank of this node must be 0 '
             'to 0 (NNODES=1 nodes)\n')


@pytest.mark.parametrize('script, args, env, rc, expected', [
    # it used to end in torchrun's bare AssertionError
    ('dist_train.sh', ['CONFIG', '0'], {}, 2, 'GPUS=0: the number of '
     'processes must be a positive integer'),
    ('dist_test.sh', ['CONFIG', 'CKPT', 'two'], {}, 2, 'GPUS=two: the number '
     'of processes must be a positive integer'),
    # it used to wait forever for a node that cannot join
    *[('dist_train.sh', ['CONFIG', '1'], dict(NNODES='1', NODE_RANK=rank), 2,
       NODE_RANK.format(rank)) for rank in ('5', '1', 'x')],
    ('slurm_train.sh', ['part', 'job', 'cfg.py'], {}, 2, 'usage:'),
    # it printed nothing and started pip download into a folder named --help
    ('install/gpu_wheels.sh', ['--help'], dict(PY='false'), 0,
     'usage: tools/install/gpu_wheels.sh [PYTHON_VERSION [DIR]]'),
])
def test_script_refusals_and_help(tmp_path, script, args, env, rc, expected):
    proc = _bash(osp.join(ROOT, 'tools', script), *args, env=_env(**env),
                 timeout=60, cwd=tmp_path)
    assert proc.returncode == rc, explain(proc)
    assert expected in proc.stdout + proc.stderr, explain(proc)
    assert 'Traceback' not in proc.stderr
    assert os.listdir(tmp_path) == []
