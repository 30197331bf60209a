"""Speed and memory of mmcpvt's models beside the implementations users run
today (mmpretrain, timm, mmdet).

Each model is measured alone in a fresh Python process, as users run one
model per process: the process builds the model, warms up (compilation
included with --compile), times --iters calls on a fixed input and reports
the median seconds and the median minor page faults per call. The processes
of a pair alternate ours, theirs, theirs, ours, ... (--runs of each); each
such ABBA block gives one ratio, theirs' summed time over ours', and the
printed ratio (ours / theirs throughput, > 1: ours faster) is the median
over blocks, with a distribution-free 95 % interval of it in brackets.
--in-process times both models alternately in one process instead; there
the heap one model leaves behind changes what the other's allocations cost.
After each ABBA block a progress line on stderr gives the blocks done, the
time so far and an estimate of the time left; stdout has the results only.

The default run measures the targets of benchmark_targets.yml (beside this
file); --compile measures torch.compile (inductor) against eager for each
named model; --memory the peak memory of a training step.

    python tools/analysis_tools/benchmark.py                  # the targets
    python tools/analysis_tools/benchmark.py --pairs cpvt-tiny:deit-tiny@mmpretrain \\
        --sizes 224 512 --batch 16 --threads 2 --train --latency
    python tools/analysis_tools/benchmark.py --compile cpvt-tiny pvt-tiny-peg
    python tools/analysis_tools/benchmark.py --memory pvt-small-peg-gap \\
        --sizes 512 --with-cp
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
from dataclasses import asdict, dataclass, field, replace
from typing import Callable, Dict, List, Optional, Tuple

import torch
import torch.nn as nn

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
TARGETS = os.path.join(HERE, 'benchmark_targets.yml')
# --malloc retain: glibc serves allocations below 32 MiB (the largest mmap
# threshold mallopt(3) documents for 64-bit systems) from its heap and gives
# the heap's free top back to the system only above 1 GiB, so that freed
# tensors are reused instead of faulted in again. Fixing either threshold
# also switches off glibc's dynamic thresholds.
RETAIN_MALLOC = {'MALLOC_MMAP_THRESHOLD_': str(32 * 2**20),
                 'MALLOC_TRIM_THRESHOLD_': str(2**30)}
COMPILED = ('cpvt-tiny', 'pvt-tiny-peg', 'swin-tiny-peg')  # --compile
DETECTOR_BATCH = 2  # the images per GPU of the RetinaNet configs


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
    build.detector = True
    return build


MODELS: Dict[str, Callable[[], nn.Module]] = {
    # ours
    'cpvt-tiny': _ours(type='CPVT', arch='tiny'),
    'cpvt-tiny-nopeg': _ours(type='CPVT', arch='tiny', peg_positions=()),
    'cpvt-tiny-p0-4': _ours(type='CPVT', arch='tiny',
                            peg_positions=(0, 1, 2, 3, 4)),
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


def is_detector(name):
    return getattr(MODELS[name], 'detector', False)


@dataclass
class Settings:
    """One measurement of one model: what a child process is given, as
    JSON on its stdin."""
    model: str
    task: str = 'time'  # 'time', 'memory' (peak of a step) or 'profile'
    what: str = 'forward'  # 'forward' (no grad, eval mode) or 'train'
    size: int = 224
    batch: int = 16
    threads: int = 1
    device: str = 'cpu'
    bf16: bool = False  # bf16 autocast
    compile: bool = False  # torch.compile (inductor)
    with_cp: bool = False  # gradient checkpointing where the model has it
    warmup: int = 2  # calls before timing (the first compiles)
    iters: int = 10  # timed (or profiled) calls

    def to_json(self) -> str:
        return json.dumps(asdict(self))

    @classmethod
    def from_json(cls, text: str) -> 'Settings':
        return cls(**json.loads(text))


@dataclass
class Target:
    """An entry of benchmark_targets.yml."""
    ours: str
    theirs: str
    what: str
    size: int
    ratio: Optional[float]  # the least ours / theirs wanted; None: none

    def __post_init__(self):
        if self.what not in ('forward', 'train'):
            raise ValueError(f'a target measures forward or train, got '
                             f'{self.what!r} ({self.ours}:{self.theirs})')


@dataclass
class Result:
    """A pair's measurement (``--json`` writes a list of them)."""
    ours: str
    theirs: str
    what: str  # 'forward', 'train' or 'latency' (forward at batch 1)
    size: int
    batch: int
    ours_img_s: float  # batch / the median of the runs' s/call
    theirs_img_s: float
    ratio: float  # ours / theirs throughput: median over ABBA blocks
    ci95: Tuple[float, float]  # 95 % interval of that median
    target: Optional[float]
    ours_faults: float  # minor page faults per call, median over runs
    theirs_faults: float
    compiled: bool  # ours ran torch.compile (inductor), theirs eager
    in_process: bool  # both models in one process (else one per run)
    ours_s: List[float] = field(default_factory=list)  # s/call, each run
    theirs_s: List[float] = field(default_factory=list)
    malloc: Dict[str, str] = field(default_factory=dict)  # MALLOC_* set


@dataclass
class MemoryResult:
    """Peak memory of a training step (``--memory``)."""
    model: str
    size: int
    batch: int
    with_cp: bool
    peak_mib: float


def load_targets(path: str = TARGETS) -> List[Target]:
    import yaml
    with open(path) as f:
        return [Target(**entry) for entry in yaml.safe_load(f)]


# ------------------------------------------------------------ one model
def _det_batch(batch, size):
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


def minor_faults():
    """Minor page faults of this process so far: memory the allocator got
    from the system and touched for the first time."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_minflt


class Runner:
    """One model's forward or training step (``settings.what``) on a fixed
    input."""

    def __init__(self, settings: Settings):
        s = self.s = settings
        torch.manual_seed(0)
        self.model = MODELS[s.model]().to(s.device)
        if s.with_cp and hasattr(self.model, 'with_cp'):
            self.model.with_cp = True
        self.model.train(s.what == 'train')
        self.detector = is_detector(s.model)
        if self.detector:
            if s.compile:
                raise ValueError(f'{s.model}: the benchmark compiles '
                                 'backbones only, not detectors')
            self.data = _det_batch(s.batch, s.size)
        else:  # its own generator: the same input whatever the model drew
            self.data = torch.randn(
                s.batch, 3, s.size, s.size,
                generator=torch.Generator().manual_seed(0)).to(s.device)
        self.opt = torch.optim.AdamW(self.model.parameters(), lr=1e-5)
        self.fwd = torch.compile(self.model) if s.compile else self.model

    def _autocast(self):
        return torch.autocast(self.s.device, dtype=torch.bfloat16,
                              enabled=self.s.bf16)

    def _outputs(self, training):
        if self.detector:
            data = self.model.data_preprocessor(self.data, training=training)
            if training:
                return self.model.loss(data['inputs'], data['data_samples'])
            return self.model._forward(data['inputs'])
        out = self.fwd(self.data)
        return out if isinstance(out, (tuple, list)) else (out, )

    def step(self):
        if self.s.what == 'forward':
            with torch.no_grad(), self._autocast():
                self._outputs(training=False)
            return
        with self._autocast():
            out = self._outputs(training=True)
            loss = (self.model.parse_losses(out)[0] if self.detector else
                    sum(o.float().mean() for o in out))
        self.opt.zero_grad(set_to_none=True)
        loss.backward()
        self.opt.step()

    def _sync(self):
        if self.s.device == 'cuda':
            torch.cuda.synchronize()

    def warm_up(self):
        for _ in range(max(self.s.warmup, int(self.s.compile))):
            self.step()

    def measure(self) -> dict:
        """Median seconds and minor page faults per call over s.iters."""
        times, faults = [], []
        for _ in range(self.s.iters):
            self._sync()
            f0, t0 = minor_faults(), time.perf_counter()
            self.step()
            self._sync()
            times.append(time.perf_counter() - t0)
            faults.append(minor_faults() - f0)
        return dict(seconds=statistics.median(times),
                    faults=statistics.median(faults))

    def peak_memory(self) -> dict:
        """Peak memory of one step beyond what the step before it left: the
        CUDA allocator's peak, or on the CPU the peak RSS growth."""
        self.step()  # optimizer state and allocator pools exist from here
        if self.s.device == 'cuda':
            torch.cuda.synchronize()
            torch.cuda.reset_peak_memory_stats()
            base = torch.cuda.memory_allocated()
            self.step()
            torch.cuda.synchronize()
            peak = torch.cuda.max_memory_allocated() - base
        else:
            with open('/proc/self/statm') as f:
                base = int(f.read().split()[1]) * os.sysconf('SC_PAGE_SIZE')
            self.step()
            peak = resource.getrusage(
                resource.RUSAGE_SELF).ru_maxrss * 1024 - base
        return dict(peak_mib=max(peak, 0) / 2**20)

    def profile(self, rows=30) -> dict:
        """torch.profiler's operator table (by self time, one row per
        operator and input shapes) over s.iters calls after warm-up, and
        the page faults per call under the profiler."""
        from torch.profiler import ProfilerActivity, profile
        self.warm_up()
        acts = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA]
                                         if self.s.device == 'cuda' else [])
        f0 = minor_faults()
        with profile(activities=acts, record_shapes=True) as prof:
            for _ in range(self.s.iters):
                self.step()
        return dict(faults=(minor_faults() - f0) / self.s.iters,
                    table=prof.key_averages(group_by_input_shape=True).table(
                        sort_by='self_cpu_time_total', row_limit=rows))


def _quiet():
    import mmcpvt  # noqa: F401  (registers our models)
    from mmengine.logging import MMLogger
    MMLogger.get_instance('mmengine').setLevel('ERROR')


def malloc_settings() -> Dict[str, str]:
    """The glibc allocator variables of this process's environment."""
    return {k: v for k, v in os.environ.items() if k.startswith('MALLOC_')}


def child_main():
    """A child process: Settings as JSON on stdin; one JSON line on stdout
    with the settings it ran, its allocator variables and the task's
    figures."""
    s = Settings.from_json(sys.stdin.read())
    torch.set_num_threads(s.threads)
    _quiet()
    runner = Runner(s)
    if s.task == 'memory':
        figures = runner.peak_memory()
    elif s.task == 'profile':
        figures = runner.profile()
    else:
        runner.warm_up()
        figures = runner.measure()
    print(json.dumps(dict(settings=asdict(s), malloc=malloc_settings(),
                          **figures)), flush=True)


def child_env(malloc: str = 'default') -> Dict[str, str]:
    """The environment of the measuring processes (see RETAIN_MALLOC)."""
    return dict(os.environ, **(RETAIN_MALLOC if malloc == 'retain' else {}))


def run_child(s: Settings, env: Optional[Dict[str, str]] = None) -> dict:
    """Run ``s`` in a fresh Python process with environment ``env``."""
    proc = subprocess.run([sys.executable, os.path.abspath(__file__),
                           '--child'], input=s.to_json(), env=env,
                          capture_output=True, text=True)
    if proc.returncode != 0:
        raise RuntimeError(f'the process measuring {s.model} failed (exit '
                           f'{proc.returncode}):\n{proc.stderr[-3000:]}')
    return json.loads(proc.stdout.strip().splitlines()[-1])


# ------------------------------------------------------------ a pair
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


def abba(measure: Callable[[int], dict], runs: int,
         on_block: Optional[Callable[[int, int], None]] = None):
    """``measure(0)`` and ``measure(1)``, ``runs`` times each, in the order
    0 1 1 0 0 1 1 0 ...; returns the outputs of each, in run order.
    ``on_block(k, n)`` is called after the k-th of the n whole ABBA
    blocks."""
    out = ([], [])
    for i in range(runs):
        for j in ((0, 1) if i % 2 == 0 else (1, 0)):
            out[j].append(measure(j))
        if on_block is not None and i % 2 == 1:
            on_block((i + 1) // 2, runs // 2)
    return out


def block_ratios(t_ours: List[float], t_theirs: List[float]) -> List[float]:
    """Per ABBA block (two runs of each model), theirs' summed time over
    ours': ours' throughput over theirs'. Each model runs once first and
    once second in a block, so an advantage of either position cancels, and
    so does a linear drift of the machine within the block; drifts between
    blocks cancel in the ratio."""
    return [(t_theirs[k] + t_theirs[k + 1]) / (t_ours[k] + t_ours[k + 1])
            for k in range(0, len(t_ours) - 1, 2)]


@dataclass
class Job:
    ours: Settings
    theirs: Settings
    what: str  # 'forward', 'train' or 'latency'
    target: Optional[float] = None


def compare(job: Job, runs: int, in_process: bool = False,
            env: Optional[Dict[str, str]] = None,
            on_block: Optional[Callable[[int, int], None]] = None) -> Result:
    """Measure a pair in ``runs`` ABBA-ordered runs of each model: fresh
    processes, or turns of two Runners of this process. ``on_block``: see
    :func:`abba`."""
    if in_process:
        runners = [Runner(job.ours), Runner(job.theirs)]
        for r in runners:
            r.warm_up()
        outs = abba(lambda j: runners[j].measure(), runs, on_block)
        malloc = malloc_settings()
    else:
        outs = abba(lambda j: run_child((job.ours, job.theirs)[j], env), runs,
                    on_block)
        malloc = outs[0][0]['malloc']
    times = [[o['seconds'] for o in side] for side in outs]
    blocks = block_ratios(*times)
    batch = job.ours.batch
    return Result(
        ours=job.ours.model, theirs=job.theirs.model, what=job.what,
        size=job.ours.size, batch=batch,
        ours_img_s=batch / statistics.median(times[0]),
        theirs_img_s=batch / statistics.median(times[1]),
        ratio=statistics.median(blocks), ci95=median_interval(blocks),
        target=job.target,
        ours_faults=statistics.median(o['faults'] for o in outs[0]),
        theirs_faults=statistics.median(o['faults'] for o in outs[1]),
        compiled=job.ours.compile and not job.theirs.compile,
        in_process=in_process, ours_s=times[0], theirs_s=times[1],
        malloc=malloc)


def plan(args) -> List[Job]:
    """The pairs the command line asks for."""
    common = dict(threads=args.threads, device=args.device, bf16=args.bf16,
                  with_cp=args.with_cp, warmup=args.warmup, iters=args.iters)

    def jobs(ours, theirs, what, size, target=None, compile=False):
        batch = DETECTOR_BATCH if is_detector(ours) else args.batch

        def job(what, batch, label, target=None):
            return Job(Settings(ours, what=what, size=size, batch=batch,
                                compile=compile, **common),
                       Settings(theirs, what=what, size=size, batch=batch,
                                **common), label, target)

        out = [job(what, batch, what, target)]
        if args.train and what != 'train':
            out.append(job('train', batch, 'train'))
        if args.latency:
            out.append(job('forward', 1, 'latency'))
        return out

    if args.compile is not None:
        return [j for m in args.compile or COMPILED
                for s in args.sizes or [224]
                for j in jobs(m, m, 'forward', s, compile=True)]
    if args.pairs:
        return [j for p in args.pairs for s in args.sizes or [224]
                for j in jobs(*p.split(':'), 'forward', s)]
    return [j for t in load_targets(args.targets)
            if not args.sizes or t.size in args.sizes
            for j in jobs(t.ours, t.theirs, t.what, t.size, t.ratio)]


# ------------------------------------------------------------ the parent
def format_duration(seconds: float) -> str:
    if seconds < 90:
        return f'{seconds:.0f} s'
    if seconds < 90 * 60:
        return f'{seconds / 60:.1f} min'
    return f'{seconds / 3600:.1f} h'


class Progress:
    """One line on stderr after each ABBA block: the blocks done of the
    run's ``total``, what the block measured, the time so far and the time
    left at the mean time of a block so far (the --profile runs are not
    counted). stdout keeps the results alone."""

    def __init__(self, total: int,
                 clock: Optional[Callable[[], float]] = None):
        self.total, self.done = total, 0
        self.clock = clock or time.monotonic
        self.start = self.clock()

    def __call__(self, what: str) -> str:
        self.done += 1
        elapsed = self.clock() - self.start
        left = elapsed / self.done * (self.total - self.done)
        line = (f'[{self.done}/{self.total} blocks] {what}: '
                f'{format_duration(elapsed)} so far, ~{format_duration(left)}'
                ' left')
        print(line, file=sys.stderr, flush=True)
        return line


def format_result(r: Result) -> str:
    names = ((f'{r.ours} [inductor]', f'{r.theirs} [eager]') if r.compiled
             else (r.ours, r.theirs))
    if r.what == 'latency':
        figures = [f'{1e3 / x:8.1f} ms   ' for x in (r.ours_img_s,
                                                    r.theirs_img_s)]
    else:
        figures = [f'{x:8.2f} img/s' for x in (r.ours_img_s, r.theirs_img_s)]
    lo, hi = r.ci95
    verdict = ''
    if r.target is not None:
        verdict = (f'  target >= {r.target:.2f}: '
                   f'{"met" if r.ratio >= r.target else "MISSED"}')
        if lo <= r.target <= hi:
            verdict += ' (the 95 % interval holds the target)'
    return (f'{r.what:7s} {r.size:4d}px b{r.batch:<3d} {names[0]:26s} '
            f'{figures[0]}  vs  {names[1]:30s} {figures[1]}  ratio '
            f'{r.ratio:.3f} [{lo:.3f}, {hi:.3f}]{verdict}  (page faults/call '
            f'{r.ours_faults:.0f} vs {r.theirs_faults:.0f})')


def parse_args(argv=None):
    parser = argparse.ArgumentParser(
        description=__doc__.split('\n')[0],
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog='models: ' + ', '.join(MODELS))
    parser.add_argument('--pairs', nargs='+', metavar='OURS:THEIRS',
                        help='pairs to compare, forward (default: the '
                        'targets); a model against itself shows the noise')
    parser.add_argument('--targets', default=TARGETS,
                        help='the targets file (default: %(default)s)')
    parser.add_argument('--compile', nargs='*', metavar='MODEL',
                        help='torch.compile (inductor) against eager for '
                        f'each MODEL (default: {" ".join(COMPILED)})')
    parser.add_argument('--memory', nargs='*', metavar='MODEL',
                        help='peak memory of a training step of each MODEL '
                        '(default: pvt-small-peg-gap; with and without '
                        '--with-cp: run twice)')
    parser.add_argument('--sizes', type=int, nargs='+', default=None,
                        help="input sizes (default: each target's, or 224)")
    parser.add_argument('--batch', type=int, default=16,
                        help=f'batch of backbones (detectors: '
                        f'{DETECTOR_BATCH})')
    parser.add_argument('--threads', type=int, default=torch.get_num_threads())
    parser.add_argument('--device', default='cpu', choices=['cpu', 'cuda'])
    parser.add_argument('--bf16', action='store_true', help='bf16 autocast')
    parser.add_argument('--with-cp', action='store_true',
                        help='gradient checkpointing where supported')
    parser.add_argument('--train', action='store_true',
                        help='also time the training step of every pair')
    parser.add_argument('--latency', action='store_true',
                        help='also time the forward at batch 1')
    parser.add_argument('--profile', type=int, default=0, metavar='N',
                        help='also print the operator profile of N forwards '
                        'of each model of each pair')
    parser.add_argument(
        '--malloc', default='default', choices=['default', 'retain'],
        help='default: glibc as configured; retain: the measuring processes '
        'run with ' + ' '.join(f'{k}={v}' for k, v in RETAIN_MALLOC.items())
        + ' (freed memory stays in the heap)')
    parser.add_argument('--in-process', action='store_true',
                        help='time both models of a pair alternately in '
                        'this one process, not each in its own processes')
    parser.add_argument('--runs', type=int, default=12,
                        help='runs of each model (processes, or turns with '
                        '--in-process), rounded up to whole ABBA blocks; 12 '
                        'runs give 6 blocks, the fewest for which the '
                        'interval is a 95 %% one')
    parser.add_argument('--iters', type=int, default=10,
                        help='timed calls per run')
    parser.add_argument('--warmup', type=int, default=2,
                        help='calls per run before timing (compilation '
                        'included)')
    parser.add_argument('--json', help='also write the results here')
    parser.add_argument('--child', action='store_true', help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        return args
    for pair in args.pairs or []:
        if pair.count(':') != 1:
            parser.error(f'--pairs takes OURS:THEIRS, got {pair!r}')
    names = [n for p in args.pairs or [] for n in p.split(':')]
    where = ''
    if not (args.pairs or args.compile is not None
            or args.memory is not None):
        names = [n for t in load_targets(args.targets)
                 for n in (t.ours, t.theirs)]
        where = f' in {args.targets}'
    for name in names + (args.memory or []) + (args.compile or []):
        if name not in MODELS:
            parser.error(f'unknown model {name!r}{where}; known: '
                         f'{", ".join(MODELS)}')
    for name in args.compile or []:
        if is_detector(name):
            parser.error(f'--compile takes backbones; {name!r} is a detector')
    args.runs = max(2, args.runs + args.runs % 2)
    return args


def main():
    args = parse_args()
    if args.child:
        return child_main()
    env = child_env(args.malloc)
    if args.in_process and env != dict(os.environ):
        # glibc reads the variables at start-up: start this process again
        os.execve(sys.executable, [sys.executable, *sys.argv], env)
    torch.set_num_threads(args.threads)
    if args.in_process:
        _quiet()
    try:
        results = (memory(args, env) if args.memory is not None else
                   speed(args, env))
    except RuntimeError as e:
        sys.exit(f'benchmark: {e}')
    if args.json:
        with open(args.json, 'w') as f:
            json.dump([asdict(r) for r in results], f, indent=1)


def memory(args, env) -> List[MemoryResult]:
    results = []
    for name in args.memory or ['pvt-small-peg-gap']:
        for size in args.sizes or [512]:
            s = Settings(name, task='memory', what='train', size=size,
                         batch=args.batch, threads=args.threads,
                         device=args.device, bf16=args.bf16,
                         with_cp=args.with_cp)
            r = MemoryResult(name, size, args.batch, args.with_cp,
                             run_child(s, env)['peak_mib'])
            print(f'memory  {name:28s} {size}px  peak {r.peak_mib:8.1f} MiB',
                  flush=True)
            results.append(r)
    return results


def speed(args, env) -> List[Result]:
    method = ('both models of a pair in this one process, in turns'
              if args.in_process else 'each model alone in its own process')
    print(f'torch {torch.__version__}, {args.device}, {args.threads} threads, '
          f'{"bf16 autocast" if args.bf16 else "fp32"}, malloc {args.malloc}'
          f'{", with_cp" if args.with_cp else ""}; {method}: {args.runs} '
          f'runs of each, {args.iters} timed calls a run after a warm-up '
          f'of {args.warmup}', flush=True)
    results = []
    jobs = plan(args)
    progress = Progress(len(jobs) * (args.runs // 2))
    for job in jobs:
        pair = (f'{job.what} {job.ours.size}px {job.ours.model} vs '
                f'{job.theirs.model}')
        results.append(compare(
            job, args.runs, args.in_process, env,
            on_block=lambda k, n: progress(f'{pair}, block {k}/{n}')))
        print(format_result(results[-1]), flush=True)
        if args.profile and job.what == 'forward':
            for s in (job.ours, job.theirs):
                s = replace(s, task='profile', iters=args.profile)
                out = run_child(s, env)
                print(f'profile {s.model}, {s.size}px b{s.batch}, '
                      f'{args.profile} forwards, {out["faults"]:.0f} page '
                      f'faults per forward\n{out["table"]}', flush=True)
    return results


if __name__ == '__main__':
    main()
