# PVT-Large+PEG+GAP: the tiny model's design at PVT-Large's depths, with
# stochastic depth 0.3 as PVT-Large (PVT's configs/pvt/pvt_large.py). The
# paper trains no large model; the authors release it as Twins-PCPVT-L
# (docs/model_zoo.md, "Weights").
_base_ = './pvt-peg-gap-tiny.py'

model = dict(backbone=dict(arch='large', drop_path_rate=0.3))
