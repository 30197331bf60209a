"""Instruments that check the paper's claims on any model of ours:
translation equivariance (Sec. 3.2, Appendix A), absolute position through
zero padding (Sec. 3.2, Appendix B.3) and attention maps (Appendix D.3,
Figs. 5-6), and the models they look at, built from configs. The command
lines that run them, and draw their figures and tables, are in
``tools/analysis_tools/`` and ``tools/visualization/``.
"""
from .attention import (AttentionMaps, attention_maps, capture_attention,
                        default_queries, mean_attention_distance)
from .features import (INPUT, BlockInfo, block_features, list_blocks,
                       resolve_block)
from .models import build_model, get_backbone, init_model, load_weights
from .position_probe import position_probe
from .translation_equivariance import translation_equivariance

__all__ = [
    'INPUT', 'BlockInfo', 'list_blocks', 'resolve_block', 'block_features',
    'build_model', 'init_model', 'get_backbone', 'load_weights',
    'position_probe', 'translation_equivariance',
    'AttentionMaps', 'attention_maps', 'capture_attention', 'default_queries',
    'mean_attention_distance'
]
