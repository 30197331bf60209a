# mmdet's COCO 2017 detection data with multi-scale training (the "+MS" of
# the 3x schedule in PVT and CPVT): the shorter side is drawn from [640, 800]
# (longer side at most 1333), as in mmdet's retinanet_*_ms-640-800-3x
# configs, whose common/ms_3x_coco.py base also repeats the data set 3 times
# over a 12-epoch schedule; here the 36 epochs are in the schedule
# (schedules/schedule_3x.py). Testing stays at shorter side 800.
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
