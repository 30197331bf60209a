# mmdet's runtime (default scope 'mmdet').
_base_ = 'mmdet::_base_/default_runtime.py'

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
