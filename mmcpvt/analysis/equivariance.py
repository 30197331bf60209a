"""Translation equivariance of each block (paper, Sec. 3.2 and Appendix
A): the input is shifted by whole patches, and at every block the maps of
the shifted input are compared with the shifted maps of the original,
``||f(shift(x)) - shift(f(x))|| / ||shift(f(x))||`` over the tokens of a
region. Modes: 'circular' rolls the image; 'zero' shifts in zeros and
compares only the tokens whose content came from the image (the valid
region). Border tokens are those within ``border`` tokens of the edge of
the map in the shifted or in the original frame (under a circular shift,
the seam where the original edges meet counts as border too); the others
are interior. The command line, and what the figures show:
tools/analysis_tools/translation_equivariance.py.
"""
from typing import Dict, List, Optional, Sequence

import torch
import torch.nn as nn

from .blocks import Progress, block_features, list_blocks

MODES = ('circular', 'zero')
REGIONS = ('all', 'interior', 'border')  # as region_masks returns them


def shift(x: torch.Tensor, dy: int, dx: int, mode: str) -> torch.Tensor:
    """``x`` (..., H, W) moved ``dy`` down and ``dx`` right: rolled
    ('circular') or with zeros shifted in ('zero')."""
    if mode not in MODES:
        raise ValueError(f'unknown shift mode {mode!r}; allowed: {MODES}')
    out = torch.roll(x, shifts=(dy, dx), dims=(-2, -1))
    if mode == 'zero':  # what wrapped around becomes zeros
        out = out.masked_fill(
            ~region_masks(x.shape[-2:], dy, dx, 'zero', 0)['all'], 0)
    return out


def region_masks(hw_shape: Sequence[int], dy: int, dx: int, mode: str,
                 border: int = 1) -> Dict[str, torch.Tensor]:
    """(H, W) boolean masks of the shifted frame: 'all' (the valid
    tokens), 'interior' and 'border' (see the module's docstring)."""

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
        return block_features(backbone, x, blocks, batch_size, progress and (
            lambda done, n: progress(k * n + done, (1 + len(shifts)) * n)))

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
            t, rest = divmod(s * patch, r['stride'])  # in tokens
            if rest:  # no whole number of tokens: skipped
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
