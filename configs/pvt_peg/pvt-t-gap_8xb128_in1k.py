# PVT-Tiny+GAP (the paper's ablation): PVT's learned position tables, no PEG,
# average pooling instead of the class token; same recipe.
_base_ = './pvt-t-peg-gap_8xb128_in1k.py'

model = dict(
    backbone=dict(pos_embed='learned', peg_positions=((), (), (), ())))
