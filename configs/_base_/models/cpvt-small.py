# CPVT-S (Chu et al., ICLR 2023): DeiT-S with its learned position table
# replaced by one PEG (3x3 depth-wise convolution) after encoder 0, classified
# from the class token. Training-time batch augments are DeiT's.
custom_imports = dict(imports=['mmcpvt'], allow_failed_imports=False)

model = dict(
    type='ImageClassifier',
    backbone=dict(
        type='CPVT',
        arch='small',
        img_size=224,
        patch_size=16,
        peg_positions=(0, ),
        pos_embed='none',
        out_type='cls_token',
        drop_path_rate=0.1),
    # the backbone already returns the pooled (B, C) feature
    neck=None,
    head=dict(
        type='LinearClsHead',
        num_classes=1000,
        in_channels=384,
        loss=dict(
            type='LabelSmoothLoss', label_smooth_val=0.1, mode='original'),
        init_cfg=dict(type='TruncNormal', layer='Linear', std=.02)),
    train_cfg=dict(augments=[
        dict(type='Mixup', alpha=0.8),
        dict(type='CutMix', alpha=1.0)
    ]),
)
