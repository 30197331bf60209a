"""A small-scale analogue of CPVT's Table 2 on real digits.

Conditional Positional Encodings for Vision Transformers, Chu et al.,
ICLR 2023 (https://arxiv.org/abs/2102.10882), Table 2 (Sec. 4.2) and
Table 8 (Sec. 5.3): tiny CPVT classifiers that differ only in their
position encoding (:data:`VARIANTS`) are trained on scikit-learn's digits
pasted on a canvas and tested, unchanged, on the larger inputs of
:data:`TEST_SETS`. Set-up, outputs and results: docs/reproduction.md.

Usage: python projects/digits_canvas/digits_canvas.py [--instruments] [--quick]
"""
import argparse
import contextlib
import copy
import json
import math
import multiprocessing
import os
import os.path as osp
import time
from dataclasses import asdict, replace
from typing import Optional, Sequence

import numpy as np
import torch
from mmengine.config import Config

from mmcpvt.apis.cli import check_options, checked, positive
from mmcpvt.apis.model import build_model as build_from_config
from mmcpvt.utils.path import check_output_dir
# this project's own modules, beside this file (the script's folder)
from digits_data import (CONTROL_VARIANTS, DEFAULT_VARIANTS, NUM_CLASSES,
                         PIXEL_MEAN, PIXEL_STD, REFERENCE, ROPE_VARIANTS,
                         TEST_SETS,
                         LABELS, VARIANT_NAMES, VARIANTS, Settings,
                         epochs_of, load_split, lr_of, recipes,
                         make_test_sets, place, random_zoom, upscale)
from digits_report import (markdown_table, markdown_tables, plot,
                           plot_validation,
                           run_instruments, summarise)

# the learning-rate sweep scores the validation accuracy of the last epochs
# (the curve's end, less noisy than its last point)
TUNE_LAST_EPOCHS = 5


def model_config(variant: dict, settings: Settings) -> Config:
    """An mmpretrain ImageClassifier with the CPVT backbone and a linear
    head. The data preprocessor maps 0..255 images to [-1, 1] as
    :func:`logits` does with the [0, 1] canvases; ``test_pipeline`` reads a
    grey-level image file unresized (for the inferencers and
    tools/visualization/vis_attention.py)."""
    backbone = copy.deepcopy(dict(settings.backbone, **variant['backbone'],
                                  img_size=settings.canvas))
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
    """Build and initialise ``cfg.model`` with mmpretrain's ``init_model``
    (:func:`mmcpvt.apis.model.build_model`), drawing from torch's global
    random state as seeded by the caller."""
    return build_from_config(cfg, seed=None)[0]


def logits(model: torch.nn.Module, images: torch.Tensor) -> torch.Tensor:
    """Class scores of [0, 1] canvases (normalised as the config's data
    preprocessor does)."""
    return model((images - PIXEL_MEAN) / PIXEL_STD, mode='tensor')


def param_groups(model: torch.nn.Module, weight_decay: float) -> list:
    """No weight decay on biases, norms, position tables, the class token,
    the PEGs and RoPE-Mixed's frequencies."""
    decay, no_decay = [], []
    for name, p in model.named_parameters():
        # '.pegs.': as Twins gvt.py, where no_weight_decay() lists pos_block.*;
        # '.rope.': as timm's RotaryEmbeddingMixed.no_weight_decay()
        skip = p.ndim <= 1 or any(k in f'.{name}' for k in (
            '.pegs.', '.rope.', 'pos_embed', 'cls_token', 'rpe'))
        (no_decay if skip else decay).append(p)
    return [dict(params=decay, weight_decay=weight_decay),
            dict(params=no_decay, weight_decay=0.)]


def train(model: torch.nn.Module, data: dict, settings: Settings,
          seed: int, val: tuple, lr: float, epochs: int) -> dict:
    """Train in place for ``epochs``, the learning rate (peak ``lr``)
    annealed to zero at the last one, and keep the final weights; ``val`` (1x canvases,
    labels) is scored after every epoch, to watch, not to choose. A plain
    loop, not an mmengine Runner: the data is a tensor regenerated every
    epoch (new places and zooms)."""
    g = torch.Generator().manual_seed(seed)
    x, y = data['train']
    digits, n = upscale(x, settings.digit), len(y)
    steps_per_epoch = math.ceil(n / settings.batch_size)
    total = epochs * steps_per_epoch
    warmup = min(settings.warmup_epochs * steps_per_epoch, total // 2)
    optimizer = torch.optim.AdamW(
        param_groups(model, settings.weight_decay), lr=lr)

    def lr_at(step):  # linear warm-up, then cosine to zero at the end
        if step < warmup:
            return (step + 1) / warmup
        return 0.5 * (1 + math.cos(math.pi * (step - warmup) /
                                   max(1, total - warmup)))

    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lr_at)
    loss_fn = model.head.loss_module
    start, val_acc, losses = time.perf_counter(), [], []
    for _ in range(epochs):
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
        losses.append(loss_sum / n)
        val_acc.append(100 * float(correct(model, *val).mean()))
    model.eval()
    return dict(epochs=epochs, lr=lr, val_accuracy=val_acc,
                train_loss=losses, train_time_s=time.perf_counter() - start)


@torch.no_grad()
def correct(model: torch.nn.Module, images: torch.Tensor,
            labels: torch.Tensor, batch_size: int = 256) -> np.ndarray:
    """Whether each image is classified right: (N,) bool."""
    model.eval()
    preds = [logits(model, images[i:i + batch_size]).argmax(1)
             for i in range(0, len(labels), batch_size)]
    return (torch.cat(preds) == labels).numpy()


def fmt_time(seconds: float) -> str:
    seconds = int(round(seconds))
    return f'{seconds // 60}:{seconds % 60:02d}'


def train_and_test(name: str, seed: int, settings: Settings, out_dir: str,
                   test: bool = True) -> dict:
    """One model: build, train, test and save it (``config.py`` and
    ``checkpoint.pth``, {'state_dict', 'meta'}, which mmpretrain's
    ``init_model`` and :mod:`mmcpvt.apis.model` load); returns its record
    (with ``correct``: test set -> (N,) bool). With ``test`` False (the
    sweeps of :func:`tune`) it neither tests nor saves: the record holds
    the validation curve only. Runs in a worker process with ``--jobs`` above
    1, so it rebuilds its data (a second or so)."""
    data = load_split(settings)
    torch.manual_seed(seed)
    cfg = model_config(VARIANTS[VARIANT_NAMES.index(name)], settings)
    model = build_model(cfg)
    t0, cpu0 = time.perf_counter(), time.process_time()
    x_val, y_val = data['val']  # at 1x, other places than the test sets'
    val = place(upscale(x_val, settings.digit), settings.canvas,
                torch.Generator().manual_seed(settings.test_seed + 1))[0]
    stats = train(model, data, settings, seed, (val, y_val),
                  lr_of(name, settings), epochs_of(name, settings))
    record = dict(variant=name, seed=seed,
                  params=sum(p.numel() for p in model.parameters()))
    if test:
        right = {t: correct(model, *d) for t, d in make_test_sets(
            *data['test'], settings).items()}
        acc = {t: 100 * float(c.mean()) for t, c in right.items()}
        work_dir = osp.join(out_dir, name, f'seed{seed}')
        os.makedirs(work_dir, exist_ok=True)
        with open(osp.join(work_dir, 'config.py'), 'w') as f:
            f.write('# Written by projects/digits_canvas/digits_canvas.py: '
                    f'1-channel {settings.canvas} px digit canvases, images '
                    'in 0..255.\n')
            f.write(cfg.pretty_text)
        torch.save({'state_dict': model.state_dict(), 'meta': dict(
            variant=name, seed=seed, accuracy=acc, canvas=settings.canvas,
            settings=asdict(settings))}, osp.join(work_dir, 'checkpoint.pth'))
        record.update(accuracy=acc, correct=right, work_dir=work_dir)
    return dict(record, run_time_s=time.perf_counter() - t0,
                # this process's CPU: the wall time on an idle core
                cpu_time_s=time.process_time() - cpu0, **stats)


def train_job(job: tuple) -> dict:
    """:func:`train_and_test` of a (name, seed, settings, out_dir[, test])
    tuple."""
    return train_and_test(*job)


def train_all(jobs_list: list, jobs: int):
    """Yield the records of :func:`train_job` of every tuple in
    ``jobs_list``, ``jobs`` at a time (each in its own process with one
    thread when ``jobs`` > 1), in the order they finish."""
    # spawn, not fork: a forked child inherits torch's thread pool; one
    # thread each (more would wait on each other, and one gives every
    # run the same result whatever the job count)
    pool = multiprocessing.get_context('spawn').Pool(
        jobs, torch.set_num_threads, (1, )) if jobs > 1 else None
    with pool or contextlib.nullcontext():  # an error terminates the pool
        yield from (pool.imap_unordered if pool else map)(train_job,
                                                          jobs_list)


def progress(record: dict, trained: list, total: int, jobs: int,
             start: float) -> str:
    """A line on a model just trained: its figures, the elapsed time and an
    estimate of the time left."""
    eta = np.mean([r['run_time_s'] for r in trained]) * math.ceil(
        (total - len(trained)) / jobs)
    return (f'[reproduce] {len(trained)}/{total} {record["variant"]} seed '
            f'{record["seed"]}, lr {record["lr"]:g}: ' + ''.join(
                f'{t} {a:.1f} %, ' for t, a in record.get('accuracy',
                                                          {}).items())
            + f'val {record["val_accuracy"][-1]:.1f} (best '
            f'{max(record["val_accuracy"]):.1f}), loss '
            f'{record["train_loss"][-1]:.3f}, {record["run_time_s"]:.0f} s '
            f'({record["cpu_time_s"]:.0f} s CPU) | elapsed '
            f'{fmt_time(time.perf_counter() - start)}, ETA {fmt_time(eta)}')


def reusable_runs(reuse_dir: str, settings: Settings) -> dict:
    """(variant, seed) -> record, with its per-digit ``correct``, of the runs
    in ``reuse_dir``'s results.json and correct.npz, if trained with
    ``settings`` (the learning rates and lengths of other variants aside:
    each run's own must be the variant's now); none if the directory holds
    no results."""
    path = osp.join(reuse_dir, 'results.json')
    if not osp.isfile(path):
        print(f'[reproduce] --reuse {reuse_dir}: no results.json, nothing '
              'reused')
        return {}
    with open(path) as f:
        old = json.load(f)
    common = lambda s: {k: v for k, v in s.items()  # noqa: E731
                        if k not in ('variant_lr', 'variant_epochs')}
    if common(old['settings']) != common(json.loads(json.dumps(
            asdict(settings)))):
        print(f'[reproduce] --reuse {reuse_dir}: trained with other '
              'settings, nothing reused')
        return {}
    correct = np.load(osp.join(reuse_dir, 'correct.npz'))
    return {(r['variant'], r['seed']): dict(r, correct={
        t: correct[f'{r["variant"]}/seed{r["seed"]}/{t}'] for t in TEST_SETS})
        for r in old['runs'] if r['lr'] == lr_of(r['variant'], settings) and
        r['epochs'] == epochs_of(r['variant'], settings)}


def run(variants: Sequence[str], seeds: Sequence[int], settings: Settings,
        out_dir: str, instruments: bool = False, jobs: int = 1,
        reuse: Optional[str] = None) -> dict:
    """Train and test every variant x seed (``jobs`` at a time, each in its
    own process with one thread when ``jobs`` > 1), taking those that
    ``reuse`` (a former ``out_dir``) holds with the same settings from
    there; write the outputs; return the results (as written to
    results.json)."""
    start = time.perf_counter()
    os.makedirs(out_dir, exist_ok=True)
    todo = [(v, s) for v in VARIANT_NAMES if v in variants for s in seeds]
    done = {key: r for key, r in (reusable_runs(reuse, settings).items()
                                  if reuse else ()) if key in todo}
    to_train = [key for key in todo if key not in done]
    jobs = max(1, min(jobs, len(to_train)))
    data = load_split(settings)
    print(f'[reproduce] {len(data["train"][1])} training / '
          f'{len(data["val"][1])} validation / {len(data["test"][1])} test '
          f'digits; {len(todo)} models ({recipes(variants, settings)})' +
          (f' ({len(done)} taken from {reuse})' if done else '') + ', ' +
          (f'{jobs} at a time (one process and thread each)' if jobs > 1
           else f'one at a time, {torch.get_num_threads()} thread(s)'))
    trained = []
    for record in train_all([(v, s, settings, out_dir) for v, s in to_train],
                            jobs):
        done[record['variant'], record['seed']] = record
        trained.append(record)
        print(progress(record, trained, len(to_train), jobs, start))
    runs = [done[key] for key in todo]  # in table order
    summary = summarise(runs, settings)
    np.savez_compressed(osp.join(out_dir, 'correct.npz'), **{
        f'{r["variant"]}/seed{r["seed"]}/{t}': c
        for r in runs for t, c in r.pop('correct').items()})
    results = dict(settings=asdict(settings), variants=VARIANTS,
                   test_sets=TEST_SETS, reference=REFERENCE,
                   seeds=list(seeds), runs=runs, summary=summary)
    figures = ['accuracy.png', 'accuracy.svg', 'val_accuracy.png',
               'val_accuracy.svg']
    table = (markdown_tables(summary, recipes(list(summary), settings)) +
             '\n![accuracy and kept per test set](accuracy.svg)\n\n'
             '![validation accuracy against epoch](val_accuracy.svg)\n')
    if instruments:
        results['instruments'], text = run_instruments(
            runs, data['test'][0], settings)
        table += '\n' + text
    results['wall_time_s'] = time.perf_counter() - start
    with open(osp.join(out_dir, 'results.json'), 'w') as f:
        json.dump(results, f, indent=1)
    with open(osp.join(out_dir, 'results.md'), 'w') as f:
        f.write(table)
    plot(summary, [osp.join(out_dir, f) for f in figures[:2]])
    plot_validation(runs, [osp.join(out_dir, f) for f in figures[2:]])
    print('\n' + table)
    print(f'[reproduce] wrote {out_dir}/results.json, correct.npz, '
          f'results.md, {", ".join(figures)}; wall time '
          f'{fmt_time(results["wall_time_s"])}; CPU time of the models '
          f'trained {fmt_time(sum(r["cpu_time_s"] for r in trained))}')
    return results


def tune(variants: Sequence[str], seeds: Sequence[int], settings: Settings,
         out_dir: str, lrs: Sequence[float] = (), epochs: Sequence[int] = (),
         match: Optional[float] = None, jobs: int = 1) -> dict:
    """A sweep on the validation digits: train every variant x seed at each
    peak learning rate of ``lrs`` (or each length of ``epochs``), the rest
    of the recipe ``settings``', score the validation digits only (no test
    set is built) and choose for each variant:

    - a learning rate: the highest mean, over the seeds, of the validation
      accuracy over the last :data:`TUNE_LAST_EPOCHS` epochs (the first of
      the grid on a tie);
    - a length: the one whose final validation accuracy, the mean over the
      seeds, is nearest ``match`` (another variant's, to train a variant
      to the same skill; the shorter on a tie).

    Writes tune.json, tune.md and a validation-curve figure per point of
    the grid; returns what tune.json holds.
    """
    start = time.perf_counter()
    os.makedirs(out_dir, exist_ok=True)
    key = 'lr' if lrs else 'epochs'
    grid = list(lrs or epochs)
    todo = [(v, s, replace(settings, lr=x, variant_lr={}) if lrs else
             replace(settings, epochs=x, variant_epochs={}), out_dir, False)
            for x in grid for v in VARIANT_NAMES if v in variants
            for s in seeds]
    jobs = max(1, min(jobs, len(todo)))
    print(f'[tune] {len(todo)} models ({len(grid)} values of {key}), '
          f'{jobs} at a time; validation digits only')
    runs = []
    for record in train_all(todo, jobs):
        runs.append(record)
        print(progress(record, runs, len(todo), jobs, start))
    last = TUNE_LAST_EPOCHS if lrs else 1
    score = {v: {x: [float(np.mean(r['val_accuracy'][-last:]))
                     for s in seeds for r in runs if r['variant'] == v and
                     r['seed'] == s and r[key] == x] for x in grid}
             for v in VARIANT_NAMES if v in variants}
    if lrs:
        choice = {v: max(grid, key=lambda x: (np.mean(by[x]), -grid.index(x)))
                  for v, by in score.items()}
        rule = (f'the mean over the last {TUNE_LAST_EPOCHS} epochs; '
                f'**bold**: the highest, chosen')
    else:
        choice = {v: min(grid, key=lambda x: (abs(np.mean(by[x]) - match), x))
                  for v, by in score.items()}
        rule = f'the final epoch; **bold**: the nearest {match:g}, chosen'
    table = markdown_table(
        f'Validation accuracy at 1x, % ({rule}; mean over seeds '
        f'{", ".join(map(str, seeds))} [each seed])', [
            f'{key} {x:g}' for x in grid],
        [(LABELS[v], [('**{:.1f}**' if choice[v] == x else '{:.1f}').format(
            np.mean(by[x])) + ' [' + ', '.join(f'{y:.1f}' for y in by[x]) +
            ']' for x in grid]) for v, by in score.items()])
    results = dict(settings=asdict(settings), key=key, grid=grid,
                   seeds=list(seeds), match=match, score=score,
                   choice=choice, runs=runs,
                   wall_time_s=time.perf_counter() - start)
    with open(osp.join(out_dir, 'tune.json'), 'w') as f:
        json.dump(results, f, indent=1)
    with open(osp.join(out_dir, 'tune.md'), 'w') as f:
        f.write(table)
    for x in grid:
        plot_validation([r for r in runs if r[key] == x], [
            osp.join(out_dir, f'val_accuracy_{key}{x:g}.{ext}')
            for ext in ('png', 'svg')], f'{key} {x:g}')
    print('\n' + table)
    print(f'[tune] chosen {key}: {choice}; wrote {out_dir}/tune.json, '
          f'tune.md, val_accuracy_{key}*.svg; wall time '
          f'{fmt_time(results["wall_time_s"])}')
    return results


def quick_settings() -> Settings:
    """A few seconds of training: for the tests, not for numbers."""
    s = Settings(canvas=16, digit=12, max_zoom=1.5, epochs=5,
                 warmup_epochs=1, lr=3e-3, variant_lr={}, variant_epochs={},
                 resamples=200)
    s.backbone['arch'] = dict(embed_dims=32, num_layers=4, num_heads=2,
                              feedforward_channels=64)
    return s


def parse_args(argv=None):
    parser = argparse.ArgumentParser(
        description='Train tiny CPVT variants on digit canvases and test '
        'them at larger sizes without fine-tuning')
    add = parser.add_argument
    add('--variants', nargs='+',
        choices=VARIANT_NAMES + ['controls', 'rope', 'all'],
        default=DEFAULT_VARIANTS,
        help=f'default: {DEFAULT_VARIANTS}; controls: {CONTROL_VARIANTS}; '
        f'rope: {ROPE_VARIANTS}')
    add('--seeds', nargs='+', type=int, default=list(range(5)),
        help='default: 0-4')
    add('--epochs', type=int,
        help=f'every model (default: {Settings.epochs}, or the variant\'s '
        'own)')
    add('--out-dir', default='work_dirs/reproduction')
    add('--reuse', metavar='DIR', help='take the runs (variant, seed) that '
        'DIR, the --out-dir of a former run with the same settings, holds '
        'instead of training them again (make reproduce-controls takes the '
        'default run\'s four variants)')
    add('--lr', type=float, help='every model\'s peak learning rate '
        f'(default: {Settings.lr:g}, or the variant\'s own, chosen on the '
        'validation digits)')
    add('--tune-lr', type=float, nargs='+', metavar='LR',
        help='train each variant x seed at each of these peak learning '
        'rates, score the validation digits only, and choose each '
        'variant\'s learning rate (writes tune.json, tune.md)')
    add('--tune-epochs', type=int, nargs='+', metavar='N',
        help='the same for the length: choose the one whose final '
        'validation accuracy is nearest --match')
    add('--match', type=float, metavar='ACC',
        help='with --tune-epochs: the validation accuracy (%%) to match')
    add('--quick', action='store_true', help='tiny model (for tests)')
    add('--instruments', action='store_true', help='position probe, '
        'translation equivariance and attention of the seed-0 models')
    cores = len(os.sched_getaffinity(0))
    add('--jobs', type=int, default=cores,
        help='models trained at once, each in its own process with one '
        f'thread (default: the cores, {cores} here); 1 trains in this '
        'process with torch\'s threads')
    args = parser.parse_args(argv)
    try:
        check_options(checked(int, lambda v: v >= 0, 'must be 0 or more'),
                      seeds=args.seeds)
        check_options(checked(int, lambda v: v >= 1, 'must be 1 or more'),
                      epochs=args.epochs, jobs=args.jobs)
        check_options(positive, lr=args.lr, tune_lr=args.tune_lr,
                      tune_epochs=args.tune_epochs)
        check_output_dir('--out-dir', args.out_dir, 'the results')
    except ValueError as e:
        parser.error(str(e))
    if args.tune_lr and args.tune_epochs:
        parser.error('--tune-lr and --tune-epochs: one sweep at a time')
    if args.tune_epochs and args.match is None:
        parser.error('--tune-epochs needs --match, the validation accuracy '
                     'to train to')
    if len(set(args.seeds)) < len(args.seeds):  # one run per (variant, seed)
        parser.error(f'--seeds: each seed once, got {args.seeds}')
    if 'all' in args.variants:
        args.variants = VARIANT_NAMES
    for group, names in (('controls', CONTROL_VARIANTS),
                         ('rope', ROPE_VARIANTS)):
        if group in args.variants:
            args.variants = names + [v for v in args.variants if v != group]
    return args


def main(argv=None):
    args = parse_args(argv)
    settings = quick_settings() if args.quick else Settings()
    if args.epochs is not None:
        settings.epochs, settings.variant_epochs = args.epochs, {}
    if args.lr is not None:
        settings.lr, settings.variant_lr = args.lr, {}
    if args.tune_lr or args.tune_epochs:
        return tune(args.variants, args.seeds, settings, args.out_dir,
                    args.tune_lr or (), args.tune_epochs or (), args.match,
                    jobs=args.jobs)
    run(args.variants, args.seeds, settings, args.out_dir,
        instruments=args.instruments, jobs=args.jobs, reuse=args.reuse)


if __name__ == '__main__':
    main()
