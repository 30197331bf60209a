# mmpretrain's ImageNet-1k data of the Swin / DeiT recipe (Liu et al., 2021;
# Touvron et al., 2021): RandAugment 9/0.5, random erasing 0.25; Mixup 0.8
# and CutMix 1.0 are batch augments of the model (`train_cfg` in
# _base_/models). 64 images per GPU (16 GPUs x 64 = 1024, as mmpretrain's
# swin configs). Differs from mmpretrain's file only in loading: 8 worker
# processes per GPU instead of 5, kept alive between epochs.
#
# Expected layout (mmpretrain's ImageNet, split='train' / 'val'):
#   data/imagenet/train/<class>/*.JPEG   data/imagenet/meta/train.txt
#   data/imagenet/val/...                data/imagenet/meta/val.txt
# Without meta/*.txt the class sub-folders of train/ and val/ are used.
_base_ = 'mmpretrain::_base_/datasets/imagenet_bs64_swin_224.py'

train_dataloader = dict(num_workers=8, persistent_workers=True)
val_dataloader = dict(num_workers=8, persistent_workers=True)
# ImageNet-1k has no labelled test split: test on the validation set.
test_dataloader = val_dataloader
