"""Command-line arguments and inputs shared by the analysis tools
(tools/analysis_tools/position_probe.py, translation_equivariance.py and
tools/visualization/vis_attention.py): the model, its checkpoint, the
images and the blocks; and the checks of the paths they write.

The tools import it after putting this directory on ``sys.path``; the
method they run is in :mod:`mmcpvt.analysis`.
"""
import argparse
import copy
import json
import os
import os.path as osp
import sys
from typing import Callable, Optional, Sequence, Tuple

import torch
import torch.nn as nn

from common import CfgOptionsAction, check_cfg_options  # tools/common.py
from mmengine.config import Config

from mmcpvt.analysis import (build_model, get_backbone, list_blocks,
                             require_file, resolve_block)


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


def check_out_file(parser, option: str, path, example: str):
    """Refuse, before any work, an output file that is a directory or whose
    directory is a file."""
    if path is None:
        return
    if osp.isdir(path):
        parser.error(f'{option} {path} is a directory; give a file name, '
                     f'e.g. {osp.join(path, example)}')
    parent = osp.dirname(path)
    while parent and not osp.exists(parent):
        parent = osp.dirname(parent)
    if parent and not osp.isdir(parent):
        parser.error(f'{option} {path}: {parent} is a file, not a directory')


def check_out_dir(parser, option: str, path):
    """Refuse, before any work, an output directory that is a file (or is
    under one)."""
    while path and not osp.exists(path):
        path = osp.dirname(path)
    if path and not osp.isdir(path):
        parser.error(f'{option}: {path} is a file, not a directory')


def check_files(parser, args):
    """Missing files are reported before anything is built."""
    try:
        require_file(args.config, 'config')
        if getattr(args, 'checkpoint', None) is not None:
            require_file(args.checkpoint)
    except FileNotFoundError as e:
        parser.error(str(e))


def load(parser, args):
    """``(model, backbone, cfg)`` from the arguments; prints what the
    checkpoint gave on stderr."""
    check_files(parser, args)
    try:
        cfg = Config.fromfile(args.config)
        if args.cfg_options:  # misspelt keys are refused
            check_cfg_options(cfg, args.cfg_options, args.config)
        model, cfg, report = build_model(cfg, args.checkpoint,
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


def describe_load(report: Optional[dict], checkpoint: Optional[str]) -> str:
    """One or two lines on what a checkpoint gave."""
    if report is None:
        return ('no checkpoint: random weights (the config\'s '
                'initialisation)')
    text = (f'checkpoint {checkpoint}: {report["loaded"]}/{report["total"]} '
            f'tensors of the {report["target"]} loaded (backbone '
            f'{report["backbone_loaded"]}/{report["backbone_total"]}), '
            f'{len(report["unexpected"])} unused')
    b_missing = [
        k for k in report['missing']
        if report['target'] == 'backbone' or k.startswith('backbone.')
    ]
    if b_missing:
        text += (f'\n  warning: backbone tensors left random: '
                 f'{", ".join(b_missing[:5])}'
                 f'{", ..." if len(b_missing) > 5 else ""}')
    return text


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


def size_option(args, images: torch.Tensor) -> str:
    """How the user set the size of ``images``, for error messages."""
    H, W = images.shape[-2:]
    if args.random_images:
        return f'--img-size {H} {W}' if H != W else f'--img-size {H}'
    return f'the {H}x{W} images of the config\'s test pipeline'


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


def stderr_progress(what: str) -> Callable[[int, int], None]:
    """A ``progress(done, total)`` that prints ``what: done/total`` on
    stderr."""

    def progress(done, total):
        print(f'{what}: {done}/{total}', file=sys.stderr, flush=True)

    return progress


# ----------------------------------------------------------------- images


def preprocess(model: nn.Module, inputs: list, data_samples=None):
    """uint8 (3, H, W) images -> the model's normalised batch."""
    pre = getattr(model, 'data_preprocessor', None)
    if pre is None:
        return torch.stack(inputs).float()
    data = dict(inputs=inputs)
    if data_samples is not None:
        data['data_samples'] = data_samples
    with torch.no_grad():
        return pre(data, False)['inputs'].cpu()


def random_images(model: nn.Module,
                  num_images: int,
                  img_size: Sequence[int],
                  seed: int = 0) -> torch.Tensor:
    """``num_images`` uniform-noise images (uint8, from a generator seeded
    with ``seed``) through the model's data preprocessor: (N, C, H, W), C
    the input channels of the backbone's first convolution (3 if none)."""
    H, W = img_size
    channels = next((m.in_channels for m in get_backbone(model).modules()
                     if isinstance(m, nn.Conv2d)), 3)
    g = torch.Generator().manual_seed(seed)
    imgs = torch.randint(0, 256, (num_images, channels, H, W), generator=g,
                         dtype=torch.uint8)
    return preprocess(model, list(imgs))


def default_img_size(cfg) -> Tuple[int, int]:
    """The backbone's ``img_size`` if the config sets one, else 224."""
    size = cfg.model.get('backbone', {}).get('img_size', 224)
    return (size, size) if isinstance(size, int) else tuple(size)


def dataset_images(cfg, model: nn.Module, num_images: int) -> torch.Tensor:
    """The first ``num_images`` images of the config's test dataloader
    (dataset and pipeline), through the model's data preprocessor, as one
    batch (N, 3, H, W) (padded to a common size where the preprocessor
    pads, as detectors and segmentors do)."""
    from mmengine.runner import Runner
    loader_cfg = copy.deepcopy(cfg.get('test_dataloader', None))
    if not loader_cfg:
        raise ValueError('the config has no test_dataloader; use '
                         '--random-images')
    loader_cfg.update(batch_size=num_images, num_workers=0,
                      persistent_workers=False)
    loader_cfg.pop('prefetch_factor', None)
    try:
        loader = Runner.build_dataloader(loader_cfg, seed=0)
        data = next(iter(loader))
    except Exception as e:  # a missing data set fails in many ways
        root = loader_cfg.get('dataset', {}).get('data_root', '?')
        raise RuntimeError(
            f'could not read the config\'s test data (data_root {root!r}): '
            f'{type(e).__name__}: {e}\nPrepare the data set, or use '
            f'--random-images') from e
    got = len(data['inputs'])
    if got < num_images:
        print(f'note: the test set has {got} images, fewer than '
              f'{num_images} asked for', file=sys.stderr)
    return preprocess(model, data['inputs'], data.get('data_samples'))
