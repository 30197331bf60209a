# Runtime shared by the mmpretrain (ImageNet-1k) configs of mmcpvt.
# Registries default to mmpretrain's; mmcpvt's modules are found through the
# root registry once `custom_imports` (in the model configs) has run.
default_scope = 'mmpretrain'

default_hooks = dict(
    # record the time of every iteration.
    timer=dict(type='IterTimerHook'),
    # print log every 100 iterations.
    logger=dict(type='LoggerHook', interval=100),
    # enable the parameter scheduler.
    param_scheduler=dict(type='ParamSchedulerHook'),
    # save a checkpoint every epoch and keep the latest three.
    checkpoint=dict(type='CheckpointHook', interval=1, max_keep_ckpts=3),
    # set the sampler seed in distributed environments.
    sampler_seed=dict(type='DistSamplerSeedHook'),
    # validation results visualization, set True to enable it.
    visualization=dict(type='VisualizationHook', enable=False),
)

env_cfg = dict(
    cudnn_benchmark=False,
    mp_cfg=dict(mp_start_method='fork', opencv_num_threads=0),
    dist_cfg=dict(backend='nccl'),
)

vis_backends = [dict(type='LocalVisBackend')]
visualizer = dict(type='UniversalVisualizer', vis_backends=vis_backends)

log_level = 'INFO'

# load from which checkpoint
load_from = None

# whether to resume training from the loaded checkpoint
resume = False

# random seed not fixed and `deterministic` off by default
randomness = dict(seed=None, deterministic=False)
