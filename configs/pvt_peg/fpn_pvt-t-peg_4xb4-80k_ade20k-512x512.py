# Semantic FPN + PVT-Tiny+PEG(+GAP-pretrained), ADE20K, 512x512 crops, 80k
# iterations at a total batch of 16 (4 GPUs x 4 images), AdamW lr 1e-4:
# PVT's setting (CPVT Table "PVT+PEG": 38.8 mIoU). Train from scratch with
#   --cfg-options model.backbone.init_cfg=None
_base_ = [
    '../_base_/models/fpn_pvt-t-peg.py',
    '../_base_/datasets/ade20k.py',
    'mmseg::_base_/default_runtime.py',
    '../_base_/schedules/schedule_80k.py',
]
model = dict(
    backbone=dict(
        init_cfg=dict(
            type='Pretrained',
            checkpoint='checkpoints/pvt-t-peg-gap_in1k.pth',
            prefix='backbone.')))
