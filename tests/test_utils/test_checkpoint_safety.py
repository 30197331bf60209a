"""Checkpoints load safely and loudly and are never half-written
(mmcpvt/utils/checkpoint.py, mmcpvt/engine/hooks.py, the backbones'
load-time check, tools/test.py).

Every loading path is exercised as the user reaches it: a backbone's
``init_cfg=dict(type='Pretrained')``, the runner's ``load_from`` and
``resume`` with our configs' :class:`WeightsOnlyLoadHook`, ``tools/test.py``,
the converters and ``publish_model.py``. Checkpoints served by URL:
tests/test_tools/test_url_checkpoints.py.
"""
import functools
import io
import os
import os.path as osp
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
from mmengine.runner import load_checkpoint, save_checkpoint

import mmcpvt  # noqa: F401  (allow-list, atomic backend)
from mmcpvt.engine import WeightsOnlyLoadHook
from mmcpvt.registry import MODELS
from mmcpvt.utils.atomic import AtomicLocalBackend
from mmcpvt.utils.checkpoint import (BrokenCheckpointError,
                                     CheckpointDownloadError,
                                     CheckpointMismatchError,
                                     UnsafeCheckpointError, check_checkpoint)
from tests.utils import (ROOT, RunsCode, explain, free_port, load_script,
                         run_tool, serve)


TINY = dict(type='CPVT', arch=dict(embed_dims=32, num_layers=2, num_heads=2,
                                   feedforward_channels=64))
CLS_CONFIG = osp.join(ROOT, 'configs', 'cpvt', 'cpvt-tiny_4xb256_in1k.py')
UNSAFE = 'holds objects that are not allowed'
BROKEN = 'empty or truncated'


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


# ------------------------------------------------------- fit of the keys


@pytest.mark.parametrize('src, dst, keys, prefix, found', [
    # 0 of CPVT-Ti's 151 tensors used to load with a warning only
    (PVT_T, dict(type='CPVT', arch='tiny'), 'backbone.', 'backbone.', [
        'none of the 151 tensors of the CPVT backbone', 'missing 151',
        'not in the model', 'patch_embeds.0.', 'another architecture']),
    (TINY, TINY, 'backbone.', None, [  # backbone.cls_token: unexpected
        'none of the 31 tensors', "carry the prefix 'backbone.'",
        "prefix='backbone.'", 'backbone.cls_token']),
    # the FFN biases (64 channels) fit, nothing else
    (dict(TINY, arch=dict(TINY['arch'], embed_dims=48)), TINY, 'backbone.',
     'backbone.', ['only 2 of the 31 tensors', 'of another shape 29',
                   '(1, 1, 48)', 'another size']),
    # mmengine only asserts 'backbone. is not in the pretrained model'
    (TINY, TINY, '', 'backbone.', [
        "no key of the checkpoint starts with prefix='backbone.'",
        'leave prefix out']),
], ids=['another architecture', 'no prefix', 'another size', 'prefix absent'])
def test_a_pretrained_checkpoint_that_does_not_fit_names_keys_and_cause(
        tmp_path, src, dst, keys, prefix, found):
    path = tmp_path / 'cls.pth'
    state = {keys + k: v for k, v in _build(src).state_dict().items()}
    torch.save({'state_dict': state}, path)
    model = _build(dst, init_cfg=dict(type='Pretrained', checkpoint=str(path),
                                      prefix=prefix))
    with pytest.raises(CheckpointMismatchError) as e:
        model.init_weights()
    for text in [str(path), *found]:
        assert text in str(e.value), (text, str(e.value))


def test_a_pretrained_checkpoint_loads_what_fits_the_rest_keeps_its_init(
        tmp_path, monkeypatch):
    """A 3x3 PEG's checkpoint into a model with 7x7 PEGs after encoders 0
    and 1: the rest loads; the kernel of another shape and the PEG the
    checkpoint lacks (a DeiT into CPVT) keep the transformer init (zero
    bias, not PyTorch's uniform); one warning line names them (mmengine's
    PretrainedInit logged a size mismatch only)."""
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
    assert '1 of another shape (pegs.0.proj.0.weight)' in line, line
    assert '2 not in the checkpoint, left at their initialisation ' \
        '(pegs.1.proj.0.weight, pegs.1.proj.0.bias)' in line, line


def test_whole_model_load_from(tmp_path):
    """mmengine's load_checkpoint (the runner's load_from): a classifier of
    another head loads (its head keys only logged); a checkpoint whose
    backbone is another architecture is refused before anything loads."""
    from mmengine.registry import init_default_scope
    from mmpretrain.registry import MODELS as PRETRAIN_MODELS
    init_default_scope('mmpretrain')

    def classifier(backbone, num_classes):
        return PRETRAIN_MODELS.build(dict(
            type='ImageClassifier', backbone=backbone,
            head=dict(type='LinearClsHead', num_classes=num_classes,
                      in_channels=32)))

    src = classifier(TINY, 1000)
    path = tmp_path / 'in1k.pth'
    torch.save({'state_dict': src.state_dict()}, path)
    dst = classifier(TINY, 3)
    load_checkpoint(dst, str(path))
    assert torch.equal(dst.backbone.cls_token, src.backbone.cls_token)

    other = classifier(dict(TINY, type='SwinPEG', arch=dict(
        embed_dims=8, depths=[2, 2, 2, 2], num_heads=[1, 2, 2, 4])), 3)
    before = {k: v.clone() for k, v in other.state_dict().items()}
    with pytest.raises(CheckpointMismatchError,
                       match=r'none of the \d+ tensors of the SwinPEG '
                       r'backbone \(keys backbone\.\*\)'):
        load_checkpoint(other, str(path))
    for k, v in other.state_dict().items():
        assert torch.equal(v, before[k]), k


@pytest.mark.parametrize('src, dst, message', [
    (dict(TINY, arch=dict(TINY['arch'], num_layers=3)), TINY,
     'the checkpoint has layers.2 that the model lacks'),
    (PVT_S, PVT_T, 'the checkpoint has stages.0.1, stages.1.1, stages.2.1, '
     'stages.3.1 that the model lacks'),
    (PVT_T, PVT_S, 'the model has stages.0.1, stages.1.1, stages.2.1, '
     'stages.3.1 that the checkpoint lacks'),
])
def test_a_checkpoint_of_another_depth_is_refused_outside_pretrained(
        tmp_path, monkeypatch, src, dst, message):
    """mmengine's load_checkpoint (load_from, the inferencers) loaded a
    deeper checkpoint's first blocks, or a shallower one into half of the
    model, with its generic "do not match" warning only. Loaded whole, the
    checkpoint must be of the model's depth; as a Pretrained init_cfg the
    part that fits loads, with one warning line naming the rest."""
    path = tmp_path / 'src.pth'
    torch.save({'state_dict': _build(src).state_dict()}, path)
    model = _build(dst)
    before = {k: v.clone() for k, v in model.state_dict().items()}
    with pytest.raises(CheckpointMismatchError) as e:
        load_checkpoint(model, str(path))
    assert f'a checkpoint of another depth: {message}' in str(e.value)
    assert "init_cfg=dict(type='Pretrained'" in str(e.value)
    for k, v in model.state_dict().items():
        assert torch.equal(v, before[k]), k

    from mmengine.logging import MMLogger
    warned = []
    monkeypatch.setattr(MMLogger.get_current_instance(), 'warning',
                        warned.append)
    _build(dst, init_cfg=dict(type='Pretrained',
                              checkpoint=str(path))).init_weights()
    line, = warned
    assert '\n' not in line
    assert line.startswith(f"{dst['type']}: init_cfg Pretrained '{path}': ")
    assert re.search(r'\d+ (in the checkpoint, not in the model|not in the '
                     r'checkpoint, left at their initialisation) \(\w+',
                     line), line


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
    err = proc.stderr
    assert f'test.py: error: {ckpt} does not fit' in err, explain(proc)
    assert re.search(r'missing \d+: neck \(\d+\), bbox_head \(\d+\)', err)
    assert 'holds only the backbone of this model' in err
    assert 'bbox_mAP' not in proc.stdout


# ------------------------------------------------ code in a checkpoint


@pytest.fixture(scope='module')
def runner(tmp_path_factory):
    """A runner (for load_from and --resume), built once."""
    from mmengine.runner import Runner
    return Runner(model=torch.nn.Linear(2, 2),
                  work_dir=str(tmp_path_factory.mktemp('runner')))


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

    def with_hook(load, resume):
        """``load`` as the runner of one of our configs runs it: after
        ``before_run`` of :class:`WeightsOnlyLoadHook`."""
        def run(path):
            hook = WeightsOnlyLoadHook()
            runner.cfg.merge_from_dict(dict(load_from=str(path),
                                            resume=resume))
            try:
                hook.before_run(runner)
                load(str(path))
            finally:
                hook.after_run(runner)
        return run

    return dict(
        init_cfg=init_cfg,
        load_from=with_hook(runner.load_checkpoint, resume=False),
        resume=with_hook(runner.resume, resume=True),
        test_tool=tool('tools/test.py', CLS_CONFIG, '{}'),
        convert=tool('tools/model_converters/twins2mmcpvt.py', '{}',
                     str(tmp_path / 'out.pth')),
        publish=tool('tools/model_converters/publish_model.py', '{}',
                     str(tmp_path / 'pub.pth')),
        check_checkpoint=lambda p: check_checkpoint(str(p)))


PATHS = ['init_cfg', 'load_from', 'resume', 'test_tool', 'convert',
         'publish', 'check_checkpoint']


@pytest.mark.parametrize('legacy', [False, True])
def test_code_in_a_checkpoint_never_runs(runner, tmp_path, monkeypatch,
                                         legacy):
    """On every path, even with torch's default switched off by its
    environment variable (mmengine's own loader would then run the code)."""
    monkeypatch.setenv('TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD', '1')
    marker = tmp_path / 'ran'
    path = tmp_path / 'evil.pth'
    torch.save({'state_dict': {'w': torch.ones(1)}, 'x': RunsCode(marker)},
               path, _use_new_zipfile_serialization=not legacy)
    for name, load in _load_paths(runner, tmp_path).items():
        with pytest.raises((UnsafeCheckpointError, ValueError)) as e:
            load(path)
        msg = str(e.value)
        assert UNSAFE in msg and str(path) in msg, (name, msg)
        assert 'posix.system' in msg and 'nothing in it was run' in msg
        assert not marker.exists(), f'{name} ran the checkpoint\'s code'


def _write_truncated(path, legacy):
    buf = io.BytesIO()
    torch.save({'state_dict': _build().state_dict()}, buf,
               _use_new_zipfile_serialization=not legacy)
    path.write_bytes(buf.getvalue()[:len(buf.getvalue()) // 2])


@pytest.mark.parametrize('kind, found', [
    ('empty', BROKEN), ('half zip', BROKEN), ('half legacy', BROKEN),
    ('random bytes', 'not a checkpoint'),
    ('zip of numpy arrays', 'not a checkpoint')])
def test_a_damaged_file_or_no_checkpoint_is_named(runner, tmp_path, kind,
                                                  found):
    """An interrupted save or download is named empty or truncated, with
    what to do. Bytes that are neither a zip archive nor a pickle, and a
    zip archive without torch's data.pkl (an .npz), are named as no
    checkpoint: not "objects that could run code", nor "truncated"."""
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
    for name, load in _load_paths(runner, tmp_path).items():
        with pytest.raises(ValueError) as e:
            load(path)
        msg = str(e.value)
        assert isinstance(e.value, BrokenCheckpointError) or (
            name in ('convert', 'publish', 'test_tool')), name
        assert str(path) in msg and found in msg, (name, msg)
        assert 'could run code' not in msg, (name, msg)
        if found == BROKEN:
            assert 'Re-download it, re-save it, or use the previous ' \
                   'checkpoint' in msg, (name, msg)
        else:
            assert 'truncated' not in msg, (name, msg)


@pytest.mark.parametrize('obj,held', [
    ([1, 2], 'a list of 2 items'),
    (torch.ones(3), 'a tensor of shape (3,)'),
    ({'state_dict': 'hello'},
     "a dict with entries that are not tensors: 'state_dict' (str)"),
    ({'model': {'w': torch.zeros(1), 'epoch': 3}},
     "a dict whose 'model' entry is a dict with entries that are not "
     "tensors: 'epoch' (int)"),
])
def test_a_checkpoint_that_holds_no_state_dict_is_named(runner, tmp_path,
                                                        obj, held):
    """It used to end in "'list' object has no attribute 'get'" or a
    TypeError from a regex; nothing is written."""
    path = tmp_path / 'odd.pth'
    torch.save(obj, path)
    paths = _load_paths(runner, tmp_path)
    for name in set(paths) - {'check_checkpoint'}:
        with pytest.raises(ValueError) as e:
            paths[name](path)
        assert f"{path} is not a state dict: it holds {held}. Expected a " \
            f"dict of tensors (name -> tensor), or a dict whose " \
            f"'state_dict' or 'model' entry is one." in str(e.value), name
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


@pytest.mark.parametrize('kind, found', [
    ('evil', UNSAFE), ('half zip', BROKEN), ('web page', 'not a checkpoint')])
def test_a_url_names_what_is_wrong_with_the_download(
        file_server, tmp_path, monkeypatch, kind, found):
    """By URL, mmengine's loader has torch.hub download the file (with
    weights_only off); a refusal names the URL, the downloaded copy (which
    torch.hub would load again) and what is wrong in it (as for a local
    file), not torch's "Weights only load failed", even with torch's
    default switched off by its environment variable; a good file passes."""
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
    for load, setting in [(model.init_weights, 'CPVT: init_cfg Pretrained '),
                          (functools.partial(check_checkpoint, url), '')]:
        with pytest.raises(UnsafeCheckpointError if kind == 'evil' else
                           BrokenCheckpointError) as e:
            load()
        msg = str(e.value)
        assert msg.startswith(f'{setting}{url}, downloaded to {copy}: '), msg
        assert found in msg and 'delete it to download again' in msg, msg
    assert not marker.exists()
    assert os.environ['TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD'] == '1'
    check_checkpoint(f'{base}/good.pth')


# case -> (URL from the server's base and folder, the start of the reason
# and of what to do, in the message)
URL_FAILURES = {
    '404': (lambda base, d: f'{base}/missing.pth',
            'the download failed (HTTP Error 404: File not found). Check '
            'the address'),
    'connection refused': (
        lambda base, d: f'http://127.0.0.1:{free_port()}/model.pth',
        'the download failed ([Errno 111] Connection refused). Check the '
        'address'),
    'path ends in /': (lambda base, d: f'{base}/',
                       'names no file (its path ends in "/")'),
    'HTTP://': (lambda base, d: base.replace('http', 'HTTP') + '/good.pth',
                'no checkpoint loader of mmengine takes the scheme HTTP:// '),
    'file://': (lambda base, d: f'file://{d}/good.pth',
                'no checkpoint loader of mmengine takes the scheme file:// '),
}
FIXES = {'HTTP://': lambda url: 'write ' + url.replace('HTTP', 'http'),
         'file://': lambda url: "give the file's path, " + url[7:],
         'path ends in /': lambda url: f'e.g. {url}model.pth'}


@pytest.mark.parametrize('case', list(URL_FAILURES))
def test_a_url_that_cannot_be_fetched_is_named_with_what_to_do(
        runner, file_server, tmp_path, case):
    """check_checkpoint, a backbone's init_cfg and the runner's load_from
    and resume (with our hook): one CheckpointDownloadError naming the URL
    and where it was given, what went wrong and what to do, and nothing
    left in torch.hub's cache (no .partial). It used to be a urllib
    traceback, or for HTTP:// and file:// mmengine's "can not be found"."""
    base, served = file_server
    make_url, reason = URL_FAILURES[case]
    url = make_url(base, served)
    paths = _load_paths(runner, tmp_path)
    for name, load, setting in [
            ('check_checkpoint', functools.partial(
                check_checkpoint, setting='load_from'), 'load_from '),
            ('init_cfg', paths['init_cfg'], 'CPVT: init_cfg Pretrained '),
            ('load_from', paths['load_from'], 'load_from '),
            ('resume', paths['resume'], 'resume from ')]:
        with pytest.raises(CheckpointDownloadError) as e:
            load(url)
        msg = str(e.value)
        print(f'{case:20} {name:16} {msg}')
        assert msg.startswith(f'{setting}{url}'), (name, msg)
        assert reason in msg, (name, msg)
        if case in FIXES:
            assert FIXES[case](url) in msg, (name, msg)
        else:
            assert 'give its local path instead of the URL' in msg
    cache = tmp_path / 'torch_home' / 'hub' / 'checkpoints'
    assert not cache.exists() or os.listdir(cache) == []


def test_checkpoints_our_tools_write_still_load(tmp_path):
    """mmengine's objects (message hub, numpy arrays, scalars and dtypes)
    pass check_checkpoint and the runner's loader."""
    hub = MessageHub.get_instance('ckpt_safety')
    hub.update_scalar('train/loss', 1.5)
    model = _build()
    path = str(tmp_path / 'epoch_1.pth')
    save_checkpoint({'meta': {'epoch': 1, 'seed': np.int64(3)},
                     'state_dict': model.state_dict(),
                     'message_hub': hub.state_dict(),
                     'extra': np.arange(3.), 'dtype': np.dtype('int64')},
                    path)
    check_checkpoint(path)
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
        with pytest.raises(OSError):
            save_checkpoint(_ckpt(2, n=1 << 18), str(path),
                            backend_args=ATOMIC)
    finally:
        resource.setrlimit(resource.RLIMIT_FSIZE, (soft, hard))
        signal.signal(signal.SIGXFSZ, handler)
    assert sorted(os.listdir(tmp_path)) == ['epoch_1.pth', 'latest.pth']
    assert path.read_bytes() == before
    check_checkpoint(str(path))


# ------------------------------------------------------------- grep


def test_no_code_turns_the_weights_only_protection_off():
    """In tracked files and new ones not ignored."""
    found = subprocess.run(
        ['git', 'grep', '--untracked', '-lE', r'weights_only\s*=\s*False',
         '--', '*.py', '*.sh', '*.yml', '*.yaml', '*.cfg', '*.toml',
         '*Makefile'], cwd=ROOT, text=True, capture_output=True)
    assert (found.returncode, found.stdout) == (1, ''), found
