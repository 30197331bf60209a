"""The report of digits_canvas.py: paired bootstrap, summary, markdown
tables and plot.
"""
from typing import Dict, List, Sequence

import numpy as np
from digits_data import (LABELS, NUM_CLASSES, REFERENCE, TEST_SETS,
                         VARIANT_NAMES, Settings)


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

    def interval(k, key, sign=''):
        return (f'{k[key]:{sign}.1f} [{k[key + "_ci"][0]:{sign}.1f}, '
                f'{k[key + "_ci"][1]:{sign}.1f}]')

    tests = list(TEST_SETS)[1:]
    parts = [markdown_table(
        'Accuracy kept, % of the model\'s own 1x accuracy [paired bootstrap '
        '95 % interval]', tests,
        [(LABELS[v], [interval(s['kept'][t], 'kept') for t in tests])
         for v, s in summary.items()])]
    if REFERENCE in summary:
        parts.append(markdown_table(
            f'Kept minus {LABELS[REFERENCE]}\'s kept, points [95 %]', tests,
            [(LABELS[v], [interval(s['kept'][t], 'diff', '+') for t in tests])
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
