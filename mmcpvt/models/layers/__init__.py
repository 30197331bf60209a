from .attention import Attention
from .block import TransformerBlock
from .ffn import FFN
from .peg import ConditionalPositionEncoding
from .pos_embed import (LearnedPositionEmbedding, SinCos2dPositionEmbedding,
                        sincos_2d)

__all__ = [
    'Attention', 'FFN', 'TransformerBlock', 'ConditionalPositionEncoding',
    'LearnedPositionEmbedding', 'SinCos2dPositionEmbedding', 'sincos_2d'
]
