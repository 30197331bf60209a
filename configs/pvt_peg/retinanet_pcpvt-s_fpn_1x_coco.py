# RetinaNet 1x on COCO from the authors' released ImageNet-1k Twins-PCPVT-S
# weights, which are PVT-S+PEG+GAP (docs/model_zoo.md, "Weights": where they
# are published and the command that converts them). The Twins paper's
# detection setting (Twins' detection/configs/
# retinanet_pcpvt_s_fpn_1x_coco_pvt_setting.py): PVT's 1x recipe, as in
# retinanet_pvt-s-peg_fpn_1x_coco.py, with drop path 0.2. One difference
# is kept: PVTPEG normalises its last map (the norm is in the checkpoint),
# Twins' detection backbone leaves it out. The paper's PVT-S+PEG+GAP: 43.0 mAP.
_base_ = './retinanet_pvt-s-peg_fpn_1x_coco.py'
model = dict(
    backbone=dict(
        drop_path_rate=0.2,
        init_cfg=dict(checkpoint='checkpoints/twins-pcpvt-s_in1k.pth')))
