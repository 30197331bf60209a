"""The three command lines, as a user runs them (one subprocess each, on a
tiny CPVT config with random images), and their errors for bad input
(in-process)."""
import json
import os.path as osp

import numpy as np
import pytest
import torch

from mmcpvt.apis.model import build_model
from tests import utils
from tests.utils import ROOT, explain, load_script

TOOLS = {
    'position_probe': 'tools/analysis_tools/position_probe.py',
    'translation_equivariance':
    'tools/analysis_tools/translation_equivariance.py',
    'vis_attention': 'tools/visualization/vis_attention.py',
}
BASE = osp.join(ROOT, 'configs', 'cpvt', 'cpvt-tiny_4xb256_in1k.py')


@pytest.fixture(scope='module')
def tiny_config(tmp_path_factory):
    """CPVT-Ti's config with a 2-encoder, 32-channel backbone; random
    images are 64 px (4x4 tokens), the test pipeline gives 224 px."""
    path = tmp_path_factory.mktemp('cfg') / 'cpvt-tiny-tiny.py'
    path.write_text(
        f'_base_ = {BASE!r}\n'
        'model = dict(\n'
        '    backbone=dict(arch=dict(_delete_=True, embed_dims=32, '
        'num_layers=2,\n'
        '                           num_heads=2, feedforward_channels=64),\n'
        '                  img_size=64, drop_path_rate=0.),\n'
        '    head=dict(in_channels=32))\n')
    return str(path)


@pytest.fixture(scope='module')
def checkpoint(tiny_config, tmp_path_factory):
    model, _, _ = build_model(tiny_config)
    path = tmp_path_factory.mktemp('ckpt') / 'tiny.pth'
    torch.save({'state_dict': model.state_dict(), 'meta': {}}, path)
    return str(path)


def run(name, *args):
    # a few seconds of CPU each (mostly imports), but on a shared 2-core
    # machine a run has been seen to wait minutes for it
    return utils.run_tool(osp.join(ROOT, TOOLS[name]), *args, timeout=900)


def test_position_probe_cli(tiny_config, checkpoint, tmp_path):
    out = tmp_path / 'probe.json'
    proc = run('position_probe', tiny_config, checkpoint, '--block', 'input',
               '1', '--random-images', '--num-images', '8', '--out',
               str(out))
    assert proc.returncode == 0, explain(proc)
    assert 'R2 all' in proc.stdout and 'block 1' in proc.stdout
    assert "the model's" in proc.stderr and 'tensors loaded' in proc.stderr
    data = json.loads(out.read_text())
    assert [b['block'] for b in data['blocks']] == [-1, 1]
    assert data['blocks'][0]['grid'] == [4, 4]
    assert set(data['blocks'][0]) >= {'all', 'interior', 'border'}


def test_translation_equivariance_cli(tiny_config, tmp_path):
    out = tmp_path / 'eq.json'
    proc = run('translation_equivariance', tiny_config, '--random-images',
               '--num-images', '2', '--shifts', '1', '2', '--mode', 'zero',
               '--out', str(out))
    assert proc.returncode == 0, explain(proc)
    assert 'interior' in proc.stdout and 'block 1' in proc.stdout
    data = json.loads(out.read_text())
    assert [b['block'] for b in data['blocks']] == [-1, 0, 1]
    # the patch embedding alone is exactly equivariant where the image is
    assert data['blocks'][0]['all'] < 1e-5


def test_vis_attention_cli(tiny_config, checkpoint, tmp_path):
    import cv2
    image = tmp_path / 'img.png'
    cv2.imwrite(str(image),
                np.random.default_rng(0).integers(0, 255, (240, 300, 3),
                                                  dtype=np.uint8))
    proc = run('vis_attention', tiny_config, checkpoint, str(image),
               '--block', '1', '--head', '1', '--query', '3', '4',
               '--query', 'cls', '--out-dir', str(tmp_path / 'vis'),
               '--save-npy')
    assert proc.returncode == 0, explain(proc)
    stem = tmp_path / 'vis' / 'img_block1_head1'
    for suffix in ('_matrix.png', '_queries.png'):
        assert osp.getsize(f'{stem}{suffix}') > 1000
    # 224 px test crop, 16 px patches: the 14x14 patches, as the paper's
    # figures; the class token took some of each row
    patches = np.load(f'{stem}_matrix.npy')
    assert patches.shape == (196, 196)
    assert (patches.sum(-1) < 1).all()
    assert 'patch queries give the class token' in proc.stdout
    proc = run('vis_attention', tiny_config, checkpoint, str(image),
               '--block', '1', '--head', '1', '--with-cls', '--out-dir',
               str(tmp_path / 'vis'), '--save-npy')
    assert proc.returncode == 0, explain(proc)
    matrix = np.load(f'{stem}_matrix.npy')  # 1 class token + 14x14 patches
    assert matrix.shape == (197, 197)
    assert np.allclose(matrix.sum(-1), 1, atol=1e-5)
    assert np.array_equal(matrix[1:, 1:], patches)


BAD = [  # tool, argv ({config}, {ckpt}, {tmp}: tmp_path), what it says
    ('position_probe', '{config} --block 5 --random-images',
     ['block 5 out of range', '-1 (input) to 1']),
    ('translation_equivariance', '{config} --mode reflect',
     ["argument --mode: invalid choice: 'reflect'", 'circular']),
    ('position_probe', 'nowhere.py', ['config file not found: nowhere.py']),
    ('translation_equivariance', '{config} nowhere.pth',
     ['checkpoint file not found: nowhere.pth']),
    ('vis_attention', '{config} {ckpt} nowhere.jpg',
     ['image file not found: nowhere.jpg']),
    # the config's ImageNet data are not here
    ('position_probe', '{config} --num-images 2 --cfg-options '
     'test_dataloader.dataset.data_root={tmp}',
     ["could not read the config's test data", '--random-images']),
    ('vis_attention', '{config} {ckpt} {tmp}/img.png --query 14 0',
     ['outside the 14x14 token grid']),
    ('vis_attention', '{config} {ckpt} {tmp}/img.png --block -1',
     ['has no attention']),
    # values that used to give figures without a word, a table of NaN, or
    # fail once the work was done
    ('position_probe', '{config} --random-images --alpha -1',
     ['argument --alpha: the ridge penalty must be > 0', 'got -1']),
    # 4 px: one 16 px patch; the probe needs 4x4 tokens at border 1
    ('position_probe', '{config} --random-images --img-size 4',
     ['--img-size 4 gives too few tokens for the probe',
      'largest stride is 16 px: at least 64 px']),
    ('translation_equivariance', '{config} --random-images --img-size 70',
     ['--img-size 70 is not a multiple of the patch size of this CPVT '
      '(16 px)', 'e.g. 64']),
    # 4 patches a side: a shift of 4 is a whole turn (it reported 0.00)
    ('translation_equivariance',
     '{config} --random-images --img-size 64 --shifts 1 1000',
     ['--shifts 1 1000: the 64x64 input is 4x4 patches; shifts must be '
      'smaller than 4']),
    ('position_probe', '{config} --random-images --out {tmp}',
     ['--out {tmp} is a directory; it takes the file to write, e.g. '
      '{tmp}/probe.json']),
    ('translation_equivariance', '{config} --random-images --out {tmp}',
     ['--out {tmp} is a directory']),
    ('translation_equivariance',
     '{config} --random-images --out {tmp}/a_file/r.json',
     ['--out {tmp}/a_file/r.json: {tmp}/a_file is a file, not a directory']),
    ('vis_attention', '{config} {ckpt} {tmp}/a_file --out-dir '
     '{tmp}/a_file/vis',
     ['--out-dir {tmp}/a_file/vis: {tmp}/a_file is a file; it takes a '
      'directory']),
]


@pytest.mark.parametrize('name, argv, says', BAD)
def test_bad_input_is_refused_clearly(tiny_config, checkpoint, tmp_path,
                                      capsys, name, argv, says):
    """Each message names the option, the value and what is allowed."""
    import cv2
    cv2.imwrite(str(tmp_path / 'img.png'), np.zeros((64, 64, 3), np.uint8))
    (tmp_path / 'a_file').write_text('')

    def fill(text):
        return text.format(config=tiny_config, ckpt=checkpoint, tmp=tmp_path)

    with pytest.raises(SystemExit) as e:
        load_script(TOOLS[name]).main(fill(argv).split())
    assert e.value.code != 0
    err = capsys.readouterr().err
    for text in says:
        assert fill(text) in err, err
