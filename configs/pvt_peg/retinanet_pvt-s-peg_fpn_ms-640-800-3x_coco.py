# RetinaNet + PVT-Small+PEG+GAP, 3x + multi-scale, COCO (CPVT: 45.2 mAP).
_base_ = './retinanet_pvt-t-peg_fpn_ms-640-800-3x_coco.py'
model = dict(
    backbone=dict(
        arch='small',
        init_cfg=dict(checkpoint='checkpoints/pvt-s-peg-gap_in1k.pth')))
