# DeiT-B baseline built from the same backbone: learned absolute position
# table, no PEG, class token; same recipe as the CPVT configs.
_base_ = [
    '../_base_/models/cpvt-base.py',
    '../_base_/datasets/imagenet_bs256_deit_224.py',
    '../_base_/schedules/imagenet_bs1024_adamw_deit.py',
    '../_base_/default_runtime.py',
]

model = dict(backbone=dict(pos_embed='learned', peg_positions=()))

# DeiT-B keeps AdamW (the schedule's default), as DeiT did.
