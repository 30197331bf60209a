import os
import os.path as osp
import platform
import shutil
import sys
import warnings

from setuptools import find_packages, setup

ROOT = osp.dirname(osp.abspath(__file__))
# What `mim` (openmim) and mmpretrain's model hub read from an installed
# package: mmcpvt/.mim/{configs,tools,model-index*.yml}.
MIM_FILES = ('configs', 'tools', 'model-index.yml',
             'model-index-mmpretrain.yml')


def read_requirements(name):
    """Requirement lines of requirements/NAME, comments dropped.

    runtime.txt and openmmlab.txt give compatible ranges (what a user's
    environment may hold); `make install` installs them under the exact,
    tested versions of requirements/constraints.txt.
    """
    path = osp.join(ROOT, 'requirements', name)
    with open(path) as f:
        return [
            line.split('#')[0].strip() for line in f
            if line.split('#')[0].strip()
        ]


def get_version():
    scope = {}
    with open(osp.join(ROOT, 'mmcpvt', 'version.py')) as f:
        exec(f.read(), scope)
    return scope['__version__']


def _install_mode():
    """'symlink' for an editable install, 'copy' for a wheel or an sdist,
    None for anything else (egg_info, metadata only)."""
    # pip install -e .: `develop` (legacy) or `editable_wheel` (PEP 660)
    if 'develop' in sys.argv or 'editable_wheel' in sys.argv:
        # symlinks need privileges on Windows
        return 'copy' if platform.system() == 'Windows' else 'symlink'
    # pip install . / pip wheel . / python -m build
    if 'bdist_wheel' in sys.argv or 'sdist' in sys.argv:
        return 'copy'
    return None


def _remove(path):
    # a symlink (an earlier editable install) is removed, never followed
    if osp.islink(path) or osp.isfile(path):
        os.remove(path)
    elif osp.isdir(path):
        shutil.rmtree(path)


def add_mim_extension():
    """Put configs/, tools/ and model-index.yml into mmcpvt/.mim, as
    OpenMMLab packages do (mmdet's setup.py): `mim train mmcpvt CONFIG`
    finds its configs and tools/train.py there, and mmpretrain's model hub
    our model-index (mmcpvt.apis). Symlinks to the originals for an
    editable install, copies for a wheel or an sdist."""
    mode = _install_mode()
    if mode is None:
        return
    mim_path = osp.join(ROOT, 'mmcpvt', '.mim')
    os.makedirs(mim_path, exist_ok=True)
    for name in MIM_FILES:
        src = osp.join(ROOT, name)
        if not osp.exists(src):
            # building from an sdist: the copies are already in .mim
            continue
        tar = osp.join(mim_path, name)
        _remove(tar)
        if mode == 'symlink':
            try:
                os.symlink(osp.relpath(src, mim_path), tar)
                continue
            except OSError as e:
                warnings.warn(f'cannot symlink {tar} -> {src} ({e}); '
                              'copying it instead')
        if osp.isdir(src):
            shutil.copytree(
                src, tar,
                ignore=shutil.ignore_patterns('__pycache__', '*.pyc'))
        else:
            shutil.copyfile(src, tar)


if __name__ == '__main__':
    add_mim_extension()
    setup(
        name='mmcpvt',
        version=get_version(),
        description='Conditional Positional Encodings for Vision '
        'Transformers (CPVT) for OpenMMLab: mmpretrain, mmdet and mmseg',
        long_description=open(osp.join(ROOT, 'README.md')).read(),
        long_description_content_type='text/markdown',
        keywords='computer vision, vision transformer, positional encoding',
        packages=find_packages(include=('mmcpvt', 'mmcpvt.*')),
        # mmcpvt/.mim (MANIFEST.in)
        include_package_data=True,
        python_requires='>=3.8',
        install_requires=read_requirements('runtime.txt'),
        extras_require={
            'all': read_requirements('openmmlab.txt'),
            'tests': read_requirements('tests.txt'),
            'mim': read_requirements('mim.txt'),
            'rope': read_requirements('rope.txt'),
        },
        # the text: LICENSE (in the wheel's .dist-info as well)
        license='Apache License 2.0',
        classifiers=[
            'Operating System :: OS Independent',
            'Programming Language :: Python :: 3',
            'Topic :: Scientific/Engineering :: Artificial Intelligence',
        ],
        zip_safe=False)
