"""Intervals of evaluation figures: the two-level paired bootstrap
(:mod:`.bootstrap`) of the demo and the digit reproduction. ``import
mmcpvt`` does not import it."""
