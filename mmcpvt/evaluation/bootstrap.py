"""What demo/demo.py and projects/digits_canvas/digits_report.py share: a
two-level bootstrap over training runs and test images (paired between
models and test sets), a figure's 95 % interval as a table cell and as
points with bars, and the saving of a figure."""
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
    """A two-level bootstrap over training runs and test images.

    ``scores[model][test]`` holds one score per training run of the model
    (its seeds), in the same run order for every test. Each resample draws
    the runs of each model with replacement (one draw per model, shared by
    its tests, so a run's figures stay together), then the images of each
    image set with replacement (one draw per set, shared by every model and
    by the tests whose ``images`` id is the same: paired), and averages the
    drawn runs' scores. Row 0 is every run and every image once.

    With one run per model this is the bootstrap over the images alone,
    which leaves out how much training runs differ: its interval says what
    another set of test images would do to the same trained models.

    Returns:
        ``{model: {test: [score(all), score(resample 1), ...]}}``.
    """
    sizes = {images[test]: runs[0].num_images
             for tests in scores.values() for test, runs in tests.items()}
    rng = np.random.default_rng(seed)
    num_runs = {model: {len(runs) for runs in tests.values()}
                for model, tests in scores.items()}
    for model, n in num_runs.items():
        assert len(n) == 1, f'{model}: every test needs the same runs, got ' \
            f'{sorted(n)} runs'
    # the run draws first, then the image draws, from one generator
    runs_drawn = {model: np.vstack([np.arange(n), rng.integers(
        0, n, size=(resamples, n))]).T  # (runs, 1 + resamples)
        for model, (n,) in num_runs.items()}
    weights = {key: np.vstack([np.ones(n), rng.multinomial(
        n, np.full(n, 1 / n), size=resamples)])
        for key, n in sorted(sizes.items())}

    def resampled(model, test, runs):
        # the score of every run on every image draw, then the drawn runs
        per_run = np.array([[score(w) for w in weights[images[test]]]
                            for score in runs])  # (runs, 1 + resamples)
        return np.take_along_axis(per_run, runs_drawn[model], 0).mean(0)

    return {model: {test: resampled(model, test, runs)
                    for test, runs in tests.items()}
            for model, tests in scores.items()}


def interval(x: np.ndarray) -> list:
    """``[value, 2.5th, 97.5th percentile]`` of a :func:`bootstrap` row
    (all images once, then the resamples): a figure and its 95 %
    interval."""
    return [float(x[0])] + np.nanpercentile(x[1:], [2.5, 97.5]).tolist()


def cell(x: Optional[list], fmt: str, difference: bool = False) -> str:
    """``value [low, high]``; a difference signed, ``*`` if it excludes 0."""
    f = fmt.replace('{:', '{:+') if difference else fmt
    mark = '*' if difference and x and x[1] * x[2] > 0 else ''
    return x and f'{f.format(x[0])}{mark} [{f.format(x[1])}, ' \
        f'{f.format(x[2])}]' or ''


def plot(panels: list, paths: list, title: str = ''):
    """Panels side by side, each ``(y label, the y of a dotted line or None,
    test sets, {model: (colour index, [[value, low, high] per test set])})``:
    a point and its bar per model and test set."""
    import matplotlib
    from matplotlib.figure import Figure  # no pyplot: no global backend
    fig = Figure(figsize=(10, 3.8))
    axes = fig.subplots(1, len(panels))
    tab10 = matplotlib.colormaps['tab10']
    for ax, (label, line, tests, series) in zip(axes, panels):
        for i, (name, (colour, v)) in enumerate(series.items()):
            v = np.array(v)  # (tests, 3)
            x = np.arange(len(tests)) + (i - (len(series) - 1) / 2) * 0.1
            ax.errorbar(x, v[:, 0], yerr=np.abs(v[:, 1:] - v[:, :1]).T,
                        marker='o', ms=3, capsize=2, lw=0, elinewidth=1.2,
                        label=name, color=tab10(colour))
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
