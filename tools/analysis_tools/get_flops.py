"""Parameters and FLOPs of a config's model (or of every config).

Uses mmengine's counter, as mmpretrain / mmdet / mmseg's get_flops do
(multiply-adds counted as FLOPs). For classifiers only the backbone is
counted (mmpretrain's convention); detectors and segmentors are counted
whole, without post-processing. The fused attention kernel is invisible to
the counter, so attention runs on its explicit path while counting.

    python tools/analysis_tools/get_flops.py \\
        configs/cpvt/cpvt-tiny_4xb256_in1k.py
    python tools/analysis_tools/get_flops.py --all configs --markdown
"""
import argparse
import glob
import os.path as osp
from unittest import mock

import torch
from mmengine.analysis import get_model_complexity_info
from mmengine.config import Config
from mmengine.logging import MMLogger

from mmcpvt.apis import cli
from mmcpvt.apis.model import init_model
from mmcpvt.models.layers import Attention
from mmcpvt.utils.checkpoint import require_file

# the input of each library's models: H, W
DEFAULT_SHAPE = {'mmpretrain': (224, 224), 'mmdet': (800, 1280),
                 'mmseg': (512, 512)}


def count(config: str, shape):
    """``(params, FLOPs)`` of the untrained model on a ``shape`` input."""
    cfg = Config.fromfile(config)
    model = init_model(cfg).eval()
    if hasattr(model, 'extract_feat') and cfg.default_scope == 'mmpretrain':
        model.forward = model.extract_feat
    else:  # detector / segmentor: the network without post-processing
        model.forward = model._forward
    with mock.patch.object(Attention, 'fused_attn', False):
        result = get_model_complexity_info(
            model, inputs=(torch.randn(1, 3, *shape), ), show_table=False,
            show_arch=False)
    return sum(p.numel() for p in model.parameters()), result['flops']


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    which = parser.add_mutually_exclusive_group(required=True)
    which.add_argument('config', nargs='?', help='config file')
    which.add_argument('--all', metavar='DIR',
                       help='count every config under DIR instead')
    parser.add_argument('--shape', type=int, nargs='+',
                        help='input H [W]; default 224 for classifiers, '
                        '800 1280 for detectors, 512 for segmentors')
    parser.add_argument('--markdown', action='store_true')
    args = parser.parse_args(argv)
    try:
        cli.check_options(cli.positive, shape=args.shape)
        if args.config:
            require_file(args.config, 'config')
    except (ValueError, FileNotFoundError) as e:
        parser.error(str(e))
    MMLogger.get_instance('mmengine').setLevel('ERROR')
    configs = [args.config] if args.config else [  # no _base_ fragments
        c for c in sorted(glob.glob(osp.join(args.all, '**', '*.py'),
                                    recursive=True)) if '_base_' not in c]
    if not configs:
        parser.error(f'--all {args.all}: ' + (
            'no config under it (a .py file outside _base_)' if osp.isdir(
                args.all) else 'no such directory'))
    if args.markdown:
        print('| config | input | params (M) | FLOPs (G) |\n|---|---|---|---|')
    for config in configs:
        scope = Config.fromfile(config).get('default_scope', 'mmpretrain')
        shape = args.shape or DEFAULT_SHAPE.get(scope, (224, 224))
        H, W = shape[0], shape[-1]
        params, flops = count(config, (H, W))
        if args.markdown:
            print(f'| {config} | {H}x{W} | {params / 1e6:.2f} '
                  f'| {flops / 1e9:.2f} |')
        else:
            print(f'{config}: input {H}x{W}, params '
                  f'{params / 1e6:.2f} M, FLOPs {flops / 1e9:.2f} G')


if __name__ == '__main__':
    main()
