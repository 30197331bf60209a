# DeiT-Ti (learned table, no PEG) with global average pooling instead of the
# class token. Paper, tab: GAP: 72.6 top-1.
_base_ = '../cpvt/deit-tiny_4xb256_in1k.py'

model = dict(backbone=dict(out_type='avg_featmap'))
