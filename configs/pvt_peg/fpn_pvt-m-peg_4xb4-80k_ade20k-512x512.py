# Semantic FPN + PVT-Medium+PEG+GAP, ADE20K, 80k (CPVT: 44.9 mIoU).
_base_ = './fpn_pvt-t-peg_4xb4-80k_ade20k-512x512.py'
model = dict(
    backbone=dict(
        arch='medium',
        init_cfg=dict(checkpoint='checkpoints/pvt-m-peg-gap_in1k.pth')))
