# COCO 2017 detection with multi-scale training (the "+MS" of the 3x
# schedule in PVT and CPVT): the shorter side is drawn from [640, 800]
# (longer side at most 1333), as mmdet's retinanet_*_ms-640-800-3x configs.
# Testing stays at shorter side 800.
_base_ = './coco_detection.py'

train_pipeline = [
    dict(type='LoadImageFromFile', backend_args={{_base_.backend_args}}),
    dict(type='LoadAnnotations', with_bbox=True),
    dict(
        type='RandomResize', scale=[(1333, 640), (1333, 800)],
        keep_ratio=True),
    dict(type='RandomFlip', prob=0.5),
    dict(type='PackDetInputs')
]
train_dataloader = dict(dataset=dict(pipeline=train_pipeline))
