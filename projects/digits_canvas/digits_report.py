"""The report of projects/digits_canvas/digits_canvas.py: the paired bootstrap
of the accuracy each variant keeps at the larger test sets, the summary,
its markdown tables and plot, and ``--instruments`` (the position probe,
translation equivariance and attention of the trained models).
Imported by digits_canvas.py, which puts tools/, analysis_tools/,
visualization/, demo/ and this directory on ``sys.path``.
"""
import os.path as osp
from typing import Dict, List, Sequence, Tuple

import numpy as np
import paired_bootstrap as paired
import torch
from blocks import block_features
from digits_data import (INSTRUMENT_IMAGES, LABELS, NUM_CLASSES, PIXEL_MEAN,
                         PIXEL_STD, REFERENCE, TEST_SETS, VARIANT_NAMES,
                         Settings, place, upscale)
from models import build_model as build_from_config
from models import get_backbone
from position_probe import position_probe
from translation_equivariance import REGIONS, translation_equivariance
from vis_attention import (attention_maps, default_queries,
                           mean_attention_distance, save_matrix_png,
                           save_query_overlay)

ATTENTION_BLOCK = 1  # the paper's Fig. 5 shows the second encoder


def bootstrap(per_image: Dict[str, Dict[str, np.ndarray]], reference: str,
              resamples: int, seed: int) -> dict:
    """Paired bootstrap over the test images (:func:`paired.bootstrap`).

    ``per_image``: variant -> test set -> (seeds, N) correctness. Each
    resample draws N images with replacement (the same draw for every
    model and test set) and averages over seeds; a variant's *kept* is its
    accuracy on a test set over its accuracy at 1x. Returns variant ->
    test set -> dict(kept, diff): [value, 2.5th, 97.5th percentile] of
    percentages, ``diff`` the kept minus the reference's kept (where the
    reference ran).
    """
    stats = paired.bootstrap(
        {v: {t: paired.Accuracy(c.mean(0)) for t, c in tests.items()}
         for v, tests in per_image.items()},
        dict.fromkeys(TEST_SETS, 'test digits'), resamples, seed)
    kept = {v: {t: 100 * x / acc['1x'] for t, x in acc.items()}
            for v, acc in stats.items()}
    ref = kept.get(reference)
    return {v: {t: dict(kept=paired.interval(x), **{} if ref is None else
                        dict(diff=paired.interval(x - ref[t])))
                for t, x in tests.items()} for v, tests in kept.items()}


def summarise(runs: List[dict], settings: Settings) -> dict:
    """variant -> accuracy (test -> [mean, sd over seeds]), epochs
    ([mean, min, max]) and the bootstrap's kept figures of the runs'
    ``correct``."""
    by_variant = {v: [r for r in runs if r['variant'] == v]
                  for v in dict.fromkeys(r['variant'] for r in runs)}
    per_image = {v: {t: np.stack([r['correct'][t] for r in mine])
                     for t in TEST_SETS}  # (seeds, N)
                 for v, mine in by_variant.items()}
    boot = bootstrap(per_image, REFERENCE, settings.resamples,
                     settings.bootstrap_seed)
    out = {}
    for v, mine in by_variant.items():
        epochs = [r['epochs'] for r in mine]
        out[v] = dict(
            accuracy={t: [float(100 * c.mean(1).mean()),
                          float(100 * c.mean(1).std(ddof=1))
                          if len(c) > 1 else 0.]
                      for t, c in per_image[v].items()},
            epochs=[float(np.mean(epochs)), min(epochs), max(epochs)],
            kept=boot[v])
    return out


def markdown_table(title: str, columns: List[str], rows: list) -> str:
    """A titled markdown table: a row ``(name, cells)`` per variant."""
    return (f'{title}:\n\n| variant | ' + ' | '.join(columns) + ' |\n|---|' +
            '---:|' * len(columns) + '\n' + ''.join(
                f'| {name} | ' + ' | '.join(cells) + ' |\n'
                for name, cells in rows))


def markdown_tables(summary: dict) -> str:
    """The tables of results.md: the accuracy kept at each test size, the
    difference to :data:`REFERENCE`'s (where it ran), the accuracies and
    epochs."""
    tests = list(TEST_SETS)[1:]
    parts = [markdown_table(
        'Accuracy kept, % of the model\'s own 1x accuracy [paired bootstrap '
        '95 % interval]', tests,
        [(LABELS[v], [paired.cell(s['kept'][t]['kept'], '{:.1f}')
                      for t in tests])
         for v, s in summary.items()])]
    if REFERENCE in summary:
        parts.append(markdown_table(
            f'Kept minus {LABELS[REFERENCE]}\'s kept, points [95 %]', tests,
            [(LABELS[v], [paired.cell(s['kept'][t]['diff'], '{:+.1f}')
                          for t in tests])
             for v, s in summary.items() if v != REFERENCE]))
    parts.append(markdown_table(
        'Top-1 accuracy, % (mean ± sd over seeds), and epochs trained '
        '(mean, min-max; patience on the validation split)',
        list(TEST_SETS) + ['epochs'],
        [(LABELS[v], [f'{m:.1f} ± {sd:.1f}'
                      for m, sd in s['accuracy'].values()] +
          ['{:.0f} ({}-{})'.format(*s['epochs'])])
         for v, s in summary.items()]))
    return '\n'.join(parts)


def plot(summary: dict, paths: Sequence[str]):
    """Two panels over the test sets: accuracy (mean ± sd over seeds) and
    accuracy kept relative to 1x (bootstrap 95 % intervals)."""
    tests = list(TEST_SETS)

    def series(values):
        return {LABELS[v]: (VARIANT_NAMES.index(v), values(s))
                for v, s in summary.items()}

    paired.plot([
        ('top-1 accuracy, % (mean ± sd over seeds)', 100 / NUM_CLASSES,
         tests, series(lambda s: [[m, m - sd, m + sd] for m, sd in (
             s['accuracy'][t] for t in tests)])),
        ('kept, % of own 1x (bootstrap 95 %)', 100, tests[1:], series(
            lambda s: [s['kept'][t]['kept'] for t in tests[1:]]))], paths)


def run_instruments(runs: List[dict], digits: torch.Tensor,
                    settings: Settings) -> Tuple[dict, str]:
    """``--instruments``: the position probe, translation equivariance
    (tools/analysis_tools/) and the attention of block
    :data:`ATTENTION_BLOCK` (tools/visualization/vis_attention.py) of the
    lowest-seed model of every variant in ``runs``, loaded back from its
    work_dir, on :data:`INSTRUMENT_IMAGES` of the (N, 1, 8, 8) ``digits``
    at places of their own (what they measure: docs/reproduction.md,
    "Instruments on the trained models").

    Returns:
        tuple: (results per variant, markdown table). PNGs of the attention
        go to each model's work_dir.
    """
    canvases, _ = place(
        upscale(digits[:INSTRUMENT_IMAGES], settings.digit), settings.canvas,
        torch.Generator().manual_seed(settings.test_seed + 2))
    images = (canvases - PIXEL_MEAN) / PIXEL_STD
    lowest = min(r['seed'] for r in runs)
    results = {}
    for run in [r for r in runs if r['seed'] == lowest]:
        model, _, _ = build_from_config(
            osp.join(run['work_dir'], 'config.py'),
            osp.join(run['work_dir'], 'checkpoint.pth'))
        backbone = get_backbone(model)
        blocks = (0, backbone.num_layers - 1)
        maps = block_features(backbone, images, blocks)
        equiv = {e['block']: e for e in translation_equivariance(
            backbone, images, shifts=(1, 2, 3), mode='circular',
            blocks=blocks)}
        attn = attention_maps(backbone, images, ATTENTION_BLOCK)
        png = osp.join(run['work_dir'], f'attention_block{ATTENTION_BLOCK}')
        title = f'{run["variant"]}: block {ATTENTION_BLOCK}, head 0'
        save_matrix_png(attn.matrix(0, 0), png + '_matrix.png', title)
        rgb = np.repeat(canvases[0, 0, :, :, None].numpy(), 3, axis=2)
        save_query_overlay(attn, rgb, default_queries(attn),
                           png + '_queries.png', title=title)
        probe = {b: position_probe(maps[b]) for b in blocks}
        results[run['variant']] = dict(
            seed=run['seed'],
            position_probe={f'block {b}': {k: probe[b][k]['r2']
                                           for k in REGIONS}
                            for b in blocks},
            equivariance={f'block {b}': {k: equiv[b][k] for k in REGIONS}
                          for b in blocks},
            attention=dict(block=ATTENTION_BLOCK, head=0,
                           mean_distance_tokens=float(np.mean([
                               mean_attention_distance(attn, image=i)
                               for i in range(len(images))])),
                           matrix_png=png + '_matrix.png',
                           queries_png=png + '_queries.png'))
        print(f'[instruments] {run["variant"]}: done')

    def fmt(v) -> str:
        return 'n/a' if v is None or v != v else f'{v:.3f}'

    return results, markdown_table(
        'Position probe (R^2 of (row, column) from a token; held-out '
        'canvases) and translation equivariance (relative error, circular '
        'shifts of 1-3 patches), interior / border tokens; mean attention '
        f'distance of block {ATTENTION_BLOCK}, head 0, in tokens',
        ['probe R² block 0', 'probe R² last', 'equiv. error block 0',
         'equiv. error last', 'attention distance'],
        [(name, [f'{fmt(r[k][b]["interior"])} / {fmt(r[k][b]["border"])}'
                 for k in ('position_probe', 'equivariance') for b in r[k]] +
          [f'{r["attention"]["mean_distance_tokens"]:.2f}'])
         for name, r in results.items()])
