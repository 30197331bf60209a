# RetinaNet with a PVT-Tiny+PEG backbone (CPVT, Chu et al., ICLR 2023,
# Table "PVT+PEG"): PVT v1 without its learned position tables, a PEG after
# the first block of every stage. mmdet's retinanet_r50_fpn with the ResNet
# replaced, as in mmdet's configs/pvt: the FPN takes PVT's four stages
# (64/128/320/512 channels, strides 4-32) and starts at stride 8, as in PVT.
_base_ = 'mmdet::_base_/models/retinanet_r50_fpn.py'
custom_imports = dict(imports=['mmcpvt'], allow_failed_imports=False)

model = dict(
    backbone=dict(
        _delete_=True,
        type='mmcpvt.PVTPEG',
        arch='tiny',
        peg_positions=(0, 0, 0, 0),
        out_type='featmap',
        out_indices=(0, 1, 2, 3),
        drop_path_rate=0.1),
    neck=dict(in_channels=[64, 128, 320, 512]))
