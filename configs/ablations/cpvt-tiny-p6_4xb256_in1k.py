# PEG after encoder 6 instead of after encoder 0.
# Paper, tab: position: 71.7 top-1.
_base_ = '../cpvt/cpvt-tiny_4xb256_in1k.py'

model = dict(backbone=dict(peg_positions=(6, )))
