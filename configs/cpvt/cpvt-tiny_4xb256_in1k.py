# CPVT-Ti: one PEG after encoder 0, class token; 4 GPUs x 256 = 1024 images.
_base_ = [
    '../_base_/models/cpvt-tiny.py',
    '../_base_/datasets/imagenet_bs256_deit_224.py',
    '../_base_/schedules/imagenet_bs1024_adamw_deit.py',
    '../_base_/default_runtime.py',
]
