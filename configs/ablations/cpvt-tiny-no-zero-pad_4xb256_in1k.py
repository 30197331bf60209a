# PEG without zero padding. The paper removes the zero padding; we keep
# the token count with circular padding instead, which fills the border from
# the opposite side of the map, so the convolution still sees (k-1)/2 cells
# past the border but no constant value that marks it: border tokens get no
# absolute-position cue, which is the point of the ablation. The literal
# removal (no padding, a smaller map) is cpvt-tiny-no-pad_4xb256_in1k.py.
# Paper, tab: padding: 70.5 top-1 (vs 72.4 with zero padding).
_base_ = '../cpvt/cpvt-tiny_4xb256_in1k.py'

model = dict(backbone=dict(peg_cfg=dict(padding_mode='circular')))
