"""The position probe against known answers: a large random position
table gives position away, no position encoding on random images does
not."""
import math

import pytest
import torch

from mmcpvt.analysis.blocks import block_features
from mmcpvt.analysis.equivariance import region_masks
from mmcpvt.analysis.position_probe import position_probe
from tests.test_analysis.helpers import build, images
from tests.utils import load_script

probe = load_script('tools/analysis_tools/position_probe.py')


@pytest.mark.parametrize('pos_embed, blocks', [('learned', [-1, 0]),
                                               ('none', [-1, 2])])
def test_finds_position_where_it_is_encoded(pos_embed, blocks):
    model = build(peg_positions=(), pos_embed=pos_embed, img_size=32)
    if pos_embed == 'learned':
        with torch.no_grad():  # position outweighs the noise images' content
            model.pos_embed.pos_embed.normal_(0, 3.)
    feats = block_features(model, images(16, size=32), blocks=blocks)
    for maps in feats.values():  # 4x4 tokens of 32 channels
        s = position_probe(maps)['all']
        if pos_embed == 'learned':
            assert s['r2'] > 0.9 and s['mae'] < 0.3, s
        else:  # about the mean guess (1.0)
            assert s['r2'] < 0.2 and s['mae'] > 0.7, s


def test_exact_on_linear_features_and_regions():
    # channels 0 and 1 are (2 * row, -col): a perfect fit everywhere
    H, W = 5, 6
    rows, cols = torch.meshgrid(torch.arange(H.__float__()),
                                torch.arange(W.__float__()), indexing='ij')
    maps = torch.stack((2 * rows, -cols, torch.ones(H, W)))
    maps = maps[None].repeat(4, 1, 1, 1) + 1e-3 * torch.randn(4, 3, H, W)
    scores = position_probe(maps, border=1, alpha=1e-6)
    for region in ('all', 'interior', 'border'):
        assert scores[region]['r2'] > 0.999
        assert scores[region]['mae'] < 0.01
    assert scores['interior']['tokens'] == 2 * 3 * 4
    assert scores['border']['tokens'] == 2 * (30 - 12)
    assert region_masks((5, 6), 0, 0, 'zero', 2)['border'].sum() == 30 - 2
    table = probe.format_table([dict(name='block 0', grid=[H, W], **scores)])
    assert 'block 0' in table and '1.000' in table
    # an empty interior gives NaN, not an error
    small = position_probe(torch.randn(2, 3, 2, 2), border=1)
    assert small['interior']['tokens'] == 0
    assert math.isnan(small['interior']['r2'])
    with pytest.raises(ValueError, match='at least 2 images'):
        position_probe(torch.randn(1, 3, 4, 4))
    for alpha in (0, -1, float('nan')):
        with pytest.raises(ValueError, match='alpha .* must be > 0'):
            position_probe(maps, alpha=alpha)
