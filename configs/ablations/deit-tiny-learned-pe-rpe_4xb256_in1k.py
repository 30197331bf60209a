# DeiT-Ti's learned position table (LE) at the start plus a 2-D relative
# position encoding (Shaw et al., K = 8) in every encoder, no PEG: "CPE is
# not a simple combination of APE and RPE". Paper, tab:APE_RPE_combine:
# 72.4 top-1 at 224 (65.6 / 70.8 / 68.4 / 65.6 at 160 / 384 / 448 / 512).
_base_ = '../cpvt/deit-tiny_4xb256_in1k.py'

model = dict(backbone=dict(rpe_cfg=dict(clip_distance=8)))

# no weight decay on the relative tables, as on DeiT's position table
optim_wrapper = dict(
    paramwise_cfg=dict(
        custom_keys={'.relative_key_table': dict(decay_mult=0.0)}))
