# The learned-PE twin of retinanet_pvt-t-peg_demo_coco.py, for the demo's
# side-by-side comparison: the same recipe, data and seed; only the
# backbone's position encoding differs. No PEG, and PVT's learned position
# table per stage, made for the training size and resized bilinearly to any
# other input size, as PVT's _get_pos_embed does. It is our PVTPEG with
# pos_embed='learned' rather than mmdet's PyramidVisionTransformer, so that
# patch embeddings, attention, blocks and initialisation are the same code
# as the PEG model's.
_base_ = './retinanet_pvt-t-peg_demo_coco.py'

model = dict(
    backbone=dict(
        peg_positions=((), (), (), ()),
        pos_embed='learned',
        img_size={{_base_.scale}}))
