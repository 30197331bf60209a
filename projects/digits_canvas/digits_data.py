"""The digit-canvas experiment of digits_canvas.py: its settings, the
variants it compares, and its data (training canvases, zooms and the test
sets).
"""
from dataclasses import dataclass, field
from typing import Dict

import numpy as np
import torch
import torch.nn.functional as F

NUM_CLASSES = 10
# Inputs are (canvas - 0.5) / 0.5: on the raw [0, 1] canvas the black
# background embeds to exact-zero tokens at initialisation, where
# LayerNorm's gradient is 1/sqrt(eps) = 1000 times larger.
PIXEL_MEAN, PIXEL_STD = 0.5, 0.5
INSTRUMENT_IMAGES = 128  # held-out canvases for --instruments
# test set -> (kind, factor): 'canvas' a larger canvas, the digit at the
# training scale; 'scaled' the 1x scene resized (the paper's protocol);
# 'zoom' the scaled scene cut back to the 1x canvas by the window that
# keeps the digit's centre where it was at 1x (scale without more tokens
# or other places)
TEST_SETS = {'1x': ('canvas', 1), 'canvas 1.5x': ('canvas', 1.5),
             'canvas 2x': ('canvas', 2), 'scaled 1.5x': ('scaled', 1.5),
             'scaled 2x': ('scaled', 2), 'zoom 2x': ('zoom', 2)}
REFERENCE = 'learned-pe'  # the bootstrap's differences are to this model

# The CPVT arguments that differ from ``Settings.backbone`` (no position
# encoding); ``paper`` names the model of the paper it stands for;
# ``versus``: the variants a control is compared with (besides REFERENCE).
# With 4 encoders, "PEG at 0-2" is a PEG after every encoder but the last.
VARIANTS = [
    dict(name='no-pe', label='no PE', paper='DeiT-tiny (no pos)',
         backbone=dict(pos_embed='none', peg_positions=())),
    dict(name='learned-pe', label='learned PE', paper='DeiT-tiny',
         backbone=dict(pos_embed='learned', peg_positions=())),
    dict(name='sincos2d', label='2-D sin-cos', paper='DeiT-tiny (sin)',
         backbone=dict(pos_embed='sincos2d', peg_positions=())),
    dict(name='peg0', label='PEG at 0', paper='CPVT-Ti',
         backbone=dict(peg_positions=(0, ))),
    # the same convolution without the zero-padding position cue
    # PEG at 0 trained for fewer epochs (variant_epochs), chosen so that its
    # validation accuracy matches learned PE's: the PEG at learned PE's skill
    dict(name='peg0-matched', label='PEG at 0, matched skill',
         paper='(control, ours)', versus=('peg0', ),
         backbone=dict(peg_positions=(0, ))),
    dict(name='peg0-circular', label='PEG at 0, circular padding',
         paper='(control, ours)', versus=('peg0', ),
         backbone=dict(peg_positions=(0, ),
                       peg_cfg=dict(padding_mode='circular'))),
    # the paper's "remove the zero paddings" (Appendix B.3): no position
    # cue, no identity, an 8 x 8 map becomes 6 x 6
    dict(name='peg0-nopad', label='PEG at 0, no padding, no skip',
         paper='CPVT-Ti w/o padding (App. B.3)',
         versus=('peg0-circular', 'peg0'),
         backbone=dict(peg_positions=(0, ), peg_cfg=dict(padding=0))),
    dict(name='peg0-frozen', label='PEG at 0, fixed random',
         paper='CPVT-Ti, PEG fixed (random init) (Table 5)',
         versus=('peg0', 'no-pe'),
         backbone=dict(peg_positions=(0, ), peg_cfg=dict(frozen=True))),
    dict(name='peg-1', label='PEG at -1', paper='CPVT-Ti, PosIdx -1 (Table 6)',
         versus=('peg0', ), backbone=dict(peg_positions=(-1, ))),
    dict(name='peg0-le', label='PEG at 0 + learned PE',
         paper='CPVT-Ti PEG + LE (Table 7)', versus=('peg0', ),
         backbone=dict(pos_embed='learned', peg_positions=(0, ))),
    dict(name='peg0-2', label='PEG at 0-2', paper='CPVT-Ti (PEG at 0-4)',
         versus=('peg0', ), backbone=dict(peg_positions=(0, 1, 2))),
    dict(name='peg0-2-gap', label='PEG at 0-2 + GAP',
         paper='CPVT-Ti-GAP (PEG at 0-4)', versus=('peg0-2', ),
         backbone=dict(peg_positions=(0, 1, 2), out_type='avg_featmap')),
    # Shaw et al.'s clipping distance K = 8 on the paper's 14 x 14 map is
    # about 0.6 of the largest offset; K = 4 on our 8 x 8 map is the same.
    dict(name='le-rpe', label='LE + RPE', paper='DeiT-tiny (LE+RPE)',
         versus=('peg0', ), backbone=dict(pos_embed='learned', peg_positions=(),
                       rpe_cfg=dict(clip_distance=4))),
    # beyond the paper: 2-D rotary embeddings of queries and keys (timm's;
    # mmcpvt.models.layers.rope), alone and with the PEG
    dict(name='rope-axial', label='RoPE-Axial', paper='(beyond: Heo et al.)',
         versus=('peg0', ),
         backbone=dict(peg_positions=(), rope_cfg=dict(type='axial'))),
    dict(name='rope-mixed', label='RoPE-Mixed', paper='(beyond: Heo et al.)',
         versus=('peg0', 'rope-axial'),
         backbone=dict(peg_positions=(), rope_cfg=dict(type='mixed'))),
    dict(name='rope-dinov3', label='DINOv3 RoPE', paper='(beyond: DINOv3)',
         versus=('peg0', 'rope-axial'),
         backbone=dict(peg_positions=(), rope_cfg=dict(type='dinov3'))),
    dict(name='rope-mixed-peg0', label='RoPE-Mixed + PEG at 0',
         paper='(beyond, ours)', versus=('peg0', 'rope-mixed'),
         backbone=dict(peg_positions=(0, ), rope_cfg=dict(type='mixed'))),
]
VARIANT_NAMES = [v['name'] for v in VARIANTS]
LABELS = {v['name']: v['label'] for v in VARIANTS}
VERSUS = {v['name']: v['versus'] for v in VARIANTS if 'versus' in v}
DEFAULT_VARIANTS = ['no-pe', 'learned-pe', 'peg0', 'peg0-matched',
                    'peg0-circular']
# the paper's controls of the PEG (Tables 5-7, Appendix B.3), beside the
# default run's four (reused with --reuse)
CONTROL_VARIANTS = DEFAULT_VARIANTS + ['peg0-nopad', 'peg0-frozen', 'peg-1',
                                       'peg0-le']
# the PEG beside 2-D RoPE (docs/reproduction.md, "Beyond the paper"): the
# default run's no PE, learned PE and PEGs (reused with --reuse), PEG at 0-2
# (the paper's PEG at 0-4) and the RoPE variants
ROPE_VARIANTS = ['no-pe', 'learned-pe', 'peg0', 'peg0-matched', 'peg0-2',
                 'rope-axial', 'rope-mixed', 'rope-dinov3', 'rope-mixed-peg0']


@dataclass
class Settings:
    """Everything a run depends on (saved in results.json)."""
    canvas: int = 32  # training canvas side, px
    digit: int = 24  # digit side, px (the 8 x 8 digits upscaled 3x)
    max_zoom: float = 3.  # training zoom 1..max_zoom, see random_zoom
    test_fraction: float = 0.3
    val_fraction: float = 0.15  # of the training digits
    split_seed: int = 0  # the splits, the same for every run
    test_seed: int = 1234  # the test and validation places, likewise
    backbone: dict = field(default_factory=lambda: dict(
        type='CPVT', arch=dict(embed_dims=64, num_layers=4, num_heads=2,
                               feedforward_channels=128),
        patch_size=4, in_channels=1, pos_embed='none', peg_positions=(),
        pos_embed_interpolation='bilinear',  # as PVT resizes its tables
        out_type='cls_token'))
    epochs: int = 80  # the cosine ends at 0 on the last
    batch_size: int = 32
    lr: float = 7.5e-4  # peak
    # variant -> its own peak learning rate or epochs, chosen on the
    # validation digits (digits_canvas.py --tune-lr, --tune-epochs;
    # docs/reproduction.md, "Recipe" and "Beyond the paper"); the others
    # take lr and epochs
    variant_lr: dict = field(default_factory=lambda: {
        'learned-pe': 1.5e-3, 'rope-mixed': 1.5e-3, 'rope-mixed-peg0': 1.5e-3})
    variant_epochs: dict = field(default_factory=lambda: {
        'peg0-matched': 16})
    weight_decay: float = 0.05
    warmup_epochs: int = 2
    label_smooth: float = 0.1
    resamples: int = 2000  # bootstrap
    bootstrap_seed: int = 0


def lr_of(variant: str, settings: Settings) -> float:
    """A variant's peak learning rate."""
    return settings.variant_lr.get(variant, settings.lr)


def epochs_of(variant: str, settings: Settings) -> int:
    """A variant's epochs."""
    return settings.variant_epochs.get(variant, settings.epochs)


def recipes(variants, settings: Settings) -> str:
    """The peak learning rate and epochs of each of ``variants``, those
    that share them together: 'lr 0.00075, 80 epochs: no PE, PEG at 0;
    ...'."""
    groups = {}
    for v in variants:
        groups.setdefault((lr_of(v, settings), epochs_of(v, settings)),
                          []).append(LABELS[v])
    return '; '.join(f'lr {lr:g}, {n} epochs: {", ".join(names)}'
                     for (lr, n), names in groups.items())


def load_split(settings: Settings):
    """The digits in [0, 1] as (N, 1, 8, 8) tensors, split (stratified,
    ``split_seed``): dict of 'train', 'val', 'test' -> (x, y)."""
    from sklearn.datasets import load_digits
    from sklearn.model_selection import train_test_split
    digits = load_digits()
    x = torch.tensor(digits.images / 16., dtype=torch.float32)[:, None]
    y = torch.tensor(digits.target, dtype=torch.long)
    idx = np.arange(len(y))
    rest, test = train_test_split(idx, test_size=settings.test_fraction,
                                  random_state=settings.split_seed,
                                  stratify=digits.target)
    train, val = train_test_split(rest, test_size=settings.val_fraction,
                                  random_state=settings.split_seed,
                                  stratify=digits.target[rest])
    return {k: (x[i], y[i]) for k, i in
            (('train', train), ('val', val), ('test', test))}


def upscale(digits: torch.Tensor, size: int) -> torch.Tensor:
    """(N, 1, 8, 8) -> (N, 1, size, size), bilinear."""
    return F.interpolate(digits, size=(size, size), mode='bilinear',
                         align_corners=False).clamp_(0, 1)


def place(digits: torch.Tensor, canvas: int, generator: torch.Generator):
    """Paste each (d x d) digit at a uniformly random place on a black
    canvas: (N, 1, canvas, canvas) images and (N, 2) top-left (y, x)."""
    n, _, d, _ = digits.shape
    corners = torch.randint(0, canvas - d + 1, (n, 2), generator=generator)
    out = digits.new_zeros(n, 1, canvas, canvas)
    for i, (y0, x0) in enumerate(corners.tolist()):
        out[i, :, y0:y0 + d, x0:x0 + d] = digits[i]
    return out, corners


def random_zoom(images: torch.Tensor, corners: torch.Tensor, digit: int,
                max_zoom: float, generator: torch.Generator) -> torch.Tensor:
    """RandomResizedCrop (aspect ratio 1) aimed at the digit.

    As torchvision's RandomResizedCrop, the crop area is a uniform fraction
    of the canvas, here in [1 / max_zoom**2, 1], so the digit is magnified
    by 1..max_zoom. The crop is placed uniformly among the places that hold
    the whole ``digit`` x ``digit`` box at ``corners`` or, when it is smaller
    than the box, that lie inside it (then it cuts the digit's margins, as
    RandomResizedCrop cuts objects), and resized back to the canvas
    (bilinear).
    """
    n, _, canvas, _ = images.shape
    area = torch.empty(n).uniform_(1 / max_zoom**2, 1, generator=generator)
    crop = canvas * area.sqrt()  # (N,) crop side, px
    corners = corners.float()
    # the two ends of the allowed origins: the crop's edge on the box's far
    # edge, and on its near edge (either order); then kept on the canvas
    a = corners + digit - crop[:, None]  # (N, 2) (y, x)
    low = torch.minimum(a, corners).clamp(min=0)
    high = torch.minimum(torch.maximum(a, corners), canvas - crop[:, None])
    origin = low + (high - low) * torch.rand(n, 2, generator=generator)
    # affine_grid maps output coordinates in [-1, 1] to input ones
    scale = crop / canvas
    centre = (origin + crop[:, None] / 2) / (canvas / 2) - 1  # (N, 2) (y, x)
    theta = torch.zeros(n, 2, 3)
    theta[:, 0, 0] = theta[:, 1, 1] = scale
    theta[:, :, 2] = centre.flip(1)  # (x, y)
    grid = F.affine_grid(theta, list(images.shape), align_corners=False)
    return F.grid_sample(images, grid, mode='bilinear',
                         align_corners=False)


def make_test_sets(x: torch.Tensor, y: torch.Tensor,
                   settings: Settings) -> Dict[str, tuple]:
    """The test sets of :data:`TEST_SETS`: name -> (images, labels); every
    digit once, at a place drawn with ``test_seed`` (the same for every
    model)."""
    g = torch.Generator().manual_seed(settings.test_seed)
    digits = upscale(x, settings.digit)
    base, corners = place(digits, settings.canvas, g)
    sets = {}
    for name, (kind, factor) in TEST_SETS.items():
        size = int(round(settings.canvas * factor))
        if factor == 1:
            images = base
        elif kind == 'canvas':
            images, _ = place(digits, size, g)
        else:
            images = F.interpolate(base, size=(size, size), mode='bilinear',
                                   align_corners=False)
        if kind == 'zoom':  # a canvas-sized window that keeps the digit's
            # centre where it was at 1x: the scaled centre (factor x the 1x
            # one) minus the 1x one
            c = settings.canvas
            centre = corners.float() + settings.digit / 2  # (N, 2) at 1x
            origin = (centre * (factor - 1)).round().long().clamp(0, size - c)
            images = torch.stack([
                im[:, y0:y0 + c, x0:x0 + c]
                for im, (y0, x0) in zip(images, origin.tolist())])
        sets[name] = (images, y)
    return sets
