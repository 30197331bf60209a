# PVT-Large+PEG+GAP (= the authors' Twins-PCPVT-L): PVT-Medium+PEG+GAP's recipe
# (stochastic depth 0.3, gradient norm clipped at 1.0, as PVT's
# configs/pvt/pvt_large.py) at PVT-Large's depths. The paper trains no large
# model; test the authors' weights (docs/model_zoo.md, "Weights") with
#   python tools/test.py configs/pvt_peg/pvt-l-peg-gap_8xb128_in1k.py \
#       checkpoints/twins-pcpvt-l_in1k.pth
_base_ = './pvt-m-peg-gap_8xb128_in1k.py'

model = dict(backbone=dict(arch='large'))
