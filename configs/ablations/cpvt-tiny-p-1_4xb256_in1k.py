# PEG before the first encoder (position -1) instead of after encoder 0.
# Paper, tab: position: 70.6 top-1.
_base_ = '../cpvt/cpvt-tiny_4xb256_in1k.py'

model = dict(backbone=dict(peg_positions=(-1, )))
