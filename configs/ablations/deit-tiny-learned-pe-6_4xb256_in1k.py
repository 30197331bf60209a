# DeiT-Ti with a learned position table (LE) not only at the start but also
# after each of encoders 0-4 ("in the next 5 layers"), six tables in all, no
# PEG: the LE counterpart of the PEG 0-5 model (73.4).
# Paper, Sec. "Comparisons with other positional encodings": 72.7 top-1.
_base_ = '../cpvt/deit-tiny_4xb256_in1k.py'

model = dict(backbone=dict(pos_embed_positions=(-1, 0, 1, 2, 3, 4)))
