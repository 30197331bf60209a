"""Export a classifier, or the backbone of a detector / segmentor, to ONNX
with dynamic batch, height and width, and check it with onnxruntime.

    python tools/deployment/pytorch2onnx.py CONFIG [CHECKPOINT] \\
        [--output-file F] [--shape H W] [--opset N] [--verify] \\
        [--dynamic-export | --static] [--backbone-only]

What is exported (see docs/deployment.md):

- a classifier config (mmpretrain ``ImageClassifier``): the whole network,
  ``model(x, mode='tensor')`` followed by the softmax (sigmoid for a
  multi-label head), one output ``scores`` (B, num_classes), as mmdeploy
  exports mmpretrain classifiers;
- a detector or segmentor config (or ``--backbone-only``): the backbone, one
  output per returned feature map (``feat0``, ``feat1``, ...; NCHW for
  'featmap' backbones). A whole detector or segmentor (neck, head,
  post-processing) is mmdeploy's job, not this tool's.

The input ``input`` is a float32 NCHW batch already normalised as the
config's data preprocessor does: RGB, ``(img - mean) / std``. The
normalisation stays outside the graph (OpenMMLab's practice); mean, std and
channel order are printed and stored in the file's metadata.

The graph is traced by PyTorch's TorchScript exporter
(``torch.onnx.export(..., dynamo=False)``) with ``dynamic_axes`` on batch,
height and width: PEG models have no position table tied to one size, so one
file serves every input size. The export swaps mmcv's ``AdaptivePadding``
(the patch embeddings' pad to a multiple of the patch size) for one whose
padding is traced as arithmetic on the input shape, as mmdeploy's rewriter
does; mmcpvt's own shape code traces as it is. ``--verify`` runs the file with
onnxruntime at ``--shape`` and at a second size that no patch, stride or
window divides, and compares each output with PyTorch's.
"""
import argparse
import json
import os
import os.path as osp
import sys
import warnings
from contextlib import contextmanager
from typing import List, Sequence, Tuple

import torch
import torch.nn as nn
import torch.nn.functional as F
from mmcv.cnn.bricks.transformer import AdaptivePadding

from mmcpvt.analysis.features import build_model, describe_load, load_config
from mmcpvt.utils.runner import CfgOptionsAction
from mmcpvt.models.layers import (LearnedPositionEmbedding,
                                  RelativePositionEncoding2d,
                                  SinCos2dPositionEmbedding)

# The default opset: 17 is the first with LayerNormalization (one node per
# norm instead of eleven); scaled_dot_product_attention is exported as
# MatMul / Softmax from opset 14 on.
DEFAULT_OPSET = 17
MIN_OPSET = 14
# The largest max |delta| (onnxruntime vs PyTorch, float32) --verify accepts.
DEFAULT_ATOL = 1e-4

# Modules that compute a table or index for each token-map size in Python
# (resize the learned table, build the sin-cos table, the relative index):
# traced from the traced map size they follow it, but such code can freeze a
# size, so their dynamic export is always verified.
PER_SIZE_TABLES = {
    LearnedPositionEmbedding: "a learned position table (pos_embed="
    "'learned'), resized for each input size",
    SinCos2dPositionEmbedding: "a sin-cos position table (pos_embed="
    "'sincos2d'), computed for each input size",
    RelativePositionEncoding2d: 'a 2-D relative position encoding (rpe_cfg), '
    'whose index is computed for each input size',
}


class TracedAdaptivePadding(AdaptivePadding):
    """mmcv's ``AdaptivePadding`` with its padding computed by integer
    arithmetic on the input shape and always applied (0 where nothing is
    missing): the same result, but traced as shape arithmetic where mmcv's
    ``math.ceil`` and ``if pad > 0`` freeze the export size's padding."""

    def get_pad_shape(self, input_shape):
        pads = []
        for size, k, s, d in zip(input_shape, self.kernel_size, self.stride,
                                 self.dilation):
            out = (size + s - 1) // s  # ceil(size / s)
            pad = (out - 1) * s + (k - 1) * d + 1 - size
            pads.append(pad.clamp(min=0) if isinstance(pad, torch.Tensor)
                        else max(pad, 0))
        return tuple(pads)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        pad_h, pad_w = self.get_pad_shape(x.shape[-2:])
        if self.padding == 'corner':
            return F.pad(x, [0, pad_w, 0, pad_h])
        return F.pad(x, [
            pad_w // 2, pad_w - pad_w // 2, pad_h // 2, pad_h - pad_h // 2
        ])


@contextmanager
def traceable_padding(model: nn.Module):
    """Swap every ``AdaptivePadding`` of ``model`` for a
    :class:`TracedAdaptivePadding` for a while (the export); the originals
    are put back after."""
    swapped = []
    for parent in list(model.modules()):
        for name, child in list(parent.named_children()):
            if type(child) is AdaptivePadding:
                new = TracedAdaptivePadding(child.kernel_size, child.stride,
                                            child.dilation, child.padding)
                setattr(parent, name, new)
                swapped.append((parent, name, child))
    try:
        yield
    finally:
        for parent, name, child in swapped:
            setattr(parent, name, child)


class ClassifierScores(nn.Module):
    """A classifier as one tensor function: normalised images (B, C, H, W)
    -> class scores (B, num_classes), the softmax of the logits (sigmoid for
    a multi-label head), as mmdeploy exports mmpretrain classifiers."""

    def __init__(self, classifier: nn.Module):
        super().__init__()
        self.classifier = classifier
        from mmpretrain.models.heads import MultiLabelClsHead
        self.multi_label = isinstance(
            getattr(classifier, 'head', None), MultiLabelClsHead)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        logits = self.classifier(x, mode='tensor')
        if self.multi_label:
            return logits.sigmoid()
        return F.softmax(logits, dim=-1)


class BackboneFeatures(nn.Module):
    """A backbone whose outputs are returned as a tuple of tensors."""

    def __init__(self, backbone: nn.Module):
        super().__init__()
        self.backbone = backbone

    def forward(self, x: torch.Tensor) -> Tuple[torch.Tensor, ...]:
        outs = self.backbone(x)
        return tuple(outs) if isinstance(outs, (list, tuple)) else (outs, )


def parse_args(argv=None):
    parser = argparse.ArgumentParser(
        description='Export a model of an mmcpvt config to ONNX (dynamic '
        'batch, height and width) and check it with onnxruntime.')
    parser.add_argument('config', help='config file (classifier, detector '
                        'or segmentor)')
    parser.add_argument(
        'checkpoint', nargs='?', default=None,
        help='checkpoint file (whole model or backbone); without one the '
        'weights are the config\'s random initialisation')
    parser.add_argument(
        '--output-file', default=None,
        help='the .onnx file (default: work_dirs/<config name>/<config '
        'name>.onnx)')
    parser.add_argument(
        '--shape', type=int, nargs='+', default=[224], metavar='SIZE',
        help='input H [W] of the export trace and the first --verify run '
        '(default 224)')
    parser.add_argument(
        '--opset', type=int, default=DEFAULT_OPSET,
        help=f'ONNX opset (default {DEFAULT_OPSET}: LayerNormalization is '
        f'one node; at least {MIN_OPSET})')
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument(
        '--dynamic-export', dest='dynamic', action='store_true',
        default=True,
        help='dynamic batch, height and width (the default)')
    mode.add_argument(
        '--static', dest='dynamic', action='store_false',
        help='fixed batch 1 and --shape, for a model whose dynamic graph '
        'fails --verify (mmdet\'s PyramidVisionTransformer baselines)')
    parser.add_argument(
        '--backbone-only', action='store_true',
        help='export the backbone of a classifier (det / seg configs always '
        'export their backbone)')
    parser.add_argument(
        '--verify', action='store_true',
        help='run the file with onnxruntime at --shape and at '
        '--verify-shape and compare with PyTorch; exit 1 if an output '
        'differs by more than --atol')
    parser.add_argument(
        '--verify-shape', type=int, nargs=2, default=None, metavar=('H', 'W'),
        help='the second --verify size (default: --shape scaled by 0.9 and '
        '1.1, made odd, so that no patch, stride or window divides it); '
        'ignored with --static')
    parser.add_argument(
        '--atol', type=float, default=DEFAULT_ATOL,
        help=f'largest max |delta| --verify accepts (default {DEFAULT_ATOL})')
    parser.add_argument(
        '--cfg-options', nargs='+', action=CfgOptionsAction,
        help='override config settings, key=value')
    args = parser.parse_args(argv)
    if len(args.shape) not in (1, 2) or min(args.shape) < 1:
        parser.error(f'--shape takes H [W] (positive), got {args.shape}')
    args.shape = (args.shape[0], args.shape[-1])
    if args.opset < MIN_OPSET:
        parser.error(f'--opset {args.opset} is too old: the attention '
                     f'(scaled_dot_product_attention) needs opset '
                     f'>= {MIN_OPSET}; {DEFAULT_OPSET} is the default')
    if args.verify_shape is not None and min(args.verify_shape) < 1:
        parser.error(f'--verify-shape takes positive H W, got '
                     f'{args.verify_shape}')
    if not osp.isfile(args.config):
        parser.error(f'config file not found: {args.config}')
    if args.checkpoint is not None and '://' not in args.checkpoint and \
            not osp.isfile(args.checkpoint):
        parser.error(f'checkpoint file not found: {args.checkpoint}')
    if args.output_file is None:
        name = osp.splitext(osp.basename(args.config))[0]
        args.output_file = osp.join('work_dirs', name, f'{name}.onnx')
    return parser, args


def second_size(shape: Sequence[int]) -> Tuple[int, int]:
    """A second verification size: ``shape`` scaled by 0.9 (H) and 1.1 (W),
    made odd so that no patch, stride or even window divides it."""
    H, W = round(shape[0] * 0.9), round(shape[1] * 1.1)
    return max(H - (H % 2 == 0), 1), W + (W % 2 == 0)


def is_classifier(model: nn.Module) -> bool:
    """An mmpretrain classifier: a backbone, a head and a 'tensor' mode."""
    try:
        from mmpretrain.models import ImageClassifier
    except ImportError:
        return False
    return isinstance(model, ImageClassifier)


def per_size_tables(module: nn.Module) -> List[str]:
    """The :data:`PER_SIZE_TABLES` kinds in ``module``, one line each."""
    found = {}
    for name, m in module.named_modules():
        for cls, what in PER_SIZE_TABLES.items():
            if isinstance(m, cls):
                found.setdefault(what, name)
    return [f'{what} (e.g. {name})' for what, name in found.items()]


def normalisation(cfg) -> dict:
    """Mean, std and channel order the exported graph expects its input to
    have been normalised with (the config's data preprocessor)."""
    pre = dict(cfg.get('data_preprocessor') or {})
    pre.update(cfg.model.get('data_preprocessor') or {})
    to_rgb = pre.get('to_rgb', pre.get('bgr_to_rgb', False))
    return dict(mean=pre.get('mean'), std=pre.get('std'),
                to_rgb=bool(to_rgb))


def describe_input(norm: dict) -> str:
    if norm['mean'] is None:
        return ('input: float32 NCHW; the config has no mean/std, so the '
                'images go in as the data pipeline gives them')
    order = ('RGB (the config loads BGR and its preprocessor flips it: '
             'flip before)' if norm['to_rgb'] else
             'in the channel order of the data pipeline')
    return (f'input: float32 NCHW, {order}, normalised outside the graph: '
            f'(img - mean) / std with mean={norm["mean"]}, '
            f'std={norm["std"]}')


def input_channels(module: nn.Module) -> int:
    """The input channels of the first convolution (3 if none)."""
    return next((m.in_channels for m in module.modules()
                 if isinstance(m, nn.Conv2d)), 3)


def export(module: nn.Module, output_file: str, shape: Sequence[int],
           opset: int, dynamic: bool, output_names: List[str],
           spatial_outputs: Sequence[bool]) -> None:
    """Trace ``module`` (eval mode) at a batch of one ``shape`` image and
    write the ONNX file; with ``dynamic``, batch, height and width of the
    input (and batch / height / width of the outputs) are symbolic."""
    dynamic_axes = None
    if dynamic:
        dynamic_axes = {'input': {0: 'batch', 2: 'height', 3: 'width'}}
        for name, spatial in zip(output_names, spatial_outputs):
            dynamic_axes[name] = ({
                0: 'batch',
                2: f'{name}_height',
                3: f'{name}_width'
            } if spatial else {0: 'batch'})
    dummy = torch.randn(1, input_channels(module), *shape)
    if osp.dirname(output_file):
        os.makedirs(osp.dirname(output_file), exist_ok=True)
    with warnings.catch_warnings():
        # TracerWarnings come from the shape checks (``if N != H * W:
        # raise``), which trace to nothing; --verify at a second size is the
        # check that no shape was frozen. The legacy-exporter notice is said
        # in docs/deployment.md.
        warnings.simplefilter('ignore', torch.jit.TracerWarning)
        warnings.simplefilter('ignore', DeprecationWarning)
        with torch.no_grad(), traceable_padding(module):
            torch.onnx.export(
                module, (dummy, ),
                output_file,
                dynamo=False,
                opset_version=opset,
                input_names=['input'],
                output_names=output_names,
                dynamic_axes=dynamic_axes,
                do_constant_folding=True)


def add_metadata(output_file: str, metadata: dict) -> None:
    """Store ``metadata`` (str values) in the file's ``metadata_props`` and
    check the model."""
    import onnx
    model = onnx.load(output_file)
    for key, value in metadata.items():
        prop = model.metadata_props.add()
        prop.key, prop.value = key, value
    onnx.checker.check_model(model)
    onnx.save(model, output_file)


def verify(module: nn.Module, output_file: str, sizes, output_names,
           atol: float, batch: int = 2, seed: int = 0) -> List[dict]:
    """Run the file with onnxruntime at each (H, W) of ``sizes`` on a seeded
    normal batch (the scale of normalised images) and compare every output
    with PyTorch's. Returns one dict per size: ``size``, ``max_abs_diff``
    per output name, ``ok``."""
    import numpy as np
    import onnxruntime as ort
    options = ort.SessionOptions()
    options.log_severity_level = 3  # its errors are reported below
    sess = ort.InferenceSession(output_file, options,
                                providers=['CPUExecutionProvider'])
    in_shape = sess.get_inputs()[0].shape
    results = []
    g = torch.Generator().manual_seed(seed)
    for size in sizes:
        b = batch if not isinstance(in_shape[0], int) else in_shape[0]
        x = torch.randn(b, in_shape[1], *size, generator=g)
        try:
            with torch.no_grad():
                ref = module(x)
        except (ValueError, RuntimeError) as e:  # e.g. a map too small
            results.append(dict(size=list(size), ok=False,
                                error=f'PyTorch failed: {e}'))
            continue
        ref = ref if isinstance(ref, (list, tuple)) else (ref, )
        try:
            outs = sess.run(None, {'input': x.numpy()})
        except Exception as e:  # onnxruntime's errors have no common base
            results.append(dict(size=list(size), ok=False,
                                error=f'onnxruntime failed: {e}'))
            continue
        diffs = {}
        for name, o, r in zip(output_names, outs, ref):
            r = r.numpy()
            if o.shape != r.shape:
                diffs[name] = float('inf')
                continue
            diffs[name] = float(np.abs(o - r).max())
            if name == 'scores':
                # Probabilities (1e-3 each of 1000 classes) hide a wrong
                # graph; their logarithms are the logits up to a constant
                # per image, at the logits' scale.
                diffs[f'log({name})'] = float(
                    np.abs(np.log(np.maximum(o, 1e-30)) -
                           np.log(np.maximum(r, 1e-30))).max())
        results.append(
            dict(size=list(size), batch=b, max_abs_diff=diffs,
                 ok=all(d <= atol for d in diffs.values())))
    return results


def exported_module(model: nn.Module, backbone_only: bool, shape):
    """What is exported of ``model``: ``(module, description, output names,
    whether each output is a (B, C, H, W) map)``."""
    if is_classifier(model) and not backbone_only:
        what = (f'classifier {type(model).__name__} '
                f'({type(model.backbone).__name__} backbone)')
        return ClassifierScores(model).eval(), what, ['scores'], [False]
    backbone = getattr(model, 'backbone', model)
    what = f'backbone {type(backbone).__name__}'
    if not is_classifier(model) and backbone is not model:
        what += (f' of the {type(model).__name__} (neck, head and '
                 f'post-processing are not exported: use mmdeploy for the '
                 f'whole model)')
    module = BackboneFeatures(backbone).eval()
    with torch.no_grad():
        outs = module(torch.zeros(1, input_channels(module), *shape))
    return (module, what, [f'feat{i}' for i in range(len(outs))],
            [t.dim() == 4 for t in outs])


def print_verification(results: List[dict], atol: float) -> None:
    import onnxruntime
    print(f'verify with onnxruntime {onnxruntime.__version__} (CPU) against '
          f'PyTorch, tolerance max |delta| <= {atol:g}:')
    for r in results:
        size = f'{r["size"][0]}x{r["size"][1]}'
        if 'error' in r:
            print(f'  {size}: {r["error"]}')
            continue
        diffs = ', '.join(f'{k} {v:.2e}' for k, v in r['max_abs_diff'].items())
        print(f'  batch {r["batch"]} at {size}: max |delta| {diffs}  '
              f'{"ok" if r["ok"] else "FAILED"}')


def main(argv=None):
    parser, args = parse_args(argv)
    try:
        import onnx
        import onnxruntime  # noqa: F401
    except ImportError as e:
        sys.exit(f'error: {e.name} is not installed; pip install onnx '
                 f'onnxruntime (see requirements/tests.txt)')
    cfg = load_config(args.config, args.cfg_options)
    try:
        model, cfg, report = build_model(cfg, args.checkpoint)
    except (ValueError, RuntimeError, FileNotFoundError, TypeError) as e:
        parser.error(str(e))
    print(describe_load(report, args.checkpoint), file=sys.stderr)
    module, what, output_names, spatial = exported_module(
        model, args.backbone_only, args.shape)

    backbone = getattr(model, 'backbone', model)
    unsure = per_size_tables(module)
    if not type(backbone).__module__.startswith('mmcpvt.'):
        unsure.append(f'a backbone from outside mmcpvt '
                      f'({type(backbone).__module__}.'
                      f'{type(backbone).__name__}), whose shape code this '
                      f'tool does not know')
    if args.dynamic and unsure:
        print('note: the model has ' + '; '.join(unsure) + '. The dynamic '
              'graph is verified at two sizes.', file=sys.stderr)
        args.verify = True

    export(module, args.output_file, args.shape, args.opset, args.dynamic,
           output_names, spatial)
    norm = normalisation(cfg)
    add_metadata(
        args.output_file, {
            'mmcpvt_config': osp.basename(args.config),
            'mmcpvt_exported': what,
            'mmcpvt_dynamic': str(args.dynamic),
            'mmcpvt_normalisation': json.dumps(norm),
        })
    axes = ('dynamic batch, height and width' if args.dynamic else
            f'static 1x{input_channels(module)}x{args.shape[0]}x'
            f'{args.shape[1]}')
    print(f'exported the {what}\n  to {args.output_file} (opset '
          f'{args.opset}, TorchScript exporter, torch {torch.__version__}, '
          f'onnx {onnx.__version__}; {axes})')
    print(f'  outputs: {", ".join(output_names)}')
    print(f'  {describe_input(norm)}')
    if not args.verify:
        return

    sizes = [args.shape]
    if args.dynamic:
        sizes.append(tuple(args.verify_shape or second_size(args.shape)))
    results = verify(module, args.output_file, sizes, output_names,
                     args.atol)
    print_verification(results, args.atol)
    if not all(r['ok'] for r in results):
        hint = (' A size frozen into the graph fails at the second size '
                'only (a shape computed in Python where the trace cannot '
                'follow it); --static --shape H W exports the one size you '
                'will run.' if args.dynamic else '')
        sys.exit(f'error: the ONNX file does not reproduce PyTorch within '
                 f'max |delta| <= {args.atol:g} (see above).{hint}')


if __name__ == '__main__':
    main()
