# The Swin schedule (Liu et al., 2021; microsoft/Swin-Transformer
# config.py): mmpretrain's imagenet_bs1024_adamw_swin.py (AdamW, lr = 5e-4 x
# global_batch / 512 for a global batch of 1024, weight decay 0.05, none on
# norms, biases, 1-D parameters and the relative position bias tables, 20
# linear warm-up epochs, cosine decay, 300 epochs) with Swin's own values
# where mmpretrain's differ: warm-up from 5e-7 (Swin's WARMUP_LR) rather than
# 1e-6, cosine down to 5e-6 (MIN_LR) rather than 1e-5 and updated every
# iteration, and the gradient norm clipped at 5.0 (as mmpretrain's
# swin-tiny_16xb64_in1k.py). SwinPEG has no absolute position embedding, so
# only the relative position bias tables are named, and the PEGs, which the
# authors do not decay (Twins gvt.py: PosCNN.no_weight_decay()).
_base_ = 'mmpretrain::_base_/schedules/imagenet_bs1024_adamw_swin.py'

optim_wrapper = dict(
    paramwise_cfg=dict(custom_keys={
        '_delete_': True,
        '.relative_position_bias_table': dict(decay_mult=0.0),
        '.pegs.': dict(decay_mult=0.0)
    }),
    clip_grad=dict(max_norm=5.0),
)

param_scheduler = [
    # linear warm-up from lr * 5e-4 (Swin's WARMUP_LR 5e-7), updated per iter
    dict(
        type='LinearLR',
        start_factor=5e-4,
        by_epoch=True,
        begin=0,
        end=20,
        convert_to_iter_based=True),
    # cosine decay to Swin's MIN_LR, updated per iter as Swin's scheduler
    dict(
        type='CosineAnnealingLR',
        eta_min=5e-6,
        by_epoch=True,
        begin=20,
        end=300,
        convert_to_iter_based=True)
]

# The lr above is for a global batch of 1024 (16 GPUs x 64); with
# `--auto-scale-lr` it is scaled linearly to the actual global batch.
