# Beyond the paper: CPVT-Ti (one PEG after encoder 0, class token) with
# RoPE-Mixed (Heo et al., ECCV 2024: 2-D rotary embeddings of the queries and
# keys, frequencies learned per encoder and head; timm's, `pip install
# "mmcpvt[rope]"`). No published weights; docs/reproduction.md, "Beyond the
# paper", compares the two on digits. 4 GPUs x 256 = 1024 images.
_base_ = ['./cpvt-tiny_4xb256_in1k.py']

model = dict(backbone=dict(rope_cfg=dict(type='mixed')))
# the frequencies are not decayed (as timm's RotaryEmbeddingMixed asks)
optim_wrapper = dict(
    paramwise_cfg=dict(custom_keys={'.rope.': dict(decay_mult=0.0)}))
