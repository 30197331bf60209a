# No local relation, more parameters: a dense 1x1 convolution (with the
# identity branch) after each of the 12 encoders replaces the 3x3 PEG.
# Paper, tab: learnable_not, "1 (12x)": 6.13M parameters, 68.6 top-1, barely
# above no position encoding (68.2): the PEG's gain is not its parameters.
_base_ = '../cpvt/cpvt-tiny_4xb256_in1k.py'

model = dict(
    backbone=dict(
        peg_positions=tuple(range(12)),
        peg_cfg=dict(kernel_size=1, depthwise=False)))
