# PVT-Small+PEG+GAP (Chu et al., ICLR 2023, Sec. 4.6): the tiny model's
# design at PVT-Small's depths.
_base_ = './pvt-peg-gap-tiny.py'

model = dict(backbone=dict(arch='small'))
