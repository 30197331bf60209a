"""Every documented way to load weights refuses a pickle with code in it,
served on 127.0.0.1 (docs/checkpoints.md, "Which loads cannot run a
checkpoint's code").

The snippets are read from the docs (docs/checkpoints.md: the mmdet, mmseg
and mmpretrain Inferencers; docs/get_started.md: mmpretrain's
``get_model``) and run as written, in a fresh process each, with the
weights' path replaced by a URL: first a checkpoint written as our tools
write it (it loads and the snippet runs to its end), then a malicious one
(refused by torch, its payload unrun). A control runs them without the
``TORCH_FORCE_WEIGHTS_ONLY_LOAD`` line: by URL the payload runs (the line is
what protects them), by a local path torch's default refuses it. The tools
that take a checkpoint URL and are not in tests/test_tools/
test_url_checkpoints.py (the instruments) get the malicious URL too.
"""
import os
import os.path as osp
import re
import subprocess
import sys

import numpy as np
import pytest
import torch

from tests.utils import ROOT, RunsCode, explain, run_tool, serve

FORCE = 'TORCH_FORCE_WEIGHTS_ONLY_LOAD'
REFUSED = 'Weights only load failed'  # torch's message


def _snippets():
    """name -> the python blocks of the docs that load weights."""
    found = {}
    for doc in ('docs/checkpoints.md', 'docs/get_started.md'):
        with open(osp.join(ROOT, doc)) as f:
            blocks = re.findall(r'```python\n(.*?)```', f.read(), re.S)
        for block in blocks:
            match = re.search(r'(\w+Inferencer)\(|get_model\(.*pretrained=',
                              block)
            if match:
                found[match.group(1) or 'get_model'] = block
    return found


SNIPPETS = _snippets()
NAMES = ['DetInferencer', 'MMSegInferencer', 'ImageClassificationInferencer',
         'get_model']


def test_the_docs_hold_every_snippet():
    assert sorted(SNIPPETS) == sorted(NAMES)


def _as_run(snippet, weights, image, out_dir, protected=True):
    """The snippet with the weights, the image and the output folder
    replaced; without its TORCH_FORCE_WEIGHTS_ONLY_LOAD line unless
    ``protected``."""
    loaded = re.search(r"(?:weights|pretrained)=('[^']*')", snippet)[1]
    code = snippet.replace(loaded, repr(weights))
    code = code.replace("'demo.jpg'", repr(image))
    code = code.replace("'outputs'", repr(out_dir))
    if not protected:
        code = '\n'.join(line for line in code.splitlines()
                         if FORCE not in line)
    return code


def _run(code, torch_home, timeout=400, **env_vars):
    """``python -c code`` from the repository root, as a user runs it, with
    ``env_vars`` in the environment."""
    env = {k: v for k, v in os.environ.items()
           if k not in (FORCE, 'TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD')}
    env.update(TORCH_HOME=str(torch_home), OMP_NUM_THREADS='1',
               MKL_NUM_THREADS='1', **env_vars)
    return subprocess.run([sys.executable, '-c', code], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=timeout)


def _good_checkpoint(config, path):
    """A checkpoint of ``config``'s model as the runner saves one: the
    weights, numpy values in its meta and the message hub."""
    from mmengine.config import Config
    from mmengine.logging import MessageHub
    from mmengine.registry import init_default_scope
    from mmengine.runner import save_checkpoint

    import mmcpvt  # noqa: F401
    from mmcpvt.registry import MODELS
    cfg = Config.fromfile(osp.join(ROOT, config))
    init_default_scope(cfg.default_scope)
    cfg.model.get('backbone', {}).pop('init_cfg', None)
    model = MODELS.build(cfg.model)
    hub = MessageHub.get_instance('documented_loading')
    hub.update_scalar('train/loss', 1.0)
    save_checkpoint({'meta': {'epoch': 1, 'seed': np.int64(0)},
                     'state_dict': model.state_dict(),
                     'message_hub': hub.state_dict()}, str(path))


@pytest.fixture(scope='module')
def served(tmp_path_factory):
    """(base URL, served folder, an image): per snippet a malicious
    checkpoint (``evil_<name>.pth``, its payload touching ``ran_<name>``);
    the tests add the good ones (``good_<name>.pth``)."""
    from PIL import Image
    root = tmp_path_factory.mktemp('served')
    for name in SNIPPETS:
        torch.save({'state_dict': {'w': torch.ones(1)},
                    'x': RunsCode(root / f'ran_{name}')},
                   root / f'evil_{name}.pth')
    image = root / 'demo.jpg'
    Image.fromarray(np.random.RandomState(0).randint(
        0, 256, (96, 128, 3), dtype=np.uint8)).save(image)
    with serve(root) as base:
        yield base, root, str(image)


@pytest.mark.parametrize('name', NAMES)
def test_documented_snippet_refuses_a_served_malicious_pickle(
        served, tmp_path, name):
    """As written in the docs: a good checkpoint by URL loads and the
    snippet runs to its end; a malicious one is refused by torch, and its
    payload does not run; also where the environment asks torch for the
    opposite (TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD)."""
    base, root, image = served
    snippet = SNIPPETS[name]
    config = ('configs/cpvt/cpvt-tiny_4xb256_in1k.py' if name == 'get_model'
              else re.search(r"model='([^']*)'", snippet).group(1))
    _good_checkpoint(config, root / f'good_{name}.pth')
    out = str(tmp_path / 'outputs')
    code = (_as_run(snippet, f'{base}/good_{name}.pth', image, out) +
            '\nprint("GOOD CHECKPOINT RAN")\n' +
            _as_run(snippet, f'{base}/evil_{name}.pth', image, out) +
            '\nprint("MALICIOUS CHECKPOINT LOADED")\n')
    proc = _run(code, tmp_path / 'torch_home',
                TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD='1')
    refusal = next((line for line in proc.stderr.splitlines()
                    if REFUSED in line), None)
    print(f'{name}: {refusal}')
    assert 'GOOD CHECKPOINT RAN' in proc.stdout, explain(proc)
    if name != 'get_model':
        assert os.listdir(out), f'{name} wrote no output'
    assert not (root / f'ran_{name}').exists(), f'{name} ran the payload'
    assert 'MALICIOUS CHECKPOINT LOADED' not in proc.stdout, explain(proc)
    assert proc.returncode != 0 and refusal is not None, explain(proc)
    assert 'unsupported GLOBAL posix.system' in proc.stderr


def test_control_without_the_line_a_served_pickle_runs(served, tmp_path):
    """The snippets without their TORCH_FORCE_WEIGHTS_ONLY_LOAD line: by URL
    the payload runs in each (mmengine's http loader has torch.hub
    turn weights_only off); by a local path torch's default refuses it."""
    base, root, image = served
    names = sorted(SNIPPETS)
    local_marker = tmp_path / 'ran_local'
    local = tmp_path / 'evil_local.pth'
    torch.save({'x': RunsCode(local_marker)}, local)
    runs = []
    for name in names:
        for weights in (f'{base}/evil_{name}.pth', str(local)):
            body = _as_run(SNIPPETS[name], weights, image,
                           str(tmp_path / 'outputs'), protected=False)
            runs.append('try:\n' + ''.join(
                f'    {line}\n' for line in body.splitlines()) +
                'except Exception:\n    pass\n')
    proc = _run('\n'.join(runs), tmp_path / 'torch_home', timeout=600)
    assert proc.returncode == 0, explain(proc)
    for name in names:
        assert (root / f'ran_{name}').exists(), \
            f'{name} by URL did not run the payload: the control failed'
        (root / f'ran_{name}').unlink()
    assert not local_marker.exists(), 'a local file ran its payload'


INSTRUMENTS = {  # tool -> its arguments after the config and checkpoint
    'tools/analysis_tools/position_probe.py':
    lambda image, out: ['--random-images', '--num-images', '1'],
    'tools/analysis_tools/translation_equivariance.py':
    lambda image, out: ['--random-images', '--num-images', '1'],
    'tools/visualization/vis_attention.py':
    lambda image, out: [image, '--out-dir', out],
}


@pytest.mark.parametrize('tool', list(INSTRUMENTS))
def test_instrument_refuses_a_served_malicious_pickle(served, tmp_path,
                                                      monkeypatch, tool):
    """The instruments load through mmcpvt.utils.checkpoint.load_weights,
    which reads the download weights-only and names what it refers to."""
    base, root, image = served
    url = f'{base}/evil_ImageClassificationInferencer.pth'
    monkeypatch.setenv('TORCH_HOME', str(tmp_path / 'torch_home'))
    proc = run_tool(tool, 'configs/cpvt/cpvt-tiny_4xb256_in1k.py', url,
                    '--device', 'cpu',
                    *INSTRUMENTS[tool](image, str(tmp_path / 'out')),
                    timeout=300)
    assert not (root / 'ran_ImageClassificationInferencer').exists()
    assert proc.returncode != 0, explain(proc)
    assert 'Traceback' not in proc.stderr, explain(proc)
    copy = tmp_path / 'torch_home' / 'hub' / 'checkpoints' / osp.basename(url)
    assert f'{url}, downloaded to {copy}' in proc.stderr, explain(proc)
    assert 'posix.system' in proc.stderr, explain(proc)
    assert 'posix.system' in proc.stderr
