# RetinaNet + PVT-Tiny+PEG+GAP, 3x schedule with multi-scale training
# (shorter side 640-800), COCO (CPVT: 41.8 mAP).
_base_ = [
    '../_base_/models/retinanet_pvt-t-peg_fpn.py',
    '../_base_/datasets/coco_detection_ms-640-800.py',
    '../_base_/schedules/schedule_3x.py',
    '../_base_/default_runtime_mmdet.py',
]
model = dict(
    backbone=dict(
        init_cfg=dict(
            type='Pretrained',
            checkpoint='checkpoints/pvt-t-peg-gap_in1k.pth',
            prefix='backbone.')))
