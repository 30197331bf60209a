"""CPVTQKOnly: the paper's test that the PEG acts as a position encoding
(PEG on Q and K only, 71.3 top-1: stated in the text of Sec. 5.1
"Positional encoding or merely a hybrid?", not in a table; Table 5's 71.3
is another run, the PEG fixed at its random init).

Conditional Positional Encodings for Vision Transformers, Chu et al.,
ICLR 2023 (https://arxiv.org/abs/2102.10882).
"""
from typing import Optional, Sequence

import torch
import torch.nn.functional as F

from mmcpvt.registry import register_model
from ..layers import Attention, TransformerBlock
from .cpvt import CPVT


class QKPosAttention(Attention):
    """Attention whose queries and keys see ``x + qk_pos`` and whose values
    see ``x`` (no spatial reduction)."""

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
    """The transformer block with :class:`QKPosAttention`: ``qk_pos`` is
    added to the normed tokens that make queries and keys."""
    attn_cls = QKPosAttention

    def forward(self, x: torch.Tensor, hw_shape: Sequence[int],
                qk_pos: Optional[torch.Tensor] = None) -> torch.Tensor:
        x = x + self.drop_path(self.attn(self.ln1(x), hw_shape, qk_pos))
        return x + self.drop_path(self.ffn(self.ln2(x)))


@register_model
class CPVTQKOnly(CPVT):
    """CPVT whose PEGs leave the token stream as it is: each PEG's ``F(x)``
    is added to the query and key inputs of the next encoder only. Same
    arguments and parameter names as :class:`CPVT`; a PEG after the last
    encoder, or one that shrinks the map, is refused."""
    block_cls = QKPosBlock
    pegs_may_shrink = False

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        last = self.num_layers - 1  # else its PEG would feed nothing
        assert str(last) not in self.pegs, (
            f'peg_positions must not hold {last}: a PEG after the last '
            f'encoder has no next encoder to feed')

    def _qk_pos(self, position: int, x: torch.Tensor, hw_shape):
        """F(x) of the PEG at ``position``; None where there is none."""
        if str(position) not in self.pegs:
            return None
        return self.pegs[str(position)](x, hw_shape) - x

    def forward(self, x: torch.Tensor) -> tuple:
        """CPVT's, with each PEG's F(x) given to the next encoder."""
        x, hw = self._embed(x)
        qk_pos = self._qk_pos(-1, x, hw)
        outs = []
        for i, layer in enumerate(self.layers):
            x = self.run_block(layer, x, hw, qk_pos)
            if str(i) in self.pos_embeds:
                x = self.pos_embeds[str(i)](x, hw)
            qk_pos = self._qk_pos(i, x, hw)
            if i == self.num_layers - 1:
                x = self.norm(x)
            if i in self.out_indices:
                outs.append(self._format_output(x, hw))
        return tuple(outs)
