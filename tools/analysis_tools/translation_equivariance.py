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
import os.path as osp
import sys
from typing import List

# tools/ (common.py) and this folder (analysis_cli.py)
sys.path.insert(0, osp.dirname(osp.dirname(osp.abspath(__file__))))
sys.path.insert(0, osp.dirname(osp.abspath(__file__)))
import common  # noqa: E402

common.setup()
import analysis_cli as cli  # noqa: E402
from mmcpvt.analysis import list_blocks  # noqa: E402
from mmcpvt.analysis.translation_equivariance import (  # noqa: E402
    MODES, translation_equivariance)


def parse_args(argv=None):
    return cli.parse_instrument_args(
        __doc__, argv, 'report', num_images=16,
        out_example='equivariance.json',
        shifts=dict(type=cli.checked(int, bool, '0 is no shift'), nargs='+',
                    default=[1, 2, 3], metavar='S',
                    help='shifts in patches, applied down and right '
                    '(negative: up and left), not 0; default 1 2 3'),
        mode=dict(default='circular', choices=MODES,
                  help='roll the image, or shift zeros in and compare only '
                  'the tokens that came from the image (default circular)'))


def main(argv=None):
    parser, args = parse_args(argv)
    backbone, wanted, images = cli.backbone_blocks_images(parser, args)
    patch = list_blocks(backbone)[0].stride
    H, W = images.shape[-2:]
    if H % patch or W % patch:
        parser.error(
            f'{cli.size_option(args, images)} is not a multiple of the patch '
            f'size of this {type(backbone).__name__} ({patch} px): shifts by '
            f'whole patches would not be equivariant even without position '
            f'encoding; use a multiple of {patch}, e.g. '
            f'{max(patch, H // patch * patch)}')
    largest = max(i.stride for i in list_blocks(backbone)
                  if wanted is None or i.index in wanted)
    if H % largest or W % largest:
        print(f'warning: the {H}x{W} input is not a multiple of the largest '
              f'stride ({largest} px): padding at the bottom/right makes '
              f'even circular shifts inexact', file=sys.stderr)
    results = translation_equivariance(
        backbone, images, args.shifts, args.mode, args.border, wanted,
        progress=cli.stderr_progress('forward passes (images)'))
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
    cli.write_results(args, images, mode=args.mode, shifts=args.shifts,
                      patch=patch, blocks=results)


def format_table(results: List[dict]) -> str:
    """The results as a text table (mean over shifts)."""
    return cli.text_table(
        ['block', 'stride', 'grid', 'shift (tok)', 'interior', 'border',
         'all'],
        [[r['name'], str(r['stride']), 'x'.join(map(str, r['grid'])) or '-',
          ','.join(str(e['tokens']) for e in r['per_shift'].values())
          or 'none'] + ['-' if r[k] is None else f'{r[k]:.2e}'
                        for k in ('interior', 'border', 'all')]
         for r in results])


if __name__ == '__main__':
    main()
