"""translation_equivariance against cases whose answer is known (paper,
Appendix A): no position encoding and no zero padding is exactly
equivariant, a learned table is not, a zero-padded PEG breaks it only at
the border."""
import pytest
import torch

import mmcpvt.analysis.equivariance as te
from mmcpvt.analysis.blocks import INPUT
from mmcpvt.analysis.equivariance import region_masks, shift
from tests.test_analysis.helpers import PVT_ARCH, build, images

EXACT = 1e-5


def errors(model, mode='circular', shifts=(1, 3), **kwargs):
    results = te.translation_equivariance(model, images(3), shifts, mode,
                                          **kwargs)
    return {r['block']: r for r in results}


@pytest.mark.parametrize('kwargs, exact', [
    (dict(pos_embed='none', out_type='avg_featmap'), True),
    (dict(pos_embed='none', out_type='cls_token'), True),
    # a circularly padded PEG gives no position cue either
    (dict(pos_embed='none', peg_positions=(-1, 0, 1),
          peg_cfg=dict(padding_mode='circular', kernel_size=5)), True),
    (dict(pos_embed='learned'), False),
])
def test_exactly_equivariant_without_absolute_position(kwargs, exact):
    res = errors(build(**dict(dict(peg_positions=()), **kwargs)))
    assert list(res) == [INPUT, 0, 1, 2]
    for r in res.values():
        for region in ('interior', 'border', 'all'):
            assert (r[region] < EXACT) if exact else (r[region] > 1e-2), (
                r['name'], region, r[region])
        assert set(r['per_shift']) == {1, 3} and not r['skipped']


def test_zero_padded_peg_breaks_only_the_border():
    # the PEG before the first block: its output is the input of block 0
    peg = build(peg_positions=(-1, ), pos_embed='none')
    res = errors(peg)
    assert res[INPUT]['interior'] < EXACT
    assert res[INPUT]['border'] > 1e-2
    # a PEG after block 0: block 0 is exact, its PEG breaks the border
    res = errors(build(peg_positions=(0, ), pos_embed='none'))
    assert res[INPUT]['all'] < EXACT
    assert res[0]['interior'] < EXACT and res[0]['border'] > 1e-2
    # global attention then spreads the border's difference everywhere
    assert res[1]['interior'] > 1e-4
    # 'zero' mode: the seam next to the shifted-in zeros and the edges are
    # border; the interior is exact
    res = errors(peg, mode='zero')
    assert res[INPUT]['interior'] < EXACT
    assert res[INPUT]['border'] > 1e-2
    n = res[INPUT]['per_shift'][3]
    # 8x8 map moved 3: 5x5 valid, of which rows/cols 4..6 are interior
    assert (n['n_interior'], n['n_border']) == (3 * 3 * 3, 3 * (25 - 9))


@pytest.mark.parametrize('mode', ['circular', 'zero'])
def test_peg_without_padding_is_equivariant_where_it_did_not_wrap(mode):
    # no zero padding, no position cue (the paper's "no padding" PEG): the
    # shrunk map is exact wherever its content came from the image unwrapped
    model = build(peg_positions=(-1, ), pos_embed='none',
                  peg_cfg=dict(padding=0))
    res = errors(model, mode)
    assert res[INPUT]['grid'] == [6, 6] and res[INPUT]['shrunk']
    assert res[INPUT]['all'] < EXACT
    assert res[INPUT]['per_shift'][3]['n_interior'] == 3 * 1 * 1


def test_shift_and_masks_by_hand():
    x = torch.arange(16.).reshape(1, 4, 4)
    assert torch.equal(shift(x, 1, 0, 'circular')[0, 0], x[0, 3])
    z = shift(x, 1, -1, 'zero')[0]
    assert torch.equal(z[0], torch.zeros(4))
    assert torch.equal(z[1:, :3], x[0, :3, 1:])
    assert torch.equal(z[:, 3], torch.zeros(4))
    m = region_masks((6, 6), 2, 0, 'zero', border=1)
    # valid rows 2..5; border: rows 2 (seam), 5 (edge), columns 0 and 5
    assert m['all'][:2].sum() == 0 and m['all'][2:].all()
    assert m['interior'].nonzero()[:, 0].unique().tolist() == [3, 4]
    assert m['interior'].nonzero()[:, 1].unique().tolist() == [1, 2, 3, 4]
    c = region_masks((6, 6), 2, 2, 'circular', border=1)
    # the edges in either frame: rows/cols 0, 1 (seam), 2 (seam), 5
    assert c['interior'].sum() == 2 * 2 and c['all'].all()
    with pytest.raises(ValueError, match="unknown shift mode 'wrap'"):
        shift(x, 1, 1, 'wrap')


def test_hierarchical_shifts_that_are_no_whole_token_are_skipped():
    model = build('PVTPEG', arch=PVT_ARCH, peg_positions=((), (), (), ()),
                  drop_path_rate=0.)
    res = errors(model, shifts=(1, 8), blocks=[INPUT, 0, 1, 3, 4])
    assert list(res) == [INPUT, 0, 1, 3, 4]
    assert res[0]['skipped'] == [] and res[1]['skipped'] == [1]
    assert res[4]['skipped'] == [1]
    assert res[4]['per_shift'][8]['tokens'] == 1
    # no position encoding, no PEG, input a multiple of every stride:
    # PVT's spatial reduction (8x8 windows at stage 0, 4x4 at stage 1, ...)
    # is equivariant only for shifts of whole reduction windows
    for r in res.values():
        assert r['per_shift'][8]['all'] < EXACT, r['name']
    assert res[0]['per_shift'][1]['all'] > 1e-4
