# The learned-PE twin of cpvt-tiny-gap_demo_imagenet.py, for the demo's
# side-by-side comparison: the same recipe, data and seed, GAP head included;
# only the backbone's position encoding differs. No PEG, and DeiT's learned
# position table (deit-tiny_4xb256_in1k.py), made for the training size and
# resized bicubically to any other input size. It is our CPVT with
# pos_embed='learned' rather than mmpretrain's VisionTransformer, so that the
# patch embedding, attention, blocks and initialisation are the same code as
# the PEG model's.
_base_ = './cpvt-tiny-gap_demo_imagenet.py'

model = dict(backbone=dict(peg_positions=(), pos_embed='learned'))
