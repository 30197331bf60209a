# PEG after encoder 0 plus DeiT's learned absolute position table (LE).
# Paper, tab: compare_encoding, "PEG + LE": 72.9 top-1.
_base_ = '../cpvt/cpvt-tiny_4xb256_in1k.py'

model = dict(backbone=dict(pos_embed='learned'))
