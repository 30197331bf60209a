"""retain_freed_memory: after it, re-allocating freed tensors faults no
page in. Run in a subprocess: it changes process-wide malloc settings."""
import subprocess
import sys


CHILD = r'''
import resource, sys, torch
from mmcpvt.utils.malloc import retain_freed_memory
if sys.argv[1] == 'retain':
    assert retain_freed_memory() is True
else:  # glibc's documented static defaults, without its dynamic raise
    assert retain_freed_memory(128 * 1024, 128 * 1024) is True
faults = []
for i in range(10):
    f0 = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    # a few MiB-sized tensors alive at once, then all freed, as in a forward
    ts = [torch.ones(2**20 + 4096 * j) for j in range(6)]
    big = torch.ones(3 * 2**20)
    del ts, big
    faults.append(resource.getrusage(resource.RUSAGE_SELF).ru_minflt - f0)
print(sorted(faults[4:])[3])  # upper median of the last 6 rounds
'''


def child(mode):
    out = subprocess.run([sys.executable, '-c', CHILD, mode],
                         capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    return int(out.stdout.strip().splitlines()[-1])


def test_retained_memory_is_reused_without_page_faults():
    if not sys.platform.startswith('linux'):  # no glibc: a refusal, no-op
        from mmcpvt.utils.malloc import retain_freed_memory
        assert retain_freed_memory() is False
        return
    small, retained = child('small'), child('retain')
    assert retained == 0, retained
    # the same pattern with small thresholds maps and trims the freed
    # memory, and faults it in again on every round
    assert small > 1000, small
