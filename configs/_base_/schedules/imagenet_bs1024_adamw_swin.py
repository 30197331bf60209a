# The Swin schedule (Liu et al., 2021; microsoft/Swin-Transformer
# config.py): AdamW, lr = 5e-4 x global_batch / 512, weight decay 0.05,
# 20 linear warm-up epochs from 5e-7, cosine decay to 5e-6, 300 epochs,
# gradient norm clipped at 5.0. Global batch 1024.
optim_wrapper = dict(
    optimizer=dict(
        type='AdamW',
        lr=5e-4 * 1024 / 512,
        weight_decay=0.05,
        eps=1e-8,
        betas=(0.9, 0.999)),
    # No weight decay on norms, biases, 1-D parameters and the relative
    # position bias tables (Swin's `no_weight_decay_keywords`; SwinPEG has
    # no absolute position embedding).
    paramwise_cfg=dict(
        norm_decay_mult=0.0,
        bias_decay_mult=0.0,
        flat_decay_mult=0.0,
        custom_keys={
            '.relative_position_bias_table': dict(decay_mult=0.0)
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

train_cfg = dict(by_epoch=True, max_epochs=300, val_interval=1)
val_cfg = dict()
test_cfg = dict()

# The lr above is for a global batch of 1024 (16 GPUs x 64); with
# `--auto-scale-lr` it is scaled linearly to the actual global batch.
auto_scale_lr = dict(base_batch_size=1024)
