# Semantic FPN (Kirillov et al., 2019) with a PVT-Tiny+PEG backbone (CPVT,
# Chu et al., ICLR 2023, Table "PVT+PEG"), as PVT's and mmseg's Twins
# Semantic FPN: an FPN over the four stages (strides 4-32) and mmseg's
# FPNHead, 150 ADE20K classes.
norm_cfg = dict(type='SyncBN', requires_grad=True)
data_preprocessor = dict(
    type='SegDataPreProcessor',
    mean=[123.675, 116.28, 103.53],
    std=[58.395, 57.12, 57.375],
    bgr_to_rgb=True,
    pad_val=0,
    seg_pad_val=255,
    size=(512, 512))
model = dict(
    type='EncoderDecoder',
    data_preprocessor=data_preprocessor,
    backbone=dict(
        type='mmcpvt.PVTPEG',
        arch='tiny',
        peg_positions=(0, 0, 0, 0),
        out_type='featmap',
        out_indices=(0, 1, 2, 3),
        drop_path_rate=0.1),
    neck=dict(
        type='FPN',
        in_channels=[64, 128, 320, 512],
        out_channels=256,
        num_outs=4),
    decode_head=dict(
        type='FPNHead',
        in_channels=[256, 256, 256, 256],
        in_index=[0, 1, 2, 3],
        feature_strides=[4, 8, 16, 32],
        channels=128,
        dropout_ratio=0.1,
        num_classes=150,
        norm_cfg=norm_cfg,
        align_corners=False,
        loss_decode=dict(
            type='CrossEntropyLoss', use_sigmoid=False, loss_weight=1.0)),
    # model training and testing settings
    train_cfg=dict(),
    test_cfg=dict(mode='whole'))
