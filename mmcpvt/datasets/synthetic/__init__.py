"""Small generated data sets in the on-disk layouts of COCO 2017
(:mod:`.coco`), ADE20K (:mod:`.ade20k`) and ImageNet-1k (:mod:`.imagenet`):
what the demo trains on and the tests run the tools on; their command
lines are tools/dataset_converters/make_*.py. ``import mmcpvt`` does not
import them."""
