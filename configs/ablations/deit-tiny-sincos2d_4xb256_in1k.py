# DeiT-Ti with a fixed 2-D sin-cos position encoding instead of the learned
# table, no PEG. Paper, tab: compare_encoding: 72.3 top-1.
_base_ = '../cpvt/deit-tiny_4xb256_in1k.py'

model = dict(backbone=dict(pos_embed='sincos2d'))
