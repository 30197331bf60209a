from .attention import Attention
from .block import TransformerBlock
from .ffn import FFN
from .peg import ConditionalPositionEncoding, PEGs
from .pos_embed import LearnedPositionEmbedding, SinCos2dPositionEmbedding
from .rope import ROPE_TYPES, RotaryPositionEmbedding2d, apply_rope
from .rpe import RelativePositionEncoding2d, relative_position_index
from .utils import nchw_to_nlc, nlc_to_nchw

__all__ = [
    'Attention', 'FFN', 'TransformerBlock', 'ConditionalPositionEncoding',
    'PEGs', 'LearnedPositionEmbedding', 'SinCos2dPositionEmbedding',
    'RelativePositionEncoding2d', 'RotaryPositionEmbedding2d', 'ROPE_TYPES',
    'apply_rope', 'relative_position_index', 'nchw_to_nlc',
    'nlc_to_nchw'
]
