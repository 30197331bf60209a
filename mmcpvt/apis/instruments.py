"""What the instrument command lines share
(tools/analysis_tools/position_probe.py, translation_equivariance.py and
tools/visualization/vis_attention.py): their arguments, the model, the
images and the blocks (:mod:`mmcpvt.analysis`), and the results file.
"""
import argparse
import copy
import json
import os
import os.path as osp
import sys
from typing import Optional

import torch
import torch.nn as nn

from mmcpvt.analysis.blocks import list_blocks, resolve_block
from . import cli
from .cfg_options import CfgOptionsAction
from .model import build_model, get_backbone, input_channels


def make_parser(doc: str, checkpoint_required: bool = False):
    """A parser described by the tool's docstring (its first paragraph;
    the rest, the examples, as the epilog), with the model's arguments."""
    parser = argparse.ArgumentParser(
        description=doc.split('\n\n')[0], epilog=doc.split('\n\n', 1)[1],
        formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument('config', help='config file (classifier, detector '
                        'or segmentor); its backbone is analysed')
    if checkpoint_required:
        parser.add_argument('checkpoint', help='checkpoint file')
    else:
        parser.add_argument(
            'checkpoint', nargs='?', default=None,
            help='checkpoint file (whole model or backbone); without one the '
            'weights are random')
    parser.add_argument(
        '--cfg-options', nargs='+', action=CfgOptionsAction,
        help='override config settings, key=value '
        '(e.g. model.backbone.peg_cfg.padding_mode=circular)')
    parser.add_argument(
        '--device', default='cuda' if torch.cuda.is_available() else 'cpu',
        help='cpu or cuda (default: cuda if available)')
    return parser


def parse_instrument_args(doc: str, argv, what: str, num_images: int,
                          out_example: str, **options):
    """``(parser, args)`` of the position probe or the equivariance tool:
    the model's arguments, the blocks, the border, the images, ``--out``
    (refused before any work if it is a directory or under a file) and
    ``options`` (``name=dict(...)``, added as ``--name``)."""
    parser = make_parser(doc)
    add = parser.add_argument
    add('--block', nargs='+', metavar='N',
        help=f'blocks to {what}: global index (-1 or "input": before the '
        'first block) or STAGE.BLOCK; default: all')
    add('--border', type=cli.checked(int, lambda v: v >= 0, 'must be >= 0'),
        default=1, help='border width in tokens (default 1)')
    count = cli.checked(int, lambda v: v >= 1, 'must be >= 1')
    add('--num-images', type=count, default=num_images,
        help=f'images to use (default {num_images})')
    add('--random-images', action='store_true',
        help='uniform-noise images (seed 0) instead of the config\'s test '
        'data (for configs whose data is not present)')
    add('--img-size', type=count, metavar='SIZE',
        help='side of the --random-images (default: the backbone\'s '
        'img_size, else 224)')
    add('--out', help='write the results as JSON here')
    for name, kwargs in options.items():
        add(f'--{name}', **kwargs)
    args = parser.parse_args(argv)
    if args.out is not None:
        with cli.usage_errors(parser):
            cli.check_output('--out', args.out, out_example,
                             [args.config, args.checkpoint])
    return parser, args


def load(parser, args):
    """``(model, backbone, cfg)`` from the arguments (missing files refused
    before anything is built); prints what the checkpoint gave on
    stderr."""
    cli.require(parser, args.config, 'config')
    if args.checkpoint is not None:
        cli.require(parser, args.checkpoint, 'checkpoint')
    with cli.usage_errors(parser, (ValueError, RuntimeError,
                                   FileNotFoundError, TypeError)):
        model, cfg, report = build_model(args.config, args.checkpoint,
                                         args.device,
                                         cfg_options=args.cfg_options)
        backbone = get_backbone(model)
        list_blocks(backbone)  # a TypeError for another kind of backbone
    print(describe_load(report, args.checkpoint), file=sys.stderr)
    return model, backbone, cfg


def describe_load(report: Optional[dict], checkpoint: Optional[str]) -> str:
    """One or two lines on what a checkpoint gave."""
    if report is None:
        return ('no checkpoint: random weights (the config\'s '
                'initialisation)')
    text = (f'checkpoint {checkpoint}: {report["loaded"]}/{report["total"]} '
            f'tensors of the {report["target"]} loaded (backbone '
            f'{report["backbone_loaded"]}/{report["backbone_total"]}), '
            f'{len(report["unexpected"])} unused')
    b_missing = [k for k in report['missing'] if k.startswith(
        'backbone.' if report['target'] == 'model' else '')]
    if b_missing:
        more = ', ...' if len(b_missing) > 5 else ''
        text += (f'\n  warning: backbone tensors left random: '
                 f'{", ".join(b_missing[:5])}{more}')
    return text


def backbone_blocks_images(parser, args):
    """The backbone, the :class:`BlockInfo` of the ``--block`` values (int,
    'input' or STAGE.BLOCK; default: all) and the images
    (``--random-images`` or the config's test data) of a probe or
    equivariance run."""
    model, backbone, cfg = load(parser, args)
    with cli.usage_errors(parser, ValueError):
        wanted = {resolve_block(backbone, s) for s in args.block or ()}
    infos = [i for i in list_blocks(backbone)
             if not wanted or i.index in wanted]
    if args.random_images:
        size = args.img_size or cfg.model.get('backbone', {}).get(
            'img_size', 224)
        H, W = (size, size) if isinstance(size, int) else size
        print(f'{args.num_images} random {H}x{W} images', file=sys.stderr)
        return backbone, infos, random_images(model, args.num_images, (H, W))
    if args.img_size:
        parser.error('--img-size is for --random-images; the test data '
                     'come at the size of the config\'s pipeline')
    print(f'reading {args.num_images} images of the test data...',
          file=sys.stderr)
    with cli.usage_errors(parser, (RuntimeError, ValueError)):
        return backbone, infos, dataset_images(cfg, model, args.num_images)


def size_option(args, images: torch.Tensor) -> str:
    """How the user set the size of ``images``, for error messages."""
    H, W = images.shape[-2:]
    if args.random_images:
        return f'--img-size {H}' if H == W else f'{H}x{W} --random-images'
    return f'the {H}x{W} images of the config\'s test pipeline'


def write_results(args, images: torch.Tensor, **results) -> None:
    """``--out``, where given: the run's settings and ``results`` as
    JSON."""
    if not args.out:
        return
    os.makedirs(osp.dirname(args.out) or '.', exist_ok=True)
    with open(args.out, 'w') as f:
        json.dump(dict(config=args.config, checkpoint=args.checkpoint,
                       num_images=len(images),
                       random_images=args.random_images, border=args.border,
                       **results), f, indent=2)
    print(f'wrote {args.out}', file=sys.stderr)


def preprocess(model: nn.Module, inputs: list, data_samples=None):
    """uint8 (C, H, W) images -> the model's normalised batch."""
    pre = getattr(model, 'data_preprocessor', None)
    if pre is None:
        return torch.stack(inputs).float()
    with torch.no_grad():  # data_samples None: as if there were none
        return pre(dict(inputs=inputs, data_samples=data_samples),
                   False)['inputs'].cpu()


def random_images(model: nn.Module, num_images: int, img_size,
                  seed: int = 0) -> torch.Tensor:
    """``num_images`` uniform-noise images (uint8, from a generator seeded
    with ``seed``) through the model's data preprocessor: (N, C, H, W), C
    the input channels of the backbone's first convolution (3 if none)."""
    channels = input_channels(get_backbone(model))
    g = torch.Generator().manual_seed(seed)
    imgs = torch.randint(0, 256, (num_images, channels, *img_size),
                         generator=g, dtype=torch.uint8)
    return preprocess(model, list(imgs))


def dataset_images(cfg, model: nn.Module, num_images: int) -> torch.Tensor:
    """The first ``num_images`` images of the config's test dataloader
    through the model's data preprocessor, as one batch (N, 3, H, W)
    (padded to a common size where the preprocessor pads, as detectors and
    segmentors do)."""
    from mmengine.runner import Runner
    loader_cfg = copy.deepcopy(cfg.get('test_dataloader', None))
    if not loader_cfg:
        raise ValueError('the config has no test_dataloader; use '
                         '--random-images')
    loader_cfg.update(batch_size=num_images, num_workers=0,
                      persistent_workers=False)
    loader_cfg.pop('prefetch_factor', None)
    try:
        data = next(iter(Runner.build_dataloader(loader_cfg, seed=0)))
    except Exception as e:  # a missing data set fails in many ways
        root = loader_cfg.get('dataset', {}).get('data_root', '?')
        raise RuntimeError(
            f'could not read the config\'s test data (data_root {root!r}): '
            f'{type(e).__name__}: {e}\nPrepare the data set, or use '
            f'--random-images') from e
    if len(data['inputs']) < num_images:
        print(f'note: the test set has {len(data["inputs"])} images, fewer '
              f'than {num_images} asked for', file=sys.stderr)
    return preprocess(model, data['inputs'], data.get('data_samples'))
