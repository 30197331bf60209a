"""How far each block is from translation equivariance (paper, Sec. 3.2
and Appendix A): the input is shifted by whole patches, and at every block
the maps of the shifted input are compared with the shifted maps of the
original, ``||f(shift(x)) - shift(f(x))|| / ||shift(f(x))||`` over the
tokens of a region: interior and border tokens separately, and all.

Self-attention, the FFN and a PEG (ignoring its padding) are equivariant:
a model with no position encoding and no zero padding is exactly
equivariant under circular shifts. An absolute position embedding (a
learned table) is not, and a PEG's zero padding breaks equivariance only at
the border of the map, where it tells tokens where they are (Appendix
B.3). Each shift s moves the image s patches down and s right; at a block
whose tokens are r pixels, that is s * patch / r tokens, and shifts that
are no whole number of tokens there are skipped for that block (said in
the output).

Modes: 'circular' rolls the image; 'zero' shifts in zeros (the mean
colour once normalised) and compares only the tokens whose content came
from the image (the valid region).

Border tokens are those within --border tokens of the edge of the map in
the shifted or in the original frame (so that, under a circular shift, the
seam where the original edges meet counts as border too); the others are
interior. A map that a PEG without padding has shrunk no longer wraps
around with the image: there, circular shifts compare only the tokens that
did not wrap (as in 'zero' mode).

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
import sys
from typing import List

from mmcpvt.analysis.blocks import list_blocks
from mmcpvt.analysis.equivariance import MODES, translation_equivariance
from mmcpvt.apis import cli, instruments

cli.setup()


def parse_args(argv=None):
    return instruments.parse_instrument_args(
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
    backbone, infos, images = instruments.backbone_blocks_images(parser, args)
    patch = list_blocks(backbone)[0].stride
    H, W = images.shape[-2:]
    if H % patch or W % patch:
        parser.error(
            f'{instruments.size_option(args, images)} is not a multiple of '
            f'the patch size of this {type(backbone).__name__} ({patch} '
            f'px): shifts by whole patches would not be equivariant even '
            f'without position encoding; use a multiple of {patch}, e.g. '
            f'{max(patch, H // patch * patch)}')
    grid = min(H, W) // patch
    if max(map(abs, args.shifts)) >= grid:  # a whole turn, or past the map
        parser.error(f'--shifts {" ".join(map(str, args.shifts))}: the '
                     f'{H}x{W} input is {H // patch}x{W // patch} patches; '
                     f'shifts must be smaller than {grid} (one of {grid} is '
                     f'a whole turn)')
    largest = max(i.stride for i in infos)
    if H % largest or W % largest:
        print(f'warning: the {H}x{W} input is not a multiple of the largest '
              f'stride ({largest} px): padding at the bottom/right makes '
              f'even circular shifts inexact', file=sys.stderr)
    results = translation_equivariance(
        backbone, images, args.shifts, args.mode, args.border,
        [i.index for i in infos],
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
    instruments.write_results(args, images, mode=args.mode,
                              shifts=args.shifts, patch=patch,
                              blocks=results)


def format_table(results: List[dict]) -> str:
    """The results as a text table (mean over shifts)."""
    return cli.text_table(
        ['block', 'stride', 'grid', 'shift (tok)', 'interior', 'border',
         'all'],
        [[r['name'], str(r['stride']), 'x'.join(map(str, r['grid'])),
          ','.join(str(e['tokens']) for e in r['per_shift'].values())
          or 'none'] + ['-' if r[k] is None else f'{r[k]:.2e}'
                        for k in ('interior', 'border', 'all')]
         for r in results])


if __name__ == '__main__':
    main()
