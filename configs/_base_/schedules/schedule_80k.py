# mmseg's 80k-iteration schedule (poly decay with power 0.9, a checkpoint and
# a validation every 8k iterations) in PVT's Semantic FPN setting (Wang et
# al., ICCV 2021, also used by CPVT): AdamW lr 1e-4 and weight decay 1e-4
# instead of mmseg's SGD lr 0.01, and the poly decay down to 0 as PVT's
# min_lr, not to mmseg's eta_min 1e-4 (mmseg's Twins configs keep that
# eta_min, which with lr 1e-4 makes their learning rate constant).
_base_ = 'mmseg::_base_/schedules/schedule_80k.py'

optimizer = dict(_delete_=True, type='AdamW', lr=0.0001, weight_decay=0.0001)
optim_wrapper = dict(optimizer=optimizer)
param_scheduler = [
    dict(
        type='PolyLR',
        eta_min=0.,
        power=0.9,
        begin=0,
        end=80000,
        by_epoch=False)
]

# mmcpvt's runner hooks (mmcpvt/engine/hooks.py), so that any train.py --
# ours, mmdet's or mmseg's -- runs with them: checkpoints written atomically
# (the 'mmcpvt_atomic' file backend: a crash while saving leaves the previous
# file, never half a one); every checkpoint unpickled with weights_only=True,
# by path or URL, and a load_from / resume checkpoint of another model
# refused; each epoch and training step seeded from the seed and the epoch or
# iteration (a resumed run trains as the uninterrupted one); a model on CUDA
# refused before its first iteration when it calls mmcv ops that the
# installed mmcv lacks (built without CUDA).
default_hooks = dict(
    checkpoint=dict(backend_args=dict(backend='mmcpvt_atomic')),
    checkpoint_load=dict(type='mmcpvt.CheckpointLoadHook'),
    seed=dict(type='mmcpvt.SeedHook'),
    cuda_ops=dict(type='mmcpvt.CudaOpsHook'))
# mmengine's Runner that refuses a second training in a work dir in use,
# before it writes the config there (mmcpvt/engine/runner.py)
runner_type = 'mmcpvt.LockedRunner'
