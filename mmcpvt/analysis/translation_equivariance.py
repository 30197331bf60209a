"""How far each block is from translation equivariance (paper, Sec. 3.2
and Appendix A).

The input is shifted by whole patches; at every block the maps of the
shifted input are compared with the shifted maps of the original:
``||f(shift(x)) - shift(f(x))|| / ||shift(f(x))||`` over the tokens of a
region. Self-attention, the FFN and a PEG (ignoring its padding) are
equivariant; an absolute position embedding is not, and a PEG's zero
padding breaks equivariance only at the border of the map, where it tells
tokens where they are (paper, Sec. 3.2 and Appendix B.3).

Modes:
    'circular': ``torch.roll``; a model without position encoding and
        without zero padding is exactly equivariant.
    'zero': shift in zeros (the mean colour once normalised); only tokens
        whose content came from the image (the valid region) are compared.

Border tokens are those within ``border`` tokens of the edge of the map in
the shifted or in the original frame (so that, under a circular shift, the
seam where the original edges meet counts as border too); the others are
interior. A map that a PEG without padding has shrunk no longer wraps
around with the image: there, circular shifts compare only the tokens that
did not wrap (as in 'zero' mode).
"""
from fractions import Fraction
from typing import Dict, List, Optional, Sequence, Tuple

import torch
import torch.nn as nn

from .features import Progress, block_features, list_blocks

MODES = ('circular', 'zero')


def check_mode(mode: str):
    if mode not in MODES:
        raise ValueError(f'unknown shift mode {mode!r}; allowed: '
                         f'{", ".join(MODES)}')


def shift(x: torch.Tensor, dy: int, dx: int, mode: str) -> torch.Tensor:
    """``x`` (..., H, W) moved ``dy`` down and ``dx`` right: rolled
    ('circular') or with zeros shifted in ('zero')."""
    check_mode(mode)
    if mode == 'circular':
        return torch.roll(x, shifts=(dy, dx), dims=(-2, -1))
    H, W = x.shape[-2:]
    out = torch.zeros_like(x)
    if abs(dy) >= H or abs(dx) >= W:
        return out
    src_y, dst_y = (slice(0, H - dy), slice(dy, H)) if dy >= 0 else (
        slice(-dy, H), slice(0, H + dy))
    src_x, dst_x = (slice(0, W - dx), slice(dx, W)) if dx >= 0 else (
        slice(-dx, W), slice(0, W + dx))
    out[..., dst_y, dst_x] = x[..., src_y, src_x]
    return out


def _edge(n: int, border: int) -> torch.Tensor:
    """(n,) True within ``border`` of either end."""
    i = torch.arange(n)
    return (i < border) | (i >= n - border)


def region_masks(hw_shape: Sequence[int], dy: int, dx: int, mode: str,
                 border: int = 1) -> Dict[str, torch.Tensor]:
    """(H, W) boolean masks of the shifted frame: 'all' (the valid
    tokens), 'interior' and 'border' (see the module docstring)."""
    check_mode(mode)
    H, W = hw_shape
    ys, xs = torch.arange(H), torch.arange(W)
    # where each token of the shifted frame came from
    src_y, src_x = ys - dy, xs - dx
    if mode == 'circular':
        valid_y = torch.ones(H, dtype=torch.bool)
        valid_x = torch.ones(W, dtype=torch.bool)
        src_y, src_x = src_y % H, src_x % W
    else:
        valid_y = (src_y >= 0) & (src_y < H)
        valid_x = (src_x >= 0) & (src_x < W)
        src_y, src_x = src_y.clamp(0, H - 1), src_x.clamp(0, W - 1)
    edge_y = _edge(H, border) | _edge(H, border)[src_y]
    edge_x = _edge(W, border) | _edge(W, border)[src_x]
    valid = valid_y[:, None] & valid_x[None, :]
    edge = edge_y[:, None] | edge_x[None, :]
    return dict(all=valid, interior=valid & ~edge, border=valid & edge)


def token_shift(shift_patches: int, patch: int,
                stride: int) -> Optional[int]:
    """A shift of ``shift_patches`` input patches (``patch`` pixels each)
    in tokens of a block at ``stride``; None if not a whole number."""
    t = Fraction(shift_patches * patch, stride)
    return int(t) if t.denominator == 1 else None


def translation_equivariance(backbone: nn.Module,
                             images: torch.Tensor,
                             shifts: Sequence[int] = (1, 2, 3),
                             mode: str = 'circular',
                             border: int = 1,
                             blocks: Optional[Sequence[int]] = None,
                             batch_size: int = 16,
                             progress: Progress = None) -> List[dict]:
    """Relative equivariance error of every block.

    Each shift ``s`` moves the image ``s`` patches (of the first patch
    embedding) down and ``s`` right. At a block of stride ``r`` pixels per
    token that is ``s * patch / r`` tokens; shifts that are not a whole
    number of tokens there are skipped for that block (listed in
    ``skipped``): use multiples of ``r / patch``.

    Args:
        backbone (nn.Module): A CPVT, PVTPEG or SwinPEG (or subclass).
        images (Tensor): (N, 3, H, W) normalised images; H and W should be
            multiples of the largest stride analysed (for circular shifts
            to be exact).
        shifts (Sequence[int]): Shifts in patches (negative: up/left).
            Defaults to (1, 2, 3).
        mode (str): 'circular' or 'zero'. Defaults to 'circular'.
        border (int): Border width in tokens. Defaults to 1.
        blocks (Sequence[int], optional): Global block indices (``INPUT``
            = -1 allowed). Defaults to None: all.
        batch_size (int): Images per forward. Defaults to 16.
        progress (callable, optional): ``progress(done, total)``.

    Returns:
        list[dict]: One dict per block, in order: ``block`` (global index),
        ``name``, ``stride``, ``grid`` [H, W], ``interior`` / ``border`` /
        ``all`` (mean over the evaluated shifts; None if none),
        ``per_shift`` ``{s: {'tokens': t, 'interior': e, 'border': e,
        'all': e, 'n_interior': k, 'n_border': k}}`` (``k``: tokens
        compared, over all images) and ``skipped`` (the
        shifts that are no whole number of tokens there), ``shrunk`` (the
        map is smaller than the image's: only unwrapped tokens compared).
        An error is None for an empty region.
    """
    check_mode(mode)
    if border < 0:
        raise ValueError(f'border must be >= 0, got {border}')
    infos = list_blocks(backbone)
    patch = infos[0].stride  # pixels per token of the first stage
    if blocks is not None:
        infos = [i for i in infos if i.index in set(blocks)]
    indices = [i.index for i in infos]
    # sums of squares: (block, shift, region) -> [diff, reference]
    sums: Dict[Tuple[int, int, str], List[float]] = {}
    grids: Dict[int, Tuple[int, int]] = {}
    shrunk = set()
    total = len(images) * (1 + len(shifts))
    done = 0
    for start in range(0, len(images), batch_size):
        batch = images[start:start + batch_size]
        base = block_features(backbone, batch, indices, len(batch))
        done += len(batch)
        for s in shifts:
            moved = block_features(
                backbone, shift(batch, s * patch, s * patch, mode), indices,
                len(batch))
            done += len(batch)
            for info in infos:
                t = token_shift(s, patch, info.stride)
                if t is None:
                    continue
                f0, fs = base[info.index], moved[info.index]
                grid = tuple(f0.shape[-2:])
                grids[info.index] = grid
                full = tuple(-(-n // info.stride) for n in batch.shape[-2:])
                how = mode
                if grid != full:  # cropped by a PEG: it did not wrap
                    shrunk.add(info.index)
                    how = 'zero'
                ref = shift(f0, t, t, how)
                masks = region_masks(grid, t, t, how, border)
                diff2 = (fs - ref).pow(2).sum(dim=(0, 1))  # (H, W)
                ref2 = ref.pow(2).sum(dim=(0, 1))
                for region, mask in masks.items():
                    acc = sums.setdefault((info.index, s, region),
                                          [0., 0., 0])
                    acc[0] += float(diff2[mask].sum())
                    acc[1] += float(ref2[mask].sum())
                    acc[2] += int(mask.sum()) * len(batch)
            if progress is not None:
                progress(done, total)
    results = []
    for info in infos:
        per_shift, skipped = {}, []
        for s in shifts:
            t = token_shift(s, patch, info.stride)
            if t is None:
                skipped.append(s)
                continue
            entry = dict(tokens=t)
            for region in ('interior', 'border', 'all'):
                d2, r2, n = sums[(info.index, s, region)]
                entry[region] = (d2 / r2)**0.5 if n and r2 > 0 else None
            entry['n_interior'] = sums[(info.index, s, 'interior')][2]
            entry['n_border'] = sums[(info.index, s, 'border')][2]
            per_shift[s] = entry
        mean = {}
        for region in ('interior', 'border', 'all'):
            values = [e[region] for e in per_shift.values()
                      if e[region] is not None]
            mean[region] = sum(values) / len(values) if values else None
        results.append(
            dict(block=info.index, name=info.name, stride=info.stride,
                 grid=list(grids.get(info.index, ())), **mean,
                 per_shift=per_shift, skipped=skipped,
                 shrunk=info.index in shrunk))
    return results
