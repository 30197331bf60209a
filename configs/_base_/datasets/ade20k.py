# mmseg's ADE20K data (ADEChallengeData2016, 512x512 crops), with each label
# map checked against its image as soon as the pair is loaded. Differs from
# mmseg's file only in a mmcpvt.CheckSegMap right after every
# LoadAnnotations: an error names both files and both sizes when a label
# map is not the size of its image (mmseg's transforms resize each on its
# own, and the labels would no longer lie on their pixels), when it is not
# single-channel, or when it holds a label outside the 150 classes other
# than the ignore index 255. See mmcpvt/datasets/transforms.py. A config
# that writes its own pipelines keeps the check by keeping this line.
_base_ = 'mmseg::_base_/datasets/ade20k.py'

crop_size = (512, 512)
check_seg_map = dict(type='mmcpvt.CheckSegMap', num_classes=150)
train_pipeline = [
    dict(type='LoadImageFromFile'),
    dict(type='LoadAnnotations', reduce_zero_label=True),
    check_seg_map,
    dict(
        type='RandomResize',
        scale=(2048, 512),
        ratio_range=(0.5, 2.0),
        keep_ratio=True),
    dict(type='RandomCrop', crop_size=crop_size, cat_max_ratio=0.75),
    dict(type='RandomFlip', prob=0.5),
    dict(type='PhotoMetricDistortion'),
    dict(type='PackSegInputs')
]
test_pipeline = [
    dict(type='LoadImageFromFile'),
    dict(type='Resize', scale=(2048, 512), keep_ratio=True),
    # after Resize, as mmseg's: the ground truth keeps its size
    dict(type='LoadAnnotations', reduce_zero_label=True),
    check_seg_map,
    dict(type='PackSegInputs')
]
img_ratios = [0.5, 0.75, 1.0, 1.25, 1.5, 1.75]
tta_pipeline = [
    dict(type='LoadImageFromFile', backend_args=None),
    dict(
        type='TestTimeAug',
        transforms=[
            [
                dict(type='Resize', scale_factor=r, keep_ratio=True)
                for r in img_ratios
            ],
            [
                dict(type='RandomFlip', prob=0., direction='horizontal'),
                dict(type='RandomFlip', prob=1., direction='horizontal')
            ], [dict(type='LoadAnnotations')], [check_seg_map],
            [dict(type='PackSegInputs')]
        ])
]
train_dataloader = dict(dataset=dict(pipeline=train_pipeline))
val_dataloader = dict(dataset=dict(pipeline=test_pipeline))
test_dataloader = val_dataloader
