"""tools/install: the carried set of a GPU machine without network
(gpu_wheels.sh, from the package registry) and the GPU check (gpu_check.py)
in its CPU mode, end to end, as a GPU machine runs it; a step that crashes,
hangs or fails leaves its stacks and stops no other step."""
import glob
import os
import os.path as osp
import re
import subprocess
import sys
import zipfile

import pytest

from tests.utils import ROOT, explain, load_script

GPU_WHEELS = osp.join(ROOT, 'tools', 'install', 'gpu_wheels.sh')


def gpu_wheels(python_version, folder):
    proc = subprocess.run(['bash', GPU_WHEELS, python_version, str(folder)],
                          cwd=ROOT, capture_output=True, text=True,
                          timeout=600, env=dict(os.environ, PY=sys.executable))
    assert proc.returncode == 0, explain(proc)
    return proc


@pytest.fixture(scope='module')
def carried(tmp_path_factory):
    """The carried set for this Python, the one the CPU mode installs."""
    folder = tmp_path_factory.mktemp('carried')
    gpu_wheels('%d.%d' % sys.version_info[:2], folder)
    return folder


def test_carried_set_for_python_3_12(tmp_path):
    proc = gpu_wheels('3.12', tmp_path / 'whl')
    files = sorted(os.listdir(tmp_path / 'whl'))
    names = {re.split(r'-\d', f)[0].lower() for f in files}
    assert {'mmengine', 'mmdet', 'mmsegmentation', 'mmpretrain', 'mmcpvt',
            'pycocotools', 'shapely', 'terminaltables', 'setuptools'} <= names
    assert 'mmcv-2.1.0.tar.gz' in files
    # what the machine has stays out, whatever version pip resolved
    with open(osp.join(ROOT, 'tools', 'install', 'gpu_packages.txt')) as f:
        there = {re.sub(r'[-_.]+', '_', line.strip()).lower()
                 for line in f if not line.startswith('#')}
    assert not (names & there) - {'setuptools'}
    assert 'opencv_python' not in names  # the machine's headless cv2 serves
    for f in files:
        if f.endswith('.whl'):
            python, abi, platform = f[:-4].split('-')[-3:]
            assert python in ('py3', 'py2.py3') and abi == 'none' or \
                python == 'cp312' or abi == 'abi3', f
            assert platform == 'any' or 'x86_64' in platform, f
        if f.startswith('setuptools-'):
            assert int(f.split('-')[1].split('.')[0]) < 81, f
    size = sum(osp.getsize(tmp_path / 'whl' / f) for f in files)
    assert size <= 60 * 2**20
    assert f'{len(files)} files, {size / 2**20:.1f} MiB' in proc.stdout, \
        proc.stdout


def test_gpu_check_cpu_mode_end_to_end(carried, tmp_path):
    out = tmp_path / 'out'
    proc = subprocess.run(
        [sys.executable, osp.join(ROOT, 'tools', 'install', 'gpu_check.py'),
         str(out), '--cpu', '--carried', str(carried), '--budget', '1500'],
        cwd=tmp_path, capture_output=True, text=True, timeout=1800,
        env=dict(os.environ, OMP_NUM_THREADS='1', CUDA_VISIBLE_DEVICES=''))
    assert proc.returncode == 0, explain(proc)
    table = (out / 'summary.md').read_text()
    assert proc.stdout.endswith(table), explain(proc)
    rows = [[c.strip() for c in r.strip('|').split('|')]
            for r in table.splitlines() if re.match(r'\| \d+ \|', r)]
    assert len(rows) == 12 and all(r[2] == 'ok' for r in rows), table
    figures = {r[1]: r[4] for r in rows}
    # the carried packages are the ones imported
    imported = figures['imports, an mmcv op on the device']
    for name in ('mmengine', 'mmdet', 'mmseg', 'mmpretrain', 'mmcpvt',
                 'pycocotools', 'shapely'):
        assert re.search(rf'\b{name} [\d.]+ \(carried\)', imported), imported
    assert 'mmcv 2.1.0,' in imported and 'kept [0]' in imported, imported
    for name, figure in figures.items():
        if 'train' in name:
            assert re.fullmatch(r'loss [\d.]+ \(iter 1\) -> [\d.]+ \(iter '
                                r'\d+\)', figure), (name, figure)
    assert re.match(r'coco/bbox_mAP \d', figures[
        'RetinaNet PVT-T+PEG: tools/test.py']), table
    assert 'mIoU' in figures['Semantic FPN PVT-T+PEG: tools/test.py'], table
    assert re.search(r'train: ours/theirs [\d.]+ \[[\d.]+, [\d.]+\]',
                     table), table
    assert 'CUDA not available' in table, table
    # the data, configs and logs stay; the checkpoints are removed
    assert len(glob.glob(str(out / 'logs' / '*.log'))) == 12
    assert not glob.glob(str(out / 'work' / '*' / '*.pth'))


def test_a_failed_step_leaves_its_stacks_and_stops_no_other(
        tmp_path, monkeypatch, capsys):
    check = load_script('tools/install/gpu_check.py')
    py = [sys.executable, '-X', 'faulthandler', '-c']
    crash = check.Step('crash', [py + ['import ctypes; ctypes.string_at(0)']],
                       60)
    hang = check.Step('hang', [py + ['import time; time.sleep(60)']], 2)
    steps = [
        crash,
        check.Step('after the crash', [py + ['print("figure 7")']], 60,
                   check.log_figure('figure'), needs=crash),
        hang,
        check.Step('ok', [py + ['print("figure 8")']], 60,
                   check.log_figure('figure')),
        check.Step('needs the hang', [py + ['pass']], 60, needs=hang),
    ]
    monkeypatch.setattr(check, 'steps', lambda *a: steps)
    (tmp_path / 'carried').mkdir()
    with pytest.raises(SystemExit) as refused:  # no carried set
        check.main([str(tmp_path / 'out'), '--carried',
                    str(tmp_path / 'carried')])
    assert refused.value.code == 2
    assert 'no mmcv sdist there' in capsys.readouterr().err
    assert not (tmp_path / 'out').exists()
    (tmp_path / 'carried' / 'mmcv-2.1.0.tar.gz').touch()
    built = tmp_path / 'carried' / 'mmcv_cache' / 'key' / 'mmcv.whl'
    built.parent.mkdir(parents=True)
    built.write_text('an earlier run built it')
    out = tmp_path / 'out'
    assert check.main([str(out), '--cpu', '--carried',
                       str(tmp_path / 'carried')]) == 1
    printed = capsys.readouterr().out
    assert [s.status for s in steps] == [
        'failed (SIGSEGV)', 'skipped (needs: crash)', 'timed out (2 s)', 'ok',
        'skipped (needs: hang)']
    assert steps[3].result == 'figure 8'
    # each failure's stack is in its log and in the output
    logs = sorted(glob.glob(str(out / 'logs' / '*.log')))
    assert len(logs) == 3  # the skipped steps ran nothing
    for log, cause in zip(logs[:2], ('Segmentation fault', 'Aborted')):
        text = open(log).read()
        assert f'Fatal Python error: {cause}' in text, text
        assert 'File "<string>", line 1 in <module>' in text, text
        assert text.splitlines()[-1] in printed
    assert printed.endswith((out / 'summary.md').read_text())
    assert '| 4 | ok | ok |' in printed
    # build_mmcv.sh finds the wheel an earlier run built (MMCPVT_CACHE)
    assert (out / 'mmcv_cache' / 'key' / 'mmcv.whl').read_text() == \
        built.read_text()
