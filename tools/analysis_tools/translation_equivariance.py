"""How far each block is from translation equivariance (paper, Sec. 3.2
and Appendix A): the input is shifted by whole patches, and at every block
``||f(shift(x)) - shift(f(x))|| / ||shift(f(x))||`` is measured over the
interior tokens, the border tokens (within --border of an edge of the map
in the shifted or the original frame: a circular shift's seam is border
too) and all.

Self-attention, the FFN and a PEG (but for its padding) are equivariant:
without position encoding and zero padding a model is exactly equivariant
under circular shifts. A learned table is not; a PEG's zero padding breaks
equivariance only at the border, where it tells tokens where they are
(Appendix B.3). A shift of s patches is s * patch / r tokens at a block of
r-pixel tokens; shifts that are no whole number of tokens there are
skipped for that block (and said). Modes: 'circular' rolls the image;
'zero' shifts in zeros (the mean colour once normalised) and compares the
tokens whose content came from the image. On a map that a PEG without
padding has shrunk, circular shifts compare only the tokens that did not
wrap around.

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
import sys

import torch

from mmcpvt.analysis.blocks import list_blocks
from mmcpvt.analysis.equivariance import MODES, translation_equivariance
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
    add('--num-images', type=int, default=16, help='default 16')
    add('--random-images', action='store_true', help='uniform noise (seed '
        '0) instead of the config\'s test data')
    add('--img-size', type=int, metavar='SIZE', help='of --random-images '
        '(default: the backbone\'s img_size, else 224)')
    add('--out', help='the results as JSON')
    add('--shifts', type=int, nargs='+', default=[1, 2, 3], metavar='S',
        help='shifts in patches, applied down and right (negative: up and '
        'left), not 0; default 1 2 3')
    add('--mode', default='circular', choices=MODES,
        help='circular: roll the image; zero: shift zeros in, compare the '
        'tokens from the image (default circular)')
    args = parser.parse_args(argv)
    try:
        cli.check_options(cli.checked(int, bool, '0 is no shift'),
                          shifts=args.shifts)
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
            args.img_size, args.out, 'equivariance.json')
    except instruments.USAGE_ERRORS as e:
        parser.error(str(e))
    patch = list_blocks(backbone)[0].stride
    H, W = images.shape[-2:]
    if H % patch or W % patch:
        parser.error(
            f'{instruments.size_option(args.random_images, images)} is not a '
            f'multiple of the patch size of this {type(backbone).__name__} '
            f'({patch} px): shifts by whole patches would not be '
            f'equivariant even without position encoding; use a multiple '
            f'of {patch}, e.g. {max(patch, H // patch * patch)}')
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
    print(cli.text_table(
        ['block', 'stride', 'grid', 'shift (tok)', 'interior', 'border',
         'all'],
        [[r['name'], str(r['stride']), 'x'.join(map(str, r['grid'])),
          ','.join(str(e['tokens']) for e in r['per_shift'].values())
          or 'none'] + ['-' if r[k] is None else f'{r[k]:.2e}'
                        for k in ('interior', 'border', 'all')]
         for r in results]))
    skipped = [f'{r["name"]} (shifts {", ".join(map(str, r["skipped"]))})'
               for r in results if r['skipped']]
    if skipped:
        print('not a whole number of tokens, skipped: ' + '; '.join(skipped))
    shrunk = [r['name'] for r in results if r['shrunk']]
    if shrunk and args.mode == 'circular':
        print(f'maps a PEG without padding has shrunk ({", ".join(shrunk)}):'
              f' only the tokens that did not wrap around are compared')
    instruments.write_results(args.out, images, args.config, args.checkpoint,
                              args.random_images, args.border,
                              mode=args.mode, shifts=args.shifts,
                              patch=patch, blocks=results)


if __name__ == '__main__':
    main()
