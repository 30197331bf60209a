# The 3x3 PEG is initialised from a trained CPVT-Ti and kept fixed while
# the rest of the model is trained from scratch.
# Paper, tab: learnable_not, "fixed (learned init)": 72.3 top-1.
# Train configs/cpvt/cpvt-tiny_4xb256_in1k.py first, or point `checkpoint`
# at your own CPVT-Ti checkpoint (only its 'backbone.pegs.0.' entries are
# read).
_base_ = '../cpvt/cpvt-tiny_4xb256_in1k.py'

model = dict(
    backbone=dict(
        peg_cfg=dict(
            frozen=True,
            init_cfg=dict(
                type='Pretrained',
                checkpoint='work_dirs/cpvt-tiny_4xb256_in1k/epoch_300.pth',
                prefix='backbone.pegs.0.'))))
