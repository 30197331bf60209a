import os
import os.path as osp
import sys

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


def get_extensions():
    """The fused CPU kernels (mmcpvt/ops/csrc), built unless
    MMCPVT_WITH_OPS=0. Without them mmcpvt runs PyTorch's operators."""
    if os.getenv('MMCPVT_WITH_OPS', '1') == '0':
        return [], {}
    try:
        from torch.utils.cpp_extension import BuildExtension, CppExtension
    except ImportError:
        print('mmcpvt: torch is not importable here, so the fused CPU '
              'kernels are not built (install torch first and run pip with '
              '--no-build-isolation to build them)', file=sys.stderr)
        return [], {}
    # OpenMP through torch's own runtime (libgomp is already loaded by
    # torch), so torch.set_num_threads governs the kernels too.
    openmp = ['-fopenmp'] if sys.platform.startswith('linux') else []
    ext = CppExtension(
        'mmcpvt._ext', ['mmcpvt/ops/csrc/peg.cpp'],
        extra_compile_args=['-O3'] + openmp,
        extra_link_args=openmp)
    return [ext], {'build_ext': BuildExtension}


ext_modules, cmdclass = get_extensions()

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
    ext_modules=ext_modules,
    cmdclass=cmdclass,
    license='Apache License 2.0',
    zip_safe=False)
