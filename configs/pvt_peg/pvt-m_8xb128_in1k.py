# PVT-Medium baseline built from the same backbone: PVT v1's learned position
# table in every stage, no PEG, class token (added in the last stage); same
# recipe as PVT-Medium+PEG+GAP.
_base_ = './pvt-m-peg-gap_8xb128_in1k.py'

model = dict(
    backbone=dict(
        pos_embed='learned',
        peg_positions=((), (), (), ()),
        out_type='cls_token'))
