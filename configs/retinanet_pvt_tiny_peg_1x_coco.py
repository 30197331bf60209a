# RetinaNet + PVT-Tiny+PEG, 1x schedule, COCO: the entry point. The full
# config is configs/pvt_peg/retinanet_pvt-t-peg_fpn_1x_coco.py (see
# configs/pvt_peg/README.md for data and the ImageNet-pretrained backbone).
#   python tools/train.py configs/retinanet_pvt_tiny_peg_1x_coco.py
_base_ = './pvt_peg/retinanet_pvt-t-peg_fpn_1x_coco.py'
