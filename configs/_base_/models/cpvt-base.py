# CPVT-B (Chu et al., ICLR 2023): CPVT-Ti's model at DeiT-B's size.
_base_ = './cpvt-tiny.py'

model = dict(backbone=dict(arch='base'), head=dict(in_channels=768))
