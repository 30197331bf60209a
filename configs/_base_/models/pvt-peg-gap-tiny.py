# PVT-Tiny+PEG+GAP (Chu et al., ICLR 2023, Sec. 4.6): PVT v1 (Wang et al.,
# ICCV 2021) with its learned per-stage position tables removed, a PEG (3x3
# depth-wise convolution) after the first block of every stage, and global
# average pooling of the normed last stage instead of the class token.
# Training-time batch augments are DeiT's, as in PVT.
custom_imports = dict(imports=['mmcpvt'], allow_failed_imports=False)

model = dict(
    type='ImageClassifier',
    backbone=dict(
        type='PVTPEG',
        arch='tiny',
        img_size=224,
        peg_positions=(0, 0, 0, 0),
        pos_embed='none',
        out_type='avg_featmap',
        drop_path_rate=0.1),
    # the backbone already returns the pooled (B, 512) feature
    neck=None,
    head=dict(
        type='LinearClsHead',
        num_classes=1000,
        in_channels=512,
        loss=dict(
            type='LabelSmoothLoss', label_smooth_val=0.1, mode='original'),
        init_cfg=dict(type='TruncNormal', layer='Linear', std=.02)),
    train_cfg=dict(augments=[
        dict(type='Mixup', alpha=0.8),
        dict(type='CutMix', alpha=1.0)
    ]),
)
