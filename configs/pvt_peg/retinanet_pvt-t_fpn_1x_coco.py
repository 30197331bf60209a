# Baseline: RetinaNet + PVT-Tiny (mmdet's PyramidVisionTransformer, learned
# position tables, class-token ImageNet weights), 1x schedule, COCO
# (PVT paper / CPVT: 36.7 mAP). Same data, schedule and head as
# retinanet_pvt-t-peg_fpn_1x_coco.py: only the backbone differs.
_base_ = [
    '../_base_/models/retinanet_pvt-t-peg_fpn.py',
    '../_base_/datasets/coco_detection.py',
    '../_base_/schedules/schedule_1x.py',
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
