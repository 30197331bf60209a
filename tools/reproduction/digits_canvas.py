"""A small-scale analogue of CPVT's Table 2 on real digits.

Conditional Positional Encodings for Vision Transformers, Chu et al.,
ICLR 2023 (https://arxiv.org/abs/2102.10882), Table 2 "Generalization to
Higher Resolutions" (Sec. 4.2) and Table 8 (LE + RPE, Sec. 5.3): models
trained at one input size are tested at larger ones without fine-tuning.

scikit-learn's 1797 handwritten digits (8 x 8, no download) are upscaled to
24 px and pasted at a random place on a black 32 x 32 canvas. Tiny CPVT
classifiers that differ only in their position encoding (:data:`VARIANTS`)
train with a RandomResizedCrop-like zoom of 1-3x until their accuracy on a
validation split stops improving, and are tested, unchanged, on the test
sets of :data:`TEST_SETS`. The headline is the accuracy each model *keeps*
at a test size relative to its own 1x, with paired bootstrap intervals of
the difference to the learned table.

Outputs (``--out-dir``): results.json, correct.npz (per-image correctness,
to recompute the bootstrap), results.md, accuracy.png / .svg, and every
model as an OpenMMLab config + checkpoint. Results: docs/reproduction.md.
"""
import argparse
import copy
import json
import math
import multiprocessing
import os
import os.path as osp
import sys
import time
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import asdict, dataclass, field
from typing import Dict, List, Sequence

import numpy as np
import torch
import torch.nn.functional as F

try:
    import mmcpvt  # noqa: F401  (registers modules, checkpoint allow-list)
except ImportError:  # not installed: run from a clone
    sys.path.insert(
        0, osp.dirname(osp.dirname(osp.dirname(osp.abspath(__file__)))))
    import mmcpvt  # noqa: F401
# the sibling instruments.py, also when this file is imported by path
sys.path.insert(0, osp.dirname(osp.abspath(__file__)))
from mmengine.config import Config  # noqa: E402
from mmengine.logging import MMLogger  # noqa: E402
from mmengine.registry import DefaultScope  # noqa: E402

from mmcpvt.registry import MODELS  # noqa: E402

NUM_CLASSES = 10
# Inputs are (canvas - 0.5) / 0.5: on the raw [0, 1] canvas the black
# background embeds to exact-zero tokens at initialisation, where
# LayerNorm's gradient is 1/sqrt(eps) = 1000 times larger.
PIXEL_MEAN, PIXEL_STD = 0.5, 0.5
INSTRUMENT_IMAGES = 128  # held-out canvases for --instruments
# test set -> (kind, factor): 'canvas' a larger canvas, the digit at the
# training scale; 'scaled' the 1x scene resized (the paper's protocol);
# 'zoom' the scaled scene cropped back to the 1x canvas around the digit
# (scale without more tokens)
TEST_SETS = {'1x': ('canvas', 1), 'canvas 1.5x': ('canvas', 1.5),
             'canvas 2x': ('canvas', 2), 'scaled 1.5x': ('scaled', 1.5),
             'scaled 2x': ('scaled', 2), 'zoom 2x': ('zoom', 2)}
REFERENCE = 'learned-pe'  # the bootstrap's differences are to this model

# The CPVT arguments that differ from ``Settings.backbone`` (no position
# encoding); ``paper`` names the model of the paper it stands for. With 4
# encoders, "PEG at 0-2" is a PEG after every encoder but the last.
VARIANTS = [
    dict(name='no-pe', label='no PE', paper='DeiT-tiny (no pos)',
         backbone=dict(pos_embed='none', peg_positions=())),
    dict(name='learned-pe', label='learned PE', paper='DeiT-tiny',
         backbone=dict(pos_embed='learned', peg_positions=())),
    dict(name='sincos2d', label='2-D sin-cos', paper='DeiT-tiny (sin)',
         backbone=dict(pos_embed='sincos2d', peg_positions=())),
    dict(name='peg0', label='PEG at 0', paper='CPVT-Ti',
         backbone=dict(peg_positions=(0, ))),
    # control: the same convolution without the zero-padding position cue
    dict(name='peg0-circular', label='PEG at 0, circular padding',
         paper='(control, ours)',
         backbone=dict(peg_positions=(0, ),
                       peg_cfg=dict(padding_mode='circular'))),
    dict(name='peg0-2', label='PEG at 0-2', paper='CPVT-Ti (PEG at 0-4)',
         backbone=dict(peg_positions=(0, 1, 2))),
    dict(name='peg0-2-gap', label='PEG at 0-2 + GAP',
         paper='CPVT-Ti-GAP (PEG at 0-4)',
         backbone=dict(peg_positions=(0, 1, 2), out_type='avg_featmap')),
    # Shaw et al.'s clipping distance K = 8 on the paper's 14 x 14 map is
    # about 0.6 of the largest offset; K = 4 on our 8 x 8 map is the same.
    dict(name='le-rpe', label='LE + RPE', paper='DeiT-tiny (LE+RPE)',
         backbone=dict(pos_embed='learned', peg_positions=(),
                       rpe_cfg=dict(clip_distance=4))),
]
VARIANT_NAMES = [v['name'] for v in VARIANTS]
LABELS = {v['name']: v['label'] for v in VARIANTS}
DEFAULT_VARIANTS = ['no-pe', 'learned-pe', 'peg0', 'peg0-circular']


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
        out_type='cls_token'))
    max_epochs: int = 40
    patience: int = 8  # epochs without a better validation accuracy
    min_epochs: int = 15  # before early stopping (past slow starts)
    batch_size: int = 32
    lr: float = 7.5e-4
    weight_decay: float = 0.05
    warmup_epochs: int = 2
    label_smooth: float = 0.1
    resamples: int = 2000  # bootstrap
    bootstrap_seed: int = 0


# -- data ----------------------------------------------------------------


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
    if d > canvas:
        raise ValueError(f'a {d} px digit does not fit a {canvas} px canvas')
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
        if kind == 'zoom':  # a canvas-sized window centred on the digit
            c = settings.canvas
            centre = (corners.float() + settings.digit / 2) * size / c
            origin = (centre - c / 2).round().long().clamp(0, size - c)
            images = torch.stack([
                im[:, y0:y0 + c, x0:x0 + c]
                for im, (y0, x0) in zip(images, origin.tolist())])
        sets[name] = (images, y)
    return sets


# -- model ---------------------------------------------------------------


def model_config(variant: dict, settings: Settings) -> Config:
    """An mmpretrain ImageClassifier with the CPVT backbone and a linear
    head. The data preprocessor maps 0..255 images to [-1, 1] as
    :func:`logits` does with the [0, 1] canvases; ``test_pipeline`` reads a
    grey-level image file unresized (for the inferencers and
    tools/visualization/vis_attention.py)."""
    backbone = copy.deepcopy(settings.backbone)
    backbone.update(copy.deepcopy(variant['backbone']))
    backbone['img_size'] = settings.canvas
    return Config(dict(
        default_scope='mmpretrain',
        custom_imports=dict(imports=['mmcpvt'], allow_failed_imports=False),
        test_pipeline=[dict(type='LoadImageFromFile', color_type='grayscale'),
                       dict(type='PackInputs')],
        model=dict(
            type='ImageClassifier', backbone=backbone, neck=None,
            data_preprocessor=dict(
                type='ClsDataPreprocessor', num_classes=NUM_CLASSES,
                mean=[PIXEL_MEAN * 255], std=[PIXEL_STD * 255]),
            head=dict(
                type='LinearClsHead', num_classes=NUM_CLASSES,
                in_channels=backbone['arch']['embed_dims'],
                loss=dict(type='LabelSmoothLoss', mode='original',
                          label_smooth_val=settings.label_smooth),
                init_cfg=dict(type='TruncNormal', layer='Linear',
                              std=.02)))))


def build_model(cfg: Config) -> torch.nn.Module:
    """Build and initialise ``cfg.model`` through the registry (without
    mmengine's per-parameter initialisation log)."""
    if not MMLogger.check_instance_created('digits_canvas'):
        MMLogger.get_instance('digits_canvas', log_level='WARNING')
    with DefaultScope.overwrite_default_scope(cfg.default_scope):
        model = MODELS.build(cfg.model)
    model.init_weights()
    return model


def logits(model: torch.nn.Module, images: torch.Tensor) -> torch.Tensor:
    """Class scores of [0, 1] canvases (normalised as the config's data
    preprocessor does)."""
    return model((images - PIXEL_MEAN) / PIXEL_STD, mode='tensor')


def param_groups(model: torch.nn.Module, weight_decay: float) -> list:
    """No weight decay on biases, norms, position tables, the class token
    and the PEGs."""
    decay, no_decay = [], []
    for name, p in model.named_parameters():
        if not p.requires_grad:
            continue
        # '.pegs.': as Twins gvt.py, where no_weight_decay() lists pos_block.*
        skip = p.ndim <= 1 or '.pegs.' in f'.{name}' or any(
            k in name for k in ('pos_embed', 'cls_token', 'rpe'))
        (no_decay if skip else decay).append(p)
    return [dict(params=decay, weight_decay=weight_decay),
            dict(params=no_decay, weight_decay=0.)]


# -- training and evaluation ---------------------------------------------


class EarlyStopping:
    """Keeps the state of the best-scoring epoch; :meth:`step` says stop
    once ``patience`` epochs have passed without a higher score (and
    ``min_epochs`` are done)."""

    def __init__(self, patience: int, min_epochs: int = 0):
        self.patience, self.min_epochs = patience, min_epochs
        self.best, self.best_epoch, self.state = -math.inf, -1, None

    def step(self, epoch: int, score: float, model: torch.nn.Module) -> bool:
        if score > self.best:
            self.best, self.best_epoch = score, epoch
            self.state = copy.deepcopy(model.state_dict())
        return (epoch - self.best_epoch >= self.patience
                and epoch + 1 >= self.min_epochs)


def train(model: torch.nn.Module, data: dict, settings: Settings,
          seed: int, val: tuple) -> dict:
    """Train in place, scoring ``val`` (1x canvases, labels) every epoch,
    until :class:`EarlyStopping` or ``max_epochs`` ends it; the model ends
    with the best epoch's weights. A plain loop, not an mmengine Runner:
    the data is a tensor regenerated every epoch (new places and zooms)."""
    g = torch.Generator().manual_seed(seed)
    x, y = data['train']
    digits, n = upscale(x, settings.digit), len(y)
    steps_per_epoch = math.ceil(n / settings.batch_size)
    total = settings.max_epochs * steps_per_epoch
    warmup = min(settings.warmup_epochs * steps_per_epoch, total // 2)
    optimizer = torch.optim.AdamW(
        param_groups(model, settings.weight_decay), lr=settings.lr)

    def lr_at(step):  # linear warm-up, then cosine to zero at max_epochs
        if step < warmup:
            return (step + 1) / warmup
        return 0.5 * (1 + math.cos(math.pi * (step - warmup) /
                                   max(1, total - warmup)))

    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lr_at)
    loss_fn = model.head.loss_module
    stopper = EarlyStopping(settings.patience, settings.min_epochs)
    start, val_acc = time.perf_counter(), []
    for epoch in range(settings.max_epochs):
        model.train()
        canvases, corners = place(digits, settings.canvas, g)
        images = random_zoom(canvases, corners, settings.digit,
                             settings.max_zoom, g)
        order = torch.randperm(n, generator=g)
        loss_sum = 0.
        for i in range(0, n, settings.batch_size):
            idx = order[i:i + settings.batch_size]
            loss = loss_fn(logits(model, images[idx]), y[idx])
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            optimizer.step()
            scheduler.step()
            loss_sum += loss.item() * len(idx)
        val_acc.append(100 * float(correct(model, *val).mean()))
        if stopper.step(epoch, val_acc[-1], model):
            break
    model.load_state_dict(stopper.state)
    model.eval()
    return dict(epochs=epoch + 1, best_epoch=stopper.best_epoch + 1,
                val_accuracy=val_acc, final_loss=loss_sum / n,
                train_time_s=time.perf_counter() - start)


@torch.no_grad()
def correct(model: torch.nn.Module, images: torch.Tensor,
            labels: torch.Tensor, batch_size: int = 256) -> np.ndarray:
    """Whether each image is classified right: (N,) bool."""
    model.eval()
    preds = [logits(model, images[i:i + batch_size]).argmax(1)
             for i in range(0, len(labels), batch_size)]
    return (torch.cat(preds) == labels).numpy()


def save(model: torch.nn.Module, cfg: Config, work_dir: str, meta: dict):
    """``config.py`` and ``checkpoint.pth`` ({'state_dict', 'meta'}), which
    mmpretrain's ``init_model`` and :mod:`mmcpvt.analysis` load."""
    os.makedirs(work_dir, exist_ok=True)
    with open(osp.join(work_dir, 'config.py'), 'w') as f:
        f.write('# Written by tools/reproduction/digits_canvas.py: 1-channel '
                f'{meta["canvas"]} px digit canvases, images in 0..255.\n')
        f.write(cfg.pretty_text)
    torch.save({'state_dict': model.state_dict(), 'meta': meta},
               osp.join(work_dir, 'checkpoint.pth'))


# -- bootstrap, summary, table and plot ----------------------------------


def bootstrap(per_image: Dict[str, Dict[str, np.ndarray]], reference: str,
              resamples: int, seed: int) -> dict:
    """Paired bootstrap over the test images.

    ``per_image``: variant -> test set -> (seeds, N) correctness. Each
    resample draws N images with replacement (the same draw for every
    model and test set) and averages over seeds; a variant's *kept* is its
    accuracy on a test set over its accuracy at 1x. Returns variant ->
    test set -> dict(kept, kept_ci, diff, diff_ci): percentages, ``diff``
    the kept minus the reference's kept (95 % percentile intervals).
    """
    n = next(iter(next(iter(per_image.values())).values())).shape[1]
    rng = np.random.default_rng(seed)
    counts = rng.multinomial(n, np.full(n, 1 / n), size=resamples) / n
    kept = {}
    for v, tests in per_image.items():
        mean = {t: c.mean(0) for t, c in tests.items()}  # (N,) over seeds
        boot = {t: counts @ m for t, m in mean.items()}  # (B,)
        kept[v] = {t: (100 * m.mean() / mean['1x'].mean(),
                       100 * boot[t] / boot['1x']) for t, m in mean.items()}

    def ci(samples):
        return [float(q) for q in np.percentile(samples, [2.5, 97.5])]

    out = {v: {t: dict(kept=float(p), kept_ci=ci(b))
               for t, (p, b) in tests.items()} for v, tests in kept.items()}
    for v, tests in kept.items():
        for t, (p, b) in tests.items():
            if reference in kept:
                out[v][t].update(diff=float(p - kept[reference][t][0]),
                                 diff_ci=ci(b - kept[reference][t][1]))
    return out


def summarise(runs: List[dict], per_image: dict,
              settings: Settings) -> dict:
    """variant -> accuracy (test -> [mean, sd over seeds]), epochs
    ([mean, min, max]) and the bootstrap's kept figures."""
    boot = bootstrap(per_image, REFERENCE, settings.resamples,
                     settings.bootstrap_seed)
    out = {}
    for v in per_image:
        mine = [r for r in runs if r['variant'] == v]
        epochs = [r['epochs'] for r in mine]
        out[v] = dict(
            accuracy={t: [float(100 * c.mean(1).mean()),
                          float(100 * c.mean(1).std(ddof=1))
                          if len(c) > 1 else 0.]
                      for t, c in per_image[v].items()},
            epochs=[float(np.mean(epochs)), min(epochs), max(epochs)],
            best_epoch=[r['best_epoch'] for r in mine],
            kept=boot[v], seeds=len(mine))
    return out


def markdown_tables(summary: dict) -> str:
    tests = list(TEST_SETS)[1:]
    head = '| variant | ' + ' | '.join(tests) + ' |\n|---|' + \
        '---:|' * len(tests) + '\n'
    kept = 'Accuracy kept, % of the model\'s own 1x accuracy [paired ' \
        'bootstrap 95 % interval]:\n\n' + head
    diff = f'Kept minus {LABELS[REFERENCE]}\'s kept, points [95 %]:\n\n' + head
    acc = ('Top-1 accuracy, % (mean ± sd over seeds), and epochs trained '
           '(mean, min-max; patience on the validation split):\n\n'
           '| variant | ' + ' | '.join(TEST_SETS) + ' | epochs |\n|---|' +
           '---:|' * (len(TEST_SETS) + 1) + '\n')
    for v, s in summary.items():
        k = s['kept']
        kept += f'| {LABELS[v]} | ' + ' | '.join(
            f'{k[t]["kept"]:.1f} [{k[t]["kept_ci"][0]:.1f}, '
            f'{k[t]["kept_ci"][1]:.1f}]' for t in tests) + ' |\n'
        if 'diff' in k['1x'] and v != REFERENCE:
            diff += f'| {LABELS[v]} | ' + ' | '.join(
                f'{k[t]["diff"]:+.1f} [{k[t]["diff_ci"][0]:+.1f}, '
                f'{k[t]["diff_ci"][1]:+.1f}]' for t in tests) + ' |\n'
        e = s['epochs']
        acc += f'| {LABELS[v]} | ' + ' | '.join(
            f'{m:.1f} ± {sd:.1f}' for m, sd in s['accuracy'].values()) + \
            f' | {e[0]:.0f} ({e[1]}-{e[2]}) |\n'
    parts = [kept] + ([diff] if REFERENCE in summary else []) + [acc]
    return '\n'.join(parts)


def plot(summary: dict, paths: Sequence[str]):
    """Two panels over the test sets: accuracy (mean ± sd over seeds) and
    accuracy kept relative to 1x (bootstrap 95 % intervals)."""
    import matplotlib
    matplotlib.use('Agg')
    import matplotlib.pyplot as plt
    plt.rcParams['svg.fonttype'] = 'none'  # text stays text: a small SVG
    plt.rcParams['svg.hashsalt'] = 'digits-canvas'  # same run, same file
    fig, axes = plt.subplots(1, 2, figsize=(10, 3.8))
    tests = list(TEST_SETS)
    for i, (v, s) in enumerate(summary.items()):
        style = dict(marker='o', ms=3, capsize=2, lw=0, elinewidth=1.2,
                     label=LABELS[v],
                     color=plt.get_cmap('tab10')(VARIANT_NAMES.index(v)))
        x = np.arange(len(tests)) + (i - (len(summary) - 1) / 2) * 0.1
        acc = np.array([s['accuracy'][t] for t in tests])  # (T, 2)
        axes[0].errorbar(x, acc[:, 0], yerr=acc[:, 1], **style)
        kept = np.array([[s['kept'][t]['kept'], *s['kept'][t]['kept_ci']]
                         for t in tests[1:]])  # (T - 1, 3)
        axes[1].errorbar(x[1:] - 1, kept[:, 0], yerr=np.abs(
            kept[:, 1:] - kept[:, :1]).T, **style)
    for ax, names, y, label in (
            (axes[0], tests, 100 / NUM_CLASSES, 'top-1 accuracy, % '
             '(mean ± sd over seeds)'),
            (axes[1], tests[1:], 100, 'kept, % of own 1x (bootstrap 95 %)')):
        ax.axhline(y, color='grey', lw=0.8, ls=':')
        ax.set_ylabel(label, fontsize=8)
        ax.set_xticks(range(len(names)), [n.replace(' ', '\n')
                                          for n in names])
        ax.tick_params(labelsize=8)
        ax.grid(alpha=0.3, axis='y')
    handles, names = axes[0].get_legend_handles_labels()
    fig.legend(handles, names, fontsize=7, loc='center left',
               bbox_to_anchor=(1, 0.5), frameon=False)
    fig.tight_layout()
    for path in paths:
        fig.savefig(path, dpi=110 if path.endswith('.png') else None,
                    bbox_inches='tight', metadata=dict(Date=None)
                    if path.endswith('.svg') else None)
    plt.close(fig)


# -- the run -------------------------------------------------------------


def fmt_time(seconds: float) -> str:
    seconds = int(round(seconds))
    return f'{seconds // 60}:{seconds % 60:02d}'


def train_and_test(name: str, seed: int, settings: Settings,
                   out_dir: str) -> dict:
    """One model: build, train, test and save it; returns its record (with
    ``correct``: test set -> (N,) bool). Runs in a worker process with
    ``--jobs`` above 1, so it rebuilds its data (a second or so)."""
    data = load_split(settings)
    torch.manual_seed(seed)
    cfg = model_config(VARIANTS[VARIANT_NAMES.index(name)], settings)
    model = build_model(cfg)
    t0 = time.perf_counter()
    x_val, y_val = data['val']  # at 1x, other places than the test sets'
    val = place(upscale(x_val, settings.digit), settings.canvas,
                torch.Generator().manual_seed(settings.test_seed + 1))[0]
    stats = train(model, data, settings, seed, (val, y_val))
    right = {t: correct(model, *d)
             for t, d in make_test_sets(*data['test'], settings).items()}
    acc = {t: 100 * float(c.mean()) for t, c in right.items()}
    work_dir = osp.join(out_dir, name, f'seed{seed}')
    save(model, cfg, work_dir, dict(variant=name, seed=seed, accuracy=acc,
                                    canvas=settings.canvas,
                                    settings=asdict(settings)))
    return dict(variant=name, seed=seed, accuracy=acc, correct=right,
                params=sum(p.numel() for p in model.parameters()),
                work_dir=work_dir, run_time_s=time.perf_counter() - t0,
                **stats)


def _one_thread():
    """Worker start-up: one thread each (more would wait on each other,
    and one gives every run the same result whatever the job count)."""
    torch.set_num_threads(1)


def default_jobs() -> int:
    return len(os.sched_getaffinity(0)) if hasattr(
        os, 'sched_getaffinity') else os.cpu_count() or 1


def run(variants: Sequence[str], seeds: Sequence[int], settings: Settings,
        out_dir: str, instruments: bool = False, jobs: int = 1,
        log=print) -> dict:
    """Train and test every variant x seed (``jobs`` at a time, each in its
    own process with one thread when ``jobs`` > 1); write the outputs;
    return the results (as written to results.json)."""
    if jobs < 1:
        raise ValueError(f'jobs must be 1 or more, got {jobs}')
    start = time.perf_counter()
    os.makedirs(out_dir, exist_ok=True)
    todo = [(v, s) for v in VARIANT_NAMES if v in variants for s in seeds]
    jobs = min(jobs, len(todo))
    data = load_split(settings)
    log(f'[reproduce] {len(data["train"][1])} training / '
        f'{len(data["val"][1])} validation / {len(data["test"][1])} test '
        f'digits; {len(todo)} models, up to {settings.max_epochs} epochs '
        f'(patience {settings.patience}), ' +
        (f'{jobs} at a time (one process and thread each)' if jobs > 1
         else f'one at a time, {torch.get_num_threads()} thread(s)'))
    done = {}

    def report(record):
        done[record['variant'], record['seed']] = record
        per_model = np.mean([r['run_time_s'] for r in done.values()])
        eta = per_model * math.ceil((len(todo) - len(done)) / jobs)
        log(f'[reproduce] {len(done)}/{len(todo)} {record["variant"]} seed '
            f'{record["seed"]}: ' +
            ', '.join(f'{t} {a:.1f}' for t, a in record['accuracy'].items())
            + f' % | epochs {record["epochs"]} (best {record["best_epoch"]},'
            f' val {max(record["val_accuracy"]):.1f}), loss '
            f'{record["final_loss"]:.3f}, {record["run_time_s"]:.0f} s | '
            f'elapsed {fmt_time(time.perf_counter() - start)}, '
            f'ETA {fmt_time(eta)}')

    if jobs == 1:
        for name, seed in todo:
            report(train_and_test(name, seed, settings, out_dir))
    else:
        # spawn, not fork: a forked child inherits torch's thread pool
        with ProcessPoolExecutor(
                jobs, mp_context=multiprocessing.get_context('spawn'),
                initializer=_one_thread) as pool:
            futures = [pool.submit(train_and_test, name, seed, settings,
                                   out_dir) for name, seed in todo]
            try:
                for future in as_completed(futures):
                    report(future.result())
            except BaseException:
                pool.shutdown(cancel_futures=True)
                raise
    runs = [done[key] for key in todo]  # in table order
    per_image = {v: {t: np.stack([r['correct'][t] for r in runs  # (seeds, N)
                                  if r['variant'] == v]) for t in TEST_SETS}
                 for v in dict.fromkeys(r['variant'] for r in runs)}
    np.savez_compressed(osp.join(out_dir, 'correct.npz'), **{
        f'{r["variant"]}/seed{r["seed"]}/{t}': c
        for r in runs for t, c in r.pop('correct').items()})
    summary = summarise(runs, per_image, settings)
    results = dict(settings=asdict(settings), variants=VARIANTS,
                   test_sets=TEST_SETS, reference=REFERENCE,
                   seeds=list(seeds), runs=runs, summary=summary)
    table = markdown_tables(summary)
    if instruments:
        from instruments import run_instruments  # tools/reproduction/
        g = torch.Generator().manual_seed(settings.test_seed + 2)
        canvases, _ = place(
            upscale(data['test'][0][:INSTRUMENT_IMAGES], settings.digit),
            settings.canvas, g)
        results['instruments'], text = run_instruments(
            runs, canvases, (canvases - PIXEL_MEAN) / PIXEL_STD, log=log)
        table += '\n' + text
    results['wall_time_s'] = time.perf_counter() - start
    with open(osp.join(out_dir, 'results.json'), 'w') as f:
        json.dump(results, f, indent=1)
    with open(osp.join(out_dir, 'results.md'), 'w') as f:
        f.write(table)
    plot(summary, [osp.join(out_dir, 'accuracy.png'),
                   osp.join(out_dir, 'accuracy.svg')])
    log('\n' + table)
    log(f'[reproduce] wrote {out_dir}/results.json, correct.npz, results.md,'
        f' accuracy.png, accuracy.svg; wall time '
        f'{fmt_time(results["wall_time_s"])}')
    return results


def quick_settings() -> Settings:
    """A few seconds of training: for the tests, not for numbers."""
    s = Settings(canvas=16, digit=12, max_zoom=1.5, max_epochs=5, patience=2,
                 min_epochs=0, warmup_epochs=1, lr=3e-3, resamples=200)
    s.backbone['arch'] = dict(embed_dims=32, num_layers=4, num_heads=2,
                              feedforward_channels=64)
    return s


def parse_args(argv=None):
    parser = argparse.ArgumentParser(
        description='Train tiny CPVT variants on digit canvases and test '
        'them at larger sizes without fine-tuning')
    add = parser.add_argument
    add('--variants', nargs='+', choices=VARIANT_NAMES + ['all'],
        default=DEFAULT_VARIANTS, help=f'default: {DEFAULT_VARIANTS}')
    add('--seeds', nargs='+', type=int, default=list(range(5)),
        help='default: 0-4')
    add('--max-epochs', type=int, help=f'default: {Settings.max_epochs}')
    add('--patience', type=int, help=f'default: {Settings.patience}')
    add('--out-dir', default='work_dirs/reproduction')
    add('--quick', action='store_true', help='tiny model (for tests)')
    add('--instruments', action='store_true', help='position probe, '
        'translation equivariance and attention of the seed-0 models')
    add('--jobs', type=int, default=default_jobs(),
        help='models trained at once, each in its own process with one '
        f'thread (default: the cores, {default_jobs()} here); 1 trains in '
        'this process with torch\'s threads')
    args = parser.parse_args(argv)
    if args.jobs < 1:
        parser.error(f'--jobs must be 1 or more, got {args.jobs}')
    if 'all' in args.variants:
        args.variants = VARIANT_NAMES
    return args


def main(argv=None):
    args = parse_args(argv)
    settings = quick_settings() if args.quick else Settings()
    for key in ('max_epochs', 'patience'):
        if getattr(args, key) is not None:
            setattr(settings, key, getattr(args, key))
    run(args.variants, args.seeds, settings, args.out_dir,
        instruments=args.instruments, jobs=args.jobs)


if __name__ == '__main__':
    main()
