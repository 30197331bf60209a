# Baseline: Semantic FPN + PVT-Medium (mmdet's backbone), ADE20K, 80k
# (41.6 mIoU).
_base_ = './fpn_pvt-t_4xb4-80k_ade20k-512x512.py'
model = dict(
    backbone=dict(
        num_layers=[3, 4, 18, 3],
        init_cfg=dict(checkpoint='https://github.com/whai362/PVT/'
                      'releases/download/v2/pvt_medium.pth')))
