"""Helpers shared by the tests: the repository root, parameter counts, a
small configuration of every backbone, and running the tools as a user
does."""
import contextlib
import functools
import glob
import http.server
import importlib.util
import os
import os.path as osp
import subprocess
import sys
import threading

ROOT = osp.dirname(osp.dirname(osp.abspath(__file__)))


class RunsCode:
    """Pickles as ``os.system('touch <marker>')``."""

    def __init__(self, marker):
        self.marker = marker

    def __reduce__(self):
        return os.system, (f'touch {self.marker}', )


class QuietHandler(http.server.SimpleHTTPRequestHandler):
    """Serves a folder (``functools.partial(QuietHandler, directory=...)``)
    without logging each request."""

    def log_message(self, *args):
        pass


@contextlib.contextmanager
def serve(folder):
    """An http server of ``folder`` on 127.0.0.1 while in the block; its
    base URL."""
    server = http.server.ThreadingHTTPServer(
        ('127.0.0.1', 0), functools.partial(QuietHandler, directory=folder))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f'http://127.0.0.1:{server.server_address[1]}'
    finally:
        server.shutdown()


def run_tool(*args, timeout=300):
    """``python *args`` from the repository root, output captured.

    One intra-op thread: on a shared, busy 2-core CPU more threads make
    these runs many times slower (they wait on each other), never faster.
    """
    env = dict(os.environ, OMP_NUM_THREADS='1', MKL_NUM_THREADS='1')
    return subprocess.run([sys.executable, *args], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=timeout)


def load_script(path):
    """A command line of tools/, demo/ or projects/ (``path`` from the
    repository root) as a module, imported from its file as ``python
    path`` runs it, with its folder first on the path: a script imports
    the installed mmcpvt, and a project its own modules beside it (which
    stay imported)."""
    path = osp.join(ROOT, path)
    spec = importlib.util.spec_from_file_location(
        '_' + osp.relpath(path, ROOT).replace('/', '_').replace('.', '_'),
        path)
    module = importlib.util.module_from_spec(spec)
    sys.path.insert(0, osp.dirname(path))
    try:
        spec.loader.exec_module(module)
    finally:
        sys.path.remove(osp.dirname(path))
    return module


def convert_tool(family, argv):
    """tools/model_converters/<family>2mmcpvt.py with ``argv``."""
    load_script(f'tools/model_converters/{family}2mmcpvt.py').main(argv)


_CFG_LOOKUPS = {}


def load_config(path, **kwargs):
    """``Config.fromfile(path, **kwargs)``, with mmengine's look-up of an
    ``mmdet::``/``mmseg::`` base memoised over the session: mmengine searches
    every metafile of the package for it, again for each config (0.5 s a base
    here), which makes loading the configs 4x slower."""
    import mmengine.config.config as config_module
    from mmengine.config import Config
    lookup = config_module._get_external_cfg_path

    def memoised(*args):
        if args not in _CFG_LOOKUPS:
            try:
                _CFG_LOOKUPS[args] = lookup(*args), None
            except ValueError as e:  # a _base_ file: not in the metafiles
                _CFG_LOOKUPS[args] = None, e
        found, error = _CFG_LOOKUPS[args]
        if error is not None:
            raise error
        return found

    config_module._get_external_cfg_path = memoised
    try:
        return Config.fromfile(path, **kwargs)
    finally:
        config_module._get_external_cfg_path = lookup


def classifier(backbone, in_channels):
    """An mmpretrain ImageClassifier (1000 classes) on ``backbone``."""
    from mmengine.registry import init_default_scope
    from mmpretrain.registry import MODELS
    init_default_scope('mmpretrain')
    model = MODELS.build(
        dict(type='ImageClassifier', backbone=backbone,
             head=dict(type='LinearClsHead', num_classes=1000,
                       in_channels=in_channels)))
    return model.eval()


def explain(proc):
    """Exit status and output tails of a finished tool, for assertions."""
    return (f'exit {proc.returncode}\n--- stdout (tail)\n{proc.stdout[-3000:]}'
            f'\n--- stderr (tail)\n{proc.stderr[-3000:]}')


def runner_logs(work_dir):
    """All text logs the runner wrote under work_dir, concatenated."""
    text = ''
    for path in sorted(glob.glob(osp.join(work_dir, '*', '*.log'))):
        with open(path) as f:
            text += f.read()
    return text


def n_params(module):
    """Number of parameters of a module."""
    return sum(p.numel() for p in module.parameters())


def assert_compiles_at_two_sizes(model):
    """``torch.compile(model, fullgraph=True)`` with the 'eager' backend (the
    tracing is tested, not code generation) gives eager's outputs at a square
    and an odd input size. Shapes are specialised per size (dynamic=False):
    symbolic shapes trace the same code many times slower on a small CPU."""
    import torch
    import torch._dynamo
    torch._dynamo.reset()
    compiled = torch.compile(model, backend='eager', fullgraph=True,
                             dynamic=False)
    for size in ((64, 64), (45, 83)):
        x = torch.randn(2, 3, *size)
        with torch.no_grad():
            for a, b in zip(model(x), compiled(x)):
                torch.testing.assert_close(a, b)


# A small configuration per registered backbone; the generic tests run over
# all of them, and a new backbone without an entry fails
# tests/test_models/test_backbones/test_generic.py.
SMALL_BACKBONES = {
    'CPVT': [
        dict(arch=dict(embed_dims=32, num_layers=3, num_heads=2,
                       feedforward_channels=64), peg_positions=(0, 1)),
        dict(arch=dict(embed_dims=32, num_layers=3, num_heads=2,
                       feedforward_channels=64), out_type='avg_featmap',
             pos_embed='learned', peg_positions=(-1, ),
             peg_cfg=dict(num_layers=2, norm_cfg=dict(type='BN'),
                          act_cfg=dict(type='ReLU'))),
        dict(arch=dict(embed_dims=32, num_layers=3, num_heads=2,
                       feedforward_channels=64), out_type='featmap',
             pos_embed='sincos2d', out_indices=(0, -1)),
        # 2-D relative position encoding, no PEG (the paper's "2D RPE")
        dict(arch=dict(embed_dims=32, num_layers=3, num_heads=2,
                       feedforward_channels=64), peg_positions=(),
             rpe_cfg=dict(clip_distance=2)),
        # learned tables at three positions, and a PEG without padding that
        # shrinks the map after encoder 0 (the table after encoder 1 and
        # the featmaps take the smaller map)
        dict(arch=dict(embed_dims=32, num_layers=3, num_heads=2,
                       feedforward_channels=64), out_type='featmap',
             out_indices=(0, -1), pos_embed='learned', img_size=64,
             pos_embed_positions=(-1, 0, 1), peg_cfg=dict(padding=0)),
        # 2-D rotary embeddings (beyond the paper): RoPE-Mixed + PEG at 0,
        # and DINOv3's without a PEG, on the feature map
        dict(arch=dict(embed_dims=32, num_layers=3, num_heads=2,
                       feedforward_channels=64), rope_cfg=dict(type='mixed')),
        dict(arch=dict(embed_dims=32, num_layers=3, num_heads=2,
                       feedforward_channels=64), peg_positions=(),
             out_type='featmap', rope_cfg=dict(type='dinov3')),
    ],
    'CPVTQKOnly': [
        dict(arch=dict(embed_dims=32, num_layers=3, num_heads=2,
                       feedforward_channels=64), peg_positions=(-1, 0, 1)),
    ],
    'PVTPEG': [
        dict(arch=dict(embed_dims=[8, 16, 24, 32], num_heads=[1, 2, 3, 4],
                       mlp_ratios=[2, 2, 2, 2], depths=[1, 2, 1, 1],
                       sr_ratios=[8, 4, 2, 1])),
        dict(arch='tiny', out_type='avg_featmap',
             peg_positions=((-1, 1), (), 0, 1)),
        dict(arch=dict(embed_dims=[8, 16, 24, 32], num_heads=[1, 2, 3, 4],
                       mlp_ratios=[2, 2, 2, 2], depths=[1, 1, 1, 1],
                       sr_ratios=[8, 4, 2, 1]), out_type='cls_token',
             pos_embed='learned', peg_positions=((), (), (), ())),
    ],
    'SwinPEG': [
        dict(arch=dict(embed_dims=8, depths=[2, 2, 2, 2],
                       num_heads=[1, 2, 2, 4])),
        dict(arch=dict(embed_dims=8, depths=[2, 2, 3, 1],
                       num_heads=[1, 2, 2, 4]), out_type='avg_featmap',
             peg_positions=(-1, (0, 1), (), 0)),
    ],
}
BACKBONES = [(name, cfg) for name, cfgs in SMALL_BACKBONES.items()
             for cfg in cfgs]


def free_port() -> int:
    """A TCP port of this machine that no process listens on now."""
    import socket
    with socket.socket() as s:
        s.bind(('127.0.0.1', 0))
        return s.getsockname()[1]


KILL_HOOK = '''\
import os
import signal

from mmengine.hooks import Hook
from mmengine.registry import HOOKS


@HOOKS.register_module()
class KillHook(Hook):
    priority = 'LOWEST'  # after the checkpoint and logger hooks

    def __init__(self, after_iter):
        self.after_iter = after_iter

    def after_train_iter(self, runner, batch_idx, data_batch=None,
                         outputs=None):
        if runner.iter + 1 == self.after_iter:
            os.kill(os.getpid(), signal.SIGKILL)
'''


def train_killed(tmp, config, work_dir, after_iter):
    """tools/train.py on ``config``, SIGKILLed by itself after iteration
    ``after_iter`` (counted from 1 over all epochs), once the checkpoint and
    logger hooks have run: a crash that lands at the same place however slow
    the machine is. ``tmp``: a folder for the hook's module and config."""
    (tmp / 'kill_hook.py').write_text(KILL_HOOK)
    killed = tmp / f'killed_after_{after_iter}.py'
    killed.write_text(
        f'_base_ = {str(config)!r}\n'
        "custom_imports = dict(imports=['mmcpvt', 'kill_hook'])\n"
        f"custom_hooks = [dict(type='KillHook', after_iter={after_iter})]\n")
    env = dict(os.environ, OMP_NUM_THREADS='1', MKL_NUM_THREADS='1',
               PYTHONPATH=os.pathsep.join(
                   [str(tmp), os.environ.get('PYTHONPATH', '')]))
    return subprocess.run(
        [sys.executable, 'tools/train.py', str(killed), '--work-dir',
         str(work_dir)], cwd=ROOT, env=env, capture_output=True, text=True,
        timeout=300)
