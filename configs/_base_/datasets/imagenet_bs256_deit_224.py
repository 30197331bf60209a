# ImageNet-1k with the DeiT training recipe (Touvron et al., 2021), which CPVT
# follows unchanged (paper, appendix "The Hyperparameters of CPVT"):
# RandAugment 9/0.5, random erasing 0.25, repeated augmentation; Mixup 0.8 and
# CutMix 1.0 are batch augments of the model (`train_cfg` in _base_/models).
#
# Expected layout (mmpretrain's ImageNet, split='train' / 'val'):
#   data/imagenet/train/<class>/*.JPEG   data/imagenet/meta/train.txt
#   data/imagenet/val/...                data/imagenet/meta/val.txt
# Without meta/*.txt the class sub-folders of train/ and val/ are used.
dataset_type = 'ImageNet'
data_root = 'data/imagenet'

data_preprocessor = dict(
    num_classes=1000,
    # RGB format normalization parameters
    mean=[123.675, 116.28, 103.53],
    std=[58.395, 57.12, 57.375],
    # convert image from BGR to RGB
    to_rgb=True,
)

bgr_mean = data_preprocessor['mean'][::-1]
bgr_std = data_preprocessor['std'][::-1]

train_pipeline = [
    dict(type='LoadImageFromFile'),
    dict(
        type='RandomResizedCrop',
        scale=224,
        backend='pillow',
        interpolation='bicubic'),
    dict(type='RandomFlip', prob=0.5, direction='horizontal'),
    dict(
        type='RandAugment',
        policies='timm_increasing',
        num_policies=2,
        total_level=10,
        magnitude_level=9,
        magnitude_std=0.5,
        hparams=dict(
            pad_val=[round(x) for x in bgr_mean], interpolation='bicubic')),
    dict(
        type='RandomErasing',
        erase_prob=0.25,
        mode='rand',
        min_area_ratio=0.02,
        max_area_ratio=1 / 3,
        fill_color=bgr_mean,
        fill_std=bgr_std),
    dict(type='PackInputs'),
]

test_pipeline = [
    dict(type='LoadImageFromFile'),
    # 256 = 224 / 0.875, DeiT's evaluation crop ratio.
    dict(
        type='ResizeEdge',
        scale=256,
        edge='short',
        backend='pillow',
        interpolation='bicubic'),
    dict(type='CenterCrop', crop_size=224),
    dict(type='PackInputs'),
]

train_dataloader = dict(
    batch_size=256,
    num_workers=8,
    persistent_workers=True,
    dataset=dict(
        type=dataset_type,
        data_root=data_root,
        split='train',
        pipeline=train_pipeline),
    # Repeated augmentation (Hoffer et al., 2020), 3 repeats as in DeiT.
    sampler=dict(type='RepeatAugSampler', shuffle=True, num_repeats=3),
)

val_dataloader = dict(
    batch_size=256,
    num_workers=8,
    persistent_workers=True,
    dataset=dict(
        type=dataset_type,
        data_root=data_root,
        split='val',
        pipeline=test_pipeline),
    sampler=dict(type='DefaultSampler', shuffle=False),
)
val_evaluator = dict(type='Accuracy', topk=(1, 5))

# ImageNet-1k has no labelled test split: test on the validation set.
test_dataloader = val_dataloader
test_evaluator = val_evaluator
