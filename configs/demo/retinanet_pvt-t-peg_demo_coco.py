# `make demo`: the user's configs/retinanet_pvt_tiny_peg_1x_coco.py on the
# generated COCO-layout set (tools/dataset_converters/make_coco.py), small
# enough to train on 2 CPU cores in minutes. Overridden: data root and
# classes (the generated set has the first 4 COCO categories), image scale,
# batch size, schedule, and the backbone's ImageNet checkpoint (none here:
# it starts from the transformer initialisation).
_base_ = '../retinanet_pvt_tiny_peg_1x_coco.py'

data_root = 'data/demo_coco/'
classes = ('person', 'bicycle', 'car', 'motorcycle')
# 192 px images whose objects span 0.16-0.5 of the shorter side
# (demo/demo.py generates them: make_coco.py --size 192 --object-scale
# 0.16 0.5), about 30-100 px: the sizes the anchors cover (32 px and up).
scale = (192, 192)

model = dict(
    backbone=dict(init_cfg=None),
    bbox_head=dict(num_classes=len(classes)))

train_pipeline = [
    dict(type='LoadImageFromFile'),
    dict(type='LoadAnnotations', with_bbox=True),
    dict(type='Resize', scale=scale, keep_ratio=True),
    dict(type='RandomFlip', prob=0.5),
    dict(type='PackDetInputs')
]
test_pipeline = [
    dict(type='LoadImageFromFile'),
    dict(type='Resize', scale=scale, keep_ratio=True),
    dict(type='LoadAnnotations', with_bbox=True),
    dict(
        type='PackDetInputs',
        meta_keys=('img_id', 'img_path', 'ori_shape', 'img_shape',
                   'scale_factor'))
]
# Batches of 2: an image costs the same in a batch of 2 or 4, and twice the
# updates for the same images train the detector further.
train_dataloader = dict(
    batch_size=2,
    num_workers=1,
    persistent_workers=False,
    dataset=dict(
        data_root=data_root,
        metainfo=dict(classes=classes),
        pipeline=train_pipeline))
val_dataloader = dict(
    batch_size=4,
    num_workers=1,
    persistent_workers=False,
    dataset=dict(
        data_root=data_root,
        metainfo=dict(classes=classes),
        pipeline=test_pipeline))
test_dataloader = val_dataloader
val_evaluator = dict(ann_file=data_root + 'annotations/instances_val2017.json')
test_evaluator = val_evaluator

# Schedule: 3 epochs of the 160 training images, 240 iterations (the demo
# trains this model and its learned-PE twin side by side and is meant to
# fit in 15 minutes on 2 CPU cores); AdamW at 2e-4 (twice the 8x2 recipe's
# 1e-4) after a 50-iteration warm-up, cosine decay to 0, gradients clipped
# at norm 35. A fixed seed makes the demo repeatable.
max_epochs = 3
train_cfg = dict(max_epochs=max_epochs, val_interval=max_epochs)
param_scheduler = [
    dict(type='LinearLR', start_factor=0.01, by_epoch=False, begin=0,
         end=50),
    dict(
        type='CosineAnnealingLR',
        eta_min=0,
        by_epoch=True,
        begin=0,
        end=max_epochs,
        convert_to_iter_based=True)
]
randomness = dict(seed=0)
optim_wrapper = dict(
    optimizer=dict(lr=2e-4), clip_grad=dict(max_norm=35, norm_type=2))
default_hooks = dict(
    logger=dict(interval=10),
    checkpoint=dict(interval=max_epochs))
