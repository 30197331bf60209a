"""The report of projects/digits_canvas/digits_canvas.py: the paired
bootstrap over seeds and test digits of the accuracy each variant has and
keeps at the larger test sets, the summary, its markdown tables and plots (the test sets; the
validation accuracy over the epochs), and ``--instruments`` (the position
probe, translation equivariance and attention of the trained models).
"""
import os.path as osp
from typing import Dict, List, Sequence, Tuple

import numpy as np
import torch

import mmcpvt.evaluation.bootstrap as paired
from mmcpvt.analysis.attention import (attention_maps, default_queries,
                                       mean_attention_distance,
                                       save_matrix_png, save_query_overlay)
from mmcpvt.analysis.blocks import block_features
from mmcpvt.analysis.equivariance import REGIONS, translation_equivariance
from mmcpvt.analysis.position_probe import position_probe
from mmcpvt.apis.model import build_model as build_from_config
from mmcpvt.apis.model import get_backbone
from digits_data import (INSTRUMENT_IMAGES, LABELS, NUM_CLASSES, PIXEL_MEAN,
                         PIXEL_STD, REFERENCE, TEST_SETS, VARIANT_NAMES,
                         VERSUS, Settings, place, upscale)

ATTENTION_BLOCK = 1  # the paper's Fig. 5 shows the second encoder


def bootstrap(per_image: Dict[str, Dict[str, np.ndarray]],
              contrasts: Sequence[Tuple[str, str]], resamples: int,
              seed: int) -> Tuple[dict, dict]:
    """The paired bootstrap (:func:`paired.bootstrap`) of accuracy, kept
    and their differences, and their 95 % intervals
    (:func:`paired.interval`).

    ``per_image``: variant -> test set -> (seeds, N) correctness, the seeds
    in the same order in every test set. A run resample draws every
    variant's seeds with replacement (one draw per variant, shared by its
    test sets); an image resample draws N test digits with replacement (one
    draw, shared by every variant and test set). A variant's *kept* is its
    accuracy on a test set over its accuracy at 1x, both of the same
    resample. ``contrasts``: (a, b) pairs of variants whose differences (a
    minus b) are wanted.

    Returns:
        tuple: ``{variant: {test: dict(accuracy, kept)}}`` and
        ``{a: {b: {test: dict(accuracy, kept)}}}``, each figure
        ``[value, low, high]`` over the variant's seeds (a difference: the
        fewer of the two, and its p-value after them) (%, or points for
        differences).
    """
    acc = paired.bootstrap(
        {v: {t: [paired.Accuracy(run) for run in c] for t, c in tests.items()}
         for v, tests in per_image.items()},
        dict.fromkeys(TEST_SETS, 'test digits'), resamples, seed)
    rows = {v: dict(accuracy=a, kept={t: 100 * x / a['1x']
                                      for t, x in a.items()})
            for v, a in acc.items()}

    runs = {v: len(next(iter(tests.values())))
            for v, tests in per_image.items()}
    variants = {v: {t: {k: paired.interval(rows[v][k][t], runs[v])
                        for k in rows[v]} for t in acc[v]} for v in rows}
    differences = {}
    for a, b in contrasts:
        n = min(runs[a], runs[b])
        differences.setdefault(a, {})[b] = {t: {k: paired.interval(
            d, n) + [paired.p_value(d, n)] for k in rows[a] for d in [
                rows[a][k][t] - rows[b][k][t]]} for t in acc[a]}
    return variants, differences


def contrasts_of(variants: Sequence[str]) -> List[Tuple[str, str]]:
    """(a, b) pairs among ``variants``: every variant against
    :data:`REFERENCE`, each control against its ``versus``."""
    pairs = [(v, REFERENCE) for v in variants
             if REFERENCE in variants and v != REFERENCE]
    pairs += [(v, b) for v in variants for b in VERSUS.get(v, ())
              if b in variants]
    return pairs


def summarise(runs: List[dict], settings: Settings) -> dict:
    """variant -> accuracy (test -> [mean, sd over seeds]), ``interval``
    (test -> accuracy and kept, 95 % intervals), ``seeds`` (accuracy and
    kept -> test -> each seed's) and ``versus`` (other
    variant -> test -> the differences of accuracy and kept) of the runs'
    ``correct``."""
    by_variant = {v: [r for r in runs if r['variant'] == v]
                  for v in dict.fromkeys(r['variant'] for r in runs)}
    per_image = {v: {t: np.stack([r['correct'][t] for r in mine])
                     for t in TEST_SETS}  # (seeds, N)
                 for v, mine in by_variant.items()}
    intervals, differences = bootstrap(
        per_image, contrasts_of(list(by_variant)), settings.resamples,
        settings.bootstrap_seed)
    return {v: dict(
        accuracy={t: [float(100 * c.mean(1).mean()),
                      float(100 * c.mean(1).std(ddof=1)) if len(c) > 1 else 0.]
                  for t, c in per_image[v].items()},
        seeds=dict(  # each seed's figures, in the order of the runs
            accuracy={t: (100 * c.mean(1)).tolist()
                      for t, c in per_image[v].items()},
            kept={t: (100 * c.mean(1) / per_image[v]['1x'].mean(1)).tolist()
                  for t, c in per_image[v].items()}),
        interval=intervals[v], versus=differences.get(v, {}))
        for v in by_variant}


def markdown_table(title: str, columns: List[str], rows: list) -> str:
    """A titled markdown table: a row ``(name, cells)`` per variant."""
    return (f'{title}:\n\n| variant | ' + ' | '.join(columns) + ' |\n|---|' +
            '---:|' * len(columns) + '\n' + ''.join(
                f'| {name} | ' + ' | '.join(cells) + ' |\n'
                for name, cells in rows))


def markdown_tables(summary: dict, recipes: str) -> str:
    """The tables of results.md: accuracy, the accuracy kept at each test
    size, and the differences of 1x accuracy and kept to
    :data:`REFERENCE` and between each control and what it controls."""
    tests = list(TEST_SETS)
    boot = ' [95 % interval]'
    parts = [markdown_table(
        f'Top-1 accuracy, % (mean ± sd over seeds){boot}; recipes: '
        f'{recipes}', tests,
        [(LABELS[v], [f'{m:.1f} ± {sd:.1f} [{lo:.1f}, {hi:.1f}]'
                      for (m, sd), (_, lo, hi) in zip(
                          s['accuracy'].values(),
                          (s['interval'][t]['accuracy'] for t in tests))])
         for v, s in summary.items()]),
        markdown_table(
            f'Accuracy kept, % of the model\'s own 1x accuracy{boot}',
            tests[1:], [(LABELS[v], [paired.cell(
                s['interval'][t]['kept'], '{:.1f}') for t in tests[1:]])
                for v, s in summary.items()])]
    columns = ['1x accuracy'] + [f'kept {t}' for t in tests[1:]]
    pairs = contrasts_of(list(summary))
    figure = {(a, b, t): summary[a]['versus'][b][t][
        'accuracy' if t == '1x' else 'kept'] for a, b in pairs for t in tests}
    # the family: every difference these tables print
    kept = dict(zip(figure, paired.holm([x[3] for x in figure.values()])))
    stars = (f'; * the interval excludes 0 (each on its own), † also after '
             f'Holm\'s correction over the {len(figure)} differences of '
             'these tables')

    def rows(chosen):
        return [(f'{LABELS[a]} − {LABELS[b]}', [paired.cell(
            figure[a, b, t], '{:.1f}', difference=True) + '†' * kept[a, b, t]
            for t in tests]) for a, b in chosen]

    for title, chosen in (
            (f'Differences to {LABELS.get(REFERENCE)}, points{boot}{stars}',
             [p for p in pairs if p[1] == REFERENCE]),
            (f'Controls: differences to the variants they control, points'
             f'{boot}{stars}', [p for p in pairs if p[1] != REFERENCE])):
        if chosen:
            parts.append(markdown_table(title, columns, rows(chosen)))
    return '\n'.join(parts)


def plot(summary: dict, paths: Sequence[str]):
    """Two panels over the test sets: accuracy and accuracy kept relative
    to 1x (95 % intervals; small points: each seed)."""
    tests = list(TEST_SETS)

    def series(key, shown):
        return {LABELS[v]: (VARIANT_NAMES.index(v) % 10,
                            [s['interval'][t][key] for t in shown],
                            [s['seeds'][key][t] for t in shown])
                for v, s in summary.items()}

    paired.plot([
        ('top-1 accuracy, % (95 % interval; points: seeds)', 100 / NUM_CLASSES,
         tests, series('accuracy', tests)),
        ('kept, % of own 1x (95 % interval; points: seeds)', 100, tests[1:],
         series('kept', tests[1:]))], paths)


def plot_validation(runs: List[dict], paths: Sequence[str], title: str = ''):
    """Validation accuracy against epoch: a thin line per run, a thick one
    per variant (the mean over its seeds)."""
    import matplotlib
    from matplotlib.figure import Figure  # no pyplot: no global backend
    fig = Figure(figsize=(6.4, 3.8))
    ax = fig.subplots()
    tab10 = matplotlib.colormaps['tab10']
    for v in dict.fromkeys(r['variant'] for r in runs):
        val = np.array([r['val_accuracy'] for r in runs
                        if r['variant'] == v])  # (seeds, epochs)
        epochs = np.arange(1, val.shape[1] + 1)
        i = VARIANT_NAMES.index(v)  # tab10's colours, then dashed again
        colour, ls = tab10(i % 10), '-' if i < 10 else '--'
        ax.plot(epochs, val.mean(0), color=colour, lw=1.6, ls=ls,
                label=f'{LABELS[v]} ({len(val)} seeds)')
        ax.plot(epochs, val.T, color=colour, lw=0.5, ls=ls, alpha=0.5)
    ax.axhline(100 / NUM_CLASSES, color='grey', lw=0.8, ls=':')
    ax.set_xlabel('epoch', fontsize=8)
    ax.set_ylabel('validation accuracy at 1x, % (thick: mean; thin: each '
                  'seed)', fontsize=7)
    ax.tick_params(labelsize=8)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7, loc='lower right', frameon=False)
    if title:
        ax.set_title(title, fontsize=8)
    paired.save_figure(fig, paths)


def run_instruments(runs: List[dict], digits: torch.Tensor,
                    settings: Settings) -> Tuple[dict, str]:
    """``--instruments``: the position probe, translation equivariance
    and the attention of block :data:`ATTENTION_BLOCK`
    (:mod:`mmcpvt.analysis`) of every
    model in ``runs``, loaded back from its work_dir, on
    :data:`INSTRUMENT_IMAGES` of the (N, 1, 8, 8) ``digits`` at places of
    their own (what they measure: docs/reproduction.md, "Instruments on the
    trained models").

    Returns:
        tuple: (results per variant, each figure a list over its seeds;
        markdown table of their means, and of the attention distance's
        lowest and highest). PNGs of the attention of each variant's
        lowest seed go to its work_dir.
    """
    canvases, _ = place(
        upscale(digits[:INSTRUMENT_IMAGES], settings.digit), settings.canvas,
        torch.Generator().manual_seed(settings.test_seed + 2))
    images = (canvases - PIXEL_MEAN) / PIXEL_STD
    results = {}
    for run in sorted(runs, key=lambda r: r['seed']):
        model, _, _ = build_from_config(
            osp.join(run['work_dir'], 'config.py'),
            osp.join(run['work_dir'], 'checkpoint.pth'))
        backbone = get_backbone(model)
        blocks = (0, backbone.num_layers - 1)
        maps = block_features(backbone, images, blocks)
        equiv = {e['block']: e for e in translation_equivariance(
            backbone, images, shifts=(1, 2, 3), mode='circular',
            blocks=blocks)}
        probe = {b: position_probe(maps[b]) for b in blocks}
        attn = attention_maps(backbone, images, ATTENTION_BLOCK)
        distance = float(np.mean([mean_attention_distance(attn, image=i)
                                  for i in range(len(images))]))
        if run['variant'] not in results:  # the lowest seed: its PNGs
            png = osp.join(run['work_dir'],
                           f'attention_block{ATTENTION_BLOCK}')
            title = (f'{run["variant"]} seed {run["seed"]}: block '
                     f'{ATTENTION_BLOCK}, head 0')
            save_matrix_png(attn.matrix(0, 0), png + '_matrix.png', title)
            rgb = np.repeat(canvases[0, 0, :, :, None].numpy(), 3, axis=2)
            save_query_overlay(attn, rgb, default_queries(attn),
                               png + '_queries.png', title=title)
            results[run['variant']] = dict(
                seeds=[], position_probe={}, equivariance={},
                attention=dict(block=ATTENTION_BLOCK, head=0,
                               mean_distance_tokens=[],
                               matrix_png=png + '_matrix.png',
                               queries_png=png + '_queries.png'))
        r = results[run['variant']]
        r['seeds'].append(run['seed'])
        r['attention']['mean_distance_tokens'].append(distance)
        for b in blocks:
            for k in REGIONS:
                for name, value in (('position_probe', probe[b][k]['r2']),
                                    ('equivariance', equiv[b][k])):
                    r[name].setdefault(f'block {b}', {}).setdefault(
                        k, []).append(value)
        print(f'[instruments] {run["variant"]} seed {run["seed"]}: done')

    def fmt(values) -> str:
        v = np.mean([np.nan if x is None else x for x in values])
        return 'n/a' if v != v else f'{v:.3f}'

    results = {v: results[v] for v in dict.fromkeys(r['variant']
                                                    for r in runs)}
    return results, markdown_table(
        'Position probe (R^2 of (row, column) from a token; held-out '
        'canvases) and translation equivariance (relative error, circular '
        'shifts of 1-3 patches), interior / border tokens; mean attention '
        f'distance of block {ATTENTION_BLOCK}, head 0, in tokens [lowest, '
        'highest seed]; means over the seeds',
        ['seeds', 'probe R² block 0', 'probe R² last', 'equiv. error block 0',
         'equiv. error last', 'attention distance'],
        [(LABELS[name], [str(len(r['seeds']))] + [
            f'{fmt(r[k][b]["interior"])} / {fmt(r[k][b]["border"])}'
            for k in ('position_probe', 'equivariance') for b in r[k]] +
          ['{:.2f} [{:.2f}, {:.2f}]'.format(
              np.mean(d), min(d), max(d)) for d in [
                  r['attention']['mean_distance_tokens']]])
         for name, r in results.items()])
