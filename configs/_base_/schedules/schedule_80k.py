# The 80k-iteration Semantic FPN schedule in PVT's setting (Wang et al.,
# ICCV 2021, also used by CPVT): AdamW lr 1e-4 and weight decay 1e-4 for a
# total batch of 16 (4 GPUs x 4 images), poly decay with power 0.9 to 0.
# (mmseg's Twins configs keep eta_min=1e-4 from mmseg's SGD schedule, which
# with lr 1e-4 makes their learning rate constant; PVT decays to 0.)
optim_wrapper = dict(
    type='OptimWrapper',
    optimizer=dict(type='AdamW', lr=0.0001, weight_decay=0.0001),
    clip_grad=None)
param_scheduler = [
    dict(
        type='PolyLR',
        eta_min=0.,
        power=0.9,
        begin=0,
        end=80000,
        by_epoch=False)
]
train_cfg = dict(type='IterBasedTrainLoop', max_iters=80000, val_interval=8000)
val_cfg = dict(type='ValLoop')
test_cfg = dict(type='TestLoop')
default_hooks = dict(
    timer=dict(type='IterTimerHook'),
    logger=dict(type='LoggerHook', interval=50, log_metric_by_epoch=False),
    param_scheduler=dict(type='ParamSchedulerHook'),
    checkpoint=dict(type='CheckpointHook', by_epoch=False, interval=8000),
    sampler_seed=dict(type='DistSamplerSeedHook'),
    visualization=dict(type='SegVisualizationHook'))
