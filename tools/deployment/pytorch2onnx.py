"""Export a classifier, or the backbone of a detector / segmentor, to ONNX
with dynamic batch, height and width, and check it with onnxruntime at
``--shape`` and at a size no patch, stride or window divides. What is
exported, the input's normalisation (stored in the file's metadata) and
why the shapes stay dynamic: docs/deployment.md.

    python tools/deployment/pytorch2onnx.py CONFIG [CHECKPOINT] \\
        [--output-file F] [--shape H W] [--opset N] [--verify-shape H W] \\
        [--dynamic-export | --static [--verify]] [--backbone-only]
"""
import argparse
import contextlib
import json
import math
import os
import os.path as osp
import pickle
import sys
import warnings
from typing import List, Sequence, Tuple
from unittest import mock

import torch
import torch.nn as nn
import torch.nn.functional as F
from mmcv.cnn.bricks.transformer import AdaptivePadding
from mmengine.logging import MMLogger

from mmcpvt.apis import cli
from mmcpvt.apis.cfg_options import parse_cfg_options
from mmcpvt.apis.model import build_model, get_backbone, input_channels
from mmcpvt.models.layers import RotaryPositionEmbedding2d
from mmcpvt.utils.checkpoint import require_file
from mmcpvt.utils.path import check_output

# 17: the first opset with LayerNormalization (one node per norm instead of
# eleven); scaled_dot_product_attention is exported from opset 14 on.
DEFAULT_OPSET = 17
MIN_OPSET = 14
# The largest max |delta| (onnxruntime vs PyTorch, float32) accepted.
DEFAULT_ATOL = 1e-4
MMLogger.get_instance('pytorch2onnx', log_level='WARNING')  # current: no INFO


class TracedAdaptivePadding(AdaptivePadding):
    """mmcv's ``AdaptivePadding``, its padding always applied and computed
    in integers: traced as shape arithmetic, where mmcv's ``math.ceil`` and
    ``if pad > 0`` freeze the export size's padding."""

    def get_pad_shape(self, input_shape):
        pads = []
        for size, k, s, d in zip(input_shape, self.kernel_size, self.stride,
                                 self.dilation):
            # (ceil(size / s) - 1) * s + the kernel's reach - size
            pad = ((size + s - 1) // s - 1) * s + (k - 1) * d + 1 - size
            pads.append(pad.clamp(min=0) if isinstance(pad, torch.Tensor)
                        else max(pad, 0))
        return tuple(pads)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        pad_h, pad_w = self.get_pad_shape(x.shape[-2:])
        if self.padding == 'corner':
            return F.pad(x, [0, pad_w, 0, pad_h])
        return F.pad(x, [pad_w // 2, pad_w - pad_w // 2, pad_h // 2,
                         pad_h - pad_h // 2])


def traced_rope(self: RotaryPositionEmbedding2d, hw_shape) -> torch.Tensor:
    """``RotaryPositionEmbedding2d.forward`` for the tracer: timm's tables,
    from timm's frequencies, on a grid made of the traced map size. timm's
    axial table doubles its angles with ``repeat_interleave``, which this
    exporter turns into a Concat of the export size (RoPE-Mixed's, into
    wrong numbers), and DINOv3's divides by ``float(H)``, which freezes
    it."""
    embed = self.embed
    # else the grid below would differ from timm's
    assert getattr(embed, 'ref_feat_shape', None) is None and getattr(
        embed, 'normalize_coords', 'separate') == 'separate', (
        'the export of RoPE with ref_feat_shape or normalize_coords other '
        "than 'separate' is not supported")
    H, W = hw_shape
    offset = getattr(embed, 'grid_offset', 0.)
    device = next(embed.buffers(), next(embed.parameters(), None)).device
    ys = torch.arange(H, device=device).float() + offset
    xs = torch.arange(W, device=device).float() + offset
    if self.type == 'dinov3':  # centred, normalised, in [-1, 1]
        ys, xs = (ys + 0.5) / H * 2 - 1, (xs + 0.5) / W * 2 - 1
    grid = torch.stack(torch.meshgrid(ys, xs, indexing='ij'), -1)  # (H, W, 2)
    if embed.grid_indexing == 'xy':  # channels (x, y)
        grid = grid.flip(-1)
    grid = grid.flatten(0, 1)  # (H*W, 2)
    if self.type == 'mixed':  # (depth, heads, H*W, head_dims / 2)
        angles = (grid[:, 0, None] * embed.freqs[0, :, :, None] +
                  grid[:, 1, None] * embed.freqs[1, :, :, None])
    elif self.type == 'axial':
        angles = grid[..., None] * embed.bands  # (H*W, 2, dim / 4)
    else:
        angles = 2 * math.pi * grid[..., None] / embed.periods
    if self.type != 'mixed':
        angles = angles.flatten(-2)  # (H*W, dim / 2)
    angles = torch.stack([angles, angles], -1).flatten(-2)  # pairs
    rope = torch.cat([angles.sin(), angles.cos()], dim=-1)
    return rope if self.type == 'mixed' else rope.expand(self.depth, -1, -1)


def traceable(model: nn.Module):
    """:class:`TracedAdaptivePadding` and :func:`traced_rope` during the
    export (as mmdeploy's rewriters do)."""
    stack = contextlib.ExitStack()
    stack.enter_context(mock.patch.multiple(
        AdaptivePadding, get_pad_shape=TracedAdaptivePadding.get_pad_shape,
        forward=TracedAdaptivePadding.forward))
    stack.enter_context(mock.patch.object(RotaryPositionEmbedding2d,
                                          'forward', traced_rope))
    return stack


class ClassifierScores(nn.Module):
    """Normalised images (B, C, H, W) -> class scores (B, num_classes): the
    softmax (multi-label: sigmoid) of the logits, as mmdeploy exports
    mmpretrain classifiers."""

    def __init__(self, classifier: nn.Module):
        super().__init__()
        self.classifier = classifier
        from mmpretrain.models.heads import MultiLabelClsHead
        self.multi_label = isinstance(classifier.head, MultiLabelClsHead)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        logits = self.classifier(x, mode='tensor')
        return logits.sigmoid() if self.multi_label else logits.softmax(-1)


class BackboneFeatures(nn.Module):
    """A backbone whose outputs are a tuple of tensors."""

    def __init__(self, backbone: nn.Module):
        super().__init__()
        self.backbone = backbone

    def forward(self, x: torch.Tensor) -> Tuple[torch.Tensor, ...]:
        outs = self.backbone(x)
        return tuple(outs) if isinstance(outs, (list, tuple)) else (outs, )


def parse_args(argv=None):
    parser = argparse.ArgumentParser(
        description='Export a model of an mmcpvt config to ONNX and check it '
        'with onnxruntime (docs/deployment.md).')
    add = parser.add_argument
    add('config', help='classifier, detector or segmentor')
    add('checkpoint', nargs='?', help='of the whole model, a file or a URL '
        '(default: the config\'s random initialisation)')
    add('--output-file', help='the .onnx file (default: '
        'work_dirs/<config name>/<config name>.onnx)')
    add('--shape', type=int, nargs='+', default=[224], metavar='SIZE',
        help='input H [W] of the trace and the first check (default 224)')
    add('--opset', type=int, default=DEFAULT_OPSET,
        help=f'at least {MIN_OPSET} (default %(default)s)')
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument('--dynamic-export', dest='dynamic', action='store_true',
                      default=True, help='dynamic batch, height and width '
                      '(the default)')
    mode.add_argument('--static', dest='dynamic', action='store_false',
                      help='batch 1 and --shape')
    add('--backbone-only', action='store_true',
        help='export the backbone of a classifier')
    add('--verify', action='store_true',
        help='check a --static file too (a dynamic one always is)')
    add('--verify-shape', type=int, nargs=2, metavar=('H', 'W'),
        help='the second size of the check (default: --shape x 0.9 and x '
        '1.1, made odd: no patch, stride or window divides it)')
    add('--atol', type=float, default=DEFAULT_ATOL,
        help='largest max |delta| accepted (default %(default)s)')
    add('--cfg-options', nargs='+', action='extend', metavar='KEY=VALUE',
        help='override config settings, key=value')
    args = parser.parse_args(argv)
    if len(args.shape) > 2:
        parser.error(f'--shape takes H [W], got {args.shape}')
    args.shape = (args.shape[0], args.shape[-1])
    name = osp.splitext(osp.basename(args.config))[0]
    args.output_file = args.output_file or osp.join('work_dirs', name,
                                                    f'{name}.onnx')
    try:  # before anything is built
        cli.check_options(cli.positive, shape=list(args.shape),
                          verify_shape=args.verify_shape)
        cli.check_options(cli.checked(
            int, lambda opset: opset >= MIN_OPSET,
            f'must be >= {MIN_OPSET}: the attention needs it'),
            opset=args.opset)
        cli.check_options(cli.non_negative, atol=args.atol)
        if args.checkpoint is not None:
            require_file(args.checkpoint, 'checkpoint')
        check_output('--output-file', args.output_file, f'{name}.onnx',
                     [args.config, args.checkpoint])
        args.cfg_options = parse_cfg_options(args.cfg_options)
    except (ValueError, FileNotFoundError) as e:
        parser.error(str(e))
    return parser, args


def export(module: nn.Module, output_file: str, shape: Sequence[int],
           opset: int, dynamic: bool, output_names: List[str],
           spatial_outputs: Sequence[bool], metadata=None) -> None:
    """Trace ``module`` on one ``shape`` image into a checked ONNX file with
    ``metadata`` (str values); ``dynamic``: batch, height and width of the
    input and outputs symbolic."""
    import onnx
    dynamic_axes = {'input': {0: 'batch', 2: 'height', 3: 'width'}, **{
        name: {0: 'batch', 2: f'{name}_height', 3: f'{name}_width'}
        if spatial else {0: 'batch'}
        for name, spatial in zip(output_names, spatial_outputs)
    }} if dynamic else None
    dummy = torch.randn(1, input_channels(module), *shape)
    os.makedirs(osp.dirname(osp.abspath(output_file)), exist_ok=True)
    with warnings.catch_warnings():
        # TracerWarnings: the shape checks (``if N != H * W: raise``) trace
        # to nothing; the legacy-exporter notice: see docs/deployment.md.
        warnings.simplefilter('ignore', torch.jit.TracerWarning)
        warnings.simplefilter('ignore', DeprecationWarning)
        with torch.no_grad(), traceable(module):
            torch.onnx.export(
                module, (dummy, ), output_file, dynamo=False,
                opset_version=opset, input_names=['input'],
                output_names=output_names, dynamic_axes=dynamic_axes,
                do_constant_folding=True)
    model = onnx.load(output_file)
    onnx.helper.set_model_props(model, metadata or {})
    onnx.checker.check_model(model)
    onnx.save(model, output_file)


def verify(module: nn.Module, output_file: str, sizes, output_names,
           atol: float, batch: int = 2, seed: int = 0) -> bool:
    """Whether onnxruntime gives PyTorch's outputs within ``atol`` at each
    (H, W) of ``sizes`` on a seeded normal batch; prints each max |delta|."""
    import onnxruntime as ort
    ort.set_default_logger_severity(3)  # its errors are printed below
    sess = ort.InferenceSession(output_file,
                                providers=['CPUExecutionProvider'])
    print(f'verify with onnxruntime {ort.__version__} (CPU) against '
          f'PyTorch, tolerance max |delta| <= {atol:g}:')
    in_shape = sess.get_inputs()[0].shape
    b = in_shape[0] if isinstance(in_shape[0], int) else batch
    g = torch.Generator().manual_seed(seed)
    all_ok = True
    for size in sizes:
        x = torch.randn(b, in_shape[1], *size, generator=g)
        where = f'  batch {b} at {size[0]}x{size[1]}'
        try:
            with torch.no_grad():
                ref = module(x)  # may fail: e.g. a map too small
            outs = [torch.from_numpy(o) for o in sess.run(
                None, {'input': x.numpy()})]
        except Exception as e:  # onnxruntime's errors have no common base
            print(f'{where}: failed: {type(e).__name__}: {e}')
            all_ok = False
            continue
        ref = ref if isinstance(ref, tuple) else (ref, )
        diffs = {
            name: float((o - r).abs().max()) if o.shape == r.shape else
            float('inf')
            for name, o, r in zip(output_names, outs, ref)
        }
        if diffs.get('scores', float('inf')) < float('inf'):
            # Probabilities (1e-3 each of 1000 classes) hide a wrong graph;
            # their logarithms are the logits up to a constant per image.
            diffs['log(scores)'] = float((outs[0].clamp(min=1e-30).log() -
                                          ref[0].clamp(min=1e-30).log()
                                          ).abs().max())
        ok = all(d <= atol for d in diffs.values())
        all_ok = all_ok and ok
        print(f'{where}: max |delta| '
              f'{", ".join(f"{k} {v:.2e}" for k, v in diffs.items())}  '
              f'{"ok" if ok else "FAILED"}')
    return all_ok


def exported_module(model: nn.Module, backbone_only: bool, shape):
    """``(module, description, output names, whether each is a map)``: a
    classifier's scores, else the backbone's feature maps."""
    backbone = get_backbone(model)
    classifier = hasattr(model, 'head')  # mmdet / mmseg: bbox_head, ...
    if classifier and not backbone_only:
        what = (f'classifier {type(model).__name__} '
                f'({type(backbone).__name__} backbone)')
        return ClassifierScores(model).eval(), what, ['scores'], [False]
    what = f'backbone {type(backbone).__name__}'
    if backbone is not model and not classifier:
        what += (f' of the {type(model).__name__} (its neck, heads and '
                 f'post-processing: mmdeploy)')
    module = BackboneFeatures(backbone).eval()
    with torch.no_grad():
        outs = module(torch.zeros(1, input_channels(module), *shape))
    return (module, what, [f'feat{i}' for i in range(len(outs))],
            [t.dim() == 4 for t in outs])


def main(argv=None):
    parser, args = parse_args(argv)
    try:
        import onnx
        import onnxruntime  # noqa: F401
    except ImportError as e:
        sys.exit(f'error: {e.name} is not installed; pip install onnx '
                 f'onnxruntime (see requirements/tests.txt)')
    try:  # the checkpoint read weights-only and loaded whole
        model, cfg, _ = build_model(args.config, args.checkpoint,
                                    cfg_options=args.cfg_options)
    except (ValueError, RuntimeError, FileNotFoundError, TypeError) as e:
        parser.error(str(e))
    except pickle.UnpicklingError:  # another scheme: torch's loader refused
        parser.error(f'{args.checkpoint} is refused by torch\'s weights-only '
                     f'unpickler: it holds objects that could run code '
                     f'(nothing was run), or it is damaged')
    module, what, output_names, spatial = exported_module(
        model, args.backbone_only, args.shape)
    # what the graph's input must have been normalised with
    pre = {**(cfg.get('data_preprocessor') or {}),
           **(cfg.model.get('data_preprocessor') or {})}
    norm = dict(mean=pre.get('mean'), std=pre.get('std'),
                to_rgb=bool(pre.get('to_rgb', pre.get('bgr_to_rgb'))))
    try:
        export(module, args.output_file, args.shape, args.opset,
               args.dynamic, output_names, spatial, dict(
                   mmcpvt_config=osp.basename(args.config),
                   mmcpvt_exported=what, mmcpvt_dynamic=str(args.dynamic),
                   mmcpvt_normalisation=json.dumps(norm)))
    except ValueError as e:  # the model refused the input (e.g. too large)
        parser.error(str(e))
    axes = 'dynamic batch, height and width' if args.dynamic else 'static'
    print(f'exported the {what}\n  to {args.output_file} (opset '
          f'{args.opset}, TorchScript exporter, torch {torch.__version__}, '
          f'onnx {onnx.__version__}; {axes}, traced at {args.shape})\n'
          f'  outputs: {", ".join(output_names)}\n  input: float32 NCHW, '
          f'normalised outside the graph, (img - mean) / std, RGB if '
          f'to_rgb: {norm}')
    if not (args.verify or args.dynamic):
        return
    sizes = [args.shape]
    if args.dynamic:  # x 0.9 and x 1.1, odd: no patch or stride divides it
        H, W = round(args.shape[0] * 0.9), round(args.shape[1] * 1.1)
        sizes.append(tuple(args.verify_shape or (max(H - (H % 2 == 0), 1),
                                                 W + (W % 2 == 0))))
    if not verify(module, args.output_file, sizes, output_names, args.atol):
        hint = (' A size frozen into the graph (computed in Python) fails '
                'at the second size only; --static --shape H W exports the '
                'one size you will run.' if args.dynamic else '')
        sys.exit(f'error: the ONNX file does not reproduce PyTorch within '
                 f'max |delta| <= {args.atol:g} (see above).{hint}')


if __name__ == '__main__':
    main()
