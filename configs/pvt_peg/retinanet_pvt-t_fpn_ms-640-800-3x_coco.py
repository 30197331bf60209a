# Baseline: RetinaNet + PVT-Tiny (mmdet's backbone), 3x + multi-scale, COCO
# (PVT paper / CPVT: 39.4 mAP).
_base_ = [
    '../_base_/models/retinanet_pvt-t-peg_fpn.py',
    '../_base_/datasets/coco_detection_ms-640-800.py',
    '../_base_/schedules/schedule_3x.py',
    '../_base_/default_runtime_mmdet.py',
]
model = dict(
    backbone=dict(
        _delete_=True,
        type='PyramidVisionTransformer',
        num_layers=[2, 2, 2, 2],
        init_cfg=dict(
            type='Pretrained',
            checkpoint='https://github.com/whai362/PVT/'
            'releases/download/v2/pvt_tiny.pth')))
