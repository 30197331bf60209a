# PVT-Tiny+PEG+GAP: no position tables, a PEG after the first block of each
# stage, average pooling; the PVT recipe (DeiT's), 8 GPUs x 128 = 1024 images.
_base_ = [
    '../_base_/models/pvt-peg-gap-tiny.py',
    '../_base_/datasets/imagenet_bs256_deit_224.py',
    '../_base_/schedules/imagenet_bs1024_adamw_deit.py',
    '../_base_/default_runtime.py',
]

train_dataloader = dict(batch_size=128)
