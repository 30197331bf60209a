"""``--cfg-options`` and ``--work-dir`` of tools/train.py and tools/test.py
(:func:`mmcpvt.apis.cli.apply_common_args`, :mod:`mmcpvt.apis.cfg_options`).

A key that would be silently ignored (a misspelt top-level or nested key)
and an item that is not ``key=value`` are errors that name the key and say
what to do; keys the runner reads and new arguments of a module pass; a
config variable (``train_pipeline``) set on the command line gets a
warning naming the settings to change instead. The tools run in-process on
the real CPVT-Ti config (nothing is built), once as a subprocess.
"""
import copy
import os.path as osp

import pytest
from mmengine.config import Config

import mmcpvt.apis.cfg_options as runner_utils
from tests.utils import ROOT, explain, load_script, run_tool

CONFIG = osp.join(ROOT, 'configs', 'cpvt', 'cpvt-tiny_4xb256_in1k.py')


@pytest.fixture(scope='module')
def config():
    """The config as read from its file (once: reading takes a second)."""
    return Config.fromfile(CONFIG)


@pytest.fixture(scope='module')
def train(config):
    """(module, the arguments before the options, the config)."""
    return load_script('tools/train.py'), [CONFIG], config


@pytest.fixture(scope='module')
def test_tool(config, tmp_path_factory):
    checkpoint = tmp_path_factory.mktemp('ckpt') / 'model.pth'
    checkpoint.write_bytes(b'')  # parse_args only checks that it exists
    return load_script('tools/test.py'), [CONFIG, str(checkpoint)], config


@pytest.fixture(scope='module', params=['train', 'test_tool'])
def tool(request):
    """train.py and test.py: both go through apply_common_args."""
    return request.getfixturevalue(request.param)


def merged(tool, *argv):
    """The config as the tool would run it with ``argv`` appended."""
    module, first, config = tool
    args = module.parse_args([*first, *argv])
    return module.merge_args(copy.deepcopy(config), args)


def refused(tool, *options):
    """The error message with which the tool refuses ``options``."""
    with pytest.raises(SystemExit) as error:
        merged(tool, '--cfg-options', *options)
    message = str(error.value)
    assert 'error: --cfg-options ' in message, message
    return message


@pytest.mark.parametrize('item', ['model.backbone.arch', '=small'])
def test_item_without_equals_is_a_usage_error(tool, item, capsys):
    module, first, _ = tool
    with pytest.raises(SystemExit) as error:
        module.parse_args([*first, '--cfg-options', item])
    assert error.value.code == 2
    err = capsys.readouterr().err
    assert 'usage:' in err
    assert (f"error: argument --cfg-options: {item!r} is not a setting: the "
            'form is key=value, e.g. train_dataloader.batch_size=32') in err


def test_unknown_top_level_key_says_what_may_be_added(train):
    message = refused(train, 'my_setting=1')
    assert "no top-level key 'my_setting'" in message
    assert 'New top-level keys may be those the runner reads: ' in message
    for key in ('custom_hooks', 'compile', 'find_unused_parameters'):
        assert key in message
    assert f'set it in a config that inherits this one (_base_ = ' \
        f'{CONFIG!r})' in message


def test_every_refused_key_is_listed(train):
    message = refused(train, 'model.backbon.arch=small',
                      'train_cfg.max_epochs=1', 'train_dataloder.batch_size=1')
    lines = message.split('\n')
    assert len(lines) == 2
    assert 'model.backbon.arch' in lines[0]
    assert 'train_dataloder.batch_size' in lines[1]


@pytest.mark.parametrize('option, expected', [
    ('train_dataloder.batch_size=1',
     "train_dataloder.batch_size: the config has no top-level key "
     "'train_dataloder', and the runner does not read one of that name: it "
     "would be ignored. Did you mean 'train_dataloader'"),
    ('model.backbon.arch=small',
     "model.backbon.arch: model has no key 'backbon'. Did you mean "
     "'backbone'?"),
    ('default_hooks.chekpoint.interval=2', "default_hooks.chekpoint."
     "interval: default_hooks has no key 'chekpoint'. Did you mean "
     "'checkpoint'?"),
    ('train_cfg.max_epoch=3', "train_cfg.max_epoch: train_cfg has no key "
     "'max_epoch'. Did you mean 'max_epochs'?"),
    ('train_dataloader.dataset.pipeline.9.scale=1',
     'train_dataloader.dataset.pipeline has 6 items (0 to 5), no item 9.'),
    ('train_dataloader.dataset.pipeline.scale=1',
     'train_dataloader.dataset.pipeline is a list; address an item by its '
     'index (0 to 5), e.g. train_dataloader.dataset.pipeline.0.scale.'),
    ('model.backbone.arch.embed_dims=64',
     "model.backbone.arch is 'tiny' in the config, not a dict, so it has no "
     "key 'embed_dims'. Set model.backbone.arch itself"),
])
def test_key_that_would_be_ignored_is_refused(tool, option, expected):
    assert expected in refused(tool, option)


def test_runner_keys_and_new_arguments_pass(train):
    cfg = merged(train, '--cfg-options', 'compile=True',
                 'model.backbone.with_cp=True', 'train_cfg.max_epochs=1',
                 'model.backbone.drop_path_rate=0.2',
                 'train_dataloader.dataset.pipeline.1.scale=64')
    assert cfg.compile is True
    assert cfg.model.backbone.with_cp is True
    assert cfg.model.backbone.drop_path_rate == 0.2
    assert cfg.train_cfg.max_epochs == 1
    assert cfg.train_dataloader.dataset.pipeline[1].scale == 64


@pytest.mark.parametrize('option, settings', [
    ('train_pipeline.1.scale=64',
     'Set them instead: train_dataloader.dataset.pipeline.1.scale.'),
    ('dataset_type=CustomDataset',
     'Set them instead: train_dataloader.dataset.type, '
     'val_dataloader.dataset.type, test_dataloader.dataset.type.'),
])
def test_config_variable_warns(train, option, settings, monkeypatch):
    logged = []
    monkeypatch.setattr(runner_utils, 'print_log',
                        lambda msg, logger=None, level=None: logged.append(
                            msg))
    key = option.split('=')[0]
    name = key.split('.')[0]
    merged(train, '--cfg-options', option)
    warning, = logged
    assert warning.startswith(
        f'--cfg-options {key}: {name} is a variable of the config, not a '
        'setting the runner reads')
    assert warning.endswith(settings)


@pytest.mark.parametrize('value, path', [
    ('a,b.pth', 'a,b.pth'), ('my runs/epoch_1.pth', 'my runs/epoch_1.pth'),
    ('"a.pth"', 'a.pth'), ('None', None)])
def test_load_from_is_taken_as_one_path(train, value, path):
    """mmengine's parsing made 'a,b.pth' a list and dropped the space;
    quotes and None are read as mmengine reads them."""
    assert merged(train, '--cfg-options', f'load_from={value}').load_from \
        == path


def test_auto_scale_lr_needs_a_base_batch_size(train):
    """With auto_scale_lr=None it used to fail with "argument of type
    'NoneType' is not iterable"."""
    with pytest.raises(SystemExit) as error:
        merged(train, '--auto-scale-lr', '--cfg-options', 'auto_scale_lr=None')
    assert str(error.value) == (
        'train.py: error: --auto-scale-lr needs auto_scale_lr=dict('
        'base_batch_size=N) in the config (N: the total batch size its lr '
        f'is for), and it has auto_scale_lr=None; add it to {CONFIG}')


@pytest.mark.parametrize('below', [False, True])
def test_work_dir_that_is_a_file(train, tmp_path, below):
    afile = tmp_path / 'not_a_dir'
    afile.write_text('')
    work_dir = str(afile / 'run') if below else str(afile)
    with pytest.raises(SystemExit) as error:
        merged(train, '--work-dir', work_dir)
    assert (f'error: --work-dir {work_dir}: {afile} is a file; it takes a '
            'directory for logs and checkpoints') in str(error.value)


@pytest.mark.parametrize('case', ['directory', 'under a file', 'format',
                                  'metrics format', 'seg maps under a file',
                                  'the checkpoint', 'unwritable'])
def test_test_out_is_checked_before_the_test_runs(test_tool, tmp_path, case):
    """tools/test.py's ``--out`` that cannot take what the run writes, or
    would overwrite what it reads, is refused in merge_args, before the
    runner is built."""
    afile = tmp_path / 'a_file'
    afile.write_text('')
    checkpoint = test_tool[1][1]
    out, options, expected = {
        'the checkpoint': (checkpoint, ['--out-item', 'metrics'],
                           f'is {checkpoint}, an input of this run (the '
                           'same file): writing it would overwrite it'),
        'unwritable': ('/proc/p.pkl', [], '/proc is not writable'),
        'directory': (tmp_path, [], f'--out {tmp_path} is a directory; it '
                      f'takes the file to write, e.g. '
                      f'{tmp_path / "results.pkl"}'),
        'under a file': (afile / 'p.pkl', [], f'{afile} is a file, not a '
                         f'directory'),
        'format': (tmp_path / 'p.json', [], 'with --out-item pred it takes '
                   'a file name ending in .pkl, .pickle'),
        'metrics format': (tmp_path / 'm.txt', ['--out-item', 'metrics'],
                           'with --out-item metrics it takes a file name '
                           'ending in .json, .yaml, .yml, .pkl, .pickle'),
        'seg maps under a file': (afile / 'maps', ['--cfg-options',
                                                   'default_scope=mmseg'],
                                  f'{afile} is a file; it takes a directory '
                                  "for mmseg's prediction maps"),
    }[case]
    with pytest.raises(SystemExit) as error:
        merged(test_tool, '--out', str(out), *options)
    assert f'test.py: error: --out {out}' in str(error.value)
    assert expected in str(error.value), str(error.value)


def test_test_show_dir_under_a_file_is_refused(test_tool, tmp_path):
    afile = tmp_path / 'a_file'
    afile.write_text('')
    with pytest.raises(SystemExit) as error:
        merged(test_tool, '--show-dir', str(afile / 'vis'))
    assert str(error.value) == (
        f'test.py: error: --show-dir {afile / "vis"}: {afile} is a file; it '
        'takes a directory for drawn predictions (made if missing)')


def test_train_refuses_misspelt_key_as_a_user_runs_it(tmp_path):
    proc = run_tool('tools/train.py', CONFIG, '--work-dir',
                    str(tmp_path / 'w'), '--cfg-options',
                    'train_dataloder.batch_size=1', timeout=120)
    assert proc.returncode == 1, explain(proc)
    assert ("train.py: error: --cfg-options train_dataloder.batch_size: the "
            "config has no top-level key 'train_dataloder'") in proc.stderr
    assert 'Traceback' not in proc.stderr
    assert not (tmp_path / 'w').exists()  # stopped before the runner
