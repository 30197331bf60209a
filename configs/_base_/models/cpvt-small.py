# CPVT-S (Chu et al., ICLR 2023): CPVT-Ti's model at DeiT-S's size.
_base_ = './cpvt-tiny.py'

model = dict(backbone=dict(arch='small'), head=dict(in_channels=384))
