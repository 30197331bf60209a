# The 3x detection schedule in PVT's setting: 36 epochs, AdamW lr 1e-4 and
# weight decay 1e-4 for a total batch of 16 (8 GPUs x 2 images), linear
# warm-up over 500 iterations, lr x0.1 after epochs 27 and 33. PVT and CPVT
# pair it with multi-scale training (datasets/coco_detection_ms-640-800.py).
# mmdet has no 3x schedule file of this form (its ms-3x configs repeat the
# data set 3 times over the 12 epochs of common/ms_3x_coco.py).
_base_ = './schedule_1x.py'

train_cfg = dict(max_epochs=36)
param_scheduler = [
    dict(
        type='LinearLR', start_factor=0.001, by_epoch=False, begin=0, end=500),
    dict(
        type='MultiStepLR',
        begin=0,
        end=36,
        by_epoch=True,
        milestones=[27, 33],
        gamma=0.1)
]
