"""How far each block is from translation equivariance: the input is
shifted by whole patches and ||f(shift x) - shift f(x)|| / ||f(x)|| is
measured at every block, for interior and border tokens separately.

A model with no position encoding and no zero padding is exactly
equivariant under circular shifts; a learned position table is not; a PEG's
zero padding breaks it only at the border (and, under a circular shift, at
the seam where the original edges meet, counted as border). Each shift s
moves the image s patches down and s right; at a block whose tokens are r
pixels, that is s * patch / r tokens, and shifts that are no whole number
of tokens there are skipped for that block (said in the output).

Examples::

    python tools/analysis_tools/translation_equivariance.py \\
        configs/cpvt/cpvt-tiny_4xb256_in1k.py CKPT --shifts 1 2 3
    # untrained, noise images, shifting in zeros
    python tools/analysis_tools/translation_equivariance.py \\
        configs/cpvt/cpvt-tiny_4xb256_in1k.py --random-images --mode zero
    # PVT: shifts of 8 patches (4 px) are whole tokens at every stage
    python tools/analysis_tools/translation_equivariance.py \\
        configs/pvt_peg/pvt-t-peg-gap_8xb128_in1k.py --random-images \\
        --shifts 8 16
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
from mmcpvt.analysis.features import list_blocks, stderr_progress  # noqa
from mmcpvt.analysis.translation_equivariance import (  # noqa: E402
    MODES, format_table, translation_equivariance)


def parse_args(argv=None):
    parser = argparse.ArgumentParser(
        description=__doc__.split('\n\n')[0],
        epilog=__doc__.split('\n\n', 1)[1],
        formatter_class=argparse.RawDescriptionHelpFormatter)
    cli.add_model_args(parser)
    cli.add_block_args(parser, 'report')
    parser.add_argument(
        '--shifts', type=int, nargs='+', default=[1, 2, 3], metavar='S',
        help='shifts in patches, applied down and right (negative: up and '
        'left); default 1 2 3')
    parser.add_argument(
        '--mode', default='circular',
        help=f'{" or ".join(MODES)}: roll the image, or shift zeros in and '
        'compare only the tokens that came from the image (default '
        'circular)')
    cli.add_image_args(parser, num_images=16)
    parser.add_argument('--out', help='write the results as JSON here')
    args = parser.parse_args(argv)
    if args.mode not in MODES:
        parser.error(f'unknown --mode {args.mode!r}; allowed: '
                     f'{", ".join(MODES)}')
    if 0 in args.shifts:
        parser.error('--shifts: 0 is no shift')
    return parser, args


def main(argv=None):
    parser, args = parse_args(argv)
    backbone, wanted, images = cli.backbone_blocks_images(parser, args)
    infos = [i for i in list_blocks(backbone)
             if wanted is None or i.index in wanted]
    largest = max(i.stride for i in infos)
    if images.shape[-1] % largest or images.shape[-2] % largest:
        print(f'warning: the {images.shape[-2]}x{images.shape[-1]} input is '
              f'not a multiple of the largest stride ({largest} px): padding '
              f'at the bottom/right makes even circular shifts inexact',
              file=sys.stderr)
    results = translation_equivariance(
        backbone, images, args.shifts, args.mode, args.border, wanted,
        args.batch_size, stderr_progress('forward passes (images)'))
    patch = list_blocks(backbone)[0].stride
    print(f'translation equivariance ({args.mode} shifts of '
          f'{", ".join(map(str, args.shifts))} patches of {patch} px, both '
          f'axes; {len(images)} images; border = {args.border} token(s)): '
          f'relative error ||f(shift x) - shift f(x)|| / ||f(x)||, mean '
          f'over the shifts evaluated')
    print(format_table(results))
    skipped = [f'{r["name"]} (shifts {", ".join(map(str, r["skipped"]))})'
               for r in results if r['skipped']]
    if skipped:
        print('not a whole number of tokens, skipped: ' + '; '.join(skipped))
    shrunk = [r['name'] for r in results if r['shrunk']]
    if shrunk and args.mode == 'circular':
        print(f'maps a PEG without padding has shrunk ({", ".join(shrunk)}):'
              f' only the tokens that did not wrap around are compared')
    if args.out:
        cli.write_json(args.out, dict(
            config=args.config, checkpoint=args.checkpoint,
            num_images=len(images), random_images=args.random_images,
            mode=args.mode, shifts=args.shifts, patch=patch,
            border=args.border, blocks=results))


if __name__ == '__main__':
    main()
