"""A small reproduction of CPVT's resolution claim on real digits.

Conditional Positional Encodings for Vision Transformers, Chu et al.,
ICLR 2023 (https://arxiv.org/abs/2102.10882), Table 2 and the table of
LE + RPE vs PEG: models trained at one input size and tested at larger ones
without fine-tuning keep (PEG) or lose (learned table, sin-cos) accuracy.

The data needs no download: scikit-learn's 1797 handwritten digits (8 x 8,
10 classes) are upscaled to 16 px and pasted at a random place on a black
32 x 32 canvas (:class:`Settings`). Tiny CPVT classifiers that differ only
in their position encoding (:data:`VARIANTS`) are trained on the canvas with
a RandomResizedCrop-like zoom, then tested, unchanged, on

* ``1x``: held-out digits on the training canvas;
* ``canvas 1.5x`` / ``canvas 2x``: a larger canvas, the digit at the
  training scale (more background, new positions);
* ``scaled 1.5x`` / ``scaled 2x``: the ``1x`` scenes resized bilinearly, so
  the digit grows with the image (the paper's protocol: the same image at a
  higher resolution).

Each model is saved as an OpenMMLab config + checkpoint under
``<out-dir>/<variant>/seed<k>/``; ``<out-dir>`` gets ``results.json`` (every
run), ``results.md`` (mean +- sd over seeds) and ``accuracy.png`` /
``accuracy.svg``. ``--instruments`` adds the position probe, translation
equivariance and attention maps of :mod:`mmcpvt.analysis` on the seed-0
models.

Results and timings: docs/reproduction.md. Example::

    python tools/reproduction/digits_canvas.py    # all variants, seeds 0-2
    python tools/reproduction/digits_canvas.py --variants peg0 learned-pe \\
        --seeds 0 --epochs 10 --out-dir work_dirs/reproduction_try
"""
import argparse
import copy
import inspect
import json
import math
import multiprocessing
import os
import os.path as osp
import sys
import time
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import asdict, dataclass, field
from typing import Callable, Dict, List, Optional, Sequence, Tuple

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

from mmcpvt.models.backbones.cpvt import CPVT  # noqa: E402
from mmcpvt.registry import MODELS  # noqa: E402

NUM_CLASSES = 10
# Model inputs are (canvas - 0.5) / 0.5. With the raw [0, 1] canvas the
# black background embeds to exact-zero tokens at initialisation, where
# LayerNorm's gradient is 1/sqrt(eps) = 1000 times larger (eps=1e-6): in
# trials on these canvases, no PE and PEG at 0 then sat at chance for 10-30
# epochs; normalised, PEG at 0 passed 80 % within 10.
PIXEL_MEAN, PIXEL_STD = 0.5, 0.5
INSTRUMENT_IMAGES = 128  # held-out canvases for --instruments
FACTORS = (1, 1.5, 2)
# test-set name -> (protocol, size factor); '1x' belongs to both protocols
TEST_SETS = {
    '1x': ('both', 1),
    'canvas 1.5x': ('canvas', 1.5),
    'canvas 2x': ('canvas', 2),
    'scaled 1.5x': ('scaled', 1.5),
    'scaled 2x': ('scaled', 2),
}

# One entry per model of the comparison: the CPVT arguments that differ from
# ``Settings.backbone`` (no position encoding of any kind); ``paper`` names
# the model of the paper it stands for. With 4 encoders, "PEG at 0-2" puts
# a PEG after every encoder but the last: the paper's 0-4 (the first five
# of DeiT-Ti's 11 positions) at our depth.
VARIANTS = [
    dict(name='no-pe', label='no PE', paper='DeiT-tiny (no pos)',
         backbone=dict(pos_embed='none', peg_positions=())),
    dict(name='learned-pe', label='learned PE', paper='DeiT-tiny',
         backbone=dict(pos_embed='learned', peg_positions=())),
    dict(name='sincos2d', label='2-D sin-cos', paper='DeiT-tiny (sin)',
         backbone=dict(pos_embed='sincos2d', peg_positions=())),
    dict(name='peg0', label='PEG at 0', paper='CPVT-Ti',
         backbone=dict(peg_positions=(0, ))),
    dict(name='peg0-2', label='PEG at 0-2', paper='CPVT-Ti (PEG at 0-4)',
         backbone=dict(peg_positions=(0, 1, 2))),
    dict(name='peg0-2-gap', label='PEG at 0-2 + GAP',
         paper='CPVT-Ti-GAP (PEG at 0-4)',
         backbone=dict(peg_positions=(0, 1, 2), out_type='avg_featmap')),
    # Shaw et al.'s clipping distance K, in tokens: the paper uses K=8 on a
    # 14 x 14 map; K=4 on our 8 x 8 training map clips at about the same
    # fraction (0.6) of the largest offset.
    dict(name='le-rpe', label='LE + RPE', paper='DeiT-tiny (LE+RPE)',
         backbone=dict(pos_embed='learned', peg_positions=(),
                       rpe_cfg=dict(clip_distance=4))),
]
VARIANT_NAMES = [v['name'] for v in VARIANTS]


@dataclass
class Settings:
    """Everything a run depends on (saved in results.json)."""
    canvas: int = 32  # training canvas side, px
    digit: int = 16  # digit side, px (the 8 x 8 digits upscaled 2x)
    max_zoom: float = 2.  # training zoom 1..max_zoom, see random_zoom
    test_fraction: float = 0.3
    split_seed: int = 0  # the train/test split, the same for every run
    test_placements: int = 1  # random places per held-out digit and set
    test_seed: int = 1234  # the places, the same for every run
    backbone: dict = field(default_factory=lambda: dict(
        type='CPVT',
        arch=dict(embed_dims=64, num_layers=4, num_heads=2,
                  feedforward_channels=128),
        patch_size=4,
        in_channels=1,
        pos_embed='none',
        peg_positions=(),
        out_type='cls_token'))
    epochs: int = 16
    batch_size: int = 32
    lr: float = 1.5e-3
    weight_decay: float = 0.05
    warmup_epochs: int = 2
    label_smooth: float = 0.1


# -- data ----------------------------------------------------------------


def load_split(settings: Settings):
    """The scikit-learn digits in [0, 1], split train/test (stratified) by
    ``settings.split_seed``: (x_train, y_train, x_test, y_test), x as
    (N, 1, 8, 8) float tensors."""
    from sklearn.datasets import load_digits
    from sklearn.model_selection import train_test_split
    digits = load_digits()
    x = torch.tensor(digits.images / 16., dtype=torch.float32)[:, None]
    y = torch.tensor(digits.target, dtype=torch.long)
    idx_train, idx_test = train_test_split(
        np.arange(len(y)), test_size=settings.test_fraction,
        random_state=settings.split_seed, stratify=digits.target)
    return x[idx_train], y[idx_train], x[idx_test], y[idx_test]


def upscale(digits: torch.Tensor, size: int) -> torch.Tensor:
    """(N, 1, 8, 8) -> (N, 1, size, size), bilinear."""
    return F.interpolate(digits, size=(size, size), mode='bilinear',
                         align_corners=False).clamp_(0, 1)


def place(digits: torch.Tensor, canvas: int,
          generator: torch.Generator) -> Tuple[torch.Tensor, torch.Tensor]:
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
    theta[:, 0, 0] = scale
    theta[:, 1, 1] = scale
    theta[:, 0, 2] = centre[:, 1]
    theta[:, 1, 2] = centre[:, 0]
    grid = F.affine_grid(theta, list(images.shape), align_corners=False)
    return F.grid_sample(images, grid, mode='bilinear',
                         align_corners=False)


def test_size(canvas: int, factor: float) -> int:
    return int(round(canvas * factor))


def make_test_sets(x_test: torch.Tensor, y_test: torch.Tensor,
                   settings: Settings) -> Dict[str, tuple]:
    """The test sets of :data:`TEST_SETS`: name -> (images, labels).

    Every held-out digit appears ``test_placements`` times per set, at
    places drawn with ``test_seed`` (the same for every model).
    """
    g = torch.Generator().manual_seed(settings.test_seed)
    digits = upscale(x_test, settings.digit).repeat(
        settings.test_placements, 1, 1, 1)
    labels = y_test.repeat(settings.test_placements)
    base, _ = place(digits, settings.canvas, g)
    sets = {}
    for name, (protocol, factor) in TEST_SETS.items():
        size = test_size(settings.canvas, factor)
        if name == '1x':
            images = base
        elif protocol == 'canvas':
            images, _ = place(digits, size, g)
        else:
            images = F.interpolate(base, size=(size, size), mode='bilinear',
                                   align_corners=False)
        sets[name] = (images, labels)
    return sets


# -- model ---------------------------------------------------------------


def rpe_supported() -> bool:
    """Whether this CPVT takes ``rpe_cfg`` (the LE + RPE variant)."""
    return 'rpe_cfg' in inspect.signature(CPVT.__init__).parameters


def model_config(variant: dict, settings: Settings) -> Config:
    """The OpenMMLab config of a variant: an mmpretrain ImageClassifier with
    the CPVT backbone and a linear head.

    The data preprocessor maps 0..255 images (as OpenMMLab's loaders give
    them) to [-1, 1], as :func:`logits` does with the [0, 1] canvases here;
    ``test_pipeline`` reads a grey-level image file as it is (no resizing:
    the model takes any multiple of the patch size), for the inferencer and
    tools/visualization/vis_attention.py.
    """
    backbone = copy.deepcopy(settings.backbone)
    backbone.update(copy.deepcopy(variant['backbone']))
    backbone['img_size'] = settings.canvas
    return Config(dict(
        default_scope='mmpretrain',
        custom_imports=dict(imports=['mmcpvt'], allow_failed_imports=False),
        test_pipeline=[dict(type='LoadImageFromFile', color_type='grayscale'),
                       dict(type='PackInputs')],
        model=dict(
            type='ImageClassifier',
            data_preprocessor=dict(
                type='ClsDataPreprocessor', num_classes=NUM_CLASSES,
                mean=[PIXEL_MEAN * 255], std=[PIXEL_STD * 255]),
            backbone=backbone,
            neck=None,
            head=dict(
                type='LinearClsHead',
                num_classes=NUM_CLASSES,
                in_channels=backbone['arch']['embed_dims'],
                loss=dict(type='LabelSmoothLoss',
                          label_smooth_val=settings.label_smooth,
                          mode='original'),
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


# -- training and evaluation ---------------------------------------------


def logits(model: torch.nn.Module, images: torch.Tensor) -> torch.Tensor:
    """Class scores of [0, 1] canvases (normalised as the config's data
    preprocessor does)."""
    return model((images - PIXEL_MEAN) / PIXEL_STD, mode='tensor')


def param_groups(model: torch.nn.Module, weight_decay: float) -> list:
    """No weight decay on biases, norms, tables and the class token."""
    decay, no_decay = [], []
    for name, p in model.named_parameters():
        if not p.requires_grad:
            continue
        skip = p.ndim <= 1 or 'pos_embed' in name or 'cls_token' in name \
            or 'rpe' in name
        (no_decay if skip else decay).append(p)
    return [dict(params=decay, weight_decay=weight_decay),
            dict(params=no_decay, weight_decay=0.)]


def train(model: torch.nn.Module, x_train: torch.Tensor,
          y_train: torch.Tensor, settings: Settings, seed: int,
          epochs: Optional[int] = None,
          epoch_end: Optional[Callable[[int, float], None]] = None) -> dict:
    """Train in place; returns the last epoch's mean loss and the time.

    A plain loop calling the model in 'tensor' mode rather than an mmengine
    Runner: a run lasts about a minute on a CPU, the data is a tensor
    regenerated every epoch (new places and zooms), and a Runner's hooks,
    loaders and logging would cost more than the training. The result is
    saved in the Runner's checkpoint format (:func:`save`).
    """
    epochs = settings.epochs if epochs is None else epochs
    g = torch.Generator().manual_seed(seed)
    digits = upscale(x_train, settings.digit)
    n = len(y_train)
    steps_per_epoch = math.ceil(n / settings.batch_size)
    total = epochs * steps_per_epoch
    warmup = min(settings.warmup_epochs * steps_per_epoch, total // 2)
    optimizer = torch.optim.AdamW(
        param_groups(model, settings.weight_decay), lr=settings.lr)

    def lr_at(step):  # linear warm-up, then cosine to zero
        if step < warmup:
            return (step + 1) / warmup
        return 0.5 * (1 + math.cos(math.pi * (step - warmup) /
                                   max(1, total - warmup)))

    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lr_at)
    loss_fn = model.head.loss_module
    model.train()
    start, loss_sum = time.perf_counter(), 0.
    for epoch in range(epochs):
        canvases, corners = place(digits, settings.canvas, g)
        images = random_zoom(canvases, corners, settings.digit,
                             settings.max_zoom, g)
        order = torch.randperm(n, generator=g)
        loss_sum = 0.
        for i in range(0, n, settings.batch_size):
            idx = order[i:i + settings.batch_size]
            loss = loss_fn(logits(model, images[idx]), y_train[idx])
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            optimizer.step()
            scheduler.step()
            loss_sum += loss.item() * len(idx)
        if epoch_end is not None:
            epoch_end(epoch, loss_sum / n)
    model.eval()
    return dict(final_loss=loss_sum / n,
                train_time_s=time.perf_counter() - start)


@torch.no_grad()
def accuracy(model: torch.nn.Module, images: torch.Tensor,
             labels: torch.Tensor, batch_size: int = 256) -> float:
    """Top-1 accuracy in %."""
    model.eval()
    correct = 0
    for i in range(0, len(labels), batch_size):
        scores = logits(model, images[i:i + batch_size])
        correct += (scores.argmax(1) == labels[i:i + batch_size]).sum()
    return 100. * float(correct) / len(labels)


def evaluate(model: torch.nn.Module, test_sets: Dict[str, tuple]) -> dict:
    return {name: accuracy(model, *data) for name, data in test_sets.items()}


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


# -- summary, table and plot --------------------------------------------


def summarise(runs: List[dict]) -> Dict[str, Dict[str, List[float]]]:
    """variant -> test set -> [mean, sd (n-1; 0 for one seed), n]."""
    out = {}
    for name in dict.fromkeys(r['variant'] for r in runs):
        accs = [r['accuracy'] for r in runs if r['variant'] == name]
        out[name] = {}
        for test in TEST_SETS:
            v = np.array([a[test] for a in accs])
            sd = float(v.std(ddof=1)) if len(v) > 1 else 0.
            out[name][test] = [float(v.mean()), sd, len(v)]
    return out


def markdown_table(summary: dict, missing: Sequence[str] = ()) -> str:
    labels = {v['name']: v['label'] for v in VARIANTS}
    head = ['variant', *TEST_SETS]
    lines = ['| ' + ' | '.join(head) + ' |',
             '|' + '|'.join(['---'] + ['---:'] * len(TEST_SETS)) + '|']
    for name in VARIANT_NAMES:
        if name in summary:
            cells = [f'{m:.1f} ± {s:.1f}'
                     for m, s, _ in summary[name].values()]
        elif name in missing:
            cells = ['not run'] * len(TEST_SETS)
        else:
            continue
        lines.append(f'| {labels[name]} | ' + ' | '.join(cells) + ' |')
    return '\n'.join(lines) + '\n'


def plot(summary: dict, settings: Settings, paths: Sequence[str]):
    """Accuracy against test size: one panel per protocol, one line per
    variant (PEG variants solid), error bars = sd over seeds."""
    import matplotlib
    matplotlib.use('Agg')
    import matplotlib.pyplot as plt
    plt.rcParams['svg.fonttype'] = 'none'  # text stays text: a small SVG
    plt.rcParams['svg.hashsalt'] = 'digits-canvas'  # same run, same file
    labels = {v['name']: v['label'] for v in VARIANTS}
    colours = plt.get_cmap('tab10').colors
    fig, axes = plt.subplots(1, 2, figsize=(9, 3.6), sharey=True)
    titles = dict(canvas='larger canvas (digit at training scale)',
                  scaled='scaled up (same scene, bilinear)')
    sizes = [test_size(settings.canvas, f) for f in FACTORS]
    for ax, protocol in zip(axes, ('canvas', 'scaled')):
        names = ['1x'] + [f'{protocol} {f}x' for f in FACTORS[1:]]
        for variant, accs in summary.items():
            ax.errorbar(
                sizes, [accs[n][0] for n in names],
                yerr=[accs[n][1] for n in names], marker='o', ms=3,
                capsize=2, lw=1.2, label=labels[variant],
                color=colours[VARIANT_NAMES.index(variant)],
                linestyle='-' if 'peg' in variant else '--')
        ax.axhline(100 / NUM_CLASSES, color='grey', lw=0.8, ls=':')
        ax.set_title(titles[protocol], fontsize=9)
        ax.set_xticks(sizes, [f'{s}\n({f}x)' for s, f in zip(sizes, FACTORS)])
        ax.set_xlabel(f'test input side, px (trained at {settings.canvas})',
                      fontsize=8)
        ax.tick_params(labelsize=8)
        ax.grid(alpha=0.3)
    axes[0].set_ylabel('top-1 accuracy, % (mean ± sd over seeds)',
                       fontsize=8)
    axes[0].text(sizes[0], 100 / NUM_CLASSES + 1, 'chance', fontsize=7,
                 color='grey')
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
    """One model of the comparison: build, train, test and save it; returns
    its record for results.json. Runs in a worker process with ``--jobs``
    above 1, so it takes only what pickles and rebuilds its data (a second
    or so; the same split and test places as every other run)."""
    x_train, y_train, x_test, y_test = load_split(settings)
    test_sets = make_test_sets(x_test, y_test, settings)
    by_name = {v['name']: v for v in VARIANTS}
    torch.manual_seed(seed)
    cfg = model_config(by_name[name], settings)
    model = build_model(cfg)
    t0 = time.perf_counter()
    stats = train(model, x_train, y_train, settings, seed)
    acc = evaluate(model, test_sets)
    meta = dict(variant=name, seed=seed, accuracy=acc,
                canvas=settings.canvas, settings=asdict(settings))
    work_dir = osp.join(out_dir, name, f'seed{seed}')
    save(model, cfg, work_dir, meta)
    return dict(variant=name, seed=seed, accuracy=acc,
                params=sum(p.numel() for p in model.parameters()),
                work_dir=work_dir, run_time_s=time.perf_counter() - t0,
                **stats)


def _one_thread():
    """Worker start-up: one thread each. With --jobs equal to the cores,
    more threads would only wait on each other; and one thread gives every
    run the same result whatever the job count."""
    torch.set_num_threads(1)


def default_jobs() -> int:
    """The cores this process may use."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return os.cpu_count() or 1


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
    missing = []
    if 'le-rpe' in variants and not rpe_supported():
        log('[reproduce] le-rpe skipped: this CPVT has no rpe_cfg argument')
        missing.append('le-rpe')
    todo = [(v, s) for v in VARIANT_NAMES if v in variants
            and v not in missing for s in seeds]
    jobs = min(jobs, len(todo))
    _, y_train, x_test, y_test = load_split(settings)
    log(f'[reproduce] {len(y_train)} training / {len(y_test)} held-out '
        f'digits ({len(y_test) * settings.test_placements} test images per '
        f'set); {len(todo)} models, {settings.epochs} epochs each, ' +
        (f'{jobs} at a time (one process and thread each)' if jobs > 1
         else f'one at a time, {torch.get_num_threads()} thread(s)'))
    done = {}

    def report(record):
        done[record['variant'], record['seed']] = record
        elapsed = time.perf_counter() - start
        # the mean time of a model so far, for the rest, `jobs` at a time
        per_model = np.mean([r['run_time_s'] for r in done.values()])
        eta = per_model * math.ceil((len(todo) - len(done)) / jobs)
        log(f'[reproduce] {len(done)}/{len(todo)} {record["variant"]} seed '
            f'{record["seed"]}: ' +
            ', '.join(f'{t} {a:.1f}' for t, a in record['accuracy'].items())
            + f' % | loss {record["final_loss"]:.3f}, '
            f'{record["run_time_s"]:.0f} s | elapsed '
            f'{fmt_time(elapsed)}, ETA {fmt_time(eta)}')

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
    summary = summarise(runs)
    results = dict(settings=asdict(settings), variants=VARIANTS,
                   test_sets=TEST_SETS, seeds=list(seeds), missing=missing,
                   runs=runs, summary=summary)
    table = markdown_table(summary, missing)
    if instruments:
        from instruments import run_instruments  # tools/reproduction/
        g = torch.Generator().manual_seed(settings.test_seed + 1)
        canvases, _ = place(
            upscale(x_test[:INSTRUMENT_IMAGES], settings.digit),
            settings.canvas, g)
        results['instruments'], text = run_instruments(
            runs, canvases, (canvases - PIXEL_MEAN) / PIXEL_STD, log=log)
        table += '\n' + text
    results['wall_time_s'] = time.perf_counter() - start
    with open(osp.join(out_dir, 'results.json'), 'w') as f:
        json.dump(results, f, indent=1)
    with open(osp.join(out_dir, 'results.md'), 'w') as f:
        f.write(table)
    plot(summary, settings, [osp.join(out_dir, 'accuracy.png'),
                             osp.join(out_dir, 'accuracy.svg')])
    log('\n' + table)
    log(f'[reproduce] wrote {out_dir}/results.json, results.md, '
        f'accuracy.png, accuracy.svg; wall time '
        f'{fmt_time(results["wall_time_s"])}')
    return results


def quick_settings() -> Settings:
    """A few seconds of training: for the tests, not for numbers."""
    s = Settings(canvas=16, digit=12, max_zoom=1.25, epochs=4,
                 warmup_epochs=1, lr=3e-3)
    s.backbone['arch'] = dict(embed_dims=32, num_layers=4, num_heads=2,
                              feedforward_channels=64)
    return s


def parse_args(argv=None):
    parser = argparse.ArgumentParser(
        description='Train tiny CPVT variants on digit canvases and test '
        'them at larger sizes without fine-tuning')
    parser.add_argument('--variants', nargs='+', choices=VARIANT_NAMES,
                        default=VARIANT_NAMES, help='defaults to all')
    parser.add_argument('--seeds', nargs='+', type=int, default=[0, 1, 2],
                        help='defaults to 0 1 2')
    parser.add_argument('--epochs', type=int,
                        help=f'defaults to {Settings.epochs}')
    parser.add_argument('--out-dir', default='work_dirs/reproduction')
    parser.add_argument('--quick', action='store_true',
                        help='tiny model, 3 epochs (for tests)')
    parser.add_argument('--instruments', action='store_true',
                        help='position probe, translation equivariance and '
                        'attention maps of the seed-0 models')
    parser.add_argument('--jobs', type=int, default=default_jobs(),
                        help='models trained at once, each in its own '
                        'process with one thread (default: the cores, '
                        f'{default_jobs()} here); 1 trains in this process '
                        'with torch\'s threads')
    args = parser.parse_args(argv)
    if args.jobs < 1:
        parser.error(f'--jobs must be 1 or more, got {args.jobs}')
    return args


def main(argv=None):
    args = parse_args(argv)
    settings = quick_settings() if args.quick else Settings()
    if args.epochs is not None:
        settings.epochs = args.epochs
    run(args.variants, args.seeds, settings, args.out_dir,
        instruments=args.instruments, jobs=args.jobs)


if __name__ == '__main__':
    main()
