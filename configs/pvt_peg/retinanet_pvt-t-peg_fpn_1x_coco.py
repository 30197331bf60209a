# RetinaNet + PVT-Tiny+PEG(+GAP-pretrained), 1x schedule, COCO (CPVT Table
# "PVT+PEG": 38.7 mAP). The backbone starts from the ImageNet-1k PVT-T+PEG+GAP
# classifier; see README.md for how to get it, or train from scratch with
#   --cfg-options model.backbone.init_cfg=None
_base_ = [
    '../_base_/models/retinanet_pvt-t-peg_fpn.py',
    '../_base_/datasets/coco_detection.py',
    '../_base_/schedules/schedule_1x.py',
    '../_base_/default_runtime_mmdet.py',
]
model = dict(
    backbone=dict(
        init_cfg=dict(
            type='Pretrained',
            checkpoint='checkpoints/pvt-t-peg-gap_in1k.pth',
            prefix='backbone.')))
