"""Bad input to the backbones and the PEG gives one clear, early error
(issue 12): arguments are refused when the model is built, naming what was
given and what is allowed; inputs are refused by ``forward`` before any
layer runs. Inputs that can work (tiny images, an empty batch) do."""
import re

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
# class, tiny arguments, what frozen_stages counts, and how many
TINY = {
    'CPVT': (CPVT, CPVT_T, 'encoders', 3),
    'CPVTQKOnly': (CPVTQKOnly, CPVT_T, 'encoders', 3),
    'PVTPEG': (PVTPEG, PVT_T, 'stages', 4),
    'SwinPEG': (SwinPEG, SWIN_T, 'stages', 4),
}
# the stride of the token map the last PEG sees (the patch size of CPVT)
LAST_STRIDE = {'CPVT': 16, 'CPVTQKOnly': 16, 'PVTPEG': 32, 'SwinPEG': 32}


def build(name, **kwargs):
    cls, cfg, _, _ = TINY[name]
    return cls(**{**cfg, **kwargs})


def ceil_div(a, b):
    return -(-a // b)


def expected_shapes(name, B, size):
    """Output shapes of the tiny models for a size x size input: every
    embedding, merging and window pads at the bottom/right."""
    if name in ('CPVT', 'CPVTQKOnly'):
        return [(B, 32)]  # the class token
    if name == 'PVTPEG':
        return [(B, d, ceil_div(size, 4 * 2**i), ceil_div(size, 4 * 2**i))
                for i, d in enumerate([8, 16, 24, 32])]
    side, shapes = ceil_div(size, 4), []
    for i in range(4):
        shapes.append((B, 8 * 2**i, side, side))
        side = ceil_div(side, 2)
    return shapes


# -- case 1: inputs smaller than the network's stride ----------------------


@pytest.mark.parametrize('size', [1, 8, 16, 24, 31])
@pytest.mark.parametrize('name', TINY)
def test_inputs_smaller_than_the_stride_work(name, size):
    """PVTPEG failed inside its spatial-reduction convolution under 32 px
    (`get_flops.py --shape 16`); every backbone now takes any size down to
    1x1, with the maps that the bottom/right padding gives."""
    model = build(name).eval()
    assert model.min_input_size == 1
    with torch.no_grad():
        outs = model(torch.randn(1, 3, size, size))
    assert [tuple(o.shape) for o in outs] == expected_shapes(name, 1, size)
    assert all(torch.isfinite(o).all() for o in outs)


@pytest.mark.parametrize('name', TINY)
def test_a_peg_that_needs_a_larger_map_names_the_smallest_input(name):
    """Where a PEG cannot take a small map (reflect padding wider than the
    map), every backbone refuses the input with the same error, naming the
    smallest size, and takes that size."""
    model = build(name, peg_cfg=dict(kernel_size=7,
                                     padding_mode='reflect')).eval()
    # reflect padding 3 needs a 4x4 map at the last PEG
    smallest = 3 * LAST_STRIDE[name] + 1
    assert model.min_input_size == smallest
    with pytest.raises(
            ValueError,
            match=rf"{name}: a 32x{smallest - 1} input is too small: "
            rf"pegs\.[0-9.]+ \(kernel_size=7, padding=3, padding_mode="
            rf"'reflect', num_layers=1\) needs a token map of at least 4x4, "
            rf"which inputs of {smallest}x{smallest} px or more give; use "
            rf"larger inputs, or change kernel_size, padding or padding_mode "
            rf"in model.backbone.peg_cfg"):
        model(torch.randn(1, 3, 32, smallest - 1))
    with torch.no_grad():
        outs = model(torch.randn(1, 3, smallest, smallest))
    assert [tuple(o.shape)
            for o in outs] == expected_shapes(name, 1, smallest)


# -- case 3: an empty batch ------------------------------------------------


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


# -- cases 2, 4 and 5: arguments, refused when the model is built ----------

BAD_ARGUMENTS = [
    # case 2: positions and indices are ints, and a bool is not one here
    ('CPVT', dict(peg_positions=True), TypeError,
     r"CPVT: peg_positions must be block indices from -1 \(before the first "
     r"block\) to 2 \(after the last\): an int or a sequence of ints, each "
     r"once, got True \(a bool\); change model.backbone.peg_positions"),
    ('CPVT', dict(peg_positions='0'), TypeError, r"got '0' \(a str\)"),
    ('CPVT', dict(peg_positions=None), TypeError, r'got None'),
    ('CPVT', dict(peg_positions=1.0), TypeError, r'got 1\.0 \(a float\)'),
    ('CPVT', dict(peg_positions=(0, True)), TypeError,
     r'got \(0, True\), which holds True \(a bool\)'),
    ('PVTPEG', dict(peg_positions=(True, 0, 0, 0)), TypeError,
     r'PVTPEG: peg_positions of stage 0 must be block indices .* got True '
     r'\(a bool\)'),
    ('SwinPEG', dict(peg_positions=(0, 0, 0, 1.0)), TypeError,
     r'SwinPEG: peg_positions of stage 3 must .* got 1\.0 \(a float\)'),
    ('SwinPEG', dict(peg_positions=True), ValueError,
     r'SwinPEG: peg_positions needs one entry per stage \(4\), got True '
     r'\(a bool\)'),
    ('CPVT', dict(pos_embed='learned', pos_embed_positions=(-1, True)),
     TypeError, r'CPVT: pos_embed_positions must be .* which holds True'),
    ('PVTPEG', dict(out_indices=True), TypeError,
     r'PVTPEG: out_indices must be one or more indices of the 4 stages from '
     r'-4 to 3 \(negative from the end\): an int or a sequence of ints, '
     r'each once, got True \(a bool\)'),
    ('CPVT', dict(out_indices=(0, 0.5)), TypeError,
     r'CPVT: out_indices must .* got \(0, 0\.5\)'),
    ('SwinPEG', dict(out_indices=()), ValueError,
     r'SwinPEG: out_indices must be one or more indices of the 4 stages from '
     r'-4 to 3 .*, got \(\)'),
    ('PVTPEG', dict(frozen_stages=True), TypeError,
     r'PVTPEG: frozen_stages must be an int from -1 to 4, got True '
     r'\(a bool\)'),
    ('SwinPEG', dict(frozen_stages=1.0), TypeError,
     r'frozen_stages must be an int from -1 to 4, got 1\.0 \(a float\)'),
    # case 4: frozen_stages above the depth, the same range everywhere
    ('CPVT', dict(frozen_stages=4), ValueError,
     r'CPVT: frozen_stages must be an int from -1 to 3, got 4; change '
     r'model.backbone.frozen_stages'),
    ('PVTPEG', dict(frozen_stages=5), ValueError,
     r'PVTPEG: frozen_stages must be an int from -1 to 4, got 5'),
    ('SwinPEG', dict(frozen_stages=5), ValueError,
     r'SwinPEG: frozen_stages must be an int from -1 to 4, got 5'),
    ('CPVT', dict(frozen_stages=-2), ValueError,
     r'frozen_stages must be an int from -1 to 3, got -2'),
    # case 5: the PEG's arguments (peg_cfg)
    ('CPVT', dict(peg_cfg=dict(kernel_size=3.0)), TypeError,
     r'PEG: kernel_size must be an odd int >= 1, got 3\.0 \(a float\); '
     r'change model.backbone.peg_cfg.kernel_size'),
    ('PVTPEG', dict(peg_cfg=dict(kernel_size=4)), ValueError,
     r'PEG: kernel_size must be an odd int >= 1, got 4'),
    ('SwinPEG', dict(peg_cfg=dict(kernel_size=0)), ValueError,
     r'PEG: kernel_size must be an odd int >= 1, got 0'),
    ('CPVT', dict(peg_cfg=dict(kernel_size=-3)), ValueError,
     r'PEG: kernel_size must be an odd int >= 1, got -3'),
    ('CPVT', dict(peg_cfg=dict(padding_mode='mirror')), ValueError,
     r"PEG: padding_mode must be one of \('zeros', 'reflect', 'replicate', "
     r"'circular'\), got 'mirror'"),
    ('PVTPEG', dict(peg_cfg=dict(kernal_size=5)), ValueError,
     r"PVTPEG: peg_cfg has unknown key\(s\) \['kernal_size'\]; "
     r"ConditionalPositionEncoding takes \['kernel_size', 'depthwise'"),
    ('CPVT', dict(peg_cfg=dict(embed_dims=64)), ValueError,
     r"CPVT: peg_cfg sets \['embed_dims'\], which the backbone sets itself; "
     r"remove them \(it takes \['kernel_size'"),
    ('SwinPEG', dict(peg_cfg=dict(stride=2)), ValueError,
     r"SwinPEG: peg_cfg sets \['stride'\], which the backbone sets itself"),
    ('CPVT', dict(peg_cfg=dict(depthwise='no')), TypeError,
     r"PEG: depthwise must be True or False, got 'no' \(a str\)"),
    ('CPVT', dict(peg_cfg=3), TypeError,
     r'CPVT: peg_cfg must be a dict of ConditionalPositionEncoding '
     r'arguments or None, got 3'),
    ('CPVT', dict(rpe_cfg=dict(clip=8)), ValueError,
     r"CPVT: rpe_cfg has unknown key\(s\) \['clip'\]; "
     r"RelativePositionEncoding2d takes \['clip_distance'\]"),
    # case 5: rates are probabilities in [0, 1)
    ('CPVT', dict(drop_path_rate=-0.5), ValueError,
     r'CPVT: drop_path_rate must be a number in \[0, 1\) \(a probability; 0 '
     r'turns it off\), got -0\.5; change model.backbone.drop_path_rate'),
    ('SwinPEG', dict(drop_path_rate=1.0), ValueError,
     r'drop_path_rate must be a number in \[0, 1\).*got 1\.0'),
    ('PVTPEG', dict(drop_rate=1.5), ValueError,
     r'PVTPEG: drop_rate must be a number in \[0, 1\).*got 1\.5'),
    ('SwinPEG', dict(attn_drop_rate=-0.1), ValueError,
     r'SwinPEG: attn_drop_rate must be a number in \[0, 1\).*got -0\.1'),
    ('CPVT', dict(attn_drop_rate='0.1'), TypeError,
     r"CPVT: attn_drop_rate must be a number in \[0, 1\) .*, got '0\.1' "
     r"\(a str\)"),
    # case 5: arch, channels, sizes and switches
    ('CPVT', dict(arch='huge'), ValueError,
     r"CPVT: arch must be one of \['b', 'base', .*\] or a dict with keys "
     r"\['embed_dims', .*\], got 'huge'; change model.backbone.arch"),
    ('PVTPEG', dict(arch=dict(embed_dims=[8, 16, 24, 32])), ValueError,
     r"PVTPEG: arch lacks the keys \['depths', "
     r"'mlp_ratios', 'num_heads', 'sr_ratios'\]"),
    ('CPVT', dict(arch=dict(CPVT_T['arch'], embed_dims=32.0)), TypeError,
     r'CPVT: arch embed_dims must be an int >= 1, got 32\.0 \(a float\); '
     r'change model.backbone.arch'),
    ('SwinPEG', dict(arch=dict(SWIN_T['arch'], depths=[2, 0, 2, 2])),
     ValueError, r'SwinPEG: arch depths\[1\] must be an int >= 1, got 0'),
    ('PVTPEG', dict(in_channels=0), ValueError,
     r'PVTPEG: in_channels must be an int >= 1, got 0; change '
     r'model.backbone.in_channels'),
    ('SwinPEG', dict(window_size=7.0), TypeError,
     r'SwinPEG: window_size must be an int >= 1, got 7\.0 \(a float\)'),
    ('PVTPEG', dict(patch_sizes=(4, 2, 2, 0)), ValueError,
     r'PVTPEG: patch_sizes\[3\] must be an int >= 1, got 0'),
    ('CPVT', dict(img_size=(224, 224, 3)), TypeError,
     r'CPVT: img_size must be an int or an \(H, W\) pair of ints >= 1, got '
     r'\(224, 224, 3\)'),
    ('CPVT', dict(with_cp='False'), TypeError,
     r"CPVT: with_cp must be True or False, got 'False' \(a str\)"),
]


@pytest.mark.parametrize(
    'name, kwargs, error, match', BAD_ARGUMENTS,
    ids=[f'{n}-{",".join(f"{k}={v!r}" for k, v in kw.items())}'[:60]
         for n, kw, _, _ in BAD_ARGUMENTS])
def test_bad_arguments_are_refused_when_built(name, kwargs, error, match):
    with pytest.raises(error, match=match):
        build(name, **kwargs)


@pytest.mark.parametrize('name', ['CPVT', 'PVTPEG', 'SwinPEG'])
def test_frozen_stages_at_the_depth_freezes_everything(name):
    """The top of the allowed range, the number of stages (encoders),
    freezes every parameter; -1 none."""
    _, _, _, num = TINY[name]
    model = build(name, frozen_stages=num).train()
    assert not [n for n, p in model.named_parameters() if p.requires_grad]
    model = build(name, frozen_stages=-1).train()
    assert all(p.requires_grad for p in model.parameters())


# -- case 5: inputs, refused by forward before any layer runs --------------

BAD_INPUTS = [
    ('no batch dimension', torch.randn(3, 64, 64), ValueError,
     r'{name} takes images as a float tensor \(B, C, H, W\) with C = '
     r'in_channels = 3, got a \(3, 64, 64\) tensor without the batch '
     r'dimension; a single image is x\[None\] \(B = 1\)'),
    ('gray image', torch.randn(2, 1, 64, 64), ValueError,
     r'{name} takes .* in_channels = 3, got 1 channels \(2, 1, 64, 64\); '
     r'convert the images \(e\.g\. gray to RGB\), or build the model with '
     r'in_channels=1 \(model.backbone.in_channels\)'),
    ('uint8 image', torch.zeros(1, 3, 64, 64, dtype=torch.uint8),
     TypeError,
     r'{name} takes .*, got torch\.uint8; convert and normalise the '
     r'images first \(x\.float\(\), as the data preprocessor does\)'),
    ('5-D tensor', torch.randn(1, 1, 3, 64, 64), ValueError,
     r'{name} takes .*, got a 5-D \(1, 1, 3, 64, 64\) tensor'),
    ('a list', [torch.randn(3, 64, 64)], TypeError,
     r'{name} takes .*, got a list'),
    ('no pixels', torch.randn(1, 3, 0, 64), ValueError,
     r'{name}: a 0x64 input is too small: an image needs at least one '
     r'pixel a side'),
]


@pytest.mark.parametrize('what, x, error, match', BAD_INPUTS,
                         ids=[b[0] for b in BAD_INPUTS])
@pytest.mark.parametrize('name', ['CPVT', 'PVTPEG', 'SwinPEG'])
def test_bad_inputs_are_refused_before_any_layer_runs(name, what, x, error,
                                                      match):
    model = build(name).eval()
    ran = []
    for m in model.children():
        m.register_forward_pre_hook(lambda *_: ran.append(1))
    with pytest.raises(error, match=match.format(name=name)):
        model(x)
    assert not ran


# -- case 5: the PEG on its own --------------------------------------------


@pytest.mark.parametrize('hw_shape, extra, n_tokens', [
    ((3, 3), 0, 10),  # one surplus token is no class token
    ((3, 3), 0, 8),
    ((3, 3), 1, 9),  # the class token is missing
], ids=['surplus token', 'missing token', 'missing class token'])
def test_peg_tokens_that_do_not_match_the_map_are_refused(
        hw_shape, extra, n_tokens):
    """The surplus of tokens over H*W was taken for class tokens; now the
    PEG knows how many it has (num_extra_tokens) and says what mismatches."""
    peg = PEG(4, 4, num_extra_tokens=extra)
    with pytest.raises(
            ValueError,
            match=rf'PEG takes tokens \(B, N, C\) with N = num_extra_tokens '
            rf'\+ H\*W = {extra} \+ 3\*3 = {9 + extra} \(hw_shape\) and C = '
            rf'in_channels = 4, got a \(2, {n_tokens}, 4\) tensor'):
        peg(torch.randn(2, n_tokens, 4), hw_shape)


@pytest.mark.parametrize('x, hw_shape, kwargs, match', [
    (torch.randn(2, 9, 4), (3, 3), dict(kernel_size=7,
                                        padding_mode='reflect'),
     r"PEG\(kernel_size=7, padding=3, padding_mode='reflect', "
     r"num_layers=1\) needs a token map of at least 4x4, got \(3, 3\)"),
    (torch.randn(2, 4, 4), (2, 2), dict(kernel_size=7,
                                        padding_mode='circular'),
     r'at least 3x3, got \(2, 2\)'),
    (torch.randn(2, 9, 5), (3, 3), {},
     r'PEG takes tokens \(B, N, C\) .* and C = in_channels = 4, got a '
     r'\(2, 9, 5\) tensor'),
    (torch.randn(2, 9, 4, 1), (3, 3), {},
     r'PEG takes tokens \(B, N, C\) .*, got a \(2, 9, 4, 1\) tensor'),
], ids=['reflect map too small', 'circular map too small', 'channels',
        '4-D tokens'])
def test_peg_inputs_it_cannot_take_are_refused(x, hw_shape, kwargs, match):
    with pytest.raises(ValueError, match=match):
        PEG(4, 4, **kwargs)(x, hw_shape)


def test_peg_takes_an_empty_batch_and_small_maps():
    peg = PEG(4, 4, num_extra_tokens=1)
    assert peg(torch.randn(0, 10, 4), (3, 3)).shape == (0, 10, 4)
    assert peg(torch.randn(2, 2, 4), (1, 1)).shape == (2, 2, 4)
    reflect = PEG(4, 4, kernel_size=7, padding_mode='reflect')
    assert reflect.min_map_size == 4
    assert reflect(torch.randn(1, 16, 4), (4, 4)).shape == (1, 16, 4)


# -- cases that passed silently before -------------------------------------


@pytest.mark.parametrize('name, kwargs, match', [
    ('CPVT', dict(peg_positions=(0, 0)),
     r'CPVT: peg_positions must be block indices from -1 .* to 2 .*each '
     r'once, got \(0, 0\), which holds 0 twice; give each position once; '
     r'change model.backbone.peg_positions'),
    ('CPVT', dict(pos_embed='learned', pos_embed_positions=(-1, 1, 1)),
     r'pos_embed_positions must be .* got \(-1, 1, 1\), which holds 1 twice'),
    ('PVTPEG', dict(peg_positions=((), (1, 1), (), ())),
     r'PVTPEG: peg_positions of stage 1 must be .*each once, got \(1, 1\), '
     r'which holds 1 twice'),
    ('PVTPEG', dict(out_indices=(1, 1)),
     r'PVTPEG: out_indices must be one or more indices of the 4 stages .*'
     r'each once, got \(1, 1\), which holds 1 twice; give each index once'),
    ('CPVT', dict(out_type='featmap', out_indices=(2, -1)),
     r'out_indices .* got \(2, -1\), which holds 2 twice'),
])
def test_a_position_given_twice_is_refused(name, kwargs, match):
    """peg_positions=(0, 0) built one PEG without a word;
    out_indices=(1, 1) gave one map, not two."""
    with pytest.raises(ValueError, match=match):
        build(name, **kwargs)


@pytest.mark.parametrize('name, extra', [
    ('SwinPEG', dict(window_size=4)),
    ('CPVT', dict(patch_size=8)),
    ('PVTPEG', dict(embed_dim=[8, 16, 24, 32])),
])
def test_arch_keys_the_backbone_does_not_read_are_refused(name, extra):
    """SwinPEG(arch=dict(..., window_size=4)) ran with window 7."""
    _, cfg, _, _ = TINY[name]
    keys = sorted(cfg['arch'])
    with pytest.raises(
            ValueError,
            match=rf"{name}: arch has unknown key\(s\) "
            rf"\['{list(extra)[0]}'\], which it does not read; it takes "
            rf"{re.escape(str(keys))}; change model.backbone.arch"):
        build(name, arch=dict(cfg['arch'], **extra))


@pytest.mark.parametrize('dtype', [torch.float64, torch.float16])
@pytest.mark.parametrize('name', ['CPVT', 'PVTPEG', 'SwinPEG'])
def test_an_input_of_another_dtype_than_the_model_is_refused(name, dtype):
    """It got torch's "Input type (double) and bias type (float) should be
    the same" from inside the patch embedding."""
    model = build(name).eval()
    ran = []
    for m in model.children():
        m.register_forward_pre_hook(lambda *_: ran.append(1))
    with pytest.raises(
            TypeError,
            match=rf'{name} has torch.float32 weights, got a {dtype} input; '
            rf'convert the input \(x.to\(torch.float32\)\) or the model '
            rf'\(model.to\({dtype}\)\), or run under torch.autocast'):
        model(torch.randn(1, 3, 32, 32, dtype=dtype))
    assert not ran
    with torch.no_grad():  # what the message offers works
        assert model.double()(torch.randn(1, 3, 32, 32).double())
        with torch.autocast('cpu', dtype=torch.bfloat16):
            assert model.float()(torch.randn(1, 3, 32, 32).bfloat16())
            with pytest.raises(TypeError, match='got torch.uint8; convert'):
                model(torch.zeros(1, 3, 32, 32, dtype=torch.uint8))


def test_cpvt_takes_norm_eval_for_a_peg_with_batch_norm():
    """norm_eval is one of the shared arguments (docs/get_started.md); CPVT
    refused it as an unknown keyword, though its PEGs may hold BN."""
    model = build('CPVT', norm_eval=True,
                  peg_cfg=dict(norm_cfg=dict(type='BN'))).train()
    bns = [m for m in model.modules() if isinstance(m, torch.nn.BatchNorm2d)]
    assert bns and not any(m.training for m in bns)
    assert model.layers[0].training
    with pytest.raises(TypeError, match=r"CPVT: norm_eval must be True or "
                       r"False, got 'yes' \(a str\)"):
        build('CPVT', norm_eval='yes')
