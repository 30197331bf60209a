"""Helpers shared by the tests that run the tools as a user does."""
import glob
import os
import os.path as osp
import subprocess
import sys

ROOT = osp.dirname(osp.dirname(osp.abspath(__file__)))


def run_tool(*args, timeout=300):
    """``python *args`` from the repository root, output captured.

    One intra-op thread: on a shared, busy 2-core CPU more threads make
    these runs many times slower (they wait on each other), never faster.
    """
    env = dict(os.environ, OMP_NUM_THREADS='1', MKL_NUM_THREADS='1')
    return subprocess.run([sys.executable, *args], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=timeout)


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
