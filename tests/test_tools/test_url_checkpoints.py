"""A checkpoint given by URL never runs its pickle, on any path of ours.

mmengine loads ``http(s)://`` checkpoints through
``torch.hub.load_state_dict_from_url``, which turns ``weights_only`` off.
A pickle whose ``__reduce__`` calls ``os.system`` is served over http on
127.0.0.1 and given to every entry point: ``tools/train.py``
(``load_from``, ``--resume URL``, ``--resume`` where the work dir's
``last_checkpoint`` names it), ``tools/test.py``, mmpretrain's own
``tools/train.py`` on one of our configs with ``load_from`` or ``--resume``
(our ``CheckpointLoadHook`` is named by the config), the ONNX export and an
analysis tool (a backbone's ``init_cfg``: test_checkpoint_safety.py). Each
must fail and leave the payload unrun. Every process downloads into its own
``TORCH_HOME``: nothing is cached between paths.
"""
import os
import os.path as osp

import pytest
import torch

from tests.test_tools.test_eval_resolutions import SIZE, tiny_cls_config
from tests.utils import RunsCode, explain, run_tool, serve


@pytest.fixture(scope='module')
def served(tmp_path_factory):
    """(URL of the malicious checkpoint, the file its payload would
    create, a tiny classifier config)."""
    root = tmp_path_factory.mktemp('served')
    marker = root / 'payload_ran'
    torch.save({'state_dict': {'w': torch.ones(1)}, 'x': RunsCode(marker)},
               root / 'evil.pth')
    # the control's own copy, with its own marker
    torch.save({'x': RunsCode(root / 'control_ran')}, root / 'control.pth')
    config = tiny_cls_config(root)
    with serve(root) as base:
        yield f'{base}/evil.pth', marker, config


def _run(tmp_path, *args):
    """A tool as a user runs it, with its own download cache."""
    os.environ['TORCH_HOME'] = str(tmp_path / 'torch_home')
    try:
        return run_tool(*args, timeout=300)
    finally:
        del os.environ['TORCH_HOME']


def _recorded(work_dir, url):
    """``work_dir``, its ``last_checkpoint`` naming ``url`` (poisoned: the
    user types no URL, ``--resume`` finds it there)."""
    os.makedirs(work_dir, exist_ok=True)
    with open(osp.join(work_dir, 'last_checkpoint'), 'w') as f:
        f.write(url)
    return work_dir


MMPRETRAIN_TRAIN = lambda: osp.join(  # noqa: E731
    osp.dirname(__import__('mmpretrain').__file__), '.mim', 'tools',
    'train.py')

ENTRY_POINTS = {
    'train.py load_from': lambda url, cfg, w: [
        'tools/train.py', cfg, '--work-dir', w, '--cfg-options',
        f'load_from={url}'],
    'train.py --resume': lambda url, cfg, w: [
        'tools/train.py', cfg, '--work-dir', w, '--resume', url],
    'test.py': lambda url, cfg, w: [
        'tools/test.py', cfg, url, '--work-dir', w],
    'train.py --resume, last_checkpoint': lambda url, cfg, w: [
        'tools/train.py', cfg, '--work-dir', _recorded(w, url), '--resume'],
    'mmpretrain train.py': lambda url, cfg, w: [
        MMPRETRAIN_TRAIN(), cfg, '--work-dir', w, '--cfg-options',
        f'load_from={url}'],
    'mmpretrain train.py --resume, last_checkpoint': lambda url, cfg, w: [
        MMPRETRAIN_TRAIN(), cfg, '--work-dir', _recorded(w, url),
        '--resume'],
    'pytorch2onnx.py': lambda url, cfg, w: [
        'tools/deployment/pytorch2onnx.py', cfg, url,
        '--output-file', osp.join(w, 'model.onnx')],
    'eval_resolutions.py': lambda url, cfg, w: [
        'tools/analysis_tools/eval_resolutions.py', cfg, url, '--sizes',
        str(SIZE), '--out-dir', w],
}


@pytest.mark.parametrize('entry', list(ENTRY_POINTS))
def test_url_checkpoint_never_runs_its_pickle(served, tmp_path, entry):
    url, marker, config = served
    work_dir = str(tmp_path / 'work')
    proc = _run(tmp_path, *ENTRY_POINTS[entry](url, config, work_dir))
    assert not marker.exists(), f'{entry} ran the checkpoint\'s code'
    assert proc.returncode != 0, explain(proc)
    copy = tmp_path / 'torch_home' / 'hub' / 'checkpoints' / 'evil.pth'
    assert osp.isfile(copy), explain(proc)
    if not entry.startswith('mmpretrain'):  # theirs ends in torch's error
        # our tools name the URL, the copy and what it refers to
        error = proc.stderr.strip().splitlines()[-1]
        assert f'{url}, downloaded to {copy}' in error, explain(proc)
        assert 'posix.system' in error, explain(proc)
        assert 'Traceback' not in proc.stderr, explain(proc)


def test_control_mmengine_alone_runs_the_pickle(served, tmp_path,
                                                monkeypatch):
    """The threat is real: mmengine's http loader, outside our tools and
    hooks, unpickles without weights_only and runs the payload."""
    from mmengine.runner.checkpoint import load_from_http
    url, marker, _ = served
    monkeypatch.setenv('TORCH_HOME', str(tmp_path / 'torch_home'))
    monkeypatch.delenv('TORCH_FORCE_WEIGHTS_ONLY_LOAD', raising=False)
    load_from_http(url.replace('evil.pth', 'control.pth'))
    assert (marker.parent / 'control_ran').exists()
