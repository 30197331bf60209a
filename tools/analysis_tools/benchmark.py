"""Speed and memory of mmcpvt's models beside the implementations users run
today (mmpretrain, timm, mmdet); the method is in docs/benchmarks.md.

A fresh process (mmcpvt.apis.measure) measures one model; the processes of
a pair run in ABBA order, and the ratio (ours / theirs throughput, > 1: ours
faster) is the median of the blocks' ratios, with a distribution-free 95 %
interval. Results go to stdout, a progress line per block to stderr.

    python tools/analysis_tools/benchmark.py                  # the targets
    python tools/analysis_tools/benchmark.py \
        --pairs cpvt-tiny:deit-tiny@mmpretrain --train
    python tools/analysis_tools/benchmark.py --compile cpvt-tiny pvt-tiny-peg
    python tools/analysis_tools/benchmark.py --memory pvt-small-peg-gap \
        --with-cp
    python tools/analysis_tools/benchmark.py --device cuda --amp bf16 \
        --targets tools/analysis_tools/benchmark_targets_gpu.yml
"""
import argparse
import json
import math
import os
import statistics
import sys
import time
from dataclasses import asdict, dataclass, replace
from typing import Callable

import torch
import yaml

from mmcpvt.apis.cli import check_options, positive
from mmcpvt.apis.measure import (MODELS, Settings, device_arg, header,
                                 is_detector, run_child)

TARGETS = os.path.join(os.path.dirname(os.path.abspath(__file__)),
                       'benchmark_targets.yml')
TARGET_KEYS = {'ours', 'theirs', 'what', 'size', 'ratio'}
COMPILED = ('cpvt-tiny', 'pvt-tiny-peg', 'swin-tiny-peg')  # --compile
DETECTOR_BATCH = 2  # the images per GPU of the RetinaNet configs


@dataclass
class Job:
    ours: Settings
    theirs: Settings
    target: float | None = None  # the least ours / theirs wanted


@dataclass
class Result:  # --json writes a list of them
    job: Job
    ours_s: list[float]  # the median s/call of each run
    theirs_s: list[float]
    ratio: float  # ours / theirs throughput: median over ABBA blocks
    ci95: tuple[float, float]  # 95 % interval of that median


def median_interval(values, level=0.95):
    """Distribution-free interval of the median: the k-th smallest and
    largest value, k the largest for which the binomial(n, 1/2) tails leave
    ``level`` between them; (min, max) where n is too small."""
    xs = sorted(values)
    n, k, tail = len(xs), 0, 0.
    while True:  # P(fewer than k+1 of n values below the median)
        tail += math.comb(n, k) / 2**n
        if 1 - 2 * tail < level:
            break
        k += 1
    k = max(k, 1)
    return xs[k - 1], xs[n - k]


def compare(job: Job, runs: int,
            on_block: Callable[[int], None] = lambda k: None) -> Result:
    """``runs`` processes of each model of a pair, ours, theirs, theirs,
    ours, ...: each ABBA block's ratio (theirs' summed time over ours')
    cancels an advantage of either position and a linear drift.
    ``on_block(k)`` follows the k-th block."""
    times, blocks = ([], []), []
    for i in range(runs):
        for j in ((0, 1) if i % 2 == 0 else (1, 0)):
            times[j].append(run_child((job.ours, job.theirs)[j])['seconds'])
        if i % 2 == 1:
            blocks.append(sum(times[1][-2:]) / sum(times[0][-2:]))
            on_block(len(blocks))
    return Result(job, *times, statistics.median(blocks),
                  median_interval(blocks))


def plan(args) -> list[Job]:
    """The pairs of the command line (with --train also training steps)."""
    if args.compile is not None or args.pairs:
        pairs = args.pairs or [(m, m) for m in args.compile or COMPILED]
        targets = [dict(ours=o, theirs=t, what='forward', size=size,
                        ratio=None)
                   for o, t in pairs for size in args.sizes or [224]]
    else:
        targets = [t for t in args.target_list
                   if not args.sizes or t['size'] in args.sizes]
    jobs = []
    for t in targets:
        batch = DETECTOR_BATCH if is_detector(t['ours']) else args.batch
        train = ['train'] if args.train and t['what'] != 'train' else []
        for what in [t['what']] + train:
            s = replace(args.settings, model=t['ours'], what=what,
                        size=t['size'], batch=batch)
            jobs.append(Job(replace(s, compile=args.compile is not None),
                            replace(s, model=t['theirs']),
                            t['ratio'] if what == t['what'] else None))
    return jobs


def format_result(r: Result) -> str:
    ours, theirs, target = r.job.ours, r.job.theirs, r.job.target
    names = ((f'{ours.model} [inductor]', f'{theirs.model} [eager]')
             if ours.compile else (ours.model, theirs.model))
    figures = [f'{ours.batch / statistics.median(t):8.2f} img/s'
               for t in (r.ours_s, r.theirs_s)]  # batch / median s/call
    lo, hi = r.ci95
    verdict = ''
    if target is not None:
        # met or missed only where the interval says so
        verdict = f'  target >= {target:.2f}: ' + (
            'met' if lo > target else 'MISSED' if hi < target else
            f'unresolved (median {"above" if r.ratio >= target else "below"}'
            ', the 95 % interval holds the target)')
    return (f'{ours.what:7s} {ours.size:4d}px b{ours.batch:<3d} '
            f'{names[0]:26s} {figures[0]}  vs  {names[1]:30s} {figures[1]}'
            f'  ratio {r.ratio:.3f} [{lo:.3f}, {hi:.3f}]{verdict}')


def pair(text: str) -> list[str]:
    """The type of --pairs: OURS:THEIRS, two names of MODELS."""
    names = text.split(':')
    if len(names) != 2 or not set(names) <= set(MODELS):
        raise argparse.ArgumentTypeError(
            f'{text!r} given; allowed: OURS:THEIRS, each one of '
            f'{", ".join(MODELS)}')
    return names


def parse_args(argv=None):
    parser = argparse.ArgumentParser(
        description=__doc__.split('\n')[0],
        formatter_class=argparse.RawDescriptionHelpFormatter)
    add = parser.add_argument
    add('--pairs', nargs='+', type=pair, metavar='OURS:THEIRS', help='pairs '
        'to compare (default: the targets); a model against itself: noise')
    add('--targets', default=TARGETS, help='default: %(default)s')
    add('--compile', nargs='*', metavar='MODEL', help='torch.compile '
        f'(inductor) against eager for each MODEL (default: {COMPILED})',
        choices=[m for m in MODELS if not is_detector(m)])
    add('--memory', nargs='*', metavar='MODEL', choices=MODELS, help='peak '
        'memory of a training step of each MODEL (default: '
        'pvt-small-peg-gap)')
    add('--sizes', type=int, nargs='+',
        help="input sizes (default: each target's, or 224; --memory: 512)")
    add('--batch', type=int, default=16,
        help=f'batch of backbones (detectors: {DETECTOR_BATCH})')
    add('--threads', type=int, default=torch.get_num_threads())
    add('--device', default='cpu', help='cpu (default) or cuda[:N]')
    add('--amp', choices=('fp32', 'bf16', 'fp16'), default='fp32',
        help='fp32 (default; TF32 off on a GPU), or autocast to bf16, or to '
        'fp16 with GradScaler')
    add('--with-cp', action='store_true', help='gradient checkpointing')
    add('--train', action='store_true', help='also the training steps')
    add('--runs', type=int, default=12, help='processes a model, rounded '
        'up to whole ABBA blocks; 12 give 6 blocks, the fewest for a 95 %% '
        'interval')
    add('--min-time', type=float, default=3., help='seconds of '
        'timed calls in a process (blocked_autorange; default: %(default)s)')
    add('--json', help='also write the results here')
    args = parser.parse_args(argv)
    try:
        check_options(positive, sizes=args.sizes, batch=args.batch,
                      threads=args.threads, runs=args.runs,
                      min_time=args.min_time)
        check_options(device_arg, device=args.device)
    except ValueError as e:
        parser.error(str(e))
    args.runs += args.runs % 2
    if not (args.pairs or args.compile is not None
            or args.memory is not None):
        with open(args.targets) as f:
            args.target_list = yaml.safe_load(f)
        for t in args.target_list:
            if not (set(t) == TARGET_KEYS and t['what'] in ('forward', 'train')
                    and {t['ours'], t['theirs']} <= set(MODELS)):
                parser.error(f'argument --targets: {t} in {args.targets}; '
                             f'allowed: {TARGET_KEYS}, what: forward or '
                             f'train, models: {", ".join(MODELS)}')
    args.settings = Settings('', batch=args.batch, threads=args.threads,
                             device=args.device, amp=args.amp,
                             with_cp=args.with_cp, min_time=args.min_time)
    return args


def main(argv=None):
    args = parse_args(argv)
    try:
        results = memory(args) if args.memory is not None else speed(args)
    except RuntimeError as e:
        sys.exit(f'benchmark: a measuring process {e}')
    if args.json:
        with open(args.json, 'w') as f:
            json.dump(results, f, indent=1)


def memory(args) -> list[dict]:
    results = []
    for name in args.memory or ['pvt-small-peg-gap']:
        for size in args.sizes or [512]:
            s = replace(args.settings, model=name, task='memory',
                        what='train', size=size)
            results.append(run_child(s))
            print(f'memory  {name:28s} {size}px  peak '
                  f'{results[-1]["peak_mib"]:8.1f} MiB', flush=True)
    return results


def speed(args) -> list[dict]:
    print(f'{header(args.device, args.threads)}; {args.amp}'
          f'{", with_cp" if args.with_cp else ""}; each model alone in its '
          f'own process, {args.runs} of each, timed for >= '
          f'{args.min_time:g} s after warming up', flush=True)
    results, jobs, start = [], plan(args), time.monotonic()
    blocks = args.runs // 2
    for i, job in enumerate(jobs):
        def progress(k):  # a line on stderr after each ABBA block
            done, elapsed = i * blocks + k, time.monotonic() - start
            left = elapsed / done * (len(jobs) * blocks - done)
            print(f'[{done}/{len(jobs) * blocks} blocks] {job.ours.what} '
                  f'{job.ours.size}px {job.ours.model} vs {job.theirs.model}'
                  f', block {k}/{blocks}: {elapsed / 60:.1f} min so far, '
                  f'~{left / 60:.1f} min left', file=sys.stderr, flush=True)

        results.append(compare(job, args.runs, progress))
        print(format_result(results[-1]), flush=True)
    return [asdict(r) for r in results]


if __name__ == '__main__':
    main()
