# The 1x detection schedule in PVT's setting (Wang et al., ICCV 2021, also
# used by CPVT): 12 epochs, AdamW lr 1e-4 and weight decay 1e-4 for a total
# batch of 16 (8 GPUs x 2 images), linear warm-up over 500 iterations, lr x0.1
# after epochs 8 and 11.
train_cfg = dict(type='EpochBasedTrainLoop', max_epochs=12, val_interval=1)
val_cfg = dict(type='ValLoop')
test_cfg = dict(type='TestLoop')

param_scheduler = [
    dict(
        type='LinearLR', start_factor=0.001, by_epoch=False, begin=0, end=500),
    dict(
        type='MultiStepLR',
        begin=0,
        end=12,
        by_epoch=True,
        milestones=[8, 11],
        gamma=0.1)
]

optim_wrapper = dict(
    type='OptimWrapper',
    optimizer=dict(type='AdamW', lr=0.0001, weight_decay=0.0001))

# `--auto-scale-lr` scales lr by (actual total batch) / 16.
auto_scale_lr = dict(enable=False, base_batch_size=16)
