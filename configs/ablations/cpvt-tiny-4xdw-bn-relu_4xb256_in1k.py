# PEG = 4 x (depth-wise 3x3 conv + BN + ReLU) at position 0.
# Paper, tab:ablation_peg_form: 72.4 top-1.
_base_ = '../cpvt/cpvt-tiny_4xb256_in1k.py'

model = dict(
    backbone=dict(
        peg_cfg=dict(
            num_layers=4, norm_cfg=dict(type='BN'),
            act_cfg=dict(type='ReLU'))))
