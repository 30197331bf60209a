# DeiT-Ti without any position encoding (no table, no PEG).
# Paper, tab: position / tab: learnable_not, "none": 68.2 top-1.
_base_ = '../cpvt/deit-tiny_4xb256_in1k.py'

model = dict(backbone=dict(pos_embed='none'))
