# PEG without any padding, the paper's "simply removes the zero paddings"
# as the authors did it: the 3x3 convolution after encoder 0 shrinks the
# 14x14 token map to 12x12, the PEG has no skip connection (F(x) alone; the
# first author in Meituan-AutoML/CPVT issue #3: "we just remove the skip
# connection of PEG"), and encoders 1-11 run on the 12x12 map (plus the class
# token). cpvt-tiny-no-zero-pad_4xb256_in1k.py keeps the map size with
# circular padding instead. Paper, tab: padding: 70.5 top-1 (vs 72.4).
_base_ = '../cpvt/cpvt-tiny_4xb256_in1k.py'

model = dict(backbone=dict(peg_cfg=dict(padding=0)))
