"""Training steps on one device, with measure.py's models and steps: a check
of every mmcpvt backbone, or the throughput beside timm's and mmdet's.

``--check``: each of CHECKED trains ``--steps`` steps in fp32 (also with
gradient checkpointing) and under each ``--amp`` autocast (fp16 with
GradScaler, bf16): the loss and every gradient finite (fp16 steps that
GradScaler skips for an overflow are counted), every weight updated, a
forward at 225x301 finite, and in fp32 the no-grad forward (the FFN's
in-place activation) equal to the autograd one. Exits 1 on a failure.

Otherwise: img/s of a training step (forward, loss, backward, AdamW) of each
of COMPARED in fp32 (TF32 off) and under bf16 autocast, timed by
torch.utils.benchmark, and its peak memory: a markdown table with the device
and the versions. A model whose library does not load here (mmdet without
mmcv's ops) is noted as not available. No GPU figure has been measured yet.

It runs where torch and timm are installed but no OpenMMLab package and no
network (the lent GPU machines): mmengine and mmcv without ops (mmcv-lite)
travel as wheels (tools/install/gpu_wheels.sh); mmcpvt is this clone. With
the device tool's ``run``, ``carry=['.whl']``, ``timeout_s=480``::

    python3 -m pip install -q --no-index --no-deps --no-compile \
        --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
        && export PYTHONPATH=/tmp/site || exit; PYTHONUNBUFFERED=1 \
        python3 tools/analysis_tools/train_step.py --out $OUT/train_step.md

    python tools/analysis_tools/train_step.py --check --amp fp16 bf16
    python tools/analysis_tools/train_step.py --device cpu --quick  # a test
"""
import argparse
import os.path as osp
import sys
import warnings
from dataclasses import replace

import torch
from mmengine.logging import MMLogger

sys.path.insert(0, osp.dirname(osp.abspath(__file__)))
from measure import (Runner, Settings, common, header,  # noqa: E402
                     markdown, measure, positive, row)

warnings.filterwarnings(  # mmcv-lite's, on importing mmcv.cnn
    'ignore', message='Fail to import ``MultiScaleDeformableAttention')
CHECKED = ('cpvt-tiny', 'cpvt-tiny-p0-4-gap', 'pvt-tiny-peg-gap',
           'pvt-tiny-peg', 'swin-tiny-peg-gap', 'swin-tiny-peg')
# each model, and those it is compared with (the first one measured)
COMPARED = {
    'deit_tiny_patch16_224@timm': (),
    'cpvt-tiny': ('deit_tiny_patch16_224@timm', ),
    'deit_small_patch16_224@timm': (),
    'cpvt-small': ('deit_small_patch16_224@timm', ),
    'pvt-tiny@mmdet': (),
    'pvt-tiny-nopeg': (),
    'pvt-tiny-peg': ('pvt-tiny@mmdet', 'pvt-tiny-nopeg'),
}


def check(s: Settings, steps: int) -> tuple[bool, str]:
    """Whether ``s``'s model trains (see the module's docstring), and how."""
    runner, times, skipped = Runner(s), [], 0
    model, x = runner.model, runner.data
    before = [p.detach().clone() for p in model.parameters()]
    for _ in range(steps):
        scale = runner.scaler.get_scale()
        times.append(runner.timed_step())
        bad = [n for n, p in model.named_parameters()
               if p.grad is None or not torch.isfinite(p.grad).all()]
        if bad and runner.scaler.get_scale() < scale:
            skipped += 1  # fp16 overflow: GradScaler skipped this step
        elif bad or not torch.isfinite(runner.loss):
            return False, f'loss {runner.loss.item():.4f}, bad grads {bad[:3]}'
    peak = runner.peak_mib()  # one more step
    changed = sum(not torch.equal(a, p.detach())
                  for a, p in zip(before, model.parameters()))
    model.eval()
    with torch.no_grad(), runner.autocast():
        odd = model(torch.randn(1, 3, 225, 301, device=s.device))
    ok = changed == len(before) and all(torch.isfinite(o).all() for o in odd)
    msg = (f'loss {runner.loss.item():.4f}, {changed}/{len(before)} tensors '
           f'updated ({skipped} overflow steps skipped), step '
           f'{min(times) * 1e3:.1f} ms, peak {peak:.0f} MiB, '
           'odd-size forward ok')
    if s.amp == 'fp32' and not s.with_cp:  # largest |no-grad - autograd|,
        ref = [r.detach() for r in model(x)]  # relative to the largest |out|
        with torch.no_grad():
            rel = max(((o - r).abs().max() / r.abs().max()).item()
                      for o, r in zip(model(x), ref))
        ok = ok and rel <= 1e-4
        msg += f', no-grad forward = autograd forward (rel. diff {rel:.1e})'
    return ok, msg


def compare(s: Settings) -> list[str]:
    """COMPARED's table, each row printed as it is measured, then notes."""
    lines = markdown(['model', 'params (M)', 'fp32 img/s', 'bf16 img/s', 'vs',
                      'fp32 ratio', 'bf16 ratio', 'peak MiB fp32 / bf16'])
    print('\n'.join(lines), flush=True)
    rates, notes = {}, ['']
    for name, anchors in COMPARED.items():
        try:
            runners = [Runner(replace(s, model=name, amp=amp))
                       for amp in ('fp32', 'bf16')]
        except Exception as e:  # theirs, where their library does not load
            if '@' not in name:
                raise
            notes.append(f'{name}: not available ({type(e).__name__}: {e})')
            print(notes[-1], flush=True)
            continue
        figures = [measure(r) for r in runners]
        del runners
        rates[name] = [s.batch / f['seconds'] for f in figures]
        anchor = next((a for a in anchors if a in rates), None)
        ratios = ([f'{a / b:.2f}' for a, b in zip(rates[name], rates[anchor])]
                  if anchor else ['-', '-'])
        lines.append(row([
            name, f'{figures[0]["params"] / 1e6:.1f}',
            *(f'{r:.1f}' for r in rates[name]), anchor or '', *ratios,
            ' / '.join(f'{f["peak_mib"]:.0f}' for f in figures)]))
        print(lines[-1], flush=True)
    return lines + notes


def main():
    parser = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    add = parser.add_argument
    add('--check', action='store_true', help='check that every backbone '
        'trains (default: the throughput table)')
    add('--device', default='cuda')
    add('--amp', nargs='*', default=['fp16', 'bf16'], choices=['fp16', 'bf16'],
        help='--check: autocast dtypes besides fp32 (default: both)')
    add('--cases', nargs='+', choices=CHECKED, default=CHECKED,
        help='--check: these only (default: all)')
    add('--batch', type=positive(int), help='default: 128; --check: 8')
    add('--size', type=positive(int), default=224)
    add('--steps', type=positive(int), default=4, help='--check: steps')
    add('--min-time', type=positive(float), default=3., help='seconds of '
        'timed steps a model (blocked_autorange; default: %(default)s)')
    add('--quick', action='store_true', help='batch 2 at 64 px, 0.1 s of '
        'timed steps: a test that it runs')
    add('--out', help='also write the table here')
    args = parser.parse_args()
    if args.device.startswith('cuda') and not torch.cuda.is_available():
        parser.error('--device cuda: torch sees no GPU here; use --device cpu')
    torch.backends.cuda.matmul.allow_tf32 = False  # fp32 means fp32
    torch.backends.cudnn.allow_tf32 = False
    common.setup()
    MMLogger.get_instance('mmengine').setLevel('WARNING')  # no init dump
    s = Settings('', 'time+memory', 'train', args.size,
                 args.batch or (8 if args.check else 128),
                 torch.get_num_threads(), args.device, min_time=args.min_time)
    if args.quick:
        s = replace(s, batch=2, size=64, min_time=0.1)
    head = header(args.device, s.threads)
    print(head, flush=True)
    if args.check:
        failed = 0
        for name in args.cases:
            for amp, cp in [('fp32', False), ('fp32', True),
                            *((amp, False) for amp in args.amp)]:
                ok, msg = check(replace(s, model=name, amp=amp, with_cp=cp),
                                args.steps)
                failed += not ok
                print(f'[{"ok" if ok else "FAIL"}] {name:20s} {amp} '
                      f'{"+with_cp" if cp else "":8s} {msg}', flush=True)
        print(f'{failed} failed')
        sys.exit(1 if failed else 0)
    lines = [head, f'training step, batch '
             f'{s.batch}, {s.size} px, median over >= {s.min_time:g} s of '
             'steps (fp32: TF32 off)', '']
    print('\n'.join(lines[1:]), flush=True)
    lines += compare(s)
    if args.out:
        with open(args.out, 'w') as f:
            f.write('\n'.join(lines) + '\n')


if __name__ == '__main__':
    main()
