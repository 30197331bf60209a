"""Attention matrices of one block (paper, Appendix D.3 "Qualitative Analysis
of CPVT", Figs. 5 and 6: the normalised attention scores of a head of the
second encoder, the 196 x 196 matrix of the patch tokens of a 224 px image,
show whether tokens attend to their neighbours, i.e. whether they know where
they are). Nothing of the attention is recomputed here.
"""
from contextlib import contextmanager
from dataclasses import dataclass
from typing import List, Optional, Tuple, Union

import torch
import torch.nn as nn

from .features import block_module, list_blocks, run_hooked, token_positions

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
    """The attention weights of one block over a batch of images.

    Attributes:
        attn (Tensor): (B, heads, N, N_kv), rows summing to one: N = extra
            + H*W, N_kv = N or the reduced map of a PVT block; (B * windows,
            heads, ws*ws, ws*ws) for Swin windows.
        kind (str): 'global', 'spatial-reduction' (PVT, sr_ratio > 1) or
            'window' (Swin).
        hw_shape (tuple): (H, W) of the query tokens; ``kv_hw_shape``: (H',
            W') of the key tokens (None for windows).
        num_extra_tokens (int): Leading (class) tokens among the queries
            and the keys.
        stride (int): Input pixels per query token.
        num_images (int): Images the weights are of. Defaults to 1.
    """
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
        raise ValueError(f'block {block} out of range for this '
                         f'{type(backbone).__name__}: attention exists for '
                         f'blocks 0 to {infos[-1].index}')
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
    """The centre and the top-left patch, and the class token if any."""
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
