# RetinaNet + Swin-Tiny+PEG(+GAP-pretrained), 1x schedule, COCO. The paper
# reports Swin-T+PEG on ImageNet only (82.25% vs 81.10%); this config has no
# published number. Optimizer: Swin's own dense-task recipe (AdamW lr 1e-4,
# weight decay 0.05, no decay on norms and the relative position bias), see
# README.md. As mmdet's Swin RetinaNet, the FPN takes stages 1-3 (strides
# 8-32) so that no output norm is left unused.
_base_ = [
    '../_base_/models/retinanet_pvt-t-peg_fpn.py',
    '../_base_/datasets/coco_detection.py',
    '../_base_/schedules/schedule_1x.py',
    '../_base_/default_runtime_mmdet.py',
]
model = dict(
    backbone=dict(
        _delete_=True,
        type='mmcpvt.SwinPEG',
        arch='tiny',
        window_size=7,
        peg_positions=(0, 0, 0, 0),
        out_type='featmap',
        out_indices=(1, 2, 3),
        drop_path_rate=0.2,
        init_cfg=dict(
            type='Pretrained',
            checkpoint='checkpoints/swin-t-peg-gap_in1k.pth',
            prefix='backbone.')),
    neck=dict(in_channels=[192, 384, 768], start_level=0, num_outs=5))

optim_wrapper = dict(
    optimizer=dict(type='AdamW', lr=0.0001, weight_decay=0.05),
    paramwise_cfg=dict(
        norm_decay_mult=0.,
        custom_keys={'relative_position_bias_table': dict(decay_mult=0.)}))
