"""Train a few steps of every mmcpvt backbone on a device, in fp32 and AMP.

Checks that the loss and every gradient are finite and that the weights
change, and reports step time and peak memory. Exits non-zero on a failure.

    python tools/analysis_tools/train_step_check.py --device cuda --amp fp16 bf16
    python tools/analysis_tools/train_step_check.py --device cpu --amp bf16 \
        --size 32 --batch 2 --steps 1 --cases cpvt-tiny-gap swin
"""
import argparse
import os.path as osp
import sys
import time

import torch
import torch.nn as nn
import torch.nn.functional as F
from mmengine.logging import MMLogger

sys.path.insert(0, osp.dirname(osp.dirname(osp.abspath(__file__))))
import common  # noqa: E402

common.setup()
from mmcpvt.registry import MODELS  # noqa: E402

CASES = {
    'cpvt-tiny (cls, PEG 0)': dict(type='CPVT', arch='tiny'),
    'cpvt-tiny-gap (PEG 0-4)': dict(type='CPVT', arch='tiny',
                                    peg_positions=(0, 1, 2, 3, 4),
                                    out_type='avg_featmap'),
    'pvt-tiny-peg-gap': dict(type='PVTPEG', arch='tiny',
                             out_type='avg_featmap'),
    'pvt-tiny-peg (featmaps)': dict(type='PVTPEG', arch='tiny'),
    'swin-tiny-peg-gap': dict(type='SwinPEG', arch='tiny',
                              out_type='avg_featmap'),
    'swin-tiny-peg (featmaps)': dict(type='SwinPEG', arch='tiny'),
}


def loss_of(outs, head, target):
    if outs[-1].dim() == 2:  # pooled: a linear classifier
        return F.cross_entropy(head(outs[-1]).float(), target)
    return sum(o.float().pow(2).mean() for o in outs)  # dense maps


def check(cfg, args, amp, with_cp=False):
    device = torch.device(args.device)
    torch.manual_seed(0)
    model = MODELS.build(dict(cfg, with_cp=with_cp)).to(device)
    model.init_weights()
    model.train()
    dims = model.embed_dims
    dims = dims[-1] if isinstance(dims, list) else dims
    head = nn.Linear(dims, 10).to(device)
    params = list(model.parameters()) + list(head.parameters())
    opt = torch.optim.AdamW(params, lr=1e-4)
    dtype = {'fp16': torch.float16, 'bf16': torch.bfloat16}.get(amp)
    scaler = torch.amp.GradScaler(device.type, enabled=amp == 'fp16')
    x = torch.randn(args.batch, 3, args.size, args.size, device=device)
    target = torch.randint(0, 10, (args.batch, ), device=device)
    before = [p.detach().clone() for p in model.parameters()]
    if device.type == 'cuda':
        torch.cuda.reset_peak_memory_stats()
        torch.cuda.synchronize()
    times, skipped = [], 0
    for _ in range(args.steps):
        t0 = time.perf_counter()
        with torch.autocast(device.type, dtype=dtype, enabled=dtype
                            is not None):
            loss = loss_of(model(x), head, target)
        opt.zero_grad(set_to_none=True)
        scaler.scale(loss).backward()
        scaler.unscale_(opt)
        bad = [n for n, p in model.named_parameters()
               if p.grad is None or not torch.isfinite(p.grad).all()]
        scale = scaler.get_scale()
        scaler.step(opt)
        scaler.update()
        if device.type == 'cuda':
            torch.cuda.synchronize()
        times.append(time.perf_counter() - t0)
        if bad and amp == 'fp16' and scaler.get_scale() < scale:
            skipped += 1  # fp16 overflow: the scaler skipped this step
        elif not torch.isfinite(loss) or bad:
            return False, f'loss {loss.item():.4f}, bad grads {bad[:3]}'
    changed = sum(not torch.equal(a, p.detach())
                  for a, p in zip(before, model.parameters()))
    model.eval()
    with torch.no_grad(), torch.autocast(
            device.type, dtype=dtype, enabled=dtype is not None):
        odd = model(torch.randn(1, 3, 225, 301, device=device))
    ok = changed == len(before) and all(
        torch.isfinite(o).all() for o in odd)
    mem = (torch.cuda.max_memory_allocated() / 2**20
           if device.type == 'cuda' else float('nan'))
    msg = (f'loss {loss.item():.4f}, {changed}/{len(before)} tensors '
           f'updated ({skipped} overflow steps skipped), step '
           f'{min(times) * 1e3:.1f} ms, peak {mem:.0f} MiB, odd-size '
           f'forward ok')
    if dtype is None and not with_cp:
        # Without autograd the PEG adds into the tokens and the FFN
        # activates in place: the outputs must not change (largest
        # |no-grad - autograd|, relative to the largest |output|).
        ref = [r.detach() for r in model(x)]
        with torch.no_grad():
            rel = max(((o - r).abs().max() / r.abs().max()).item()
                      for o, r in zip(model(x), ref))
        ok = ok and rel <= 1e-4
        msg += f', no-grad forward = autograd forward (rel. diff {rel:.1e})'
    return ok, msg


def main():
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    parser.add_argument('--device', default='cuda')
    parser.add_argument('--amp', nargs='*', default=['fp16', 'bf16'],
                        choices=['fp16', 'bf16'])
    parser.add_argument('--size', type=int, default=224)
    parser.add_argument('--batch', type=int, default=8)
    parser.add_argument('--steps', type=int, default=4)
    parser.add_argument('--cases', nargs='+', metavar='TEXT',
                        help='only the cases whose name contains one of '
                        'these (default: all); cases: ' + '; '.join(CASES))
    args = parser.parse_args()
    cases = {name: cfg for name, cfg in CASES.items()
             if not args.cases or any(t in name for t in args.cases)}
    if not cases:
        parser.error(f'--cases {" ".join(args.cases)} selects no case; '
                     f'cases: {"; ".join(CASES)}')
    MMLogger.get_instance('mmengine').setLevel('WARNING')  # no init dump
    print(f'torch {torch.__version__}, device {args.device}'
          + (f' ({torch.cuda.get_device_name()})'
             if args.device.startswith('cuda') else ''))
    failed = 0
    for name, cfg in cases.items():
        for amp in ['fp32'] + args.amp:
            for with_cp in ([False, True] if amp == 'fp32' else [False]):
                ok, msg = check(cfg, args, amp, with_cp)
                failed += not ok
                tag = amp + (' +with_cp' if with_cp else '')
                print(f'[{"ok" if ok else "FAIL"}] {name:26s} {tag:14s} '
                      f'{msg}', flush=True)
    print(f'{failed} failed')
    sys.exit(1 if failed else 0)


if __name__ == '__main__':
    main()
