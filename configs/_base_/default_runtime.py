# mmpretrain's runtime (default scope 'mmpretrain'), keeping only the latest
# three of the per-epoch checkpoints: a 300-epoch run would otherwise write
# 300. mmcpvt's modules are found through the root registry once
# `custom_imports` (in the model configs) has run.
_base_ = 'mmpretrain::_base_/default_runtime.py'

default_hooks = dict(checkpoint=dict(max_keep_ckpts=3))
