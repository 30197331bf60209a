"""Install mmcpvt as a user does, from a folder outside the repository, and
train from the installed package; each step is checked:

1. a fresh virtual environment;
2. ``pip install .`` (a wheel, not an editable install);
3. ``import mmcpvt`` comes from it, ``mmcpvt/.mim`` holds real files, and
   mmpretrain's ``list_models`` / ``get_model`` find our models there;
4. ``mim search mmcpvt`` shows no accuracy (the paper's numbers are
   ``Paper Results``);
5. ``mim train mmcpvt cpvt-tiny_4xb256_in1k.py`` runs the installed
   ``.mim/tools/train.py``, 1 epoch on a generated ImageNet-layout set;
6. ``mim train mmdet CONFIG``, mmdet's own ``tools/train.py``, trains a user
   config inheriting the installed demo RetinaNet PVT-T+PEG config, 1 epoch
   on a generated COCO-layout set.

The venv has no torch of its own: a ``.pth`` file puts this interpreter's
site-packages behind its own (whose ``.pth`` files are not read, so an
editable mmcpvt there stays invisible). The build runs in a copy of the
tree: setup.py writes ``mmcpvt/.mim`` into the tree it builds.

    .venv/bin/python tests/test_packaging/check_package.py  # ~1 minute

Prints each command and the output lines that matter; exits with 1, naming
the failed step, where a step fails.
"""
import argparse
import os
import os.path as osp
import re
import shutil
import subprocess
import sys
import sysconfig
import tempfile
import time

from mmcpvt.datasets.synthetic.coco import make_coco
from mmcpvt.datasets.synthetic.imagenet import make_imagenet

REPO = osp.dirname(osp.dirname(osp.dirname(osp.abspath(__file__))))

# Not copied into the build tree: environments, outputs, generated files.
SKIP = ('.git', '.venv', 'work_dirs', 'data', 'build', 'dist', 'checkpoints',
        '*.egg-info', '__pycache__', '*.pyc', '.mim', '.pytest_cache')
# mim finds this config by name in the installed package; the options give
# it the generated data, 2 iterations and no dataloader workers.
MIM_CONFIG = 'cpvt-tiny_4xb256_in1k.py'
LOADER_OPTIONS = ('batch_size=2', 'num_workers=0', 'persistent_workers=False')

DET_CONFIG = """\
# A user's config: mmcpvt's demo RetinaNet PVT-T+PEG config (the first 4 COCO
# classes, 192 px) from the installed package, on a small generated set.
_base_ = {base!r}

data_root = {data_root!r}
loader = dict(batch_size=2, num_workers=0, persistent_workers=False)
train_dataloader = dict(**loader, dataset=dict(data_root=data_root))
val_dataloader = dict(**loader, dataset=dict(data_root=data_root))
test_dataloader = val_dataloader
val_evaluator = dict(ann_file=data_root + 'annotations/instances_val2017.json')
test_evaluator = val_evaluator
model = dict(test_cfg=dict(score_thr=0.0))  # an untrained model's mAP
train_cfg = dict(max_epochs=1, val_interval=1)
default_hooks = dict(logger=dict(interval=1), checkpoint=dict(interval=1))
"""


class CheckFailed(Exception):
    """A step's command failed or its result is not what it must be."""


def log(msg):
    print(f'[check_package] {msg}', flush=True)


def run(step, cmd, cwd, env, timeout, keep=()):
    """Run ``cmd``; print it and the output lines matching ``keep``."""
    shown = [c if '\n' not in c else "'<script>'" for c in cmd]
    log(f'{step}: $ {" ".join(shown)}')
    start = time.time()
    proc = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=timeout)
    out = proc.stdout + proc.stderr
    for line in out.splitlines():
        if any(re.search(k, line) for k in keep):
            print(f'    {line.strip()[:200]}', flush=True)
    log(f'{step}: exit {proc.returncode} in {time.time() - start:.0f} s')
    if proc.returncode != 0:
        raise CheckFailed(f'{step} failed (exit {proc.returncode}); last '
                          f'output:\n{out[-4000:]}')
    return out


def expect(step, condition, message):
    if not condition:
        raise CheckFailed(f'{step}: {message}')
    log(f'{step}: ok: {message}')


def make_venv(venv):
    """Create a venv whose site-packages reads this interpreter's behind its
    own (a ``.pth`` file); returns its python and its site-packages."""
    subprocess.run([sys.executable, '-m', 'venv', '--without-pip', venv],
                   check=True)
    py = osp.join(venv, 'bin', 'python')
    site = subprocess.run(
        [py, '-c', 'import sysconfig; print(sysconfig.get_path("purelib"))'],
        check=True, capture_output=True, text=True).stdout.strip()
    paths = sysconfig.get_paths()
    deps = dict.fromkeys([paths['purelib'], paths['platlib']])
    with open(osp.join(site, 'mmcpvt_check_deps.pth'), 'w') as f:
        f.write('\n'.join(deps) + '\n')
    # Python >= 3.12 has no distutils, which mmengine's collect_env imports:
    # setuptools' shim provides it, started by its .pth file as in any venv
    # with setuptools (torch requires it)
    shim = osp.join(paths['purelib'], 'distutils-precedence.pth')
    if osp.isfile(shim):
        shutil.copy(shim, site)
    return py, site


def check(work):
    env = {k: v for k, v in os.environ.items()
           if k not in ('PYTHONPATH', 'PYTHONHOME', 'VIRTUAL_ENV')}
    env.update(OMP_NUM_THREADS='1', MKL_NUM_THREADS='1',
               PYTHONDONTWRITEBYTECODE='1')

    step = '1 fresh venv'
    venv = osp.join(work, 'venv')
    py, site = make_venv(venv)
    env['PATH'] = osp.join(venv, 'bin') + os.pathsep + env.get('PATH', '')
    log(f'{step}: {venv} (python {sys.version.split()[0]}; torch, mmcv, '
        f'mmdet, mmpretrain, openmim from {sysconfig.get_paths()["purelib"]})')

    step = '2 pip install .'
    src = osp.join(work, 'src')
    shutil.copytree(REPO, src, ignore=shutil.ignore_patterns(*SKIP),
                    symlinks=True)
    # the build uses this environment's setuptools, as `make install` does
    run(step, [py, '-m', 'pip', 'install', '--no-build-isolation',
               '--no-deps', '--ignore-installed', '--no-cache-dir', '.'],
        src, env, 600,
        keep=(r'Successfully|Building wheel|Created wheel|ERROR'))
    expect(step, not osp.islink(osp.join(src, 'mmcpvt', '.mim', 'configs')),
           'the build copied configs/ into mmcpvt/.mim (copy mode)')

    step = '3 import from the venv'
    out = run(step, [py, '-c', (
        'import os.path as osp, mmcpvt, mmcpvt.apis as a\n'
        'from mmpretrain import list_models\n'
        'from mmpretrain.apis.model import ModelHub\n'
        'p = osp.dirname(mmcpvt.__file__)\n'
        'print("mmcpvt", mmcpvt.__version__, "from", mmcpvt.__file__)\n'
        'print("mim_root", a.get_mim_root())\n'
        'for n in ("configs", "tools", "model-index.yml"):\n'
        '    q = osp.join(p, ".mim", n)\n'
        '    print(".mim", n, "link" if osp.islink(q) else "file",'
        ' osp.exists(q))\n'
        'print("list_models(\'cpvt-tiny\'):", list_models("cpvt-tiny"))\n'
        'm = ModelHub.get("cpvt-tiny_4xb256_in1k")\n'
        'print("ModelHub.get config:", m.config.filename)\n')],
        work, env, 300,
        keep=(r'^(mmcpvt|mim_root|\.mim|list_models|ModelHub)',))
    pkg = osp.join(site, 'mmcpvt')
    expect(step, f'from {osp.join(pkg, "__init__.py")}' in out,
           f'mmcpvt imports from {pkg}, not from the repository')
    expect(step, f'mim_root {osp.join(pkg, ".mim")}' in out,
           'mmcpvt.apis reads the installed mmcpvt/.mim')
    for name in ('configs', 'tools', 'model-index.yml'):
        expect(step, f'.mim {name} file True' in out,
               f'mmcpvt/.mim/{name} is in the package (not a link)')
    expect(step, "'cpvt-tiny_4xb256_in1k'" in out and
           f'config: {osp.join(pkg, ".mim", "configs")}' in out,
           "mmpretrain's list_models / get_model find our models in the "
           'installed package')

    step = '4 mim search'
    out = run(step, [py, '-m', 'mim', 'search', 'mmcpvt', '--config',
                     'cpvt-tiny_4xb256_in1k'], work, env, 300,
              keep=(r'^\S+ {2,}\S', r'Error'))
    expect(step, 'config id: cpvt-tiny_4xb256_in1k' in out and
           'configs/cpvt/cpvt-tiny_4xb256_in1k.py' in out,
           'mim reads the installed model-index')
    expect(step, 'accuracy' not in out,
           "mim shows no accuracy: the paper's numbers are not in Results")

    tools = osp.join(pkg, '.mim', 'tools')
    step = '5 mim train mmcpvt'
    imagenet = osp.join(work, 'imagenet')
    make_imagenet(imagenet, num_classes=2, train_per_class=2,
                  val_per_class=1, size=48, seed=0)
    options = [f'{split}_dataloader.dataset.data_root={imagenet}'
               for split in ('train', 'val', 'test')]
    options += [f'{split}_dataloader.{o}' for split in ('train', 'val', 'test')
                for o in LOADER_OPTIONS]
    options += ['train_cfg.max_epochs=1', 'default_hooks.logger.interval=1']
    work_cls = osp.join(work, 'work_mim_cls')
    out = run(step, [py, '-m', 'mim', 'train', 'mmcpvt', MIM_CONFIG,
                     '--work-dir', work_cls, '--cfg-options', *options],
              work, env, 600,
              keep=(r'find the config file', r'Training command',
                    r'Epoch\(train\)', r'Epoch\(val\)', r'Error'))
    expect(step, f'will use {osp.join(pkg, ".mim", "configs", "cpvt")}' in out,
           f'mim found {MIM_CONFIG} in the installed package')
    expect(step, f'{osp.join(tools, "train.py")} ' in out,
           'mim ran the installed mmcpvt/.mim/tools/train.py')
    expect(step, osp.isfile(osp.join(work_cls, 'epoch_1.pth')) and
           re.search(r'Epoch\(val\) \[1\].*accuracy/top1', out) is not None,
           'trained 1 epoch, saved epoch_1.pth and validated')

    step = '6 mim train mmdet'
    coco = osp.join(work, 'coco') + '/'
    make_coco(coco, num_train=2, num_val=2, size=128, num_classes=4, seed=0)
    config = osp.join(work, 'retinanet_pvt-t-peg_check.py')
    base = osp.join(pkg, '.mim', 'configs', 'demo',
                    'retinanet_pvt-t-peg_demo_coco.py')
    with open(config, 'w') as f:
        f.write(DET_CONFIG.format(base=base, data_root=coco))
    work_det = osp.join(work, 'work_mim_det')
    out = run(step, [py, '-m', 'mim', 'train', 'mmdet', config, '--work-dir',
                     work_det], work, env, 600,
              keep=(r'Training command', r'Epoch\(train\)',
                    r'Epoch\(val\).*bbox_mAP', r'Error'))
    mmdet_train = re.search(r'Training command is \S+ (\S+)', out)
    expect(step, mmdet_train is not None and mmdet_train.group(1).endswith(
        osp.join('mmdet', '.mim', 'tools', 'train.py')),
        f'mim ran mmdet\'s own tools/train.py '
        f'({mmdet_train.group(1) if mmdet_train else "?"})')
    expect(step, 'PVTPEG' in out and
           osp.isfile(osp.join(work_det, 'epoch_1.pth')) and
           re.search(r'coco/bbox_mAP: [\d.]+', out) is not None,
           'RetinaNet PVT-T+PEG trained 1 epoch and validated (COCO mAP)')


def main(argv=None):
    parser = argparse.ArgumentParser(
        description='pip install . into a fresh venv, then mim search, '
        'mmpretrain.list_models, mim train mmcpvt and mim train mmdet')
    parser.add_argument(
        '--work-dir', help='where the venv, data and runs go (emptied '
        'first); defaults to a new temporary folder')
    parser.add_argument('--keep', action='store_true',
                        help='keep the work dir (always kept on failure)')
    args = parser.parse_args(argv)

    if args.work_dir:
        work = osp.abspath(args.work_dir)
        if osp.realpath(work).startswith(osp.realpath(REPO) + os.sep):
            parser.error(f'--work-dir {work} is inside the repository '
                         f'{REPO}; the check runs outside it, so that '
                         'nothing is imported from the checkout')
        shutil.rmtree(work, ignore_errors=True)
        os.makedirs(work)
    else:
        work = tempfile.mkdtemp(prefix='mmcpvt_check_package_')
    start = time.time()
    try:
        check(work)
    except (CheckFailed, subprocess.SubprocessError) as e:
        log(f'FAILED after {time.time() - start:.0f} s: {e}')
        log(f'kept for inspection: {work}')
        return 1
    log(f'all steps passed in {time.time() - start:.0f} s')
    if args.keep:
        log(f'kept: {work}')
    else:
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == '__main__':
    sys.exit(main())
