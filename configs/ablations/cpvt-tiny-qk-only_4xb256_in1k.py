# PEG after encoder 0, but its encoding F(x) is added only to the query and
# key inputs of encoder 1, not to the token stream (values see no PEG).
# Paper, Sec. 5.1 ("PEG mainly serves as a positional encoding"): 71.3 top-1.
_base_ = '../cpvt/cpvt-tiny_4xb256_in1k.py'

model = dict(backbone=dict(type='CPVTQKOnly'))
