# The classification demo (`make demo`, demo/demo.py): CPVT-GAP with PEGs
# after encoders 0-4, shrunk to train on 2 CPU cores in a few minutes on the
# synthetic ImageNet-layout set of tools/dataset_converters/make_imagenet.py
# (10 classes of coloured shapes, 64x64). Everything else - the model, the
# data set class, the optimizer and schedule types - is the real recipe of
# the parent config.
_base_ = '../cpvt/cpvt-tiny-gap-p0-4_4xb256_in1k.py'

data_root = 'data/demo_imagenet'
num_classes = 10
img_size = 64  # training crop; the demo also tests at 96 and 128, never seen
embed_dims = 96

model = dict(
    backbone=dict(
        arch=dict(
            _delete_=True,  # a dict replaces the parent's arch='tiny'
            embed_dims=embed_dims,
            num_layers=6,
            num_heads=3,
            feedforward_channels=embed_dims * 2),
        img_size=img_size,
        patch_size=8,  # 8x8 tokens at 64 px
        drop_path_rate=0.0),
    head=dict(num_classes=num_classes, in_channels=embed_dims),
    # Mixup/CutMix slow down a model trained for minutes: off.
    train_cfg=None)
data_preprocessor = dict(num_classes=num_classes)

# RandAugment and random erasing off for the same reason; crops keep most
# of the image, so the shape that defines the class stays in view.
train_pipeline = [
    dict(type='LoadImageFromFile'),
    dict(
        type='RandomResizedCrop',
        scale=img_size,
        crop_ratio_range=(0.6, 1.0),
        backend='pillow',
        interpolation='bicubic'),
    dict(type='RandomFlip', prob=0.5, direction='horizontal'),
    dict(type='PackInputs'),
]
test_pipeline = [
    dict(type='LoadImageFromFile'),
    dict(
        type='ResizeEdge',
        scale=img_size * 8 // 7,  # DeiT's 0.875 crop ratio
        edge='short',
        backend='pillow',
        interpolation='bicubic'),
    dict(type='CenterCrop', crop_size=img_size),
    dict(type='PackInputs'),
]

train_dataloader = dict(
    batch_size=32,
    num_workers=1,
    persistent_workers=True,
    # One process: repeated augmentation would only repeat images in a
    # batch (and leave 2/3 of the set out of each epoch).
    sampler=dict(_delete_=True, type='DefaultSampler', shuffle=True),
    dataset=dict(data_root=data_root, pipeline=train_pipeline))
val_dataloader = dict(
    batch_size=64,
    num_workers=1,
    persistent_workers=True,
    dataset=dict(data_root=data_root, pipeline=test_pipeline))
test_dataloader = val_dataloader
val_evaluator = dict(type='Accuracy', topk=(1, 5))
test_evaluator = val_evaluator

# 15 epochs of 32 iterations; lr for batch 32 (the parent's is for 1024).
max_epochs = 15
optim_wrapper = dict(optimizer=dict(lr=1e-3, weight_decay=0.05))
param_scheduler = [
    dict(
        type='LinearLR',
        start_factor=1e-2,
        by_epoch=True,
        begin=0,
        end=2,
        convert_to_iter_based=True),
    dict(
        type='CosineAnnealingLR',
        eta_min=1e-5,
        by_epoch=True,
        begin=2,
        end=max_epochs,
        convert_to_iter_based=True)
]
train_cfg = dict(max_epochs=max_epochs, val_interval=max_epochs)
auto_scale_lr = dict(base_batch_size=32)

default_hooks = dict(
    logger=dict(interval=10),
    checkpoint=dict(interval=max_epochs))
randomness = dict(seed=0)
