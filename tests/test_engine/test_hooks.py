"""mmcpvt/engine (hooks, the runner's lock) and what ``import mmcpvt``
leaves alone.

Importing mmcpvt registers its modules and changes nothing else: mmengine's
file backends and checkpoint loaders and mmpretrain's model hub methods are
the very objects they were. What mmcpvt adds to a run comes from the hooks
and the runner its configs name: weights-only loads, the runner's
checkpoint loaded whole, the work-dir lock.
"""
import os
import os.path as osp
import socket
import subprocess
import sys
from types import SimpleNamespace

import pytest
import torch
from mmengine.config import Config

from mmcpvt.engine import CheckpointLoadHook, WorkDirInUseError, work_dir_lock
from mmcpvt.engine.runner import LOCK
from mmcpvt.utils.checkpoint import CheckpointMismatchError
from tests.utils import ROOT, explain

SNAPSHOT = '''
import mmengine.fileio.backends.registry_utils as files
from mmengine.runner import CheckpointLoader
from mmpretrain.apis.model import ModelHub
before = (dict(files.backends), dict(files.prefix_to_backends),
          dict(CheckpointLoader._schemes), dict(vars(ModelHub)))
import mmcpvt
after = (dict(files.backends), dict(files.prefix_to_backends),
         dict(CheckpointLoader._schemes), dict(vars(ModelHub)))
for name, old, new in zip(('backends', 'prefixes', 'schemes', 'ModelHub'),
                          before, after):
    changed = sorted(k for k in old if new.get(k) is not old[k])
    added = sorted(set(new) - set(old))
    print(name, changed, added)
from mmpretrain import list_models
print('listed', 'cpvt-tiny_4xb256_in1k' in list_models())
'''


def test_import_changes_nothing_in_mmengine():
    """A user who adds ``custom_imports=dict(imports=['mmcpvt'])`` to a
    config of their own gets mmengine's own saving and loading; mmcpvt adds
    one backend under its own name, and its classifiers to mmpretrain's hub
    through ``ModelHub.register_model_index`` (not by replacing a
    method)."""
    proc = subprocess.run([sys.executable, '-c', SNAPSHOT], cwd=ROOT,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, explain(proc)
    lines = proc.stdout.strip().splitlines()[-5:]
    assert lines == [
        "backends [] ['mmcpvt_atomic']", 'prefixes [] []', 'schemes [] []',
        "ModelHub [] []", 'listed True'
    ], explain(proc)


@pytest.fixture
def runner(tmp_path):
    return SimpleNamespace(cfg=Config(), work_dir=str(tmp_path), rank=0,
                           model=torch.nn.Linear(2, 2))


def test_checkpoint_load_hook(runner, tmp_path, monkeypatch):
    """torch's setting made weights-only while the run loads and restored
    when its loop starts; the checkpoint the runner read loaded whole, or
    refused naming what does not fit and leaving the model as it was."""
    monkeypatch.delenv('TORCH_FORCE_WEIGHTS_ONLY_LOAD', raising=False)
    monkeypatch.setenv('TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD', '1')
    hook = CheckpointLoadHook()
    runner.cfg = Config(dict(resume=True))
    (tmp_path / 'last_checkpoint').write_text(str(tmp_path / 'epoch_1.pth'))
    hook.before_run(runner)
    assert os.environ['TORCH_FORCE_WEIGHTS_ONLY_LOAD'] == '1'
    assert 'TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD' not in os.environ
    assert hook.checkpoint == str(tmp_path / 'epoch_1.pth')

    state = {'module.weight': torch.ones(2, 2), 'module.bias': torch.ones(2)}
    hook.after_load_checkpoint(runner, {'state_dict': state, 'meta': {}})
    assert runner.model.weight.eq(1).all() and hook.checkpoint is None
    before = runner.model.weight.clone()
    with pytest.raises(CheckpointMismatchError) as e:
        hook.after_load_checkpoint(runner, {'state_dict': {
            'weight': torch.zeros(2, 2), 'bias': torch.zeros(3)}})
    assert 'bias' in str(e.value) and '1 of another shape' in str(e.value)
    assert torch.equal(runner.model.weight, before)
    for end in ('before_train', 'before_val', 'before_test', 'after_run'):
        getattr(hook, end)(runner)  # loading is over
        assert 'TORCH_FORCE_WEIGHTS_ONLY_LOAD' not in os.environ
        assert os.environ['TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD'] == '1'
        hook.before_run(runner)
    hook.release()


def test_second_training_in_a_work_dir_is_refused(tmp_path):
    lock = tmp_path / LOCK
    other = os.getppid()  # a process that runs: the first training
    lock.write_text(f'{socket.gethostname()} {other}')
    with pytest.raises(WorkDirInUseError) as e:
        with work_dir_lock(str(tmp_path)):
            pass
    msg = str(e.value)
    assert str(tmp_path) in msg and str(other) in msg and str(lock) in msg
    lock.unlink()
    with work_dir_lock(str(tmp_path)):  # free again
        assert lock.read_text() == f'{socket.gethostname()} {os.getpid()}'
        assert os.listdir(tmp_path) == [LOCK]  # nothing aside
    assert not lock.exists()


@pytest.mark.parametrize('left', ['ended process', 'empty', 'unreadable'])
def test_what_a_killed_run_left_is_taken_over(tmp_path, left):
    """A killed run's lock, and one left empty or unreadable (a kill between
    making and writing it, as locks were once made), is stale; the
    temporary file of a save killed midway (atomic_write's
    '.<name>.<random>.tmp') is removed once the next run holds the lock."""
    ended = subprocess.run([sys.executable, '-c', 'import os; '
                            'print(os.getpid())'], capture_output=True,
                           text=True, check=True).stdout.strip()
    lock = tmp_path / LOCK
    lock.write_bytes({'ended process': f'{socket.gethostname()} {ended}'
                      .encode(), 'empty': b'',
                      'unreadable': b'\xff\xfe'}[left])
    orphan = tmp_path / '.iter_4.pth.k2j3h4.tmp'
    orphan.write_bytes(b'\0' * 1000)
    kept = tmp_path / 'iter_2.pth'
    kept.write_bytes(b'')
    with work_dir_lock(str(tmp_path)):  # a warning, no error
        assert lock.read_text().split()[1] == str(os.getpid())
        assert not orphan.exists() and kept.exists()
    assert not lock.exists()


def test_train_tool_locks_before_it_writes_the_config(tmp_path):
    """tools/train.py refuses a work dir in use before the runner dumps the
    config there (it used to overwrite the running training's copy), with a
    config of its own that names no runner too."""
    base = osp.join(ROOT, 'configs', 'cpvt', 'cpvt-tiny_4xb256_in1k.py')
    own = tmp_path / 'configs' / 'own.py'  # names no runner, no hooks
    own.parent.mkdir()
    cfg = Config.fromfile(base).to_dict()
    del cfg['runner_type'], cfg['default_hooks']
    Config(cfg).dump(str(own))
    (tmp_path / LOCK).write_text(f'{socket.gethostname()} {os.getpid()}')
    for config in (base, str(own)):
        dumped = tmp_path / osp.basename(config)
        dumped.write_text('# the running training\'s config\n')
        proc = subprocess.run(
            [sys.executable, 'tools/train.py', str(config), '--work-dir',
             str(tmp_path)], cwd=ROOT, capture_output=True, text=True,
            timeout=300)
        assert proc.returncode == 1, explain(proc)
        assert proc.stderr.strip().splitlines()[-1].startswith(
            f'train.py: error: work dir {tmp_path} is in use'), explain(proc)
        assert str(os.getpid()) in proc.stderr
        assert dumped.read_text() == '# the running training\'s config\n'


@pytest.mark.parametrize('resumed, persistent, loop, warned', [
    (True, True, 'epoch', True), (False, True, 'epoch', False),
    (True, False, 'epoch', False), (True, True, 'iter', False)])
def test_an_inexact_resume_is_said_once(monkeypatch, resumed, persistent,
                                        loop, warned):
    """Epoch-based with persistent data workers, a resumed run cannot draw
    the uninterrupted run's augmentation (docs/checkpoints.md)."""
    from mmengine.runner import EpochBasedTrainLoop, IterBasedTrainLoop

    import mmcpvt.engine.hooks as hooks
    logged = []
    monkeypatch.setattr(hooks, 'print_log', lambda msg, **k: logged.append(
        msg))
    kind = EpochBasedTrainLoop if loop == 'epoch' else IterBasedTrainLoop
    runner = SimpleNamespace(
        iter=8 * resumed, train_loop=kind.__new__(kind),
        train_dataloader=SimpleNamespace(persistent_workers=persistent))
    hooks.SeedHook().before_train(runner)
    assert len(logged) == warned
    assert not warned or 'resumed at iteration 8 with persistent' in logged[0]
