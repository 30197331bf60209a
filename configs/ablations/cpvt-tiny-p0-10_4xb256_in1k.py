# A PEG after each of encoders 0-10: the paper's "0-11" (it writes i-j for
# encoders i to j-1). Paper, tab: ablation_Number_of_Plug-in: 73.4 top-1,
# the same as 0-5 (configs/cpvt/cpvt-tiny-p0-4_4xb256_in1k.py).
_base_ = '../cpvt/cpvt-tiny_4xb256_in1k.py'

model = dict(backbone=dict(peg_positions=tuple(range(11))))
