# The 3x3 PEG keeps its random initialisation and is never trained: what
# it adds can only be position information, not capacity.
# Paper, tab: learnable_not, "fixed (random init)": 71.3 top-1.
_base_ = '../cpvt/cpvt-tiny_4xb256_in1k.py'

model = dict(backbone=dict(peg_cfg=dict(frozen=True)))
