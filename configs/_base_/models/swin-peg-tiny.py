# Swin-Tiny+PEG (Chu et al., ICLR 2023, appendix "Classification Evaluation
# of Swin with PEG", which gives the result but not the placement): Swin-T
# (Liu et al., ICCV 2021) with a PEG (3x3 depth-wise convolution) after the
# first block of every stage, position 0 as in PVT+PEG, and its relative
# position bias kept (our choice, see configs/swin_peg/README.md); final
# norm + global average pooling as Swin. Stochastic depth 0.2 and the batch
# augments are Swin-T's.
custom_imports = dict(imports=['mmcpvt'], allow_failed_imports=False)

model = dict(
    type='ImageClassifier',
    backbone=dict(
        type='SwinPEG',
        arch='tiny',
        window_size=7,
        peg_positions=(0, 0, 0, 0),
        out_type='avg_featmap',
        drop_path_rate=0.2),
    # the backbone already returns the pooled (B, 768) feature
    neck=None,
    head=dict(
        type='LinearClsHead',
        num_classes=1000,
        in_channels=768,
        loss=dict(
            type='LabelSmoothLoss', label_smooth_val=0.1, mode='original'),
        init_cfg=dict(type='TruncNormal', layer='Linear', std=.02)),
    train_cfg=dict(augments=[
        dict(type='Mixup', alpha=0.8),
        dict(type='CutMix', alpha=1.0)
    ]),
)
