# PVT-Medium+PEG+GAP (Chu et al., ICLR 2023, Sec. 4.6): the tiny model's
# design at PVT-Medium's depths, with stochastic depth 0.3 as PVT-Medium
# (PVT's configs/pvt/pvt_medium.py).
_base_ = './pvt-peg-gap-tiny.py'

model = dict(backbone=dict(arch='medium', drop_path_rate=0.3))
