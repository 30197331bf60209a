"""Checkpoints load safely and loudly and are never half-written
(mmcpvt/utils/checkpoint.py: ``load_weights``, the one place that loads
weights; mmcpvt/engine/hooks.py: ``CheckpointLoadHook``; tools/test.py).

Every loading path is exercised as the user reaches it: a backbone's
``init_cfg=dict(type='Pretrained')``, the runner's ``load_from`` and
``resume`` with the hook our configs name, ``tools/test.py``, the
converters and ``publish_model.py``. The tests assert the error's type and
the facts in it (the path, the keys, the counts), not its sentences.
Checkpoints served by URL: tests/test_tools/test_url_checkpoints.py.
"""
import functools
import io
import os
import re
import resource
import signal
import subprocess

import numpy as np
import pytest
import torch
from mmengine.fileio import get_file_backend
from mmengine.fileio.backends import LocalBackend
from mmengine.logging import MessageHub
from mmengine.runner import save_checkpoint

import mmcpvt  # noqa: F401  (allow-list, atomic backend)
from mmcpvt.engine import CheckpointLoadHook
from mmcpvt.registry import MODELS
from mmcpvt.utils.atomic import AtomicLocalBackend
from mmcpvt.utils.checkpoint import (BrokenCheckpointError, CheckpointError,
                                     CheckpointDownloadError,
                                     CheckpointMismatchError,
                                     UnsafeCheckpointError, load_weights,
                                     read_checkpoint)
from tests.utils import (ROOT, RunsCode, explain, free_port, load_script,
                         run_tool, serve)

TINY = dict(type='CPVT', arch=dict(embed_dims=32, num_layers=2, num_heads=2,
                                   feedforward_channels=64))


@functools.lru_cache()
def _tool(path):
    return load_script(path)


def _build(cfg=TINY, **kwargs):
    torch.manual_seed(0)
    return MODELS.build(dict(cfg, **kwargs))


PVT_T, PVT_S = (dict(type='PVTPEG', arch=dict(
    embed_dims=[8, 16, 24, 32], num_heads=[1, 2, 3, 4],
    mlp_ratios=[2, 2, 2, 2], depths=depths, sr_ratios=[8, 4, 2, 1]))
    for depths in ([1, 1, 1, 1], [2, 2, 2, 2]))


def _state(model):
    return {k: v.clone() for k, v in model.state_dict().items()}


def _unchanged(model, before):
    return all(torch.equal(v, before[k]) for k, v in
               model.state_dict().items())


# ------------------------------------------------------- fit of the keys


def test_strict_false_loads_what_fits_as_torch_documents():
    """A backbone's load_state_dict is torch's: strict=False loads what
    fits and reports the rest; official keys are not converted there."""
    tiny, small = _build(PVT_T), _build(PVT_S)
    result = tiny.load_state_dict(small.state_dict(), strict=False)
    assert result.missing_keys == []
    assert result.unexpected_keys and all(
        re.match(r'stages\.\d\.1\.', k) for k in result.unexpected_keys)
    for k, v in tiny.state_dict().items():
        assert torch.equal(v, small.state_dict()[k]), k
    with pytest.raises(RuntimeError):
        tiny.load_state_dict(small.state_dict())  # strict: torch's error
    official = {'blocks.0.attn.qkv.weight': torch.zeros(96, 32)}  # DeiT's
    result = _build().load_state_dict(official, strict=False)
    assert result.unexpected_keys == list(official)


@pytest.mark.parametrize('src, dst, keys, prefix, facts', [
    (PVT_T, dict(type='CPVT', arch='tiny'), 'backbone.', 'backbone.',
     ['only 0 of the 151 tensors of CPVT', 'patch_embeds.0.']),
    (TINY, TINY, 'backbone.', None, [  # the prefix left out
        'only 0 of the 31 tensors of CPVT', 'backbone.cls_token']),
    # the FFN biases (64 channels) fit, nothing else
    (dict(TINY, arch=dict(TINY['arch'], embed_dims=48)), TINY, 'backbone.',
     'backbone.', ['only 2 of the 31 tensors of CPVT', '29 of another shape']),
    (TINY, TINY, '', 'backbone.', ["prefix='backbone.'", 'cls_token']),
], ids=['another architecture', 'no prefix', 'another size', 'prefix absent'])
def test_a_pretrained_checkpoint_that_mostly_does_not_fit_is_refused(
        tmp_path, src, dst, keys, prefix, facts):
    path = tmp_path / 'cls.pth'
    torch.save({'state_dict': {keys + k: v for k, v in
                               _build(src).state_dict().items()}}, path)
    model = _build(dst, init_cfg=dict(type='Pretrained', checkpoint=str(path),
                                      prefix=prefix))
    with pytest.raises(CheckpointMismatchError) as e:
        model.init_weights()
    for fact in [str(path), *facts]:
        assert fact in str(e.value), (fact, str(e.value))


def test_a_pretrained_checkpoint_loads_what_fits_the_rest_keeps_its_init(
        tmp_path, monkeypatch):
    """A 3x3 PEG's checkpoint into a model with 7x7 PEGs after encoders 0
    and 1: the rest loads; the kernel of another shape and the PEG the
    checkpoint lacks (a DeiT into CPVT) keep the transformer init (zero
    bias, not PyTorch's uniform); one warning line names them."""
    from mmengine.logging import MMLogger
    src = _build()
    path = tmp_path / 'k3.pth'
    state = {f'backbone.{k}': v for k, v in src.state_dict().items()}
    torch.save({'state_dict': dict(state, **{
        'head.fc.weight': torch.zeros(10, 32)})}, path)
    warned = []
    monkeypatch.setattr(MMLogger.get_current_instance(), 'warning',
                        warned.append)
    model = _build(peg_positions=(0, 1), peg_cfg=dict(kernel_size=7),
                   init_cfg=dict(type='Pretrained', checkpoint=str(path),
                                 prefix='backbone.'))
    kernel = model.pegs['0'].proj[0].weight.clone()
    model.init_weights()
    assert not torch.equal(model.pegs['0'].proj[0].weight, kernel)  # init
    assert not model.pegs['1'].proj[0].bias.any()
    state = model.state_dict()
    for k, v in src.state_dict().items():
        if k != 'pegs.0.proj.0.weight':
            assert torch.equal(state[k], v), k
    line, = warned
    assert '\n' not in line and str(path) in line
    assert '1 of another shape (pegs.0.proj.0.weight)' in line, line
    assert '2 not in the checkpoint (pegs.1.proj.0.weight, ' \
        'pegs.1.proj.0.bias)' in line, line


def _runner(model, tmp_path):
    """An mmengine Runner of ``model`` with the hook our configs name."""
    from mmengine.runner import Runner
    return Runner(model=model, work_dir=str(tmp_path / 'runner'),
                  custom_hooks=[CheckpointLoadHook()])


def _runner_load(runner, path, resume=False):
    """``load_from`` (or ``resume``) as the runner runs it."""
    runner.cfg.merge_from_dict(dict(load_from=str(path), resume=resume))
    runner.call_hook('before_run')
    try:
        (runner.resume if resume else runner.load_checkpoint)(str(path))
    finally:
        runner.call_hook('after_run')


@pytest.mark.parametrize('src, dst, blocks', [
    (dict(TINY, arch=dict(TINY['arch'], num_layers=3)), TINY, ['layers.2']),
    (PVT_S, PVT_T, ['66 not in the module (stages.0.1.']),
    (PVT_T, PVT_S, ['66 not in the checkpoint (stages.0.1.']),
    (TINY, dict(TINY, type='SwinPEG', arch=dict(
        embed_dims=8, depths=[2, 2, 2, 2], num_heads=[1, 2, 2, 4])),
     ['cls_token']),
])
def test_a_checkpoint_of_another_model_is_refused_whole(tmp_path, monkeypatch,
                                                        src, dst, blocks):
    """Loaded whole (load_weights; the runner's load_from with our hook),
    the checkpoint must be of the model: of another depth or architecture,
    it is refused with the keys that do not fit, and nothing loads. As a
    Pretrained init_cfg, the part that fits loads, with one warning line."""
    path = tmp_path / 'src.pth'
    torch.save({'state_dict': _build(src).state_dict()}, path)
    model = _build(dst)
    before = _state(model)
    for load in (functools.partial(load_weights, model),
                 functools.partial(_runner_load, _runner(model, tmp_path))):
        with pytest.raises(CheckpointMismatchError) as e:
            load(str(path))
        assert str(path) in str(e.value)
        assert all(b in str(e.value) for b in blocks), str(e.value)
        assert _unchanged(model, before)
    if dst['type'] == 'SwinPEG':
        return
    from mmengine.logging import MMLogger
    warned = []
    monkeypatch.setattr(MMLogger.get_current_instance(), 'warning',
                        warned.append)
    _build(dst, init_cfg=dict(type='Pretrained',
                              checkpoint=str(path))).init_weights()
    line, = warned
    assert '\n' not in line and str(path) in line and blocks[0] in line


def test_the_runner_loads_a_checkpoint_of_its_model(tmp_path):
    """load_from of the model's own checkpoint (DDP-saved: ``module.``)."""
    src, dst = _build(), _build(TINY, init_cfg=None)
    torch.nn.init.ones_(src.cls_token)
    path = tmp_path / 'own.pth'
    torch.save({'state_dict': {f'module.{k}': v for k, v in
                               src.state_dict().items()}}, path)
    _runner_load(_runner(dst, tmp_path), path)
    assert _unchanged(dst, src.state_dict())


def test_test_tool_refuses_a_classifier_checkpoint_for_a_detector(
        tmp_path):
    """It used to exit 0 with mAP 0.000: the neck and head stayed random."""
    from tests.test_tools.test_det_seg_e2e import det_config
    config = det_config(tmp_path, 1, 1, 64)
    pvt = _build(dict(type='PVTPEG', arch='tiny', peg_positions=(0, 0, 0, 0),
                      out_type='featmap', out_indices=(0, 1, 2, 3)))
    ckpt = tmp_path / 'pvt_cls.pth'
    state = {f'backbone.{k}': v for k, v in pvt.state_dict().items()}
    state['head.fc.weight'] = torch.zeros(10, 512)
    torch.save({'state_dict': state}, ckpt)
    proc = run_tool('tools/test.py', str(config), str(ckpt), '--work-dir',
                    str(tmp_path / 'work'), timeout=240)
    assert proc.returncode != 0, explain(proc)
    assert 'Traceback' not in proc.stderr, explain(proc)
    error = proc.stderr.strip().splitlines()[-1]
    assert error.startswith(f'test.py: error: {ckpt}'), explain(proc)
    assert re.search(r'\d+ not in the checkpoint \(neck\.', error), error
    assert '1 not in the module (head.fc.weight)' in error, error
    assert 'bbox_mAP' not in proc.stdout


# ------------------------------------------------ code in a checkpoint


@pytest.fixture(scope='module')
def runner(tmp_path_factory):
    """A runner (for load_from and --resume) and a classifier config over
    generated data (for tools/test.py), made once."""
    from tests.test_tools.test_eval_resolutions import tiny_cls_config
    runner = _runner(torch.nn.Linear(2, 2), tmp_path_factory.mktemp('runner'))
    runner.test_config = tiny_cls_config(tmp_path_factory.mktemp('config'))
    return runner


def _load_paths(runner, tmp_path):
    """Each way a checkpoint file reaches torch.load: name -> load(path)."""
    def init_cfg(path):
        _build(init_cfg=dict(type='Pretrained',
                             checkpoint=str(path))).init_weights()

    def tool(script, *argv):
        """``script`` on ``argv`` (``{}``: the path); its exit a ValueError."""
        def run(path):
            try:
                _tool(script).main([a.format(path) for a in argv])
            except SystemExit as e:
                raise ValueError(str(e))
        return run

    return dict(
        init_cfg=init_cfg,
        load_from=functools.partial(_runner_load, runner),
        resume=functools.partial(_runner_load, runner, resume=True),
        test_tool=tool('tools/test.py', runner.test_config, '{}',
                       '--work-dir', str(tmp_path / 'test')),
        convert=tool('tools/model_converters/twins2mmcpvt.py', '{}',
                     str(tmp_path / 'out.pth')),
        publish=tool('tools/model_converters/publish_model.py', '{}',
                     str(tmp_path / 'pub.pth')),
        read_checkpoint=read_checkpoint)


# the runner's own reader (mmengine's) fails with torch's error: the tools
# name the file (test_tool), mmdet's and mmseg's tools show torch's error
OURS = ['init_cfg', 'test_tool', 'convert', 'publish', 'read_checkpoint']


@pytest.mark.parametrize('legacy', [False, True])
def test_code_in_a_checkpoint_never_runs(runner, tmp_path, monkeypatch,
                                         legacy):
    """On every path, even with torch's default switched off by its
    environment variable (mmengine's own loader would then run the code)."""
    import pickle
    monkeypatch.setenv('TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD', '1')
    marker = tmp_path / 'ran'
    path = tmp_path / 'evil.pth'
    torch.save({'state_dict': {'w': torch.ones(1)}, 'x': RunsCode(marker)},
               path, _use_new_zipfile_serialization=not legacy)
    for name, load in _load_paths(runner, tmp_path).items():
        with pytest.raises((ValueError, pickle.UnpicklingError)) as e:
            load(path)
        assert not marker.exists(), f'{name} ran the checkpoint\'s code'
        # the weights-only setting ends with the failed load
        assert 'TORCH_FORCE_WEIGHTS_ONLY_LOAD' not in os.environ, name
        assert os.environ['TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD'] == '1', name
        if name in OURS:
            assert isinstance(e.value, UnsafeCheckpointError) or name in (
                'test_tool', 'convert', 'publish'), name
            msg = str(e.value)
            assert str(path) in msg and 'nothing in it was run' in msg
            assert legacy or 'posix.system' in msg, (name, msg)


def _write_truncated(path, legacy):
    buf = io.BytesIO()
    torch.save({'state_dict': _build().state_dict()}, buf,
               _use_new_zipfile_serialization=not legacy)
    path.write_bytes(buf.getvalue()[:len(buf.getvalue()) // 2])


@pytest.mark.parametrize('kind', ['empty', 'half zip', 'half legacy',
                                  'random bytes', 'zip of numpy arrays'])
def test_a_damaged_file_or_no_checkpoint_is_named(runner, tmp_path, kind):
    """An interrupted save or download, and bytes that are no torch file,
    are named with their size, not as objects that could run code."""
    path = tmp_path / 'epoch_3.pth'
    if kind == 'empty':
        path.write_bytes(b'')  # torch: EOFError with an empty message
    elif kind == 'random bytes':
        path.write_bytes(bytes(range(7, 256)) * 4)
    elif kind == 'zip of numpy arrays':
        with open(path, 'wb') as f:
            np.savez(f, w=np.ones(2))
    else:
        _write_truncated(path, legacy=kind == 'half legacy')
    paths = _load_paths(runner, tmp_path)
    for name in OURS:
        with pytest.raises(ValueError) as e:
            paths[name](path)
        msg = str(e.value)
        assert isinstance(e.value, BrokenCheckpointError) or (
            name in ('convert', 'publish', 'test_tool')), name
        assert f'{path}: ' in msg and f'({path.stat().st_size} bytes' in msg
        assert 'nothing in it was run' not in msg, (name, msg)
    for name in ('load_from', 'resume'):  # the runner's reader: torch's error
        with pytest.raises(Exception):
            paths[name](path)


@pytest.mark.parametrize('obj,facts', [
    ([1, 2], ['list']),
    (torch.ones(3), ['Tensor']),
    ({'state_dict': 'hello'}, ['state_dict']),
    ({'model': {'w': torch.zeros(1), 'epoch': 3}}, ['epoch']),
])
def test_a_checkpoint_that_holds_no_state_dict_is_named(runner, tmp_path,
                                                        obj, facts):
    """It used to end in "'list' object has no attribute 'get'" or a
    TypeError from a regex; nothing is written."""
    path = tmp_path / 'odd.pth'
    torch.save(obj, path)
    paths = _load_paths(runner, tmp_path)
    for name in set(paths) - {'read_checkpoint'}:
        if name in ('load_from', 'resume') and not isinstance(obj, dict):
            continue  # mmengine's own loader fails first, with its error
        with pytest.raises(CheckpointError if name in (
                'init_cfg', 'load_from', 'resume') else ValueError) as e:
            paths[name](path)
        assert all(f in str(e.value) for f in facts), (name, str(e.value))
    assert not {'out.pth', 'pub.pth'} & set(os.listdir(tmp_path))


@pytest.fixture
def file_server(tmp_path, monkeypatch):
    """(base URL, served folder) of an http server on 127.0.0.1; torch.hub's
    cache in tmp_path/torch_home."""
    served = tmp_path / 'served'
    served.mkdir()
    torch.save({'state_dict': {'w': torch.ones(1)}}, served / 'good.pth')
    monkeypatch.setenv('TORCH_HOME', str(tmp_path / 'torch_home'))
    with serve(served) as base:
        yield base, served


@pytest.mark.parametrize('kind', ['evil', 'half zip', 'web page'])
def test_a_url_names_what_is_wrong_with_the_download(
        file_server, tmp_path, monkeypatch, kind):
    """By URL: the refusal names the URL and the downloaded copy in
    torch.hub's cache (which it would load again), even with torch's
    default switched off by its environment variable; a good file passes,
    as does an upper-case scheme."""
    base, served = file_server
    marker = tmp_path / 'ran'
    if kind == 'evil':
        torch.save({'state_dict': {'w': torch.ones(1)},
                    'x': RunsCode(marker)}, served / 'model.pth')
    elif kind == 'half zip':
        _write_truncated(served / 'model.pth', legacy=False)
    else:
        (served / 'model.pth').write_text('<!DOCTYPE html><html></html>')
    monkeypatch.setenv('TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD', '1')
    url = f'{base}/model.pth'
    model = _build(init_cfg=dict(type='Pretrained', checkpoint=url))
    copy = tmp_path / 'torch_home' / 'hub' / 'checkpoints' / 'model.pth'
    for load in (model.init_weights, functools.partial(read_checkpoint, url)):
        with pytest.raises(UnsafeCheckpointError if kind == 'evil' else
                           BrokenCheckpointError) as e:
            load()
        assert f'{url}, downloaded to {copy}' in str(e.value), str(e.value)
    assert not marker.exists()
    assert os.environ['TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD'] == '1'
    read_checkpoint(f'{base}/good.pth')
    read_checkpoint(f'{base}/good.pth'.replace('http', 'HTTP'))
    published = _tool('tools/model_converters/publish_model.py').publish(
        f'{base}/good.pth', str(tmp_path / 'pub.pth'),  # a URL, as a file
        save_keys=('state_dict', ))
    assert torch.load(published, weights_only=True)['state_dict']['w'] == 1


URL_FAILURES = {
    '404': lambda base: f'{base}/missing.pth',
    'connection refused': lambda base: (f'http://127.0.0.1:{free_port()}'
                                        f'/model.pth'),
    'path ends in /': lambda base: f'{base}/',
}


@pytest.mark.parametrize('case', list(URL_FAILURES))
def test_a_url_that_cannot_be_fetched_is_named(file_server, tmp_path, case):
    """read_checkpoint and a backbone's init_cfg: a CheckpointDownloadError
    naming the URL, and nothing left in torch.hub's cache (no .partial).
    It used to be a urllib traceback."""
    base, _ = file_server
    url = URL_FAILURES[case](base)
    model = _build(init_cfg=dict(type='Pretrained', checkpoint=url))
    for load in (model.init_weights, functools.partial(read_checkpoint, url)):
        with pytest.raises(CheckpointDownloadError) as e:
            load()
        assert url in str(e.value)
    cache = tmp_path / 'torch_home' / 'hub' / 'checkpoints'
    assert not cache.exists() or os.listdir(cache) == []


def test_checkpoints_our_tools_write_still_load(tmp_path):
    """mmengine's objects (message hub, numpy arrays, scalars and dtypes)
    pass read_checkpoint and the runner's loader."""
    hub = MessageHub.get_instance('ckpt_safety')
    hub.update_scalar('train/loss', 1.5)
    model = _build()
    path = str(tmp_path / 'epoch_1.pth')
    save_checkpoint({'meta': {'epoch': 1, 'seed': np.int64(3)},
                     'state_dict': model.state_dict(),
                     'message_hub': hub.state_dict(),
                     'extra': np.arange(3.), 'dtype': np.dtype('int64')},
                    path)
    read_checkpoint(path)
    from mmengine.runner.checkpoint import _load_checkpoint
    loaded = _load_checkpoint(path)
    assert loaded['message_hub']['log_scalars']['train/loss'].current() \
        == 1.5
    assert torch.equal(loaded['state_dict']['cls_token'], model.cls_token)
    assert loaded['meta']['seed'] == 3 and loaded['dtype'] == np.int64
    np.testing.assert_array_equal(loaded['extra'], np.arange(3.))


def test_getattr_is_restricted_to_history_buffer_statistics(tmp_path):
    import builtins
    path = tmp_path / 'getattr.pth'

    class Reach:  # pickles as getattr(np.ndarray, '__class__')
        def __reduce__(self):
            return builtins.getattr, (np.ndarray, '__class__')

    torch.save({'x': Reach()}, path)
    with pytest.raises(Exception, match='only HistoryBuffer statistics'):
        torch.load(path, weights_only=True)


# ---------------------------------------------------- atomic saving


def _ckpt(value, n=1 << 16):
    return {'state_dict': {'w': torch.full((n, ), float(value))}}


ATOMIC = dict(backend='mmcpvt_atomic')  # as our configs name it


def test_runners_save_through_the_atomic_backend(tmp_path):
    """Named by our configs, it writes as open(path, 'wb') would (the mode;
    a symlink written through). Where the write fails halfway (disk full),
    mmengine's LocalBackend leaves half a file under the final name; ours
    leaves the previous checkpoint, and no temporary file."""
    path, link = tmp_path / 'epoch_1.pth', tmp_path / 'latest.pth'
    assert type(get_file_backend(str(path))) is LocalBackend  # unchanged
    assert type(get_file_backend(str(path), backend_args=ATOMIC)) is \
        AtomicLocalBackend
    link.symlink_to(path)
    save_checkpoint(_ckpt(1), str(link), backend_args=ATOMIC)
    assert link.is_symlink()
    umask = os.umask(0)
    os.umask(umask)
    assert path.stat().st_mode & 0o777 == 0o666 & ~umask
    before = path.read_bytes()
    soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
    handler = signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    resource.setrlimit(resource.RLIMIT_FSIZE, (len(before), hard))  # 1/4
    try:
        with pytest.raises(OSError) as e:  # (EFBIG here, ENOSPC on a disk)
            save_checkpoint(_ckpt(2, n=1 << 18), str(path),
                            backend_args=ATOMIC)
        assert str(path) in str(e.value) and e.value.errno is not None
    finally:
        resource.setrlimit(resource.RLIMIT_FSIZE, (soft, hard))
        signal.signal(signal.SIGXFSZ, handler)
    assert sorted(os.listdir(tmp_path)) == ['epoch_1.pth', 'latest.pth']
    assert path.read_bytes() == before
    read_checkpoint(str(path))


# ------------------------------------------------------------- grep


def test_no_code_turns_the_weights_only_protection_off():
    """In tracked files and new ones not ignored."""
    found = subprocess.run(
        ['git', 'grep', '--untracked', '-lE', r'weights_only\s*=\s*False',
         '--', '*.py', '*.sh', '*.yml', '*.yaml', '*.cfg', '*.toml',
         '*Makefile'], cwd=ROOT, text=True, capture_output=True)
    assert (found.returncode, found.stdout) == (1, ''), found
