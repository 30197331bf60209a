# mmdet's COCO 2017 detection data, checked as it loads. Differs from
# mmdet's file only in the data set type: mmcpvt.CheckedCocoDataset is
# mmdet's CocoDataset (the same data list and filter_cfg) that stops with an
# error naming the annotation file when it cannot be used (no 'images', no
# annotations in a training file, metainfo classes that are not its
# categories, keys mmdet reads missing) and warns, per reason, about the
# annotations mmdet drops without a word (box outside its image, negative
# width or height, unknown category_id). See mmcpvt/datasets/coco.py.
_base_ = 'mmdet::_base_/datasets/coco_detection.py'

dataset_type = 'mmcpvt.CheckedCocoDataset'
train_dataloader = dict(dataset=dict(type=dataset_type))
val_dataloader = dict(dataset=dict(type=dataset_type))
test_dataloader = val_dataloader
