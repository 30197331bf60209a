# Swin-T baseline built from the same backbone: no PEG; same recipe as
# Swin-T+PEG.
_base_ = './swin-t-peg_16xb64_in1k.py'

model = dict(backbone=dict(peg_positions=((), (), (), ())))
