"""Speed and memory of mmcpvt's models beside the implementations users run
today (mmpretrain, timm, mmdet), measured side by side in one process.

For each pair, ours and theirs run on the same input, threads and dtype, in
ABBA blocks after warm-up (so that drifts of the machine and the order of
the calls hit both alike). Printed: forward throughput (img/s),
training-step throughput (forward + backward + AdamW step, img/s), latency
at batch 1 (ms), each the median over rounds; the ratio ours / theirs (the
median over blocks) with a 95 % confidence interval of it in brackets;
the minor page faults per call of each (memory that the C library had
given back and had to fault in again: see mmcpvt/utils/malloc.py and
``--malloc``); and with ``--memory`` the peak memory of a training step
(CUDA: the allocator's peak; CPU: peak RSS growth of a fresh process per
model).

    python tools/analysis_tools/benchmark.py                  # the targets
    python tools/analysis_tools/benchmark.py --pairs cpvt-tiny:deit-tiny@mmpretrain \\
        --sizes 224 512 --batch 16 --threads 2 --bf16
"""
import argparse
import copy
import json
import math
import os
import resource
import statistics
import subprocess
import sys
import time
from typing import Callable, Dict

import torch
import torch.nn as nn

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))))


def _ours(**cfg):
    def build():
        from mmcpvt.registry import MODELS
        return MODELS.build(cfg)
    return build


def _mmpretrain_vit(arch):
    def build():
        from mmpretrain.models import VisionTransformer
        return VisionTransformer(arch=arch, img_size=224, patch_size=16,
                                 out_type='cls_token')
    return build


def _timm(name):
    def build():
        import timm

        # ViT/DeiT: resize the position table to any input size; the other
        # models take any size by design and do not accept the argument
        kwargs = (dict(dynamic_img_size=True)
                  if name.startswith(('vit', 'deit')) else {})
        return timm.create_model(name, pretrained=False, num_classes=0,
                                 **kwargs)
    return build


def _mmdet(type_, **cfg):
    def build():
        from mmdet.registry import MODELS
        from mmengine.registry import init_default_scope
        init_default_scope('mmdet')
        return MODELS.build(dict(type=type_, **cfg))
    return build


def _detector(config, backbone=None):
    """A detector of a config, untrained; ``backbone`` replaces the config's
    backbone (for a baseline that has no config of its own here)."""
    def build():
        import importlib

        from mmengine.config import Config
        from mmengine.registry import init_default_scope
        cfg = Config.fromfile(os.path.join(ROOT, config))
        if backbone is not None:
            cfg.model.backbone = copy.deepcopy(backbone)
        cfg.model.backbone.init_cfg = None
        init_default_scope(cfg.default_scope)
        registry = importlib.import_module(
            f'{cfg.default_scope}.registry').MODELS
        model = registry.build(cfg.model)
        model.init_weights()
        return model
    return build


MODELS: Dict[str, Callable[[], nn.Module]] = {
    # ours
    'cpvt-tiny': _ours(type='CPVT', arch='tiny'),
    'cpvt-tiny-nopeg': _ours(type='CPVT', arch='tiny', peg_positions=()),
    'cpvt-tiny-p0-4': _ours(type='CPVT', arch='tiny',
                            peg_positions=(0, 1, 2, 3, 4)),
    # the PEGs through PyTorch's operators instead of the fused kernel
    'cpvt-tiny-p0-4-unfused': _ours(type='CPVT', arch='tiny',
                                    peg_positions=(0, 1, 2, 3, 4),
                                    peg_cfg=dict(fused=False)),
    'cpvt-small': _ours(type='CPVT', arch='small'),
    'deit-tiny@mmcpvt': _ours(type='CPVT', arch='tiny', pos_embed='learned',
                              peg_positions=()),
    'pvt-tiny-peg': _ours(type='PVTPEG', arch='tiny'),
    'pvt-small-peg': _ours(type='PVTPEG', arch='small'),
    'pvt-small-peg-gap': _ours(type='PVTPEG', arch='small',
                               out_type='avg_featmap'),
    'swin-tiny-peg': _ours(type='SwinPEG', arch='tiny'),
    'retinanet-pvt-tiny-peg': _detector(
        'configs/retinanet_pvt_tiny_peg_1x_coco.py'),
    'retinanet-swin-tiny-peg': _detector(
        'configs/swin_peg/retinanet_swin-t-peg_fpn_1x_coco.py'),
    # theirs
    'deit-tiny@mmpretrain': _mmpretrain_vit('deit-tiny'),
    'deit-small@mmpretrain': _mmpretrain_vit('deit-small'),
    'deit_tiny_patch16_224@timm': _timm('deit_tiny_patch16_224'),
    'vit_small_patch16_224@timm': _timm('vit_small_patch16_224'),
    'twins_pcpvt_small@timm': _timm('twins_pcpvt_small'),
    'swin_tiny_patch4_window7_224@timm': _timm(
        'swin_tiny_patch4_window7_224'),
    'pvt-tiny@mmdet': _mmdet('PyramidVisionTransformer',
                             num_layers=[2, 2, 2, 2]),
    'swin-tiny@mmdet': _mmdet('SwinTransformer', embed_dims=96,
                              depths=[2, 2, 6, 2],
                              num_heads=[3, 6, 12, 24], window_size=7),
    'retinanet-pvt-tiny@mmdet': _detector(
        'configs/pvt_peg/retinanet_pvt-t_fpn_1x_coco.py'),
    # mmdet's configs/swin/retinanet_swin-t-p4-w7_fpn_1x_coco.py: the same
    # head and neck as ours (stages 1-3), mmdet's Swin-T
    'retinanet-swin-tiny@mmdet': _detector(
        'configs/swin_peg/retinanet_swin-t-peg_fpn_1x_coco.py',
        backbone=dict(type='SwinTransformer', embed_dims=96,
                      depths=[2, 2, 6, 2], num_heads=[3, 6, 12, 24],
                      window_size=7, drop_path_rate=0.2,
                      out_indices=(1, 2, 3))),
}

# The targets: (ours, theirs, what is measured, size, wanted ratio).
TARGETS = [
    ('cpvt-tiny', 'deit-tiny@mmpretrain', 'forward', 224, 1.00),
    ('cpvt-tiny', 'deit_tiny_patch16_224@timm', 'forward', 224, 0.95),
    ('cpvt-tiny', 'cpvt-tiny-nopeg', 'forward', 224, 0.98),
    ('cpvt-tiny-p0-4', 'cpvt-tiny-nopeg', 'forward', 224, 0.98),
    ('cpvt-tiny', 'deit-tiny@mmpretrain', 'forward', 512, 1.00),
    ('pvt-tiny-peg', 'pvt-tiny@mmdet', 'forward', 224, 1.25),
    ('swin-tiny-peg', 'swin-tiny@mmdet', 'forward', 224, 1.00),
    ('retinanet-pvt-tiny-peg', 'retinanet-pvt-tiny@mmdet', 'train', 320,
     1.00),
]
# Detectors train at their own batch (2 images per GPU in the configs).
DETECTOR_BATCH = 2


def _is_detector(model):
    return hasattr(model, 'data_preprocessor') and hasattr(model, 'loss')


def _det_batch(model, batch, size):
    from mmdet.structures import DetDataSample
    from mmengine.structures import InstanceData
    g = torch.Generator().manual_seed(0)
    inputs, samples = [], []
    for _ in range(batch):
        inputs.append(torch.randint(0, 255, (3, size, size), generator=g,
                                    dtype=torch.uint8))
        xy = torch.rand(4, 2, generator=g) * size * 0.6
        wh = torch.rand(4, 2, generator=g) * size * 0.3 + 8
        sample = DetDataSample(metainfo=dict(
            img_shape=(size, size), ori_shape=(size, size),
            pad_shape=(size, size), scale_factor=(1., 1.)))
        sample.gt_instances = InstanceData(
            bboxes=torch.cat((xy, xy + wh), 1),
            labels=torch.randint(0, 80, (4, ), generator=g))
        samples.append(sample)
    return dict(inputs=inputs, data_samples=samples)


class Runner:
    """One model's forward / training step on a fixed input."""

    def __init__(self, name, args, size, batch):
        torch.manual_seed(0)
        self.name = name
        self.model = MODELS[name]().to(args.device)
        if args.with_cp and hasattr(self.model, 'with_cp'):
            self.model.with_cp = True
        self.detector = _is_detector(self.model)
        self.args = args
        if self.detector:
            self.data = _det_batch(self.model, batch, size)
        else:  # its own generator: the same input whatever the model drew
            self.data = torch.randn(batch, 3, size, size,
                                    generator=torch.Generator().manual_seed(0))
        self.opt = torch.optim.AdamW(self.model.parameters(), lr=1e-5)
        self.fwd = self.model
        if args.compile:
            self.fwd = torch.compile(self.model)

    def _autocast(self):
        return torch.autocast('cpu' if self.args.device == 'cpu' else 'cuda',
                              dtype=torch.bfloat16, enabled=self.args.bf16)

    def _outputs(self):
        if self.detector:
            data = self.model.data_preprocessor(self.data, training=False)
            return self.model._forward(data['inputs'])
        out = self.fwd(self.data.to(self.args.device))
        return out if isinstance(out, (tuple, list)) else (out, )

    def forward(self):
        self.model.eval()
        with torch.no_grad(), self._autocast():
            self._outputs()

    def train(self):
        self.model.train()
        with self._autocast():
            if self.detector:
                data = self.model.data_preprocessor(self.data, training=True)
                losses = self.model.loss(data['inputs'], data['data_samples'])
                loss, _ = self.model.parse_losses(losses)
            else:
                loss = sum(o.float().mean() for o in self._outputs())
        self.opt.zero_grad(set_to_none=True)
        loss.backward()
        self.opt.step()

    def warm_up(self, what):
        for _ in range(self.args.warmup):
            self.timed(what)

    def timed(self, what):
        sync = torch.cuda.synchronize if self.args.device == 'cuda' else (
            lambda: None)
        sync()
        t0 = time.perf_counter()
        getattr(self, what)()
        sync()
        return time.perf_counter() - t0


def _minor_faults():
    """Minor page faults of this process so far: memory the allocator got
    from the system and touched for the first time (see
    mmcpvt/utils/malloc.py)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_minflt


def median_interval(values, level=0.95):
    """Distribution-free confidence interval of the median: the k-th
    smallest and k-th largest value, with the largest k for which the
    binomial(n, 1/2) tails leave at least ``level`` between them; (min,
    max) where n is too small for ``level``."""
    xs = sorted(values)
    n, k, tail = len(xs), 0, 0.
    while True:  # P(fewer than k+1 of n values below the median)
        tail += math.comb(n, k) / 2**n
        if 1 - 2 * tail < level:
            break
        k += 1
    k = max(k, 1)
    return xs[k - 1], xs[n - k]


def compare(a, b, what, size, args, batch=None):
    """Time ``what`` for models a and b in ABBA blocks.

    Each block runs a, b, b, a; its ratio is b's time over a's time within
    the block. Each model runs once first and once second in a block, so
    an advantage of either position cancels, and so does a linear drift of
    the machine within the block; drifts between blocks cancel in the
    ratio.

    Returns the median seconds per call of a and of b, the median block
    ratio, a 95 % confidence interval (lo, hi) of that median (how far one
    run can be trusted), and the median minor page faults per call of a
    and of b.
    """
    batch = batch or args.batch
    runners = [Runner(n, args, size, batch) for n in (a, b)]
    for r in runners:
        r.warm_up(what)
    # Keyed by position, so that a model can be compared with itself: the
    # ratio of an A:A pair shows the noise of the measurement.
    times, faults = [[], []], [[], []]
    rounds = max(2, args.rounds + args.rounds % 2)  # whole ABBA blocks
    for i in range(rounds):
        for j in ((0, 1) if i % 2 == 0 else (1, 0)):
            f0 = _minor_faults()
            times[j].append(runners[j].timed(what))
            faults[j].append(_minor_faults() - f0)
    blocks = [(times[1][k] + times[1][k + 1]) / (times[0][k] + times[0][k + 1])
              for k in range(0, rounds, 2)]
    spread = median_interval(blocks)
    return (statistics.median(times[0]), statistics.median(times[1]),
            statistics.median(blocks), spread,
            [statistics.median(f) for f in faults])


def profile_table(name, size, args, rows=30):
    """torch.profiler's operator table (by self time, one row per operator
    and input shapes) over ``args.profile`` forwards of ``name`` after
    warm-up, with the page faults they took."""
    from torch.profiler import ProfilerActivity, profile
    r = Runner(name, args, size, args.batch)
    r.warm_up('forward')
    acts = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA]
                                     if args.device == 'cuda' else [])
    f0 = _minor_faults()
    with profile(activities=acts, record_shapes=True) as prof:
        for _ in range(args.profile):
            r.forward()
    faults = (_minor_faults() - f0) / args.profile
    table = prof.key_averages(group_by_input_shape=True).table(
        sort_by='self_cpu_time_total', row_limit=rows)
    return (f'profile {name}, {size}px b{args.batch}, {args.profile} '
            f'forwards, {faults:.0f} page faults per forward\n{table}')


def peak_memory(name, args, size):
    """Peak memory of one training step: CUDA allocator peak, or on the CPU
    the peak RSS growth of a fresh process (in MiB)."""
    if args.device == 'cuda':
        r = Runner(name, args, size, args.batch)
        r.train()  # optimizer state allocated
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
        base = torch.cuda.memory_allocated()
        r.train()
        return (torch.cuda.max_memory_allocated() - base) / 2**20
    cmd = [sys.executable, __file__, '--memory-child', name, '--sizes',
           str(size), '--batch', str(args.batch), '--threads',
           str(args.threads)] + (['--with-cp'] if args.with_cp else []) + (
               ['--bf16'] if args.bf16 else []) + ['--malloc', args.malloc]
    out = subprocess.run(cmd, capture_output=True, text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])['peak_mib']


def _memory_child(args):
    r = Runner(args.memory_child, args, args.sizes[0], args.batch)
    r.train()  # optimizer state and allocator pools exist from here on

    def rss():
        with open('/proc/self/statm') as f:
            return int(f.read().split()[1]) * os.sysconf('SC_PAGE_SIZE')

    base = rss()
    r.train()
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    print(json.dumps({'peak_mib': max(peak - base, 0) / 2**20}))


def main():
    parser = argparse.ArgumentParser(
        description=__doc__.split('\n')[0],
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog='models: ' + ', '.join(MODELS))
    parser.add_argument('--pairs', nargs='+', metavar='OURS:THEIRS',
                        help='pairs to compare (default: the targets)')
    parser.add_argument('--sizes', type=int, nargs='+', default=None,
                        help='input sizes (default: each target\'s)')
    parser.add_argument('--batch', type=int, default=16)
    parser.add_argument('--threads', type=int, default=torch.get_num_threads())
    parser.add_argument('--device', default='cpu', choices=['cpu', 'cuda'])
    parser.add_argument('--bf16', action='store_true', help='bf16 autocast')
    parser.add_argument('--compile', action='store_true',
                        help='torch.compile both models')
    parser.add_argument('--with-cp', action='store_true',
                        help='gradient checkpointing where supported')
    parser.add_argument('--train', action='store_true',
                        help='also time the training step of every pair')
    parser.add_argument('--latency', action='store_true',
                        help='also time batch-1 forward latency')
    parser.add_argument('--profile', type=int, default=0, metavar='N',
                        help='also print the operator profile of N forwards '
                        'of each model of each pair')
    parser.add_argument('--memory', nargs='*', metavar='MODEL',
                        help='peak training memory of MODELs (with and '
                        'without --with-cp: run twice)')
    parser.add_argument(
        '--malloc', default='default', choices=['default', 'retain'],
        help='default: glibc as configured; retain: keep freed memory in '
        'the heap (mmcpvt.utils.malloc), which removes the page faults of '
        're-allocation for both models alike')
    parser.add_argument('--warmup', type=int, default=2)
    parser.add_argument('--rounds', type=int, default=6)
    parser.add_argument('--json', help='also write the results here')
    parser.add_argument('--memory-child', help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.malloc == 'retain':
        from mmcpvt.utils.malloc import retain_freed_memory
        if not retain_freed_memory():
            parser.error('--malloc retain needs glibc')
    torch.set_num_threads(args.threads)
    import mmcpvt  # noqa: F401
    from mmengine.logging import MMLogger
    MMLogger.get_instance('mmengine').setLevel('ERROR')
    if args.memory_child:
        return _memory_child(args)

    print(f'torch {torch.__version__}, {args.device}, {args.threads} threads, '
          f'batch {args.batch}, {"bf16 autocast" if args.bf16 else "fp32"}, '
          f'malloc {args.malloc}'
          f'{", torch.compile" if args.compile else ""}'
          f'{", with_cp" if args.with_cp else ""}')
    for pair in args.pairs or []:
        if pair.count(':') != 1:
            parser.error(f'--pairs takes OURS:THEIRS, got {pair!r}')
    names = [n for p in args.pairs or [] for n in p.split(':')]
    for name in names + (args.memory or []):
        if name not in MODELS:
            parser.error(f'unknown model {name!r}; known: '
                         f'{", ".join(MODELS)}')
    results = []
    if args.memory is not None:
        for name in args.memory or ['pvt-small-peg-gap']:
            for size in args.sizes or [512]:
                mib = peak_memory(name, args, size)
                print(f'memory  {name:28s} {size}px  peak {mib:8.1f} MiB')
                results.append(dict(model=name, size=size, peak_mib=mib,
                                    with_cp=args.with_cp))
    else:
        if args.pairs:
            todo = [(*p.split(':'), 'forward', s, None) for p in args.pairs
                    for s in (args.sizes or [224])]
        else:
            todo = [t for t in TARGETS
                    if not args.sizes or t[3] in args.sizes]
        for ours, theirs, what, size, want in todo:
            whats = [what] + (['train'] if args.train and what != 'train'
                              else [])
            for w in whats:
                batch = (DETECTOR_BATCH if ours.startswith('retinanet')
                         else args.batch)
                t_ours, t_theirs, ratio, spread, faults = compare(
                    ours, theirs, w, size, args, batch=batch)
                row = dict(ours=ours, theirs=theirs, what=w, size=size,
                           batch=batch, ours_img_s=batch / t_ours,
                           theirs_img_s=batch / t_theirs,
                           ratio=ratio, ratio_ci95=spread, target=want,
                           malloc=args.malloc,
                           ours_faults=faults[0], theirs_faults=faults[1])
                results.append(row)
                unresolved = ' (the 95 % interval holds the target)'
                verdict = '' if want is None or w != what else (
                    f'  target >= {want:.2f}: '
                    f'{"met" if row["ratio"] >= want else "MISSED"}'
                    f'{unresolved if spread[0] <= want <= spread[1] else ""}')
                print(f'{w:7s} {size:4d}px b{batch:<3d} {ours:24s} '
                      f'{row["ours_img_s"]:8.2f} img/s  vs  {theirs:28s} '
                      f'{row["theirs_img_s"]:8.2f} img/s  ratio '
                      f'{row["ratio"]:.3f} [{spread[0]:.3f}, {spread[1]:.3f}]'
                      f'{verdict}  (page faults/call '
                      f'{faults[0]:.0f} vs {faults[1]:.0f})', flush=True)
            if args.latency:
                t_ours, t_theirs, ratio, spread, _ = compare(
                    ours, theirs, 'forward', size, args, batch=1)
                print(f'latency {size:4d}px  {ours:24s} {t_ours * 1e3:8.1f} '
                      f'ms     vs  {theirs:28s} {t_theirs * 1e3:8.1f} ms  '
                      f'ratio {ratio:.3f} [{spread[0]:.3f}, {spread[1]:.3f}]',
                      flush=True)
            if args.profile:
                for name in (ours, theirs):
                    print(profile_table(name, size, args), flush=True)
    if args.json:
        with open(args.json, 'w') as f:
            json.dump(results, f, indent=1)


if __name__ == '__main__':
    main()
