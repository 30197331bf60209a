# Swin-T+PEG: a PEG after the first block of each stage, Swin's relative
# position bias kept; the Swin recipe, 16 GPUs x 64 = 1024 images.
_base_ = [
    '../_base_/models/swin-peg-tiny.py',
    '../_base_/datasets/imagenet_bs64_swin_224.py',
    '../_base_/schedules/imagenet_bs1024_adamw_swin.py',
    '../_base_/default_runtime.py',
]
