# CPVT-Ti with a PEG after each of encoders 0-4 (the paper's double-dagger
# model, "0-5" in its position notation).
_base_ = './cpvt-tiny_4xb256_in1k.py'

model = dict(backbone=dict(peg_positions=(0, 1, 2, 3, 4)))
