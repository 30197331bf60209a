"""How much absolute position the tokens of each block carry (paper, Sec. 3.2
and Appendix B.3, position through zero padding): a linear (ridge) probe
predicts each token's (row, column) from its standardised features, fitted
on half of the images and scored on the other half (R^2 and mean absolute
error in tokens; whole map, interior, border: the tokens within --border of
an edge). A model without position information scores R^2 near 0 (or
below); a learned position table, or a PEG's zero padding once it has
spread, lets the probe recover position.

Examples::

    # blocks 0 and 1 of a trained CPVT-Ti on 64 ImageNet validation images
    python tools/analysis_tools/position_probe.py \\
        configs/cpvt/cpvt-tiny_4xb256_in1k.py CKPT --block 0 1 --out p.json
    # every block, untrained, noise images (no data needed)
    python tools/analysis_tools/position_probe.py \\
        configs/cpvt/cpvt-tiny_4xb256_in1k.py --random-images
    # PVT / Swin blocks as STAGE.BLOCK
    python tools/analysis_tools/position_probe.py \\
        configs/pvt_peg/pvt-t-peg-gap_8xb128_in1k.py CKPT --block 0.0 1.1
"""
import argparse
from typing import List

import torch

from mmcpvt.analysis.blocks import block_features
from mmcpvt.analysis.equivariance import REGIONS
from mmcpvt.analysis.position_probe import position_probe
from mmcpvt.apis import cli, instruments
from mmcpvt.apis.cfg_options import parse_cfg_options


def parse_args(argv=None):
    parser = argparse.ArgumentParser(
        description=__doc__.split('\n\n')[0],
        epilog=__doc__.split('\n\n', 1)[1],
        formatter_class=argparse.RawDescriptionHelpFormatter)
    add = parser.add_argument
    add('config', help='classifier, detector or segmentor config')
    add('checkpoint', nargs='?', help='of the model or backbone (default: '
        'random weights)')
    add('--cfg-options', nargs='+', action='extend', metavar='KEY=VALUE',
        help='e.g. model.backbone.peg_cfg.padding_mode=circular')
    add('--device', default='cuda' if torch.cuda.is_available() else 'cpu',
        help='cpu or cuda (default: cuda if available)')
    add('--block', nargs='+', metavar='N', help='global index (-1 or '
        '"input": before the first block) or STAGE.BLOCK (default: all)')
    add('--border', type=int, default=1, help='in tokens (default 1)')
    add('--num-images', type=int, default=64, help='default 64')
    add('--random-images', action='store_true', help='uniform noise (seed '
        '0) instead of the config\'s test data')
    add('--img-size', type=int, metavar='SIZE', help='of --random-images '
        '(default: the backbone\'s img_size, else 224)')
    add('--out', help='the results as JSON')
    add('--alpha', type=float, default=1.0,
        help='ridge penalty, > 0 (default 1.0)')
    args = parser.parse_args(argv)
    try:
        cli.check_options(cli.checked(
            float, lambda v: v > 0, 'the ridge penalty must be > 0 (0 '
            'leaves the fit singular where features are constant)'),
            alpha=args.alpha)
        args.cfg_options = parse_cfg_options(args.cfg_options)
    except ValueError as e:
        parser.error(str(e))
    return parser, args


def main(argv=None):
    parser, args = parse_args(argv)
    try:
        backbone, infos, images = instruments.backbone_blocks_images(
            args.config, args.checkpoint, args.device, args.cfg_options,
            args.block, args.border, args.num_images, args.random_images,
            args.img_size, args.out, 'probe.json')
    except instruments.USAGE_ERRORS as e:
        parser.error(str(e))
    if len(images) < 2:
        parser.error('the probe needs at least 2 images (half to fit, half '
                     'to test)')
    stride = max(i.stride for i in infos)
    side = 2 * args.border + 2  # an interior of 2x2 inside the border
    if min(images.shape[-2:]) < side * stride:
        parser.error(
            f'{instruments.size_option(args.random_images, images)} gives '
            f'too few tokens for the probe: it needs {side}x{side} tokens '
            f'(an interior of 2x2 inside a border of {args.border}) at '
            f'every block probed, whose largest stride is {stride} px: at '
            f'least {side * stride} px')
    feats = block_features(backbone, images, [i.index for i in infos],
                           progress=cli.stderr_progress('features (images)'))
    rows = [dict(block=i.index, name=i.name,
                 grid=list(feats[i.index].shape[-2:]),
                 channels=feats[i.index].shape[1],
                 **position_probe(feats[i.index], args.border, args.alpha))
            for i in infos]
    n_fit = len(images) // 2
    print(f'position probe: ridge (alpha {args.alpha}) fitted on {n_fit} '
          f'images, scored on {len(images) - n_fit} held-out images; border '
          f'= {args.border} token(s); MAE in tokens')
    print(format_table(rows))
    instruments.write_results(args.out, images, args.config, args.checkpoint,
                              args.random_images, args.border,
                              alpha=args.alpha, blocks=rows)


def format_table(rows: List[dict]) -> str:
    """Rows of :func:`position_probe`'s scores, with name and grid."""
    return cli.text_table(
        ['block', 'grid', 'R2 all', 'R2 int', 'R2 bord', 'MAE all',
         'MAE int', 'MAE bord', 'MAE guess'],
        [[r['name'], 'x'.join(map(str, r['grid']))] +
         [f'{r[k]["r2"]:.3f}' for k in REGIONS] +
         [f'{r[k]["mae"]:.2f}' for k in REGIONS] +
         [f'{r["all"]["mae_mean_guess"]:.2f}'] for r in rows])


if __name__ == '__main__':
    main()
