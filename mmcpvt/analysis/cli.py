"""Command-line arguments shared by the analysis tools
(tools/analysis_tools/position_probe.py, translation_equivariance.py and
tools/visualization/vis_attention.py): the model, its checkpoint, the
images and the blocks."""
import argparse
import json
import os
import os.path as osp
import sys

import torch

from ..utils.runner import CfgOptionsAction
from .features import (build_model, dataset_images, default_img_size,
                       describe_load, get_backbone, list_blocks,
                       random_images, resolve_block)


def add_model_args(parser: argparse.ArgumentParser,
                   checkpoint_required: bool = False):
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


def add_block_args(parser: argparse.ArgumentParser, what: str):
    """``--block`` (which blocks) and ``--border`` (border width)."""
    parser.add_argument(
        '--block', nargs='+', metavar='N',
        help=f'blocks to {what}: global index (-1 or "input": before the '
        'first block) or STAGE.BLOCK; default: all')
    parser.add_argument('--border', type=_border, default=1,
                        help='border width in tokens (default 1)')


def _border(text: str) -> int:
    value = int(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f'must be >= 0, got {value}')
    return value


def add_image_args(parser: argparse.ArgumentParser, num_images: int):
    parser.add_argument(
        '--num-images', type=int, default=num_images,
        help=f'images to use (default {num_images})')
    parser.add_argument(
        '--random-images', action='store_true',
        help='seeded uniform-noise images instead of the config\'s test '
        'data (for configs whose data is not present)')
    parser.add_argument(
        '--img-size', type=int, nargs='+', metavar='SIZE',
        help='H [W] of --random-images (default: the backbone\'s img_size, '
        'else 224)')
    parser.add_argument(
        '--seed', type=int, default=0,
        help='seed of --random-images and of the random weights without a '
        'checkpoint (default 0)')
    parser.add_argument('--batch-size', type=int, default=16,
                        help='images per forward pass (default 16)')


def check_files(parser, args):
    """Missing files are reported before anything is built."""
    if not osp.isfile(args.config):
        parser.error(f'config file not found: {args.config}')
    ckpt = getattr(args, 'checkpoint', None)
    if ckpt is not None and '://' not in ckpt and not osp.isfile(ckpt):
        parser.error(f'checkpoint file not found: {ckpt}')


def load(parser, args):
    """``(model, backbone, cfg)`` from the arguments; prints what the
    checkpoint gave on stderr."""
    check_files(parser, args)
    try:
        model, cfg, report = build_model(args.config, args.checkpoint,
                                         args.cfg_options, args.device,
                                         getattr(args, 'seed', 0))
    except (ValueError, RuntimeError, FileNotFoundError, TypeError) as e:
        parser.error(str(e))
    print(describe_load(report, args.checkpoint), file=sys.stderr)
    backbone = get_backbone(model)
    try:
        list_blocks(backbone)
    except TypeError as e:
        parser.error(str(e))
    return model, backbone, cfg


def images(parser, args, model, cfg) -> torch.Tensor:
    """The images: the config's test data or ``--random-images``."""
    if args.num_images < 1:
        parser.error(f'--num-images must be >= 1, got {args.num_images}')
    if args.random_images:
        size = args.img_size or default_img_size(cfg)
        if len(size) not in (1, 2) or min(size) < 1:
            parser.error(f'--img-size takes H [W], got {args.img_size}')
        size = (size[0], size[-1])
        print(f'{args.num_images} random {size[0]}x{size[1]} images '
              f'(seed {args.seed})', file=sys.stderr)
        return random_images(model, args.num_images, size, args.seed)
    if args.img_size:
        parser.error('--img-size is for --random-images; the test data '
                     'come at the size of the config\'s pipeline')
    print(f'reading {args.num_images} images of the test data...',
          file=sys.stderr)
    try:
        return dataset_images(cfg, model, args.num_images)
    except (RuntimeError, ValueError) as e:
        parser.error(str(e))


def blocks(parser, backbone, specs):
    """Global block indices of ``--block`` values (int, 'input' or
    STAGE.BLOCK); None for None."""
    if specs is None:
        return None
    try:
        return sorted({resolve_block(backbone, s) for s in specs})
    except ValueError as e:
        parser.error(str(e))


def write_json(path: str, data) -> None:
    if osp.dirname(path):
        os.makedirs(osp.dirname(path), exist_ok=True)
    with open(path, 'w') as f:
        json.dump(data, f, indent=2)
    print(f'wrote {path}', file=sys.stderr)


def backbone_blocks_images(parser, args):
    """The backbone, the blocks asked for (None: all) and the images of a
    probe or equivariance run."""
    model, backbone, cfg = load(parser, args)
    wanted = blocks(parser, backbone, args.block)
    return backbone, wanted, images(parser, args, model, cfg)
