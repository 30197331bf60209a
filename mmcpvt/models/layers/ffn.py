"""The feed-forward network of the transformer blocks."""
import torch
import torch.nn as nn
from mmcv.cnn.bricks.transformer import FFN as _MMCVFFN


class FFN(_MMCVFFN):
    """mmcv's FFN, with the GELU in place where autograd records nothing
    (no_grad, inference, frozen weights): mmcv's allocates a second B x N x
    4C tensor per block, its largest (the figure: docs/benchmarks.md)."""

    def forward(self, x: torch.Tensor, identity=None) -> torch.Tensor:
        fc1, act, drop1 = self.layers[0]
        fc2, drop2 = self.layers[1], self.layers[2]
        h = fc1(x)  # (B, N, C) -> (B, N, hidden)
        if type(act) is nn.GELU and not h.requires_grad:
            h = torch.ops.aten.gelu_(h, approximate=act.approximate)
        else:
            h = act(h)
        out = self.dropout_layer(self.gamma2(drop2(fc2(drop1(h)))))
        if not self.add_identity:
            return out
        return (x if identity is None else identity) + out
