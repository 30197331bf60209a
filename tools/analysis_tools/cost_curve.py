"""How forward time and peak memory grow with the input side, ours beside
the implementations users run instead; the method is in docs/benchmarks.md.

A fresh process (mmcpvt.apis.measure) measures one model at one side:
batch 1, eval mode, no grad. A curve's exponent is the least-squares slope
of log(cost) against log(tokens), tokens = (side / 16) ** 2.

    python tools/analysis_tools/cost_curve.py --json cost.json \
        --plot docs/cost_curve.svg
"""
import argparse
import json
import math
import statistics
import sys
import time

import torch

from mmcpvt.apis.cli import check_options, non_negative, positive
from mmcpvt.apis.measure import (MODELS, Settings, device_arg, header,
                                 is_detector, run_child)
from mmcpvt.utils.path import check_output

# CPVT-Ti, PVTPEG-T, SwinPEG-T, each followed by what users run instead
DEFAULT_MODELS = ['cpvt-tiny', 'deit_tiny_patch16_224@timm', 'pvt-tiny-peg',
                  'pvt-tiny@mmdet', 'swin-tiny-peg', 'swin-tiny@mmdet']


def fit_exponent(xs, ys):
    """Least-squares slope of log(y) against log(x); None under 2 points."""
    pts = [(math.log(x), math.log(y)) for x, y in zip(xs, ys) if y > 0]
    return (statistics.linear_regression(*zip(*pts)).slope
            if len(pts) > 1 else None)


def run(args) -> list[dict]:
    """Every (model, side) point, repeat by repeat (a drift of the machine
    touches every point alike)."""
    points = {(m, s): dict(model=m, side=s, tokens=(s / 16) ** 2, ms=[],
                           mib=[], note=None)
              for m in args.models for s in args.sizes}
    for r in range(args.repeats):
        for (model, side), p in points.items():
            if p['note']:
                continue
            try:
                out = run_child(Settings(
                    model, 'time+memory', size=side, batch=1,
                    threads=args.threads, device=args.device,
                    min_time=args.min_time, max_seconds=args.max_seconds),
                    args.timeout)
            except RuntimeError as e:
                out = dict(note=str(e).partition('\n')[0])
            out.pop('settings', None)
            print(f'[{r + 1}/{args.repeats}] {model} {side}px: {out}',
                  file=sys.stderr, flush=True)
            if out.get('peak_mib', 0) is None:  # too slow: it and above
                for s in args.sizes[args.sizes.index(side):]:
                    points[model, s]['note'] = (
                        f'skipped: {out["seconds"]:.1f} s a forward at '
                        f'{side}px > --max-seconds')
            elif 'note' in out:
                p['note'] = out['note']
            else:
                p['ms'].append(1e3 * out['seconds'])
                p['mib'].append(out['peak_mib'])
    for p in points.values():
        for key in ('ms', 'mib'):
            p[f'{key}_median'] = (None if p['note'] else
                                  statistics.median(p[key]))
    return list(points.values())


def exponents(points: list[dict]) -> dict:
    """Each model's exponents over its medians: time, time between the two
    largest sides, memory."""
    fits = {}
    for model in dict.fromkeys(p['model'] for p in points):
        pts = [p for p in points
               if p['model'] == model and p['ms_median'] is not None]
        x, ms = [p['tokens'] for p in pts], [p['ms_median'] for p in pts]
        fits[model] = dict(time=fit_exponent(x, ms),
                           time_last_two=fit_exponent(x[-2:], ms[-2:]),
                           memory=fit_exponent(x, [p['mib_median']
                                                   for p in pts]))
    return fits


def table(result: dict, key: str, title: str) -> str:
    """Markdown, model x side: median (min-max over processes), exponents."""
    fits = ['time', 'time_last_two'] if key == 'ms' else ['memory']
    rows = []
    for model, fit in result['exponents'].items():
        cells = [model]
        for p in (p for p in result['points'] if p['model'] == model):
            vs, cell = p[key], (p['note'] or '').split(':')[0]
            if not cell:
                cell = f'{statistics.median(vs):.1f}' + (
                    f' ({min(vs):.1f}-{max(vs):.1f})' if len(vs) > 1 else '')
            cells.append(cell)
        rows.append(cells + ['n/a' if fit[f] is None else f'{fit[f]:.2f}'
                             for f in fits])
    head = [title, *(f'{s}px' for s in result['sides']),
            *(f'exponent ({f.replace("_", " ")})' for f in fits)]
    lines = ['| ' + ' | '.join(cells) + ' |' for cells in [head, *rows]]
    return '\n'.join([lines[0], '|---' * len(head) + '|', *lines[1:]])


def plot(result: dict, path: str):
    """Time and memory against the side, log-log: ours solid, theirs dashed,
    a colour per pair."""
    from matplotlib.figure import Figure  # no pyplot: no global backend
    fig = Figure(figsize=(11, 4.5))
    axes = fig.subplots(1, 2)
    for i, model in enumerate(result['exponents']):
        pts = [p for p in result['points']
               if p['model'] == model and p['ms_median'] is not None]
        for ax, key in zip(axes, ('ms_median', 'mib_median')):
            ax.plot([p['side'] for p in pts], [p[key] for p in pts],
                    marker='o', color=f'C{i // 2}', label=model,
                    linestyle='--' if '@' in model else '-')
    axes[0].axhline(1000, color='grey', linestyle=':')  # 1 s an image
    for ax, label in zip(axes, ('forward time, ms', 'peak memory, MiB')):
        ax.set(xscale='log', yscale='log', xlabel='input side, px',
               ylabel=label)
        ax.set_xticks(result['sides'], [str(s) for s in result['sides']])
        ax.minorticks_off()
        ax.grid(alpha=0.3)
    axes[0].legend(fontsize=8)
    fig.suptitle(f'batch 1, {result["device"]}, {result["threads"]} threads,'
                 f' torch {result["torch"]}, {result["date"]}', fontsize=9)
    fig.tight_layout()
    fig.savefig(path, metadata={'Date': None} if path.endswith('.svg') else {})


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    add = parser.add_argument
    add('--models', nargs='+', default=DEFAULT_MODELS, metavar='MODEL',
        choices=[m for m in MODELS if not is_detector(m)],
        help="mmcpvt.apis.measure's names (default: %(default)s)")
    add('--sizes', type=int, nargs='+',
        default=[224, 384, 512, 768, 1024],
        help='input sides, px (default: %(default)s)')
    add('--repeats', type=int, default=3, help='processes a point')
    add('--threads', type=int, default=torch.get_num_threads())
    add('--device', default='cpu', help='cpu or cuda[:N]')
    add('--min-time', default=1., type=float,
        help='seconds of timed forwards a process (blocked_autorange; '
        'default: %(default)s)')
    add('--max-seconds', type=float, default=30.,
        help="a slower forward ends the model's curve: larger sides are "
        'skipped (0: the smallest side alone; default: 30)')
    add('--timeout', type=float, default=600., help='seconds a process '
        'may take; a later one is noted as a timeout (default: 600)')
    add('--json', help='write the results here')
    add('--plot', help='draw the curves here (.svg or .png)')
    args = parser.parse_args(argv)
    try:
        check_options(positive, sizes=args.sizes, repeats=args.repeats,
                      threads=args.threads, timeout=args.timeout)
        check_options(non_negative, min_time=args.min_time,
                      max_seconds=args.max_seconds)
        check_options(device_arg, device=args.device)
        if args.plot and not args.plot.endswith(('.svg', '.png')):
            raise ValueError(f'argument --plot: {args.plot}: it takes an '
                             f'.svg or .png file')
        for option, path in (('--json', args.json), ('--plot', args.plot)):
            if path:  # before minutes of measuring
                check_output(option, path, 'cost_curve' + (
                    '.json' if option == '--json' else '.svg'))
    except ValueError as e:
        parser.error(str(e))
    args.sizes = sorted(set(args.sizes))
    return args


def main():
    args = parse_args()
    points = run(args)
    result = dict(
        date=time.strftime('%Y-%m-%d'), torch=torch.__version__,
        machine=header(args.device, args.threads), device=args.device,
        threads=args.threads, batch=1, repeats=args.repeats,
        sides=args.sizes, tokens='(side / 16) ** 2', points=points,
        exponents=exponents(points))
    print(f'{result["machine"]}; batch 1, {args.repeats} processes a point;'
          ' exponent: slope of log(cost) against log((side / 16) ** 2)\n')
    print(table(result, 'ms', 'forward, ms') + '\n')
    print(table(result, 'mib', 'peak memory, MiB'))
    for p in (p for p in points if p['note']):
        print(f'- {p["model"]} {p["side"]}px: {p["note"]}')
    if args.json:
        with open(args.json, 'w') as f:
            json.dump(result, f, indent=1)
    if args.plot:
        plot(result, args.plot)


if __name__ == '__main__':
    main()
