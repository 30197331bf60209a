# The DeiT schedule that CPVT keeps (paper, Sec. 4.1 and appendix): AdamW,
# lr = 5e-4 * global_batch / 512, weight decay 0.05, 5 warm-up epochs, cosine
# decay to 1e-5, 300 epochs, no gradient clipping. Global batch 1024.
optim_wrapper = dict(
    optimizer=dict(
        type='AdamW',
        lr=5e-4 * 1024 / 512,
        weight_decay=0.05,
        eps=1e-8,
        betas=(0.9, 0.999)),
    # No weight decay on norms, biases, 1-D parameters, the class token and
    # the learned position table (DeiT's `no_weight_decay`).
    paramwise_cfg=dict(
        norm_decay_mult=0.0,
        bias_decay_mult=0.0,
        flat_decay_mult=0.0,
        custom_keys={
            '.cls_token': dict(decay_mult=0.0),
            '.pos_embed': dict(decay_mult=0.0)
        }),
)

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

train_cfg = dict(by_epoch=True, max_epochs=300, val_interval=1)
val_cfg = dict()
test_cfg = dict()

# The lr above is for a global batch of 1024 (4 GPUs x 256); with
# `--auto-scale-lr` it is scaled linearly to the actual global batch.
auto_scale_lr = dict(base_batch_size=1024)
