"""How much absolute position the tokens of each block carry: a linear
(ridge) probe predicts each token's (row, column) from its standardised
features, fitted on half of the images and scored on the other half
(R^2 and mean absolute error in tokens; whole map, interior, border).

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
import os.path as osp
import sys

try:
    import mmcpvt  # noqa: F401
except ImportError:  # not installed: run from a clone
    sys.path.insert(0, osp.dirname(osp.dirname(osp.dirname(
        osp.abspath(__file__)))))
    import mmcpvt  # noqa: F401
from mmcpvt.analysis import cli  # noqa: E402
from mmcpvt.analysis.features import (block_features, list_blocks,  # noqa
                                      stderr_progress)
from mmcpvt.analysis.position_probe import format_table, position_probe  # noqa


def parse_args(argv=None):
    parser = argparse.ArgumentParser(
        description=__doc__.split('\n\n')[0],
        epilog=__doc__.split('\n\n', 1)[1],
        formatter_class=argparse.RawDescriptionHelpFormatter)
    cli.add_model_args(parser)
    cli.add_block_args(parser, 'probe')
    cli.add_image_args(parser, num_images=64)
    parser.add_argument('--alpha', type=float, default=1.0,
                        help='ridge penalty (default 1.0)')
    parser.add_argument('--out', help='write the results as JSON here')
    args = parser.parse_args(argv)
    return parser, args


def main(argv=None):
    parser, args = parse_args(argv)
    backbone, wanted, images = cli.backbone_blocks_images(parser, args)
    if len(images) < 2:
        parser.error('the probe needs at least 2 images (half to fit, half '
                     'to test)')
    feats = block_features(backbone, images, wanted, args.batch_size,
                           stderr_progress('features (images)'))
    rows = []
    for info in list_blocks(backbone):
        if info.index not in feats:
            continue
        maps = feats[info.index]
        rows.append(dict(block=info.index, name=info.name,
                         grid=list(maps.shape[-2:]), channels=maps.shape[1],
                         **position_probe(maps, args.border, args.alpha)))
    n_fit = len(images) // 2
    print(f'position probe: ridge (alpha {args.alpha}) fitted on {n_fit} '
          f'images, scored on {len(images) - n_fit} held-out images; border '
          f'= {args.border} token(s); MAE in tokens')
    print(format_table(rows))
    if args.out:
        cli.write_json(args.out, dict(
            config=args.config, checkpoint=args.checkpoint,
            num_images=len(images), random_images=args.random_images,
            border=args.border, alpha=args.alpha, blocks=rows))


if __name__ == '__main__':
    main()
