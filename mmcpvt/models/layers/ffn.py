"""The feed-forward network of the transformer blocks."""
import torch
import torch.nn as nn
from mmcv.cnn.bricks.transformer import FFN as _MMCVFFN


class FFN(_MMCVFFN):
    """mmcv's two-layer FFN (same parameters and names: ``layers.0.0`` is
    fc1, ``layers.1`` is fc2), with the activation applied in place when
    autograd does not record it (``torch.no_grad``, inference, frozen
    weights): mmcv's out-of-place GELU allocates a second B x N x 4C tensor
    per block there, the block's largest, and makes one more pass over
    memory (docs/benchmarks.md gives the figure that keeps this).
    """

    def forward(self, x: torch.Tensor, identity=None) -> torch.Tensor:
        fc1, act, drop1 = self.layers[0]
        fc2, drop2 = self.layers[1], self.layers[2]
        h = fc1(x)  # (B, N, C) -> (B, N, hidden)
        if type(act) is nn.GELU and not h.requires_grad:
            # in h's memory, for the blocks' GELU (the one measured)
            h = torch.ops.aten.gelu_(h, approximate=act.approximate)
        else:
            h = act(h)
        out = self.gamma2(drop2(fc2(drop1(h))))
        if not self.add_identity:
            return self.dropout_layer(out)
        return (x if identity is None else identity) + self.dropout_layer(out)
