# A 27x27 depth-wise PEG (padding 13) at position -1: the large kernel gives
# the PEG before the first encoder the global receptive field that position 0
# gets from attention. Paper, tab: position (right): 72.5 top-1.
_base_ = '../cpvt/cpvt-tiny_4xb256_in1k.py'

model = dict(
    backbone=dict(peg_positions=(-1, ), peg_cfg=dict(kernel_size=27)))
