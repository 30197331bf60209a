"""Check that every mmcpvt backbone trains on one device, with the models
and steps of :mod:`mmcpvt.apis.measure`.

Each of CHECKED trains ``--steps`` steps in fp32 (also with gradient
checkpointing) and under each ``--amp`` autocast (fp16 with GradScaler,
bf16): the loss and every gradient finite (fp16 steps that GradScaler skips
for an overflow are counted), every weight updated, a forward at 225x301
finite, and in fp32 the no-grad forward (the FFN's in-place activation)
equal to the autograd one. Exits 1 on a failure. It needs torch, timm,
mmengine and mmcv-lite only (on a machine without OpenMMLab packages:
docs/get_started.md, "Training on a GPU")::

    python tools/analysis_tools/train_step.py --amp fp16 bf16
    python tools/analysis_tools/train_step.py --device cpu --amp bf16
"""
import argparse
import sys
import warnings
from dataclasses import replace

import torch
from mmengine.logging import MMLogger

warnings.filterwarnings(  # mmcv-lite's, on importing mmcv.cnn (by mmcpvt)
    'ignore', message='Fail to import ``MultiScaleDeformableAttention')
from mmcpvt.apis import cli  # noqa: E402
from mmcpvt.apis.measure import (Runner, Settings, device_arg,  # noqa: E402
                                 header)
CHECKED = ('cpvt-tiny', 'cpvt-tiny-p0-4-gap', 'pvt-tiny-peg-gap',
           'pvt-tiny-peg', 'swin-tiny-peg-gap', 'swin-tiny-peg')


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


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    add = parser.add_argument
    add('--device', default='cuda', help='cpu or cuda[:N] (default cuda)')
    add('--amp', nargs='*', default=['fp16', 'bf16'], choices=['fp16', 'bf16'],
        help='autocast dtypes besides fp32 (default: both)')
    add('--cases', nargs='+', choices=CHECKED, default=CHECKED)
    add('--batch', type=int, default=8)
    add('--size', type=int, default=224)
    add('--steps', type=int, default=4)
    args = parser.parse_args(argv)
    try:
        cli.check_options(cli.positive, batch=args.batch, size=args.size,
                          steps=args.steps)
        cli.check_options(device_arg, device=args.device)
    except ValueError as e:
        parser.error(str(e))
    MMLogger.get_instance('mmengine').setLevel('WARNING')  # no init dump
    s = Settings('', what='train', size=args.size, batch=args.batch,
                 threads=torch.get_num_threads(), device=args.device)
    print(header(args.device, s.threads), flush=True)
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


if __name__ == '__main__':
    main()
