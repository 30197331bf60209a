# RetinaNet + PVT-Medium+PEG+GAP, 3x + multi-scale, COCO (CPVT: 46.4 mAP).
_base_ = './retinanet_pvt-t-peg_fpn_ms-640-800-3x_coco.py'
model = dict(
    backbone=dict(
        arch='medium',
        init_cfg=dict(checkpoint='checkpoints/pvt-m-peg-gap_in1k.pth')))
