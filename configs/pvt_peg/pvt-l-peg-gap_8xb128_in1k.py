# PVT-Large+PEG+GAP (= the authors' Twins-PCPVT-L): no position tables, a PEG
# after the first block of each stage, average pooling; the PVT recipe
# (DeiT's), 8 GPUs x 128 = 1024 images. Test the released weights with
#   python tools/test.py configs/pvt_peg/pvt-l-peg-gap_8xb128_in1k.py \
#       checkpoints/twins-pcpvt-l_in1k.pth
_base_ = [
    '../_base_/models/pvt-peg-gap-large.py',
    '../_base_/datasets/imagenet_bs256_deit_224.py',
    '../_base_/schedules/imagenet_bs1024_adamw_deit.py',
    '../_base_/default_runtime.py',
]

train_dataloader = dict(batch_size=128)
# PVT-Large clips the gradient norm at 1.0 (PVT's configs/pvt/pvt_large.py)
optim_wrapper = dict(clip_grad=dict(max_norm=1.0))
