"""The attention of one block, as in the paper's Figs. 5 and 6 (Appendix
D.3): the softmax weights recorded as the block computes them (not
recomputed), its matrix of one head, the attention of a query token over
the image, the mean attention distance, and their drawings. The command
line: tools/visualization/vis_attention.py.
"""
from contextlib import contextmanager
from dataclasses import dataclass
from typing import List, Optional, Tuple, Union

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

from .blocks import block_module, list_blocks, run_hooked, token_positions

Query = Union[str, Tuple[int, int]]  # 'cls' or (row, column)


@contextmanager
def capture_attention(attn: nn.Module):
    """Record the softmax weights of an :class:`Attention` (or subclass)
    on every call: yields a list that receives (B, heads, N, N_kv) float32
    CPU tensors. Its ``attend`` runs with ``return_attn=True`` (the explicit
    softmax path) for the while; its outputs are unchanged."""
    original = attn.attend
    store: List[torch.Tensor] = []

    def attend(q, k, v, attn_bias=None, return_attn=False):
        out, weights = original(q, k, v, attn_bias, True)
        store.append(weights.detach().float().cpu())
        return (out, weights) if return_attn else out

    attn.attend = attend  # an instance attribute shadows the method
    try:
        yield store
    finally:
        del attn.attend


@dataclass
class AttentionMaps:
    """The attention weights of one block over ``num_images`` images:
    ``attn`` (B, heads, N, N_kv), rows summing to one (N = extra + H*W, N_kv
    = N or PVT's reduced map; (B * windows, heads, ws*ws, ws*ws) for Swin);
    ``kind`` 'global', 'spatial-reduction' (PVT, sr_ratio > 1) or 'window'
    (Swin); ``hw_shape`` (H, W) of the queries, ``kv_hw_shape`` (H', W') of
    the keys (None for windows); ``num_extra_tokens`` leading (class)
    tokens; ``stride`` input pixels per query token."""
    attn: torch.Tensor
    kind: str
    hw_shape: Tuple[int, int]
    kv_hw_shape: Optional[Tuple[int, int]]
    num_extra_tokens: int
    stride: int
    num_images: int = 1

    def matrix(self, image: int = 0, head: int = 0,
               extra_tokens: bool = False) -> torch.Tensor:
        """The matrix of one head (of the first window of the image for
        Swin): patch queries x patch keys, as the paper's figures (H*W x
        H'*W'); with ``extra_tokens`` the class token's row and column too
        (N x N_kv, rows summing to one)."""
        heads = self.attn.shape[1]
        if not 0 <= head < heads:
            raise ValueError(f'head {head} out of range: this block has '
                             f'{heads} heads (0 to {heads - 1})')
        if self.kind == 'window':
            windows = self.attn.shape[0] // self.num_images
            return self.attn[image * windows, head]
        n = 0 if extra_tokens else self.num_extra_tokens
        return self.attn[image, head, n:, n:]

    def query_index(self, query: Query) -> int:
        """The row of a query: 'cls' (the first extra token) or (row,
        column) of a patch token."""
        H, W = self.hw_shape
        if query == 'cls':
            if not self.num_extra_tokens:
                raise ValueError(f"query 'cls': this block has no class "
                                 f'token; give ROW COL of a patch (0..'
                                 f'{H - 1}, 0..{W - 1})')
            return 0
        r, c = query
        if not (0 <= r < H and 0 <= c < W):
            raise ValueError(f'query ({r}, {c}) outside the {H}x{W} token '
                             f'grid (rows 0..{H - 1}, columns 0..{W - 1})')
        return self.num_extra_tokens + r * W + c

    def query_map(self, query: Query, image: int = 0,
                  head: int = 0) -> torch.Tensor:
        """The attention of one query over the key patch grid (H', W')."""
        if self.kind == 'window':
            raise ValueError('per-query maps over the image need global '
                             'attention; Swin attends within windows')
        row = self.matrix(image, head, True)[self.query_index(query)]
        n = self.num_extra_tokens
        return row[n:].reshape(self.kv_hw_shape)


def attention_maps(backbone: nn.Module,
                   images: torch.Tensor,
                   block: int,
                   batch_size: int = 16) -> AttentionMaps:
    """Run ``backbone`` on ``images`` and keep the attention weights of
    block ``block`` (global index, see :func:`list_blocks`)."""
    infos = list_blocks(backbone)
    if not 0 <= block <= infos[-1].index:
        raise ValueError(f'block {block} has no attention: this '
                         f'{type(backbone).__name__} has blocks 0 to '
                         f'{infos[-1].index}')
    module = block_module(backbone, block)
    # the (H, W) the block receives: CPVT's map after a PEG without padding
    # is smaller than the patch embedding's
    hw = []
    handles = [module.register_forward_pre_hook(
        lambda m, args: hw.append(tuple(args[1])))]
    with capture_attention(module.attn) as store:
        run_hooked(backbone, images, batch_size, handles)
    attn, (H, W), stride = torch.cat(store), hw[0], infos[block + 1].stride
    if hasattr(module, 'window_size'):
        return AttentionMaps(attn, 'window', (H, W), None, 0, stride,
                             len(images))
    sr = module.attn.sr_ratio
    kind = 'spatial-reduction' if sr > 1 else 'global'
    # a map smaller than sr is padded to one sr x sr window (Attention)
    kv_hw = (max(1, H // sr), max(1, W // sr))
    return AttentionMaps(attn, kind, (H, W), kv_hw, attn.shape[2] - H * W,
                         stride, len(images))


def default_queries(maps: AttentionMaps) -> List[Query]:
    H, W = maps.hw_shape
    extra: List[Query] = ['cls'] if maps.num_extra_tokens else []
    return [(H // 2, W // 2), (0, 0)] + extra


def mean_attention_distance(maps: AttentionMaps, image: int = 0,
                            head: int = 0) -> float:
    """Attention-weighted distance from the patch queries to the key
    patches, in query tokens, averaged over the queries (extra tokens left
    out, the rest renormalised; not for Swin's windows): small for a head
    that attends to its neighbours (Fig. 5, DeiT and CPVT), 0.52 x the side
    of a square map for one that attends everywhere alike (Fig. 5, no
    position encoding)."""
    H, W = maps.hw_shape
    Hk, Wk = maps.kv_hw_shape
    a = maps.matrix(image, head).double()
    a = a / a.sum(1, keepdim=True).clamp_min(1e-12)
    # token centres in query tokens; a key token covers H / Hk of them
    q = token_positions(H, W) + .5
    k = (token_positions(Hk, Wk) + .5) * (H / Hk)
    return float((a * torch.cdist(q, k)).sum(1).mean())


def normalise(x: torch.Tensor) -> np.ndarray:
    """Min-max scaled to [0, 1] (a constant array gives zeros)."""
    x = x.detach().double().cpu().numpy()
    span = x.max() - x.min()
    return (x - x.min()) / span if span > 0 else np.zeros_like(x)


def save_matrix_png(matrix: torch.Tensor, path: str, title: str = ''):
    from matplotlib.figure import Figure  # no pyplot: no global backend
    fig = Figure(figsize=(6, 5), dpi=100)
    ax = fig.subplots()
    im = ax.imshow(normalise(matrix), cmap='viridis', interpolation='nearest')
    ax.set(xlabel='key token', ylabel='query token')
    ax.set_title(title, fontsize=9)
    fig.colorbar(im, ax=ax, fraction=0.046, pad=0.04)
    fig.tight_layout()
    fig.savefig(path)


def save_query_overlay(maps: AttentionMaps, image_rgb: np.ndarray,
                       queries: List[Query], path: str, image: int = 0,
                       head: int = 0, title: str = ''):
    """The image with the queries marked, then for each query its
    attention over the key patches (min-max normalised, upsampled by
    nearest neighbour onto the image), side by side."""
    from matplotlib.figure import Figure
    from matplotlib.patches import Rectangle
    Hi, Wi = image_rgb.shape[:2]
    s = maps.stride
    kv_stride = s * (maps.hw_shape[0] // maps.kv_hw_shape[0])
    fig = Figure(figsize=(3 * (1 + len(queries)), 3.4), dpi=100)
    axes = fig.subplots(1, 1 + len(queries), squeeze=False)[0]
    axes[0].imshow(image_rgb)
    axes[0].set_title('input', fontsize=9)
    for ax, query in zip(axes[1:], queries):
        heat = maps.query_map(query, image, head)  # (H', W')
        heat = F.interpolate(
            torch.as_tensor(normalise(heat))[None, None],
            scale_factor=kv_stride, mode='nearest')[0, 0, :Hi, :Wi]
        ax.imshow(image_rgb)
        ax.imshow(heat.numpy(), cmap='jet', alpha=0.55, vmin=0, vmax=1,
                  extent=(-0.5, heat.shape[1] - 0.5, heat.shape[0] - 0.5,
                          -0.5))
        row = maps.matrix(image, head, True)[maps.query_index(query)]
        label = 'query: class token'
        if query != 'cls':
            r, c = query
            label = f'query: ({r}, {c})'
            for a in (axes[0], ax):
                a.add_patch(Rectangle((c * s - 0.5, r * s - 0.5), s, s,
                                      fill=False, edgecolor='white',
                                      linewidth=1.5))
        if maps.num_extra_tokens:
            label += f'\nto cls: {float(row[0]):.3f}'
        ax.set_title(label, fontsize=9)
    for ax in axes:
        ax.set(xticks=[], yticks=[])
    fig.suptitle(title, fontsize=9)
    fig.tight_layout()
    fig.savefig(path)
