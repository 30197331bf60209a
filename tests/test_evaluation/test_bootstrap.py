"""The two-level bootstrap of mmcpvt.evaluation.bootstrap: training runs,
then test images, the image draw paired between models and test sets; and
its figures, saved alike."""
import numpy as np
import pytest

from mmcpvt.evaluation.bootstrap import (Accuracy, bootstrap, interval,
                                         save_figure)


def nested(accuracies, num_images=400):
    """One run per accuracy (%), each right on the first images: runs that
    disagree by much, images that agree (an image one run gets right, every
    better run gets right too)."""
    return [np.arange(num_images) < num_images * a / 100 for a in accuracies]


def test_seeds_that_disagree_widen_the_interval():
    """Runs spread over 40 points, means 10 apart: the bootstrap over the
    images alone (runs averaged first) excludes 0; the two-level one, which
    draws the runs as well, includes it."""
    a, b = nested([60, 70, 80, 90, 100]), nested([50, 60, 70, 80, 90])
    images = {'1x': 'test'}

    def difference(runs_a, runs_b):
        stats = bootstrap(
            {'a': {'1x': [Accuracy(c) for c in runs_a]},
             'b': {'1x': [Accuracy(c) for c in runs_b]}},
            images, resamples=2000, seed=0)
        return interval(stats['a']['1x'] - stats['b']['1x'])

    one_level = difference([np.mean(a, 0)], [np.mean(b, 0)])
    two_level = difference(a, b)
    assert one_level[0] == two_level[0] == pytest.approx(10)
    assert one_level[1] > 0  # excludes 0: the images agree
    assert two_level[1] < 0 < two_level[2]  # includes 0: the runs do not


def test_images_paired_runs_kept_together():
    """The same runs on the same images give equal figures in every
    resample (paired draws, a run kept together across tests); another
    model's runs are drawn independently."""
    rng = np.random.default_rng(0)
    runs = [rng.random(300) < p for p in (0.5, 0.7, 0.9)]
    scores = [Accuracy(c) for c in runs]
    stats = bootstrap(
        {'a': {'1x': scores, '2x': scores}, 'b': {'1x': scores}},
        {'1x': 'test', '2x': 'test'}, resamples=300, seed=1)
    assert np.all(stats['a']['2x'] == stats['a']['1x'])
    assert np.allclose(100 * stats['a']['2x'] / stats['a']['1x'], 100)
    assert stats['a']['1x'][0] == pytest.approx(np.mean(runs) * 100)
    assert not np.all(stats['a']['1x'] == stats['b']['1x'])  # runs drawn apart


def test_one_run_is_the_image_bootstrap():
    """With one run per model the run draw changes nothing: the figures
    are the image bootstrap's, a mean of weighted scores."""
    c = np.random.default_rng(2).random(100) < 0.6
    stats = bootstrap({'a': {'1x': [Accuracy(c)]}}, {'1x': 'test'},
                      resamples=50, seed=3)
    rng = np.random.default_rng(3)
    rng.integers(0, 1, size=(50, 1))  # the (trivial) run draw comes first
    w = rng.multinomial(100, np.full(100, 1 / 100), size=50)
    assert np.allclose(stats['a']['1x'][1:], 100 * (w @ c) / 100)


def test_a_figure_saves_the_same_file_twice(tmp_path):
    """No date and a fixed hash salt in the SVG, its text kept as text."""
    from matplotlib.figure import Figure
    for name in ('a', 'b'):
        fig = Figure()
        fig.subplots().plot([0, 1], label='accuracy')
        save_figure(fig, [str(tmp_path / f'{name}.svg'),
                          str(tmp_path / f'{name}.png')])
    svg = (tmp_path / 'a.svg').read_text()
    assert svg == (tmp_path / 'b.svg').read_text() and '<text' in svg
    assert (tmp_path / 'a.png').stat().st_size > 0
