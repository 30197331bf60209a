# Baseline: Semantic FPN + PVT-Tiny (mmdet's PyramidVisionTransformer with
# learned position tables; mmseg has no PVT v1), ADE20K, 80k
# (PVT paper / CPVT: 35.7 mIoU). Only the backbone differs from
# fpn_pvt-t-peg_4xb4-80k_ade20k-512x512.py.
_base_ = [
    '../_base_/models/fpn_pvt-t-peg.py',
    '../_base_/datasets/ade20k.py',
    'mmseg::_base_/default_runtime.py',
    '../_base_/schedules/schedule_80k.py',
]
# mmdet registers the backbone; 'mmdet.' finds it from mmseg's scope.
custom_imports = dict(
    imports=['mmcpvt', 'mmdet.models'], allow_failed_imports=False)
model = dict(
    backbone=dict(
        _delete_=True,
        type='mmdet.PyramidVisionTransformer',
        num_layers=[2, 2, 2, 2],
        init_cfg=dict(
            type='Pretrained',
            checkpoint='https://github.com/whai362/PVT/'
            'releases/download/v2/pvt_tiny.pth')))
