"""Intervals of evaluation figures: the paired bootstrap over training runs
and test images, with Student's t over the runs (:mod:`.bootstrap`), of the
demo and the digit reproduction. ``import
mmcpvt`` does not import it."""
