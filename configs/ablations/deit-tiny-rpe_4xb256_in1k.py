# DeiT-Ti with a 2-D relative position encoding (Shaw et al.) in every
# encoder instead of the learned table, no PEG: in each encoder, relative key
# embeddings chosen by the key - query offset (dy, dx), each axis clipped to
# [-8, 8] (the paper's K = 8), plus one for pairs with the class token.
# Paper, tab: compare_encoding, "2D RPE": 70.5 top-1.
_base_ = '../cpvt/deit-tiny_4xb256_in1k.py'

model = dict(backbone=dict(pos_embed='none', rpe_cfg=dict(clip_distance=8)))

# no weight decay on the relative tables, as on DeiT's position table
optim_wrapper = dict(
    paramwise_cfg=dict(
        custom_keys={'.relative_key_table': dict(decay_mult=0.0)}))
