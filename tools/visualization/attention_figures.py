"""Figures of attention maps (paper, Appendix D.3, Figs. 5 and 6): the
matrix of one head, and the attention of a few query tokens over the image.

Used by tools/visualization/vis_attention.py and
projects/digits_canvas/digits_report.py (digits_canvas.py puts this
directory on ``sys.path``); the maps come from :func:`vis_attention.attention_maps`.
"""
from typing import TYPE_CHECKING, Sequence

import numpy as np
import torch
import torch.nn.functional as F
# no pyplot: a figure of its own, no global backend change
from matplotlib.figure import Figure

if TYPE_CHECKING:  # vis_attention.py imports this module
    from vis_attention import AttentionMaps, Query


def normalise(x: torch.Tensor) -> np.ndarray:
    """Min-max scaled to [0, 1] (a constant array gives zeros)."""
    x = x.detach().double().cpu().numpy()
    span = x.max() - x.min()
    return (x - x.min()) / span if span > 0 else np.zeros_like(x)


def save_matrix_png(matrix: torch.Tensor, path: str, title: str = ''):
    """The matrix, min-max normalised, as a PNG with a colour bar."""
    fig = Figure(figsize=(6, 5), dpi=100)
    ax = fig.subplots()
    im = ax.imshow(normalise(matrix), cmap='viridis', interpolation='nearest')
    ax.set_xlabel('key token')
    ax.set_ylabel('query token')
    ax.set_title(title, fontsize=9)
    fig.colorbar(im, ax=ax, fraction=0.046, pad=0.04)
    fig.tight_layout()
    fig.savefig(path)


def save_query_overlay(maps: 'AttentionMaps', image_rgb: np.ndarray,
                       queries: Sequence['Query'], path: str, image: int = 0,
                       head: int = 0, title: str = ''):
    """The image with the queries marked, then for each query its
    attention over the key patches (min-max normalised, upsampled by
    nearest neighbour onto the image), side by side."""
    from matplotlib.patches import Rectangle
    Hi, Wi = image_rgb.shape[:2]
    kv_stride = maps.stride * (maps.hw_shape[0] // maps.kv_hw_shape[0])
    fig = Figure(figsize=(3 * (1 + len(queries)), 3.4), dpi=100)
    axes = fig.subplots(1, 1 + len(queries), squeeze=False)[0]
    axes[0].imshow(image_rgb)
    axes[0].set_title('input', fontsize=9)
    s = maps.stride
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
        if query == 'cls':
            label = 'query: class token'
        else:
            r, c = query
            label = f'query: ({r}, {c})'
            for a in (axes[0], ax):
                a.add_patch(
                    Rectangle((c * s - 0.5, r * s - 0.5), s, s, fill=False,
                              edgecolor='white', linewidth=1.5))
        if maps.num_extra_tokens:
            label += f'\nto cls: {float(row[0]):.3f}'
        ax.set_title(label, fontsize=9)
    for ax in axes:
        ax.set_xticks([])
        ax.set_yticks([])
    fig.suptitle(title, fontsize=9)
    fig.tight_layout()
    fig.savefig(path)
