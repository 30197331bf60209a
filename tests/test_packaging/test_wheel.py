"""The wheel of ``pip install .`` and the editable install of ``make
install``, built from a copy of the checkout: the wheel carries configs/,
tools/ and the model-indexes in ``mmcpvt/.mim`` (what mim and mmpretrain's
hub read), version ranges and the licence; the editable install links
``mmcpvt/.mim`` to the checkout, and building the wheel over it replaces the
links, never what they point to.
"""
import email.parser
import glob
import os
import os.path as osp
import shutil
import subprocess
import sys
import zipfile

import yaml

from tests.test_packaging.check_package import SKIP, make_venv
from tests.utils import ROOT, explain

MIM_SUFFIXES = {'configs': ('.py', '.yml', '.md'),
                'tools': ('.py', '.sh', '.yml')}
MIM_NAMES = ('configs', 'tools', 'model-index.yml',
             'model-index-mmpretrain.yml')


def _tree_files(root, folder, suffixes):
    files = set()
    for path in glob.glob(osp.join(root, folder, '**', '*'), recursive=True):
        if osp.isfile(path) and path.endswith(suffixes):
            files.add(osp.relpath(path, root))
    return files


def test_editable_install_then_wheel(tmp_path):
    """A copy of the checkout, installed editable into a fresh venv, then
    built into a wheel (which turns the editable links into copies)."""
    src = str(tmp_path / 'src')
    shutil.copytree(ROOT, src, ignore=shutil.ignore_patterns(*SKIP))
    py, _ = make_venv(str(tmp_path / 'venv'))
    env = dict(os.environ, PYTHONDONTWRITEBYTECODE='1')

    def run(*args):
        proc = subprocess.run(args, cwd=str(tmp_path), env=env, text=True,
                              capture_output=True, timeout=300)
        assert proc.returncode == 0, explain(proc)
        return proc.stdout

    run(py, '-m', 'pip', 'install', '--no-build-isolation', '--no-deps',
        '--ignore-installed', '-e', src)
    # the editable install finds mmcpvt in the copy (find_spec imports
    # nothing), and links mmcpvt/.mim to it
    assert run(py, '-c', 'import importlib.util as u; '
               'print(u.find_spec("mmcpvt").origin)').strip() == osp.join(
                   src, 'mmcpvt', '__init__.py')
    mim = osp.join(src, 'mmcpvt', '.mim')
    assert {name: os.readlink(osp.join(mim, name)) for name in MIM_NAMES} \
        == {name: f'../../{name}' for name in MIM_NAMES}
    originals = {folder: _tree_files(src, folder, suffixes)
                 for folder, suffixes in MIM_SUFFIXES.items()}

    run(sys.executable, '-m', 'pip', 'wheel', '--no-deps',
        '--no-build-isolation', '-w', str(tmp_path / 'dist'), src)
    wheel, = glob.glob(str(tmp_path / 'dist' / 'mmcpvt-*.whl'))
    # the build replaced the links, not what they pointed to
    for name in MIM_NAMES:
        assert not osp.islink(osp.join(mim, name)), name
    for folder, suffixes in MIM_SUFFIXES.items():
        files = originals[folder]
        assert files and _tree_files(src, folder, suffixes) == files
        assert _tree_files(mim, folder, suffixes) == files

    with zipfile.ZipFile(wheel) as z:
        names = set(z.namelist())
        index = yaml.safe_load(z.read('mmcpvt/.mim/model-index.yml'))
        metafiles = {m: yaml.safe_load(z.read('mmcpvt/.mim/' + m))
                     for m in index['Import']}
        meta = email.parser.Parser().parsestr(
            z.read('mmcpvt-0.1.0.dist-info/METADATA').decode())
        licence = z.read('mmcpvt-0.1.0.dist-info/licenses/LICENSE').decode()
    # the wheel ships configs/, tools/ and the model-indexes
    for folder, suffixes in MIM_SUFFIXES.items():
        expected = {'mmcpvt/.mim/' + f
                    for f in _tree_files(src, folder, suffixes)}
        assert expected and expected <= names, sorted(expected - names)
    assert 'mmcpvt/.mim/model-index-mmpretrain.yml' in names
    # every config the metafiles name is in the wheel
    for meta_file in metafiles.values():
        for model in meta_file['Models']:
            assert 'mmcpvt/.mim/' + model['Config'] in names, model['Name']
    # the library and its metadata only: no tests/, no top-level configs/
    tops = {n.split('/')[0] for n in names}
    assert tops == {'mmcpvt', 'mmcpvt-0.1.0.dist-info'}, tops
    # with what the tools import: every subpackage
    for module in ('apis/model_index.py', 'apis/cli.py', 'analysis/blocks.py',
                   'datasets/synthetic/coco.py', 'evaluation/bootstrap.py'):
        assert f'mmcpvt/{module}' in names, module
    assert not [n for n in names if '__pycache__' in n or n.endswith('.pyc')]

    # version ranges, extras and the licence
    requires = meta.get_all('Requires-Dist')
    runtime = sorted(r for r in requires if 'extra ==' not in r)
    assert runtime == [
        'mmcv<2.2.0,>=2.0.0', 'mmengine<1.0.0,>=0.10.0', 'numpy'
    ], runtime
    assert {'all', 'tests', 'mim', 'rope'} <= set(
        meta.get_all('Provides-Extra'))
    assert 'openmim>=0.3.7; extra == "mim"' in requires
    assert 'timm<2.0.0,>=1.0.31; extra == "rope"' in requires
    for name in ('mmdet', 'mmsegmentation', 'mmpretrain'):
        spec, = [r for r in requires
                 if r.startswith(name) and 'extra == "all"' in r]
        assert '<' in spec and '>=' in spec, spec
    assert meta['License'] == 'Apache License 2.0'  # setup.py's licence=
    with open(osp.join(ROOT, 'LICENSE')) as f:
        assert licence == f.read()


def _requirements(name):
    from packaging.requirements import Requirement
    with open(osp.join(ROOT, 'requirements', name)) as f:
        lines = [line.split('#')[0].strip() for line in f]
    return [Requirement(line) for line in lines if line]


def test_tested_pins_satisfy_the_ranges():
    """`make install` installs requirements/*.txt under constraints.txt: an
    exact version per OpenMMLab package, which setup.py's ranges admit."""
    from packaging.utils import canonicalize_name
    pins = {}
    for req in _requirements('constraints.txt'):
        spec, = req.specifier
        assert spec.operator == '==', f'{req}: constraints.txt pins exactly'
        pins[canonicalize_name(req.name)] = spec.version
    ranged = [r for f in ('runtime.txt', 'openmmlab.txt', 'mim.txt',
                          'rope.txt')
              for r in _requirements(f)]
    for req in ranged:
        assert not [s for s in req.specifier if s.operator == '=='], \
            f'{req}: an exact pin belongs in constraints.txt'
        name = canonicalize_name(req.name)
        if name in pins:
            assert req.specifier.contains(pins[name]), (req, pins[name])
    assert {'mmengine', 'mmcv', 'mmdet', 'mmsegmentation', 'mmpretrain',
            'openmim'} <= set(pins)
