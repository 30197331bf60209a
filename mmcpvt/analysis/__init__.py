"""Instruments that check the paper's claims on any model of ours:
translation equivariance (Sec. 3.2, Appendix A), absolute position through
zero padding (Sec. 3.2, Appendix B.3) and attention maps (Appendix D.3,
Figs. 5-6).

The command lines are in ``tools/analysis_tools/`` and
``tools/visualization/``; this package holds what they (and scripts) call.
"""
from .attention import (AttentionMaps, attention_maps, capture_attention,
                        default_queries, save_matrix_png, save_query_overlay)
from .features import (INPUT, BlockInfo, block_features, build_model,
                       dataset_images, get_backbone, image_from_file,
                       list_blocks, load_weights, random_images,
                       resolve_block)
from .position_probe import position_probe
from .translation_equivariance import translation_equivariance

__all__ = [
    'INPUT', 'BlockInfo', 'list_blocks', 'resolve_block', 'block_features',
    'build_model', 'get_backbone', 'load_weights', 'random_images',
    'dataset_images', 'image_from_file', 'position_probe',
    'translation_equivariance', 'AttentionMaps', 'attention_maps',
    'capture_attention', 'default_queries', 'save_matrix_png',
    'save_query_overlay'
]
