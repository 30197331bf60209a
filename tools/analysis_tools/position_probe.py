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
from typing import List

# tools/ (common.py) and this folder (analysis_cli.py)
sys.path.insert(0, osp.dirname(osp.dirname(osp.abspath(__file__))))
sys.path.insert(0, osp.dirname(osp.abspath(__file__)))
import common  # noqa: E402

common.setup()
import analysis_cli as cli  # noqa: E402
from mmcpvt.analysis import block_features, list_blocks  # noqa: E402
from mmcpvt.analysis.position_probe import (REGIONS,  # noqa: E402
                                            position_probe)


def positive_float(text: str) -> float:
    value = float(text)
    if not value > 0:  # NaN included
        raise argparse.ArgumentTypeError(
            f'the ridge penalty must be > 0 (0 leaves the fit singular '
            f'where features are constant), got {text}')
    return value


def parse_args(argv=None):
    parser = argparse.ArgumentParser(
        description=__doc__.split('\n\n')[0],
        epilog=__doc__.split('\n\n', 1)[1],
        formatter_class=argparse.RawDescriptionHelpFormatter)
    cli.add_model_args(parser)
    cli.add_block_args(parser, 'probe')
    cli.add_image_args(parser, num_images=64)
    parser.add_argument('--alpha', type=positive_float, default=1.0,
                        help='ridge penalty, > 0 (default 1.0)')
    parser.add_argument('--out', help='write the results as JSON here')
    args = parser.parse_args(argv)
    cli.check_out_file(parser, '--out', args.out, 'probe.json')
    return parser, args


def min_tokens(border: int) -> int:
    """Tokens per side a map needs for every region's R^2: an interior
    of at least 2 x 2 inside the border (R^2 needs spread)."""
    return 2 * border + 2


def main(argv=None):
    parser, args = parse_args(argv)
    backbone, wanted, images = cli.backbone_blocks_images(parser, args)
    if len(images) < 2:
        parser.error('the probe needs at least 2 images (half to fit, half '
                     'to test)')
    stride = max(i.stride for i in list_blocks(backbone)
                 if wanted is None or i.index in wanted)
    need = min_tokens(args.border) * stride
    if min(images.shape[-2:]) < need:
        parser.error(
            f'{cli.size_option(args, images)} gives too few tokens for the '
            f'probe: it needs {min_tokens(args.border)}x'
            f'{min_tokens(args.border)} tokens (an interior of 2x2 inside a '
            f'border of {args.border}) at every block probed, whose largest '
            f'stride is {stride} px: at least {need} px')
    feats = block_features(backbone, images, wanted, args.batch_size,
                           cli.stderr_progress('features (images)'))
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


def format_table(rows: List[dict]) -> str:
    """Rows ``{'name', 'grid', 'all', 'interior', 'border'}`` (scores as
    :func:`position_probe` returns them) as a text table."""

    def cell(v, fmt):
        return f'{v:{fmt}}' if v == v else 'nan'  # NaN != NaN

    lines = [f'{"block":<18} {"grid":>7} {"R2 all":>7} {"R2 int":>7} '
             f'{"R2 bord":>7} {"MAE all":>7} {"MAE int":>7} {"MAE bord":>8}'
             f' {"MAE guess":>9}']
    for r in rows:
        grid = 'x'.join(map(str, r['grid']))
        lines.append(
            f'{r["name"]:<18} {grid:>7} '
            + ' '.join(f'{cell(r[k]["r2"], ".3f"):>7}' for k in REGIONS)
            + ' '
            + ' '.join(f'{cell(r[k]["mae"], ".2f"):>7}' for k in REGIONS[:2])
            + f' {cell(r["border"]["mae"], ".2f"):>8}'
            + f' {cell(r["all"]["mae_mean_guess"], ".2f"):>9}')
    return '\n'.join(lines)


if __name__ == '__main__':
    main()
