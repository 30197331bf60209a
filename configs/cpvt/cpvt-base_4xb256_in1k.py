# CPVT-B: one PEG after encoder 0, class token; 4 GPUs x 256 = 1024 images.
_base_ = [
    '../_base_/models/cpvt-base.py',
    '../_base_/datasets/imagenet_bs256_deit_224.py',
    '../_base_/schedules/imagenet_bs1024_adamw_deit.py',
    '../_base_/default_runtime.py',
]

# CPVT-B is trained with LAMB instead of AdamW (paper, appendix: AdamW is not
# always stable for the base model); same lr formula and weight decay.
# Note: mmpretrain's Lamb, like timm's, rescales the global gradient norm to
# at most 1.0 inside the optimizer (`max_grad_norm`, left at its default);
# no other gradient clipping is used.
optim_wrapper = dict(
    optimizer=dict(
        _delete_=True,
        type='Lamb',
        lr=5e-4 * 1024 / 512,
        weight_decay=0.05,
        eps=1e-8,
        betas=(0.9, 0.999)))
