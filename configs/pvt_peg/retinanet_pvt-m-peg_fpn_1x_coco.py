# RetinaNet + PVT-Medium+PEG+GAP, 1x schedule, COCO (CPVT: 44.3 mAP).
_base_ = './retinanet_pvt-t-peg_fpn_1x_coco.py'
model = dict(
    backbone=dict(
        arch='medium',
        init_cfg=dict(checkpoint='checkpoints/pvt-m-peg-gap_in1k.pth')))
