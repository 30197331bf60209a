# PEG after encoder 3 instead of after encoder 0.
# Paper, tab: position: 72.3 top-1.
_base_ = '../cpvt/cpvt-tiny_4xb256_in1k.py'

model = dict(backbone=dict(peg_positions=(3, )))
