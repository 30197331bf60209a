"""``pip install .`` into a fresh virtual environment, then ``mim train
mmcpvt CONFIG`` and mmdet's own ``tools/train.py`` with our config, from
outside the repository: check_package.py of this folder, run as a user runs
it (its docstring lists what each step checks)."""
import re

from tests.utils import explain, run_tool


def test_pip_install_then_mim_train_and_mmdet_train(tmp_path):
    work = tmp_path / 'check'
    proc = run_tool('tests/test_packaging/check_package.py', '--work-dir',
                    str(work), timeout=900)
    assert proc.returncode == 0, explain(proc)
    out = proc.stdout
    assert '[check_package] all steps passed' in out, explain(proc)
    for step in ('2 pip install .', '3 import from the venv',
                 '4 mim search', '5 mim train mmcpvt', '6 mim train mmdet'):
        assert re.search(rf'\[check_package\] {re.escape(step)}: ok: ', out), \
            step
    assert 'FAILED' not in out
    assert not work.exists()  # cleaned up after success
