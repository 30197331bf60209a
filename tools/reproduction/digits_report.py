"""The report of digits_canvas.py: paired bootstrap, summary, markdown
tables and plot, with the statistics and figure it shares with the demo
(tools/paired_bootstrap.py).
"""
from typing import Dict, List, Sequence

import numpy as np
import paired_bootstrap as paired  # tools/, on sys.path: digits_canvas.py
from digits_data import (LABELS, NUM_CLASSES, REFERENCE, TEST_SETS,
                         VARIANT_NAMES, Settings)


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
