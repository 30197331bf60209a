"""``--cfg-options`` and ``--work-dir`` of tools/train.py and tools/test.py
(:func:`mmcpvt.apis.cli.apply_common_args`, :mod:`mmcpvt.apis.cfg_options`).

A key that would be silently ignored (a misspelt top-level or nested key)
and an item that is not ``key=value`` are errors that name the key and say
what to do; keys the runner reads and new arguments of a module pass; a
config variable (``train_pipeline``) set on the command line gets a
warning naming the settings to change instead. The tools run in-process on
the real CPVT-Ti config (nothing is built); test_train_e2e.py runs one
refusal as a subprocess.
"""
import copy
import os.path as osp

import pytest
from mmengine.config import Config

import mmcpvt.apis.cfg_options as runner_utils
from tests.utils import ROOT, load_script

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


def test_every_refused_key_is_listed_with_what_to_do(train):
    message = refused(train, 'my_setting=1', 'train_cfg.max_epochs=1',
                      'model.backbon.arch=small')
    first, second = message.split('\n')
    assert "no top-level key 'my_setting'" in first
    assert 'New top-level keys may be those the runner reads: ' in first
    for key in ('custom_hooks', 'compile', 'find_unused_parameters'):
        assert key in first
    assert f'set it in a config that inherits this one (_base_ = ' \
        f'{CONFIG!r})' in first
    assert 'model.backbon.arch' in second


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
    # text for a number: mmengine's loop would fail naming no key
    ('train_cfg.max_epochs=abc',
     "train_cfg.max_epochs is a number in the config (300), got 'abc'."),
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


CASES = {  # (the options, what the refusal says after the first one)
    'work dir a file': (['--work-dir', '{afile}'], ': {afile} is a file; it '
                        'takes a directory for logs and checkpoints'),
    'work dir under a file': (['--work-dir', '{afile}/run'], ': {afile} is a '
                              'file; it takes a directory for logs and '
                              'checkpoints'),
    'out the checkpoint': (['--out', '{checkpoint}', '--out-item', 'metrics'],
                           ' is {checkpoint}, an input of this run (the same '
                           'file): writing it would overwrite it'),
    'out unwritable': (['--out', '/proc/p.pkl'], ': /proc is not writable'),
    'out a directory': (['--out', '{tmp}'], ' is a directory; it takes the '
                        'file to write, e.g. {tmp}/results.pkl'),
    'out under a file': (['--out', '{afile}/p.pkl'], ': {afile} is a file, '
                         'not a directory'),
    'out format': (['--out', '{tmp}/p.json'], ': with --out-item pred it '
                   'takes a file name ending in .pkl, .pickle'),
    'out metrics format': (['--out', '{tmp}/m.txt', '--out-item', 'metrics'],
                           ': with --out-item metrics it takes a file name '
                           'ending in .json, .yaml, .yml, .pkl, .pickle'),
    'seg maps under a file': (['--out', '{afile}/maps', '--cfg-options',
                               'default_scope=mmseg'], ': {afile} is a file; '
                              "it takes a directory for mmseg's prediction "
                              'maps'),
    'show dir under a file': (['--show-dir', '{afile}/vis'], ': {afile} is a '
                              'file; it takes a directory for drawn '
                              'predictions (made if missing)'),
}


@pytest.mark.parametrize('case', list(CASES))
def test_outputs_are_checked_before_the_run(test_tool, tmp_path, case):
    """A work dir, or tools/test.py's ``--out`` or ``--show-dir``, that
    cannot take what the run writes, or would overwrite what it reads, is
    refused in merge_args, before the runner is built."""
    afile = tmp_path / 'a_file'
    afile.write_text('')
    names = dict(afile=afile, tmp=tmp_path, checkpoint=test_tool[1][1])
    argv, expected = CASES[case]
    argv = [a.format(**names) for a in argv]
    with pytest.raises(SystemExit) as error:
        merged(test_tool, *argv)
    assert f'error: {argv[0]} {argv[1]}{expected.format(**names)}' in \
        str(error.value), str(error.value)


@pytest.mark.parametrize('value', ['-1', '0', '2.5'])
def test_a_schedule_that_trains_nothing_is_refused(train, value):
    """max_epochs=-1 trained nothing and exited 0."""
    with pytest.raises(SystemExit) as error:
        merged(train, '--cfg-options', f'train_cfg.max_epochs={value}')
    assert str(error.value) == (f'train.py: error: train_cfg.max_epochs '
                                f'must be an int >= 1, got {value}')
