# Semantic FPN, ADE20K, 80k iterations, from the authors' released ImageNet-1k
# Twins-PCPVT-S weights, which are PVT-S+PEG+GAP (docs/model_zoo.md,
# "Weights": where they are published and the command that converts them).
# The Twins paper's segmentation setting (mmseg's
# twins_pcpvt-s_fpn_fpnhead_8xb4-80k_ade20k-512x512.py, after Twins'
# segmentation configs): PVT's Semantic FPN recipe, as in
# fpn_pvt-s-peg_4xb4-80k_ade20k-512x512.py, with drop path 0.2. The paper's
# PVT-S+PEG+GAP: 44.3 mIoU.
_base_ = './fpn_pvt-s-peg_4xb4-80k_ade20k-512x512.py'
model = dict(
    backbone=dict(
        drop_path_rate=0.2,
        init_cfg=dict(checkpoint='checkpoints/twins-pcpvt-s_in1k.pth')))
