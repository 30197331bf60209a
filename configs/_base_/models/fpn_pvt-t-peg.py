# Semantic FPN (Kirillov et al., 2019) with a PVT-Tiny+PEG backbone (CPVT,
# Chu et al., ICLR 2023, Table "PVT+PEG"), as PVT's and mmseg's Twins
# Semantic FPN: mmseg's fpn_r50 with the ResNet replaced (and no ResNet
# `pretrained`), the FPN over PVT's four stages (64/128/320/512 channels,
# strides 4-32), 150 ADE20K classes and 512x512 padding of the inputs.
_base_ = 'mmseg::_base_/models/fpn_r50.py'
custom_imports = dict(imports=['mmcpvt'], allow_failed_imports=False)

data_preprocessor = dict(size=(512, 512))
model = dict(
    data_preprocessor=data_preprocessor,
    pretrained=None,
    backbone=dict(
        _delete_=True,
        type='mmcpvt.PVTPEG',
        arch='tiny',
        peg_positions=(0, 0, 0, 0),
        out_type='featmap',
        out_indices=(0, 1, 2, 3),
        drop_path_rate=0.1),
    neck=dict(in_channels=[64, 128, 320, 512]),
    decode_head=dict(num_classes=150))
