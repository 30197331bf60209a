# PVT-Tiny+PEG (the paper's ablation): no position tables, a PEG after the
# first block of each stage, class token (the PEG of the last stage leaves it
# untouched); same recipe.
_base_ = './pvt-t-peg-gap_8xb128_in1k.py'

model = dict(backbone=dict(out_type='cls_token'))
