"""The models, steps and child processes that benchmark.py, cost_curve.py
and train_step.py (tools/analysis_tools) measure with; run_child runs this
module in a fresh process."""
import ctypes
import importlib
import json
import os
import platform
import re
import subprocess
import sys
import time
from dataclasses import asdict, dataclass

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils import benchmark

from .cli import checked
from .model_index import get_mim_root

# the versions a header gives, where installed (mmcv-lite: mmcv, no ops)
LIBS = ('timm', 'mmengine', 'mmcv', 'mmcv-lite', 'mmpretrain', 'mmdet')
SWIN_T = dict(embed_dims=96, depths=[2, 2, 6, 2], num_heads=[3, 6, 12, 24],
              window_size=7)
RETINANET_SWIN = 'configs/swin_peg/retinanet_swin-t-peg_fpn_1x_coco.py'
P0_4 = (0, 1, 2, 3, 4)  # CPVT-Ti‡: a PEG after each of the first 5 blocks
# ours: a module config of mmcpvt's registry; theirs (name@library): one of
# the library's registry or timm's model name; detectors: (config file, None
# or a backbone to replace the config's)
MODELS = {
    'cpvt-tiny': dict(type='CPVT', arch='tiny'),
    'cpvt-tiny-nopeg': dict(type='CPVT', arch='tiny', peg_positions=()),
    'cpvt-tiny-p0-4': dict(type='CPVT', arch='tiny', peg_positions=P0_4),
    'cpvt-tiny-p0-4-gap': dict(type='CPVT', arch='tiny', peg_positions=P0_4,
                               out_type='avg_featmap'),
    'cpvt-small': dict(type='CPVT', arch='small'),
    'pvt-tiny-peg': dict(type='PVTPEG', arch='tiny'),
    'pvt-tiny-peg-gap': dict(type='PVTPEG', arch='tiny',
                             out_type='avg_featmap'),
    # PVT's learned position tables instead of PEGs
    'pvt-tiny-nopeg': dict(type='PVTPEG', arch='tiny', pos_embed='learned',
                           peg_positions=((), (), (), ())),
    'pvt-small-peg-gap': dict(type='PVTPEG', arch='small',
                              out_type='avg_featmap'),
    'swin-tiny-peg': dict(type='SwinPEG', arch='tiny'),
    'swin-tiny-peg-gap': dict(type='SwinPEG', arch='tiny',
                              out_type='avg_featmap'),
    'retinanet-pvt-tiny-peg': ('configs/retinanet_pvt_tiny_peg_1x_coco.py',
                               None),
    'retinanet-swin-tiny-peg': (RETINANET_SWIN, None),
    'deit-tiny@mmpretrain': dict(type='VisionTransformer', arch='deit-tiny',
                                 out_type='cls_token'),
    'deit_tiny_patch16_224@timm': 'deit_tiny_patch16_224',
    'deit_small_patch16_224@timm': 'deit_small_patch16_224',
    'pvt-tiny@mmdet': dict(type='PyramidVisionTransformer',
                           num_layers=[2, 2, 2, 2]),
    'swin-tiny@mmdet': dict(type='SwinTransformer', **SWIN_T),
    'retinanet-pvt-tiny@mmdet': (
        'configs/pvt_peg/retinanet_pvt-t_fpn_1x_coco.py', None),
    # mmdet's configs/swin/retinanet_swin-t-p4-w7_fpn_1x_coco.py: the same
    # head and neck as ours (stages 1-3), mmdet's Swin-T
    'retinanet-swin-tiny@mmdet': (RETINANET_SWIN, dict(
        type='SwinTransformer', drop_path_rate=0.2, out_indices=(1, 2, 3),
        **SWIN_T)),
}
# the check of the tools' --device (cli.check_options): cpu, or a GPU that
# torch sees
device_arg = checked(
    str, lambda d: d == 'cpu' or bool(re.fullmatch(r'cuda(:\d+)?', d))
    and torch.cuda.is_available(), 'cpu, or cuda[:N] where torch sees a GPU')


def is_detector(name):
    return isinstance(MODELS[name], tuple)


def build(name: str) -> nn.Module:
    """An untrained model of MODELS, initialised as a runner does."""
    from mmengine.config import Config, ConfigDict
    from mmengine.registry import init_default_scope
    cfg, scope = MODELS[name], name.partition('@')[2] or 'mmcpvt'
    if scope == 'timm':  # a ViT: resize its position table to any input
        import timm
        return timm.create_model(cfg, pretrained=False, num_classes=0,
                                 dynamic_img_size=True)
    if is_detector(name):
        config = Config.fromfile(os.path.join(get_mim_root(), cfg[0]))
        config.model.backbone = ConfigDict(cfg[1] or config.model.backbone,
                                           init_cfg=None)
        scope, cfg = config.default_scope, config.model
    init_default_scope(scope)
    model = importlib.import_module(f'{scope}.registry').MODELS.build(cfg)
    model.init_weights()
    return model


def header(device: str, threads: int) -> str:
    """The device, threads and versions the figures were measured on."""
    from importlib.metadata import distributions
    found = {d.metadata['Name']: d.version for d in distributions()}
    where = (f'{torch.cuda.get_device_name(device)}, CUDA {torch.version.cuda}'
             if device.startswith('cuda') else
             f'{platform.machine()} CPU, {os.cpu_count()} cores')
    versions = [f'Python {platform.python_version()}',
                f'torch {torch.__version__}',
                *(f'{lib} {found[lib]}' for lib in LIBS if lib in found)]
    return f'{where}, {threads} threads; {", ".join(versions)}'


@dataclass
class Settings:
    """One measurement of one model (a child's stdin, as JSON)."""
    model: str
    task: str = 'time'  # 'time', 'memory' (the peak of a step) or both
    what: str = 'forward'  # 'forward' (no grad, eval mode) or 'train'
    size: int = 224
    batch: int = 16
    threads: int = 1
    device: str = 'cpu'
    amp: str = 'fp32'  # or autocast to 'bf16', or to 'fp16' with GradScaler
    compile: bool = False  # torch.compile (inductor)
    with_cp: bool = False  # gradient checkpointing where the model has it
    min_time: float = 3.  # seconds of timed calls (blocked_autorange)
    # a slower first step is the only one: no memory, no timed calls
    max_seconds: float | None = None


class Runner:
    """One model's forward or training step (``settings.what``) on a fixed
    input. A backbone's training loss: the cross-entropy of its last output
    (pooled) as logits, plus the mean square of each other output."""

    def __init__(self, settings: Settings):
        s = self.s = settings
        # fp32 means fp32 (cuDNN's convolutions default to TF32)
        torch.backends.cuda.matmul.allow_tf32 = False
        torch.backends.cudnn.allow_tf32 = False
        torch.manual_seed(0)
        self.model = build(s.model).to(s.device)
        self.model.train(s.what == 'train')  # mmpretrain's returns None
        if s.with_cp and hasattr(self.model, 'with_cp'):
            self.model.with_cp = True
        self.detector = is_detector(s.model)
        if self.detector:  # mmdet's own test batch: images and 4 boxes each
            from mmdet.testing import demo_mm_inputs
            self.data = demo_mm_inputs(s.batch, (3, s.size, s.size),
                                       num_items=[4] * s.batch,
                                       num_classes=80)
        else:  # its own generator: the same input whatever the model drew
            self.data = torch.randn(
                s.batch, 3, s.size, s.size,
                generator=torch.Generator().manual_seed(0)).to(s.device)
        self.opt = torch.optim.AdamW(self.model.parameters(), lr=1e-5)
        self.fwd = torch.compile(self.model) if s.compile else self.model
        self.dtype = dict(fp16=torch.float16, bf16=torch.bfloat16).get(s.amp)
        self.scaler = torch.amp.GradScaler(s.device.split(':')[0],
                                           enabled=s.amp == 'fp16')

    def autocast(self):
        return torch.autocast(self.s.device.split(':')[0], self.dtype,
                              enabled=self.dtype is not None)

    def step(self):
        train = self.s.what == 'train'
        with torch.set_grad_enabled(train), self.autocast():
            if self.detector:  # the data preprocessor, then the model
                data = self.model.data_preprocessor(self.data, train)
                out = self.model(**data, mode='loss' if train else 'tensor')
            else:
                out = self.fwd(self.data)
        if not train:
            return
        if self.detector:
            self.loss = self.model.parse_losses(out)[0]
        else:
            *maps, last = out if isinstance(out, (tuple, list)) else (out, )
            if last.dim() == 4:  # (B, C, H, W) -> (B, C)
                last = last.mean((2, 3))
            classes = torch.arange(len(last), device=last.device)
            self.loss = F.cross_entropy(last.float(),
                                        classes % last.shape[1]) + sum(
                o.float().pow(2).mean() for o in maps)
        self.opt.zero_grad(set_to_none=True)
        self.scaler.scale(self.loss).backward()
        self.scaler.step(self.opt)
        self.scaler.update()

    def timed_step(self) -> float:
        """Seconds of one step (the first one also compiles and warms up)."""
        start = time.perf_counter()
        self.step()
        if self.s.device.startswith('cuda'):
            torch.cuda.synchronize()
        return time.perf_counter() - start

    def seconds(self) -> float:
        """Median seconds a step (blocked_autorange synchronises CUDA)."""
        timer = benchmark.Timer('runner.step()', globals=dict(runner=self),
                                num_threads=self.s.threads)
        return timer.blocked_autorange(min_run_time=self.s.min_time).median

    def peak_mib(self) -> float:
        """Memory of one step beyond what was held before it. CUDA: the
        allocator's peak; CPU: the peak resident set (VmHWM, reset through
        /proc/self/clear_refs) over the resident set once glibc has
        returned the freed heap (malloc_trim), which would hide it."""
        if self.s.device.startswith('cuda'):
            base = torch.cuda.memory_allocated()
            torch.cuda.reset_peak_memory_stats()
            self.step()
            return (torch.cuda.max_memory_allocated() - base) / 2**20
        ctypes.CDLL('libc.so.6').malloc_trim(0)
        with open('/proc/self/clear_refs', 'w') as f:
            f.write('5')  # VmHWM := VmRSS
        base = _status_kib('VmRSS')
        self.step()
        return max(_status_kib('VmHWM') - base, 0) / 1024


def _status_kib(key: str) -> int:
    with open('/proc/self/status') as f:
        return int(re.search(rf'^{key}:\s+(\d+)', f.read(), re.M)[1])


def measure(runner: Runner) -> dict:
    """Parameters, then ``runner.s.task``'s peak_mib and seconds of a step;
    a first step over ``max_seconds`` is the only one (peak_mib None)."""
    s, first = runner.s, runner.timed_step()
    figures = dict(params=sum(p.numel() for p in runner.model.parameters()))
    if s.max_seconds is not None and first > s.max_seconds:
        return dict(figures, seconds=first, peak_mib=None)
    if 'memory' in s.task:
        figures['peak_mib'] = runner.peak_mib()
    if 'time' in s.task:
        figures['seconds'] = runner.seconds()
    return figures


def child_main():
    """Settings as JSON on stdin -> its settings and figures on stdout."""
    s = Settings(**json.loads(sys.stdin.read()))
    torch.set_num_threads(s.threads)
    print(json.dumps(dict(settings=asdict(s), **measure(Runner(s)))),
          flush=True)


def run_child(s: Settings, timeout: float | None = None) -> dict:
    """Figures of ``s`` from a fresh Python process; a RuntimeError whose
    first line says why there are none (failed or timeout)."""
    try:
        proc = subprocess.run([sys.executable, '-m', 'mmcpvt.apis.measure'],
                              input=json.dumps(asdict(s)), text=True,
                              capture_output=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        raise RuntimeError(f'timeout: no result within {timeout:g} s '
                           f'({s.model}, {s.size}px)') from None
    if proc.returncode != 0:
        last = (proc.stderr.strip().splitlines() or ['(no output)'])[-1]
        raise RuntimeError(
            f'failed (exit {proc.returncode}): {last[:200]}\nthe process '
            f'measuring {s.model} at {s.size}px:\n{proc.stderr[-3000:]}')
    return json.loads(proc.stdout.strip().splitlines()[-1])


if __name__ == '__main__':
    child_main()
