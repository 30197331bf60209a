"""The instruments of the paper's analysis, on any CPVT-, PVTPEG- or
SwinPEG-like backbone: the token maps each block hands on
(:mod:`.blocks`), the position probe (:mod:`.position_probe`), translation
equivariance (:mod:`.equivariance`) and the attention maps
(:mod:`.attention`). Used by tools/analysis_tools, tools/visualization and
projects/; ``import mmcpvt`` does not import them."""
