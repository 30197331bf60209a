"""Bad input to the backbones and the PEG. Where a user plausibly errs and
torch would stay silent or mislead, the constructor refuses it in one line
that names the argument, the value and what is allowed; where torch or
Python already name the problem, theirs is the message, and these tests
show it is reached. Inputs that can work (tiny images, an empty batch) do."""
import pytest
import torch

from mmcpvt.models.backbones import CPVT, PVTPEG, CPVTQKOnly, SwinPEG
from mmcpvt.models.layers import ConditionalPositionEncoding as PEG

CPVT_T = dict(arch=dict(embed_dims=32, num_layers=3, num_heads=2,
                        feedforward_channels=64))
PVT_T = dict(arch=dict(embed_dims=[8, 16, 24, 32], num_heads=[1, 2, 3, 4],
                       mlp_ratios=[2, 2, 2, 2], depths=[1, 2, 1, 1],
                       sr_ratios=[8, 4, 2, 1]))
SWIN_T = dict(arch=dict(embed_dims=8, depths=[2, 2, 2, 2],
                        num_heads=[1, 2, 2, 4]))
# class, tiny arguments and the number of stages (encoders)
TINY = {
    'CPVT': (CPVT, CPVT_T, 3),
    'CPVTQKOnly': (CPVTQKOnly, CPVT_T, 3),
    'PVTPEG': (PVTPEG, PVT_T, 4),
    'SwinPEG': (SwinPEG, SWIN_T, 4),
}
# the stride of the token map the last PEG sees (the patch size of CPVT)
LAST_STRIDE = {'CPVT': 16, 'CPVTQKOnly': 16, 'PVTPEG': 32, 'SwinPEG': 32}


def build(name, **kwargs):
    cls, cfg, _ = TINY[name]
    return cls(**{**cfg, **kwargs})


def ids(cases):
    """'CPVT-peg_positions=True': a case's backbone and arguments."""
    return [f'{n}-{",".join(f"{k}={v!r}" for k, v in kw.items())}'[:60]
            for n, kw, *_ in cases]


def ceil_div(a, b):
    return -(-a // b)


def expected_shapes(name, B, h, w):
    """Output shapes of the tiny models for an h x w input: every
    embedding, merging and window pads at the bottom/right, so the stage i
    map is ceil(h / 2**(i+2)) high."""
    if name in ('CPVT', 'CPVTQKOnly'):
        return [(B, 32)]  # the class token
    dims = [8, 16, 24, 32] if name == 'PVTPEG' else [8, 16, 32, 64]
    return [(B, d, ceil_div(h, 4 * 2**i), ceil_div(w, 4 * 2**i))
            for i, d in enumerate(dims)]


@pytest.mark.parametrize('h, w', [(1, 1), (8, 8), (16, 16), (24, 24),
                                  (31, 31), (31, 33), (97, 1001), (333, 517)])
@pytest.mark.parametrize('name', TINY)
def test_any_input_size_gives_ceil_stride_maps(name, h, w):
    """PVTPEG failed inside its spatial-reduction convolution under 32 px
    (`get_flops.py --shape 16`); every backbone now takes any size down to
    1x1, with the maps that the bottom/right padding gives."""
    model = build(name).eval()
    with torch.no_grad():
        outs = model(torch.randn(1, 3, h, w))
    assert [tuple(o.shape) for o in outs] == expected_shapes(name, 1, h, w)
    assert all(torch.isfinite(o).all() for o in outs)


@pytest.mark.parametrize('name', TINY)
def test_a_peg_that_needs_a_larger_map_is_refused_by_torch(name):
    """Reflect padding wider than the map: torch's padding names the
    padding and the map; the smallest size that gives a 4x4 map works."""
    model = build(name, peg_cfg=dict(kernel_size=7,
                                     padding_mode='reflect')).eval()
    smallest = 3 * LAST_STRIDE[name] + 1
    with pytest.raises(RuntimeError, match=r'Padding size should be less '
                       r'than the corresponding input dimension, but got: '
                       r'padding \(3, 3\)'):
        model(torch.randn(1, 3, 32, smallest - 1))
    with torch.no_grad():
        outs = model(torch.randn(1, 3, smallest, smallest))
    assert [tuple(o.shape)
            for o in outs] == expected_shapes(name, 1, smallest, smallest)


@pytest.mark.parametrize('mode', ['eval', 'train'])
@pytest.mark.parametrize('name', TINY)
def test_an_empty_batch_gives_empty_outputs(name, mode):
    """B = 0 gives outputs of B = 0 and the right shapes, as torch layers
    do (it was "cannot reshape tensor of 0 elements")."""
    model = build(name, drop_path_rate=0.1)
    model.train(mode == 'train')
    outs = model(torch.randn(0, 3, 45, 61))
    assert [tuple(o.shape) for o in outs] == [
        (0, *s[1:]) for s in (tuple(o.shape)
                              for o in model(torch.randn(1, 3, 45, 61)))
    ]
    if mode == 'train':
        sum(o.sum() for o in outs).backward()


# Refused when built, in our words: each would otherwise run without a word
# or fail later with a message about something else.
REFUSED = [
    # positions are ints (True would build a PEG under the key 'True' that
    # never runs), each once ((0, 0) built one PEG)
    ('CPVT', dict(peg_positions=True),
     r'peg_positions must be an int or a sequence of ints, got \(True,\)'),
    ('CPVT', dict(peg_positions=0.5),
     r'peg_positions must be an int or a sequence of ints, got 0\.5'),
    ('CPVT', dict(peg_positions=None), r'peg_positions must be .* got None'),
    ('CPVT', dict(peg_positions=(4, )), r'from -1 to 2, got \(4,\)'),
    ('CPVT', dict(peg_positions=(0, 0)),
     r'peg_positions must be distinct ints .* got \(0, 0\)'),
    ('PVTPEG', dict(peg_positions=(True, 0, 0, 0)),
     r'peg_positions\[0\] must be an int or a sequence of ints, got '
     r'\(True,\)'),
    ('PVTPEG', dict(peg_positions=((), (1, 1), (), ())),
     r'peg_positions\[1\] must be distinct ints from -1 to 1, got \(1, 1\)'),
    ('SwinPEG', dict(peg_positions=(0, 0, 0)),
     r'peg_positions needs an entry per stage, got \(0, 0, 0\)'),
    ('PVTPEG', dict(peg_positions=(0, 0)), 'an entry per stage'),
    ('SwinPEG', dict(peg_positions=(0, 0, 0, 2)),
     r'peg_positions\[3\] must be distinct ints from -1 to 1, got \(2,\)'),
    # a PEG after the last encoder of CPVTQKOnly would feed nothing
    ('CPVTQKOnly', dict(peg_positions=(2, )), r'peg_positions must not '
     r'hold 2: a PEG after the last encoder has no next encoder to feed'),
    ('CPVT', dict(pos_embed='learned', pos_embed_positions=(-1, 1, 1)),
     r'pos_embed_positions must be .* got \(-1, 1, 1\)'),
    # no table would be added
    ('CPVT', dict(pos_embed_positions=(0, )),
     r'pos_embed_positions=\(0,\) needs a pos_embed'),
    ('CPVT', dict(pos_embed='learned', pos_embed_positions=()),
     r"pos_embed='learned' needs pos_embed_positions"),
    # the first patch token, or a token of a reduced map, taken for a class
    # token
    ('CPVT', dict(out_type='cls_token', with_cls_token=False),
     r"out_type='cls_token' needs with_cls_token=True \(or None\)"),
    ('PVTPEG', dict(out_type='cls_token',
                    arch=dict(PVT_T['arch'], sr_ratios=[8, 4, 2, 2])),
     r"out_type='cls_token' needs arch sr_ratios 1 in the last stage"),
    # out indices: each once ((1, 1) gave one map, not two), in range
    ('PVTPEG', dict(out_indices=(1, 1)),
     r'out_indices must be distinct ints from -4 to 3, got \(1, 1\)'),
    ('CPVT', dict(out_type='featmap', out_indices=(2, -1)),
     r'out_indices must be distinct ints from -3 to 2, got \(2, -1\)'),
    ('CPVT', dict(out_indices=(0, 0.5)), r'got \(0, 0\.5\)'),
    ('SwinPEG', dict(out_indices=()), r'got \(\)'),
    # a division by zero, later
    ('SwinPEG', dict(window_size=0),
     r'window_size must be an int >= 1, got 0'),
    ('CPVT', dict(patch_size=0), r'patch_size must be an int >= 1, got 0'),
    # frozen_stages above the depth froze everything, below -1 nothing
    ('CPVT', dict(frozen_stages=4),
     r'frozen_stages must be from -1 to 3, got 4'),
    ('PVTPEG', dict(frozen_stages=5), r'from -1 to 4, got 5'),
    ('SwinPEG', dict(frozen_stages=-2), r'from -1 to 4, got -2'),
    # a negative rate turned stochastic depth off, 1 gave NaN
    ('CPVT', dict(drop_path_rate=-0.5),
     r'drop_path_rate must be in \[0, 1\), got -0\.5'),
    ('SwinPEG', dict(drop_path_rate=1.0), r'got 1\.0'),
    # an even kernel grows the map by one: torch then names a size mismatch
    ('CPVT', dict(peg_cfg=dict(kernel_size=4)),
     r'PEG kernel_size must be a positive odd int, got 4'),
    ('SwinPEG', dict(peg_cfg=dict(kernel_size=-3)), r'got -3'),
    ('CPVT', dict(peg_cfg=dict(padding=2)),
     r'PEG padding must be from 0 to 1, got 2'),
    ('PVTPEG', dict(peg_cfg=dict(padding=-1)), r'got -1'),
    # a PEG that changes the map size in a backbone that needs it fixed
    ('SwinPEG', dict(peg_cfg=dict(stride=2)),
     r"SwinPEG needs PEGs that keep the map size, got peg_cfg="
     r"\{'stride': 2\}"),
    ('PVTPEG', dict(peg_cfg=dict(kernel_size=5, padding=1)),
     r"PVTPEG needs PEGs that keep the map size, got peg_cfg="
     r"\{'kernel_size': 5, 'padding': 1\}"),
    # F(x) of a smaller map cannot be added to the unchanged tokens
    ('CPVTQKOnly', dict(peg_cfg=dict(padding=0)),
     'CPVTQKOnly needs PEGs that keep the map size'),
    # choices: the last branch would be taken for anything else
    ('CPVT', dict(out_type='gap'),
     r"out_type must be one of \('cls_token', 'avg_featmap', 'featmap'\), "
     r"got 'gap'"),
    ('PVTPEG', dict(out_type='cls'), r"out_type must be .* got 'cls'"),
    ('SwinPEG', dict(out_type='cls_token'),
     r"out_type must be 'featmap' or 'avg_featmap', got 'cls_token'"),
    ('CPVT', dict(pos_embed='relative'),
     r"pos_embed must be one of \('none', 'learned', 'sincos2d'\), got "
     r"'relative'"),
    ('PVTPEG', dict(pos_embed='sincos2d'),
     r"pos_embed must be 'none' or 'learned', got 'sincos2d'"),
    # arch: a name of the zoo, or a dict of exactly its keys (an unread key
    # such as SwinPEG's window_size ran with the default)
    ('CPVT', dict(arch='huge'), r"arch 'huge' is not in \['b', 'base'"),
    ('PVTPEG', dict(arch=dict(embed_dims=[8, 16, 24, 32])),
     r"arch needs the keys \['depths', 'embed_dims', 'mlp_ratios', "
     r"'num_heads', 'sr_ratios'\], got"),
    ('SwinPEG', dict(arch=dict(SWIN_T['arch'], window_size=4)),
     r"arch needs the keys \['depths', 'embed_dims', 'num_heads'\], got "
     r".*'window_size': 4"),
    ('CPVT', dict(arch=dict(CPVT_T['arch'], patch_size=8)),
     r"got .*'patch_size': 8"),
    ('PVTPEG', dict(arch=dict(PVT_T['arch'], embed_dim=[8, 16, 24, 32])),
     r"got .*'embed_dim'"),
]


@pytest.mark.parametrize('name, kwargs, match', REFUSED, ids=ids(REFUSED))
def test_silent_or_misleading_arguments_are_refused_when_built(
        name, kwargs, match):
    """In one line, a ValueError (a TypeError for a value of another type),
    as torch's and mmengine's are."""
    with pytest.raises((ValueError, TypeError), match=match) as e:
        build(name, **kwargs)
    assert '\n' not in str(e.value)


# Arguments that torch or Python refuse, naming the problem themselves.
SPOKEN = [
    ('CPVT', dict(peg_cfg=dict(padding_mode='mirror')), ValueError,
     r"padding_mode must be one of .*, but got padding_mode='mirror'"),
    ('PVTPEG', dict(peg_cfg=dict(kernal_size=5)), TypeError,
     "unexpected keyword argument 'kernal_size'"),
    ('CPVT', dict(peg_cfg=dict(embed_dims=64)), TypeError,
     "got multiple values for argument 'embed_dims'"),
    ('CPVT', dict(peg_cfg=3), TypeError,
     'argument after \\*\\* must be a mapping, not int'),
    ('CPVT', dict(rpe_cfg=dict(clip=8)), TypeError,
     "unexpected keyword argument 'clip'"),
    ('PVTPEG', dict(drop_rate=1.5), ValueError,
     'dropout probability has to be between 0 and 1, but got 1.5'),
    # torch 2.14: '... must be tuple of ints, but found element of type
    # float'; 2.11: '... expected one of: * (tuple of ints size, ...'
    ('CPVT', dict(arch=dict(CPVT_T['arch'], embed_dims=32.0)), TypeError,
     'tuple of ints'),
]


@pytest.mark.parametrize('name, kwargs, error, match', SPOKEN,
                         ids=ids(SPOKEN))
def test_arguments_that_torch_or_python_refuse(name, kwargs, error, match):
    with pytest.raises(error, match=match):
        build(name, **kwargs)


@pytest.mark.parametrize('name', ['CPVT', 'PVTPEG', 'SwinPEG'])
def test_frozen_stages_at_the_depth_freezes_everything(name):
    """The top of the allowed range, the number of stages (encoders),
    freezes every parameter; -1 none."""
    _, _, num = TINY[name]
    model = build(name, frozen_stages=num).train()
    assert not [n for n, p in model.named_parameters() if p.requires_grad]
    model = build(name, frozen_stages=-1).train()
    assert all(p.requires_grad for p in model.parameters())


BAD_INPUTS = [
    # ours: mmcv's patch embedding would end in an IndexError
    ('no batch dimension', torch.randn(3, 64, 64), ValueError,
     r'x must be \(B, C, H, W\), got \(3, 64, 64\)'),
    ('5-D tensor', torch.randn(1, 1, 3, 64, 64), ValueError,
     r'got \(1, 1, 3, 64, 64\)'),
    # torch's
    ('gray image', torch.randn(2, 1, 64, 64), RuntimeError,
     r'expected input\[2, 1, 64, 64\] to have 3 channels, but got 1 '
     r'channels instead'),
    ('uint8 image', torch.zeros(1, 3, 64, 64, dtype=torch.uint8),
     RuntimeError, r'Input type \(unsigned char\) and bias type \(float\) '
     r'should be the same'),
    ('double', torch.randn(1, 3, 64, 64, dtype=torch.float64), RuntimeError,
     r'Input type \(double\) and bias type \(float\) should be the same'),
    ('half', torch.randn(1, 3, 64, 64, dtype=torch.float16), RuntimeError,
     r'Input type \(c10::Half\) and bias type \(float\)'),
    ('a list', [torch.randn(3, 64, 64)], AttributeError,
     "'list' object has no attribute 'dim'"),
    ('no pixels', torch.randn(1, 3, 0, 64), RuntimeError,
     r"Calculated padded input size per channel: \(0 x 64\)\. Kernel size: "
     r"\(\d+ x \d+\)\. Kernel size can't be greater than actual input size"),
]


@pytest.mark.parametrize('what, x, error, match', BAD_INPUTS,
                         ids=[b[0] for b in BAD_INPUTS])
@pytest.mark.parametrize('name', ['CPVT', 'PVTPEG', 'SwinPEG'])
def test_bad_inputs_are_refused(name, what, x, error, match):
    with pytest.raises(error, match=match):
        build(name).eval()(x)


@pytest.mark.parametrize('name', ['CPVT', 'PVTPEG', 'SwinPEG'])
def test_another_dtype_works_as_torch_says(name):
    """What torch's dtype message offers works: the model in the input's
    dtype, or the input under autocast."""
    model = build(name).eval()
    with torch.no_grad():
        assert model.double()(torch.randn(1, 3, 32, 32).double())
        with torch.autocast('cpu', dtype=torch.bfloat16):
            assert model.float()(torch.randn(1, 3, 32, 32).bfloat16())


# The PEG on its own: torch names what does not fit.
@pytest.mark.parametrize('x, hw_shape, kwargs, error, match', [
    (torch.randn(2, 10, 4), (3, 3), {}, RuntimeError,
     r"shape '\[2, 3, 3, 4\]' is invalid for input of size 80"),
    (torch.randn(2, 9, 4), (3, 3), dict(num_extra_tokens=1), RuntimeError,
     r"shape '\[2, 3, 3, 4\]' is invalid for input of size 64"),
    (torch.randn(2, 9, 4), (3, 3), dict(kernel_size=7,
                                        padding_mode='reflect'),
     RuntimeError, r'Padding size should be less than the corresponding '
     r'input dimension'),
    (torch.randn(2, 4, 4), (2, 2), dict(kernel_size=7,
                                        padding_mode='circular'),
     RuntimeError, 'Padding value causes wrapping around more than once'),
    (torch.randn(1, 10, 4), (2, 5), dict(padding=0), RuntimeError,
     r"Kernel size: \(3 x 3\)\. Kernel size can't be greater than actual "
     r"input size"),
    (torch.randn(2, 9, 5), (3, 3), {}, RuntimeError,
     r'expected input\[2, 5, 3, 3\] to have 4 channels, but got 5'),
    (torch.randn(2, 9, 4, 1), (3, 3), {}, ValueError,
     r'too many values to unpack \(expected 3\)'),
], ids=['surplus token', 'missing class token', 'reflect map too small',
        'circular map too small', 'unpadded map too small', 'channels',
        '4-D tokens'])
def test_peg_inputs_it_cannot_take_are_refused_by_torch(
        x, hw_shape, kwargs, error, match):
    """The surplus of tokens over H*W was taken for class tokens; the PEG
    knows how many it has (num_extra_tokens), so the map does not fit."""
    with pytest.raises(error, match=match):
        PEG(4, 4, **kwargs)(x, hw_shape)


def test_cpvt_takes_norm_eval_for_a_peg_with_batch_norm():
    """norm_eval is one of the shared arguments (docs/get_started.md); CPVT
    refused it as an unknown keyword, though its PEGs may hold BN."""
    model = build('CPVT', norm_eval=True,
                  peg_cfg=dict(norm_cfg=dict(type='BN'))).train()
    bns = [m for m in model.modules() if isinstance(m, torch.nn.BatchNorm2d)]
    assert bns and not any(m.training for m in bns)
    assert model.layers[0].training


def test_the_checks_hold_under_python_O():
    """``python -O`` removes asserts, not these checks."""
    import subprocess
    import sys
    code = ('from mmcpvt.models.backbones import CPVT\n'
            'CPVT(drop_path_rate=1.5)')
    proc = subprocess.run([sys.executable, '-O', '-c', code],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 1, proc.stderr
    assert proc.stderr.strip().splitlines()[-1] == (
        'ValueError: drop_path_rate must be in [0, 1), got 1.5')


def test_attention_past_its_limit_is_refused_and_the_limit_lifts(
        monkeypatch):
    """The query-key pairs a head attends over (here 16 tokens of 64 px and
    the class token: 17 x 17) against Attention.max_pairs."""
    from mmcpvt.models.layers import Attention
    x = torch.randn(1, 3, 64, 64)
    monkeypatch.setattr(Attention, 'max_pairs', 17 * 17 - 1)
    with pytest.raises(ValueError, match=r'attention of 17 tokens over 17 '
                       r'keys \(2.9e\+02 pairs a head\) is past '
                       r'Attention.max_pairs \(2.9e\+02\)'):
        build('CPVT')(x)
    monkeypatch.setattr(Attention, 'max_pairs', None)
    build('CPVT')(x)
