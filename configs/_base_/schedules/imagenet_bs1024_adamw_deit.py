# The DeiT schedule that CPVT keeps (paper, Sec. 4.1 and appendix), written
# as mmpretrain's imagenet_bs1024_adamw_swin.py (AdamW, lr = 5e-4 x
# global_batch / 512 for a global batch of 1024, weight decay 0.05, none on
# norms, biases and 1-D parameters, 300 epochs, no gradient clipping) with
# DeiT's differences: 5 warm-up epochs instead of 20, and no weight decay on
# the class token and the learned position table rather than on Swin's
# position parameters. The PEGs are not decayed either (weights and biases of
# every `.pegs.` module), as in the authors' code: Twins gvt.py,
# PosCNN.no_weight_decay() and CPVTV2.no_weight_decay(), which timm's
# optimizer factory puts in the no-decay group.
_base_ = 'mmpretrain::_base_/schedules/imagenet_bs1024_adamw_swin.py'

optim_wrapper = dict(
    paramwise_cfg=dict(
        custom_keys={
            '_delete_': True,
            '.cls_token': dict(decay_mult=0.0),
            '.pos_embed': dict(decay_mult=0.0),
            '.pegs.': dict(decay_mult=0.0)
        }))

param_scheduler = [
    # linear warm-up from lr * 1e-3 (DeiT's warmup_lr 1e-6), updated per iter
    dict(
        type='LinearLR',
        start_factor=1e-3,
        by_epoch=True,
        begin=0,
        end=5,
        convert_to_iter_based=True),
    # cosine decay to DeiT's min_lr
    dict(
        type='CosineAnnealingLR',
        eta_min=1e-5,
        by_epoch=True,
        begin=5,
        end=300)
]

# The lr above is for a global batch of 1024 (4 GPUs x 256); with
# `--auto-scale-lr` it is scaled linearly to the actual global batch.
