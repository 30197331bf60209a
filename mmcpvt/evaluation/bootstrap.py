"""What demo/demo.py and projects/digits_canvas/digits_report.py share: a
bootstrap over training runs and over test images (paired between models
and test sets), a figure's 95 % interval from it (Student's t over the
runs) as a table cell and as points with bars, and the saving of a
figure."""
from typing import Callable, Dict, Optional, Sequence

import numpy as np


class Accuracy:
    """Top-1 (%) of one run's per-image results (1: right, 0: wrong), image
    ``i`` counted ``w[i]`` times: ``score(w)``."""

    def __init__(self, correct):
        self.correct = np.asarray(correct, float)
        self.num_images = len(self.correct)

    def __call__(self, w: np.ndarray) -> float:
        return float(100 * (w @ self.correct) / w.sum())


def bootstrap(scores: Dict[str, Dict[str, Sequence[Callable]]],
              images: Dict[str, str], resamples: int, seed: int = 0) -> dict:
    """A bootstrap over training runs and over test images, one level at a
    time, for :func:`interval`.

    ``scores[model][test]`` holds one score per training run of the model
    (its seeds), in the same run order for every test. A *run* resample
    draws the runs of each model with replacement (one draw per model,
    shared by its tests, so a run's figures stay together) and scores every
    image once; an *image* resample draws the images of each image set with
    replacement (one draw per set, shared by every model and by the tests
    whose ``images`` id is the same: paired) and averages every run once.
    Row 0 is every run and every image once.

    The two levels are drawn apart, not together, because drawing both in
    one resample counts the runs' disagreement on single images twice, and
    because :func:`interval` needs each level's spread (the runs' is
    uncertain with few runs: Student's t; the images' is not).

    Returns:
        ``{model: {test: [score(all), run resamples (``resamples``),
        image resamples (``resamples``)]}}``.
    """
    sizes = {images[test]: runs[0].num_images
             for tests in scores.values() for test, runs in tests.items()}
    rng = np.random.default_rng(seed)
    num_runs = {model: {len(runs) for runs in tests.values()}
                for model, tests in scores.items()}
    for model, n in num_runs.items():
        if len(n) != 1:
            raise ValueError(f'{model}: every test needs the same runs, got '
                             f'{sorted(n)} runs')
    # the run draws first, then the image draws, from one generator
    runs_drawn = {model: rng.integers(0, n, size=(resamples, n))
                  for model, (n,) in num_runs.items()}
    weights = {key: np.vstack([np.ones(n), rng.multinomial(
        n, np.full(n, 1 / n), size=resamples)])
        for key, n in sorted(sizes.items())}

    def resampled(model, test, runs):
        # the score of every run on every image draw (column 0: all once)
        per_run = np.array([[score(w) for w in weights[images[test]]]
                            for score in runs])  # (runs, 1 + resamples)
        return np.concatenate([per_run[:, :1].mean(0),
                               per_run[runs_drawn[model], 0].mean(1),
                               per_run[:, 1:].mean(0)])

    return {model: {test: resampled(model, test, runs)
                    for test, runs in tests.items()}
            for model, tests in scores.items()}


def interval(x: np.ndarray, runs: int = 1) -> list:
    """``[value, low, high]``: a :func:`bootstrap` row's figure (all runs
    and images once, ``x[0]``) and its 95 % interval, for a figure of
    ``runs`` training runs per model (a difference of two models: the
    fewer).

    value +- t * se, where se**2 adds the spread of the run resamples,
    widened by n / (n - 1) (a resample of n runs spreads by (n - 1) / n of
    what a new set of n runs would: Hesterberg, "What teachers should know
    about the bootstrap", The American Statistician 69(4), 2015, Sec. 3),
    to that of the image resamples; t is Student's 97.5 % quantile with
    Welch-Satterthwaite's degrees of freedom, n - 1 for the runs' part and
    unbounded for the images' (Satterthwaite, Biometrics Bulletin 2(6),
    1946). With few runs, the resamples' plain spread and the normal
    quantile are too narrow where the runs' spread dominates (in the
    simulation of tests/test_evaluation/test_bootstrap.py they cover 92 %
    at 5 runs and 85 % at 3); this interval holds its 95 % there (96 % and
    93 %), and is wider than needed where the images dominate. With one run
    it is the images' normal interval: it says what another set of test
    images would do to the same trained models, not another training run.
    """
    se, df = _se_df(x, runs)
    from scipy.stats import t
    half = float(t.ppf(0.975, df) * se)
    return [float(x[0]), float(x[0]) - half, float(x[0]) + half]


def p_value(x: np.ndarray, runs: int = 1) -> float:
    """The two-sided p-value of "the figure is 0" that goes with
    :func:`interval` (below 0.05 exactly when the interval excludes 0)."""
    se, df = _se_df(x, runs)
    from scipy.stats import t
    return float(2 * t.sf(abs(x[0]) / se, df)) if se > 0 else float(
        x[0] == 0)


def _se_df(x: np.ndarray, runs: int) -> tuple:
    """:func:`interval`'s standard error and degrees of freedom."""
    resamples = (len(x) - 1) // 2
    run_part, image_part = x[1:resamples + 1], x[resamples + 1:]
    v_runs = np.nanvar(run_part, ddof=1) * runs / (runs - 1) if runs > 1 \
        else 0.
    v_images = np.nanvar(image_part, ddof=1)
    df = (v_runs + v_images)**2 * (runs - 1) / v_runs**2 if v_runs else \
        np.inf
    return float(np.sqrt(v_runs + v_images)), df


def holm(p_values: Sequence[float], alpha: float = 0.05) -> list:
    """Which of a family of hypotheses Holm's step-down procedure rejects at
    family-wise error ``alpha`` (Holm, Scand. J. Statist. 6(2), 1979): the
    k-th smallest p-value against alpha / (m - k + 1), stopping at the
    first that is not below."""
    rejected, m = [False] * len(p_values), len(p_values)
    for k, i in enumerate(np.argsort(p_values, kind='stable')):
        if p_values[i] > alpha / (m - k):
            break
        rejected[i] = True
    return rejected


def cell(x: Optional[list], fmt: str, difference: bool = False) -> str:
    """``value [low, high]``; a difference signed, ``*`` if it excludes 0."""
    f = fmt.replace('{:', '{:+') if difference else fmt
    mark = '*' if difference and x and x[1] * x[2] > 0 else ''
    return x and f'{f.format(x[0])}{mark} [{f.format(x[1])}, ' \
        f'{f.format(x[2])}]' or ''


def plot(panels: list, paths: list, title: str = ''):
    """Panels side by side, each ``(y label, the y of a dotted line or None,
    test sets, {model: (colour index, [[value, low, high] per test set][,
    [each run's value per test set]])})``: a point and its bar per model
    and test set, and beside it a small point per run when given (where
    runs spread widely, a mean and its bar hide it)."""
    import matplotlib
    from matplotlib.figure import Figure  # no pyplot: no global backend
    fig = Figure(figsize=(10, 3.8))
    axes = fig.subplots(1, len(panels))
    tab10 = matplotlib.colormaps['tab10']
    for ax, (label, line, tests, series) in zip(axes, panels):
        for i, (name, (colour, v, *runs)) in enumerate(series.items()):
            v = np.array(v)  # (tests, 3)
            x = np.arange(len(tests)) + (i - (len(series) - 1) / 2) * 0.12
            ax.errorbar(x, v[:, 0], yerr=np.abs(v[:, 1:] - v[:, :1]).T,
                        marker='o', ms=3, capsize=2, lw=0, elinewidth=1.2,
                        label=name, color=tab10(colour))
            for xi, values in zip(x, runs[0] if runs else ()):
                ax.plot(np.full(len(values), xi + 0.04), values, lw=0,
                        marker='.', ms=2.5, alpha=0.6, color=tab10(colour))
        if line is not None:
            ax.axhline(line, color='grey', lw=0.8, ls=':')
        ax.set_ylabel(label, fontsize=8)
        ax.set_xticks(range(len(tests)), [n.replace(' ', '\n') for n in tests])
        ax.tick_params(labelsize=8)
        ax.grid(alpha=0.3, axis='y')
    handles, names = axes[0].get_legend_handles_labels()
    fig.legend(handles, names, fontsize=7, loc='center left',
               bbox_to_anchor=(1, 0.5), frameon=False)
    if title:
        fig.suptitle(title, fontsize=8, wrap=True)
    save_figure(fig, paths)


def save_figure(fig, paths: Sequence[str]):
    """Save a matplotlib ``fig`` to each of ``paths`` (.png, .svg), laid
    out tight; an SVG keeps its text as text (a small file) and the same
    figure gives the same file (no date, a fixed hash salt)."""
    import matplotlib
    fig.tight_layout()
    with matplotlib.rc_context({'svg.fonttype': 'none',
                                'svg.hashsalt': 'digits-canvas'}):
        for path in paths:
            fig.savefig(path, dpi=110 if path.endswith('.png') else None,
                        bbox_inches='tight', metadata=dict(Date=None)
                        if path.endswith('.svg') else None)
