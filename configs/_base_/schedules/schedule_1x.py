# mmdet's 1x schedule (12 epochs, 500-iteration linear warm-up, lr x0.1
# after epochs 8 and 11, 8 GPUs x 2 images) with the optimizer of PVT's
# setting (Wang et al., ICCV 2021), also used by CPVT: AdamW lr 1e-4 and
# weight decay 1e-4 instead of mmdet's SGD lr 0.02, as in mmdet's own
# configs/pvt/retinanet_pvt-*_fpn_1x_coco.py.
_base_ = 'mmdet::_base_/schedules/schedule_1x.py'

optim_wrapper = dict(
    optimizer=dict(
        _delete_=True, type='AdamW', lr=0.0001, weight_decay=0.0001))
