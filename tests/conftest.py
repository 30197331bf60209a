"""Test-session settings.

One intra-op thread, for the tests and the tools they start: the models
under test are small, and on a 2-core machine two threads per process run
5-40x slower as soon as anything else is running (measured on this
project's CI machine kind). Throughput is measured by
tools/analysis_tools/benchmark.py, not by tests.
"""
import os

os.environ.setdefault('OMP_NUM_THREADS', '1')

import torch  # noqa: E402

torch.set_num_threads(1)
