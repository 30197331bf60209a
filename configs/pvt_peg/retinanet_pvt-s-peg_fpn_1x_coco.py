# RetinaNet + PVT-Small+PEG+GAP, 1x schedule, COCO (CPVT: 43.0 mAP).
_base_ = './retinanet_pvt-t-peg_fpn_1x_coco.py'
model = dict(
    backbone=dict(
        arch='small',
        init_cfg=dict(checkpoint='checkpoints/pvt-s-peg-gap_in1k.pth')))
