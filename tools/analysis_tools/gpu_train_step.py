"""Training-step throughput on one GPU: CPVT-Ti/S against timm's DeiT-Ti/S,
PVTPEG-T against mmdet's PVT-T (where mmdet loads) and mmcpvt's PVT-T
without PEG (PVT's learned tables), in fp32 and under bf16 autocast.

A step is forward, cross-entropy on random labels, backward and an AdamW
step, on random images (ImageNet's 1000 classes, drop path 0.1 everywhere);
its time is the median over the timed steps after warm-up, each step closed
by ``torch.cuda.synchronize()``. Prints a markdown table with the device and
the versions. No GPU figure has been measured with it yet.

It runs where torch and timm are installed but no OpenMMLab package and no
network (the lent GPU machines): mmengine, mmcv without ops (mmcv-lite) and
their small pure-Python needs travel as wheels; mmcpvt is imported from this
clone. Without mmcv's ops mmdet does not import: its PVT-T row then says
"not available" and why. On such a machine (about 2-3 minutes on one H100):

    tools/install/gpu_wheels.sh 3.12 .whl   # here, once: ~2 MiB of wheels

and the device tool's ``run`` with ``carry=['.whl']``, ``timeout_s=480``::

    python3 -m pip install -q --no-index --no-deps --no-compile \
        --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
        && export PYTHONPATH=/tmp/site || exit; PYTHONUNBUFFERED=1 \
        python3 tools/analysis_tools/gpu_train_step.py --out $OUT/train_step.md

Here, as a test (tiny batch and input, one warm-up and two timed steps)::

    python tools/analysis_tools/gpu_train_step.py --device cpu --quick
"""
import argparse
import logging
import os.path as osp
import platform
import statistics
import sys
import time

import warnings

import torch
import torch.nn as nn
import torch.nn.functional as F

ROOT = osp.dirname(osp.dirname(osp.dirname(osp.abspath(__file__))))
sys.path.insert(0, ROOT)  # this clone's mmcpvt, installed or not
warnings.filterwarnings(  # mmcv-lite's, on importing mmcv.cnn
    'ignore', message='Fail to import ``MultiScaleDeformableAttention')

NUM_CLASSES = 1000
DROP_PATH = 0.1
PVT_T = dict(type='PVTPEG', arch='tiny', out_type='featmap', out_indices=(3, ))
PVT_T_NO_PEG = 'PVT-T (mmcpvt, no PEG)'
# (name, how to build, the rows it is compared with: the first measured)
MODELS = [
    ('DeiT-Ti (timm)', ('timm', 'deit_tiny_patch16_224'), ()),
    ('CPVT-Ti', ('mmcpvt', dict(type='CPVT', arch='tiny')),
     ('DeiT-Ti (timm)', )),
    ('DeiT-S (timm)', ('timm', 'deit_small_patch16_224'), ()),
    ('CPVT-S', ('mmcpvt', dict(type='CPVT', arch='small')),
     ('DeiT-S (timm)', )),
    ('PVT-T (mmdet)', ('mmdet', dict(num_layers=[2, 2, 2, 2],
                                     out_indices=(3, ))), ()),
    (PVT_T_NO_PEG, ('mmcpvt', dict(PVT_T, peg_positions=((), (), (), ()),
                                   pos_embed='learned')), ()),
    ('PVTPEG-T', ('mmcpvt', PVT_T), ('PVT-T (mmdet)', PVT_T_NO_PEG)),
]


class Classifier(nn.Module):
    """A backbone and a linear head on its last output: the class token or
    the average of the last feature map."""

    def __init__(self, backbone: nn.Module, dims: int):
        super().__init__()
        self.backbone = backbone
        self.head = nn.Linear(dims, NUM_CLASSES)

    def forward(self, x):
        out = self.backbone(x)
        out = out[-1] if isinstance(out, (tuple, list)) else out
        if out.dim() == 4:  # (B, C, H, W) -> (B, C)
            out = out.mean((2, 3))
        return self.head(out)


def build(how, size: int) -> nn.Module:
    """The model of a MODELS row, or an ImportError saying why it cannot
    be built here."""
    lib, cfg = how
    if lib == 'timm':
        import timm
        return timm.create_model(cfg, pretrained=False, img_size=size,
                                 drop_path_rate=DROP_PATH)
    if lib == 'mmdet':
        try:
            from mmdet.models.backbones import PyramidVisionTransformer
        except Exception as e:  # mmdet, or mmcv's ops, missing
            raise ImportError(f'{type(e).__name__}: {e}') from None
        backbone = PyramidVisionTransformer(drop_path_rate=DROP_PATH, **cfg)
        return Classifier(backbone, 512)
    from mmengine.logging import MMLogger
    from mmcpvt.registry import MODELS as REGISTRY
    # init_weights logs every tensor at INFO
    MMLogger.get_current_instance().setLevel(logging.WARNING)
    backbone = REGISTRY.build(dict(cfg, drop_path_rate=DROP_PATH))
    backbone.init_weights()
    dims = backbone.embed_dims
    return Classifier(backbone, dims[-1] if isinstance(dims, list) else dims)


def measure(model: nn.Module, device: torch.device, dtype, batch: int,
            size: int, warmup: int, steps: int):
    """(images per second, peak memory in MiB or None) of training steps."""
    model.to(device).train()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, weight_decay=0.05)
    x = torch.randn(batch, 3, size, size, device=device)
    y = torch.randint(0, NUM_CLASSES, (batch, ), device=device)
    cuda = device.type == 'cuda'
    sync = torch.cuda.synchronize if cuda else (lambda: None)
    if cuda:
        torch.cuda.empty_cache()
        torch.cuda.reset_peak_memory_stats()
    times = []
    for i in range(warmup + steps):
        start = time.perf_counter()
        with torch.autocast(device.type, dtype=dtype,
                            enabled=dtype is not None):
            loss = F.cross_entropy(model(x), y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        sync()
        times.append(time.perf_counter() - start)
    if not torch.isfinite(loss):
        raise FloatingPointError(f'the loss is {loss.item()}')
    peak = torch.cuda.max_memory_allocated() / 2**20 if cuda else None
    return batch / statistics.median(times[warmup:]), peak


def header(device: torch.device) -> list:
    import mmcv
    import mmengine
    import timm
    try:
        from mmcv.ops import get_compiling_cuda_version
        cuda = get_compiling_cuda_version()
        ops = ('CPU ops only' if cuda == 'not available' else
               f'ops for CUDA {cuda}')
    except ImportError:
        ops = 'no ops: mmcv-lite'
    name = (torch.cuda.get_device_name(device) if device.type == 'cuda'
            else f'CPU ({platform.processor() or platform.machine()}, '
            f'{torch.get_num_threads()} threads)')
    return [f'device: {name}',
            f'torch {torch.__version__} (CUDA {torch.version.cuda}), timm '
            f'{timm.__version__}, mmengine {mmengine.__version__}, mmcv '
            f'{mmcv.__version__} ({ops}), Python {platform.python_version()}']


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    parser.add_argument('--device', default='cuda')
    parser.add_argument('--batch', type=int, default=128)
    parser.add_argument('--size', type=int, default=224)
    parser.add_argument('--warmup', type=int, default=10)
    parser.add_argument('--steps', type=int, default=30)
    parser.add_argument('--quick', action='store_true',
                        help='batch 2 at 64 px, 1 warm-up and 2 timed steps '
                        '(a test that the script runs)')
    parser.add_argument('--out', help='also write the table to this file')
    args = parser.parse_args(argv)
    if args.quick:
        args.batch, args.size, args.warmup, args.steps = 2, 64, 1, 2
    device = torch.device(args.device)
    if device.type == 'cuda' and not torch.cuda.is_available():
        parser.error('--device cuda: torch sees no GPU here; use --device cpu')
    torch.backends.cuda.matmul.allow_tf32 = False  # fp32 means fp32
    torch.backends.cudnn.allow_tf32 = False

    lines = header(device) + [
        f'train step (forward, backward, AdamW), batch {args.batch}, '
        f'{args.size} px, median of {args.steps} steps after {args.warmup}'
        ' (fp32: TF32 off)',
        '', '| model | params (M) | fp32 img/s | bf16 img/s | vs | '
        'fp32 ratio | bf16 ratio | peak MiB fp32 / bf16 |',
        '|---|---:|---:|---:|---|---:|---:|---:|']
    print('\n'.join(lines), flush=True)
    rates, notes = {}, []
    for name, how, anchors in MODELS:
        torch.manual_seed(0)
        try:
            model = build(how, args.size)
        except ImportError as e:
            notes.append(f'{name}: not available ({e})')
            print(notes[-1], flush=True)
            continue
        params = sum(p.numel() for p in model.parameters()) / 1e6
        (fp32, peak32), (bf16, peak16) = (
            measure(model, device, dtype, args.batch, args.size,
                    args.warmup, args.steps)
            for dtype in (None, torch.bfloat16))
        rates[name] = fp32, bf16
        del model
        anchor = next((a for a in anchors if a in rates), None)
        ratio = [f'{ours / theirs:.2f}' if anchor else '-'
                 for ours, theirs in zip(rates[name],
                                         rates.get(anchor, (1, 1)))]
        peak = (f'{peak32:.0f} / {peak16:.0f}' if peak32 is not None
                else '-')
        lines.append(f'| {name} | {params:.1f} | {fp32:.1f} | {bf16:.1f} '
                     f'| {anchor or ""} | {ratio[0]} | {ratio[1]} | {peak} |')
        print(lines[-1], flush=True)
    lines += [''] + notes
    if args.out:
        with open(args.out, 'w') as f:
            f.write('\n'.join(lines) + '\n')


if __name__ == '__main__':
    main()
