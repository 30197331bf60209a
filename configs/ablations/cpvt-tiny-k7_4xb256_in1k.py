# One 7x7 depth-wise convolution as the PEG (position 0).
# Paper, tab:ablation_peg_form: 72.5 top-1.
_base_ = '../cpvt/cpvt-tiny_4xb256_in1k.py'

model = dict(backbone=dict(peg_cfg=dict(kernel_size=7)))
