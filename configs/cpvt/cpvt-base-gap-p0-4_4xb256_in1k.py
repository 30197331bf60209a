# CPVT-B-GAP (double dagger): PEGs after encoders 0-4, no class token, global
# average pooling of the patch tokens before the classifier.
_base_ = './cpvt-base-p0-4_4xb256_in1k.py'

model = dict(backbone=dict(out_type='avg_featmap'))
