import os.path as osp

from setuptools import find_packages, setup


def read_requirements(name):
    path = osp.join(osp.dirname(__file__), 'requirements', name)
    with open(path) as f:
        return [
            line.split('#')[0].strip() for line in f
            if line.split('#')[0].strip()
        ]


def get_version():
    scope = {}
    with open(osp.join('mmcpvt', 'version.py')) as f:
        exec(f.read(), scope)
    return scope['__version__']


setup(
    name='mmcpvt',
    version=get_version(),
    description='Conditional Positional Encodings for Vision Transformers '
    '(CPVT) for OpenMMLab: mmpretrain, mmdet and mmseg',
    long_description=open('README.md').read(),
    long_description_content_type='text/markdown',
    packages=find_packages(exclude=('configs', 'tools', 'tests', 'docs')),
    python_requires='>=3.8',
    install_requires=read_requirements('runtime.txt'),
    extras_require={
        'all': read_requirements('openmmlab.txt'),
        'tests': read_requirements('tests.txt'),
    },
    license='Apache License 2.0',
    zip_safe=False)
