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
import os.path as osp
import sys
from typing import Dict, List, Optional, Sequence

import torch
import torch.nn as nn

# tools/ (common.py, models.py) and this folder (analysis_cli.py, blocks.py)
sys.path.insert(0, osp.dirname(osp.dirname(osp.abspath(__file__))))
sys.path.insert(0, osp.dirname(osp.abspath(__file__)))
import common  # noqa: E402

common.setup()
import analysis_cli as cli  # noqa: E402
from blocks import Progress, block_features, list_blocks  # noqa: E402

MODES = ('circular', 'zero')
REGIONS = ('all', 'interior', 'border')  # as region_masks returns them


def shift(x: torch.Tensor, dy: int, dx: int, mode: str) -> torch.Tensor:
    """``x`` (..., H, W) moved ``dy`` down and ``dx`` right: rolled
    ('circular') or with zeros shifted in ('zero')."""
    if mode not in MODES:
        raise ValueError(f'unknown shift mode {mode!r}; allowed: '
                         f'{", ".join(MODES)}')
    out = torch.roll(x, shifts=(dy, dx), dims=(-2, -1))
    if mode == 'zero':  # what wrapped around becomes zeros
        out = out.masked_fill(
            ~region_masks(x.shape[-2:], dy, dx, 'zero', 0)['all'], 0)
    return out


def region_masks(hw_shape: Sequence[int], dy: int, dx: int, mode: str,
                 border: int = 1) -> Dict[str, torch.Tensor]:
    """(H, W) boolean masks of the shifted frame: 'all' (the valid
    tokens), 'interior' and 'border' (see the module docstring)."""

    def axis(n, d):  # (valid, edge) of the tokens along one axis
        i = torch.arange(n)
        src = (i - d) % n if mode == 'circular' else i - d  # came from
        edge = (i < border) | (i >= n - border) | (src < border) | (
            src >= n - border)
        return (src >= 0) & (src < n), edge

    H, W = hw_shape
    (valid_y, edge_y), (valid_x, edge_x) = axis(H, dy), axis(W, dx)
    valid = valid_y[:, None] & valid_x[None, :]
    edge = edge_y[:, None] | edge_x[None, :]
    return dict(all=valid, interior=valid & ~edge, border=valid & edge)


def token_shift(shift_patches: int, patch: int,
                stride: int) -> Optional[int]:
    """A shift of ``shift_patches`` input patches (``patch`` pixels each)
    in tokens of a block at ``stride``; None if not a whole number."""
    tokens, rest = divmod(shift_patches * patch, stride)
    return None if rest else tokens


def translation_equivariance(backbone: nn.Module,
                             images: torch.Tensor,
                             shifts: Sequence[int] = (1, 2, 3),
                             mode: str = 'circular',
                             border: int = 1,
                             blocks: Optional[Sequence[int]] = None,
                             batch_size: int = 16,
                             progress: Progress = None) -> List[dict]:
    """Relative equivariance error of every block (``blocks``,
    ``batch_size`` and ``progress`` as in :func:`block_features`; the
    progress counts the images of all the forward passes, one unshifted
    and one per shift).

    Each shift ``s`` is in patches of the first patch embedding (negative:
    up/left), as above. H and W of ``images`` should be multiples of the
    largest stride for circular shifts to be exact; ``border`` is in tokens.

    Returns:
        list[dict]: One dict per block, in order: ``block`` (global index),
        ``name``, ``stride``, ``grid`` [H, W], ``interior`` / ``border`` /
        ``all`` (mean over the evaluated shifts; None if none),
        ``per_shift`` ``{s: {'tokens': t, 'interior': e, 'border': e,
        'all': e, 'n_interior': k, 'n_border': k}}`` (``k``: tokens
        compared, over all images), ``skipped`` (the shifts skipped) and
        ``shrunk`` (a PEG has shrunk the map: only unwrapped tokens
        compared). An error is None for an empty region.
    """
    every_block = list_blocks(backbone)
    patch = every_block[0].stride  # pixels per token, stage 0

    def features(k, x):  # forward pass k of 1 + len(shifts)

        def step(done, total):
            progress(k * total + done, (1 + len(shifts)) * total)

        return block_features(backbone, x, blocks, batch_size,
                              step if progress else None)

    base = features(0, images)
    results = [
        dict(block=i.index, name=i.name, stride=i.stride,
             grid=list(base[i.index].shape[-2:]), per_shift={},
             # a map that a PEG has cropped did not wrap with the image
             shrunk=list(base[i.index].shape[-2:]) != [
                 -(-n // i.stride) for n in images.shape[-2:]])
        for i in every_block if i.index in base
    ]
    for k, s in enumerate(shifts, 1):
        moved = features(k, shift(images, s * patch, s * patch, mode))
        for r in results:
            t = token_shift(s, patch, r['stride'])
            if t is None:
                continue
            how = 'zero' if r['shrunk'] else mode
            ref = shift(base[r['block']], t, t, how).double()
            diff2 = (moved[r['block']] - ref).pow(2).sum(dim=(0, 1))
            ref2 = ref.pow(2).sum(dim=(0, 1))
            masks = region_masks(ref.shape[-2:], t, t, how, border)
            r['per_shift'][s] = dict(
                tokens=t, **{
                    region: float(diff2[m].sum() / ref2[m].sum())**.5
                    if m.any() and ref2[m].sum() else None
                    for region, m in masks.items()
                },
                n_interior=len(images) * int(masks['interior'].sum()),
                n_border=len(images) * int(masks['border'].sum()))
    for r in results:
        r['skipped'] = [s for s in shifts if s not in r['per_shift']]
        for region in REGIONS:
            values = [e[region] for e in r['per_shift'].values()
                      if e[region] is not None]
            r[region] = sum(values) / len(values) if values else None
    return results


def parse_args(argv=None):
    return cli.parse_instrument_args(
        __doc__, argv, 'report', num_images=16,
        out_example='equivariance.json',
        shifts=dict(type=common.checked(int, bool, '0 is no shift'), nargs='+',
                    default=[1, 2, 3], metavar='S',
                    help='shifts in patches, applied down and right '
                    '(negative: up and left), not 0; default 1 2 3'),
        mode=dict(default='circular', choices=MODES,
                  help='roll the image, or shift zeros in and compare only '
                  'the tokens that came from the image (default circular)'))


def main(argv=None):
    parser, args = parse_args(argv)
    backbone, infos, images = cli.backbone_blocks_images(parser, args)
    patch = list_blocks(backbone)[0].stride
    H, W = images.shape[-2:]
    if H % patch or W % patch:
        parser.error(
            f'{cli.size_option(args, images)} is not a multiple of the patch '
            f'size of this {type(backbone).__name__} ({patch} px): shifts by '
            f'whole patches would not be equivariant even without position '
            f'encoding; use a multiple of {patch}, e.g. '
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
    cli.write_results(args, images, mode=args.mode, shifts=args.shifts,
                      patch=patch, blocks=results)


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
