# ImageNet-1k with the Swin training recipe (Liu et al., 2021): DeiT's
# pipeline (RandAugment 9/0.5, random erasing 0.25; Mixup 0.8 and CutMix 1.0
# are batch augments of the model) but no repeated augmentation; 64 images
# per GPU (16 GPUs x 64 = 1024, as mmpretrain's swin configs).
_base_ = './imagenet_bs256_deit_224.py'

train_dataloader = dict(
    batch_size=64,
    sampler=dict(_delete_=True, type='DefaultSampler', shuffle=True))
val_dataloader = dict(batch_size=64)
test_dataloader = val_dataloader
