"""CPVTQKOnly: the paper's test that the PEG acts as a position encoding
(PEG on Q and K only, 71.3 top-1: stated in the text of Sec. 5.1
"Positional encoding or merely a hybrid?", not in a table; Table 5's 71.3
is another run, the PEG fixed at its random init).

Conditional Positional Encodings for Vision Transformers, Chu et al.,
ICLR 2023 (https://arxiv.org/abs/2102.10882).
"""
from typing import Optional, Sequence

import torch
import torch.nn as nn
import torch.nn.functional as F

from mmcpvt.registry import register_model
from ..layers import Attention, TransformerBlock
from .cpvt import CPVT


class QKPosAttention(Attention):
    """Attention whose queries and keys see ``x + qk_pos``, its values
    ``x`` (no spatial reduction)."""

    def forward(self, x: torch.Tensor,
                hw_shape: Optional[Sequence[int]] = None,
                qk_pos: Optional[torch.Tensor] = None) -> torch.Tensor:
        if qk_pos is None:
            return super().forward(x, hw_shape)
        C = x.shape[-1]
        w, b = self.qkv.weight, self.qkv.bias
        b_qk, b_v = (None, None) if b is None else (b[:2 * C], b[2 * C:])
        q, k = self._split_heads(F.linear(x + qk_pos, w[:2 * C], b_qk),
                                 2).unbind(0)
        v = self._split_heads(F.linear(x, w[2 * C:], b_v), 1)[0]
        return self.attend(q, k, v, self.position_bias(q, hw_shape))


class QKPosBlock(TransformerBlock):
    """The transformer block whose queries and keys get the ``F(x)`` of the
    PEG before it, ``peg(x) - x``, added to the normed tokens."""
    attn_cls = QKPosAttention

    def forward(self, x: torch.Tensor, hw_shape: Sequence[int],
                peg: Optional[nn.Module] = None) -> torch.Tensor:
        qk_pos = None if peg is None else peg(x, hw_shape) - x
        x = x + self.drop_path(self.attn(self.ln1(x), hw_shape, qk_pos))
        return x + self.drop_path(self.ffn(self.ln2(x)))


@register_model
class CPVTQKOnly(CPVT):
    """CPVT whose PEGs leave the token stream as it is: each PEG's ``F(x)``
    goes to the query and key inputs of the next encoder only. Arguments
    and parameter names: :class:`CPVT`'s."""
    block_cls = QKPosBlock
    pegs_may_shrink = False

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        # else ignored: its blocks take the PEG instead
        if self.rope is not None:
            raise ValueError('CPVTQKOnly takes no rope_cfg')
        last = self.num_layers - 1  # else its PEG would feed nothing
        if str(last) in self.pegs:
            raise ValueError(f'peg_positions must not hold {last}: a PEG '
                             f'after the last encoder has no next encoder to '
                             f'feed')

    def forward(self, x: torch.Tensor) -> tuple:
        x, hw = self._embed(x)
        outs = []
        for i, layer in enumerate(self.layers):
            peg = self.pegs[str(i - 1)] if str(i - 1) in self.pegs else None
            x = self.run_block(layer, x, hw, peg)  # the PEG feeds Q and K
            if str(i) in self.pos_embeds:
                x = self.pos_embeds[str(i)](x, hw)
            if i == self.num_layers - 1:
                x = self.norm(x)
            if i in self.out_indices:
                outs.append(self._format_output(x, hw))
        return tuple(outs)
