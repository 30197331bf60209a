# ImageNet-1k with the DeiT training recipe (Touvron et al., 2021), which CPVT
# follows unchanged (paper, appendix "The Hyperparameters of CPVT"): the Swin
# data of ./imagenet_bs64_swin_224.py (DeiT's pipeline) plus DeiT's repeated
# augmentation (Hoffer et al., 2020; 3 repeats), which mmpretrain's DeiT
# configs leave out; 256 images per GPU (4 GPUs x 256 = 1024).
_base_ = './imagenet_bs64_swin_224.py'

train_dataloader = dict(
    batch_size=256,
    sampler=dict(type='RepeatAugSampler', shuffle=True, num_repeats=3))
val_dataloader = dict(batch_size=256)
test_dataloader = val_dataloader
