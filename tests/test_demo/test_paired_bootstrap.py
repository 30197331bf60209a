"""The two-level bootstrap of demo/paired_bootstrap.py: training runs, then
test images, the image draw paired between models and test sets."""
import os.path as osp
import sys

import numpy as np
import pytest

from tests.utils import ROOT


@pytest.fixture(scope='module')
def paired():
    sys.path.insert(0, osp.join(ROOT, 'demo'))
    import paired_bootstrap
    return paired_bootstrap


def nested(accuracies, num_images=400):
    """One run per accuracy (%), each right on the first images: runs that
    disagree by much, images that agree (an image one run gets right, every
    better run gets right too)."""
    return [np.arange(num_images) < num_images * a / 100 for a in accuracies]


def test_seeds_that_disagree_widen_the_interval(paired):
    """Two models whose 5 runs spread over 40 points and whose means differ
    by 10: the bootstrap over the images alone (the runs averaged first, one
    "run") excludes 0; the two-level one, which draws the runs as well,
    includes it. Both keep the value of all runs and images."""
    a, b = nested([60, 70, 80, 90, 100]), nested([50, 60, 70, 80, 90])
    images = {'1x': 'test'}

    def difference(runs_a, runs_b):
        stats = paired.bootstrap(
            {'a': {'1x': [paired.Accuracy(c) for c in runs_a]},
             'b': {'1x': [paired.Accuracy(c) for c in runs_b]}},
            images, resamples=2000, seed=0)
        return paired.interval(stats['a']['1x'] - stats['b']['1x'])

    one_level = difference([np.mean(a, 0)], [np.mean(b, 0)])
    two_level = difference(a, b)
    print(f'one level (images only): {one_level}\n'
          f'two levels (runs, then images): {two_level}')
    assert one_level[0] == two_level[0] == pytest.approx(10)
    assert one_level[1] > 0  # excludes 0: the images agree
    assert two_level[1] < 0 < two_level[2]  # includes 0: the runs do not


def test_images_paired_runs_kept_together(paired):
    """A model against itself on the same images gives zero differences in
    every resample (paired draws); a run keeps its figures together across
    tests (the kept ratio of a model whose runs each keep 100 % is 100 in
    every resample); the runs of another model are drawn independently."""
    rng = np.random.default_rng(0)
    runs = [rng.random(300) < p for p in (0.5, 0.7, 0.9)]
    scores = [paired.Accuracy(c) for c in runs]
    stats = paired.bootstrap(
        {'a': {'1x': scores, '2x': scores}, 'b': {'1x': scores}},
        {'1x': 'test', '2x': 'test'}, resamples=300, seed=1)
    assert np.all(stats['a']['2x'] == stats['a']['1x'])
    assert np.allclose(100 * stats['a']['2x'] / stats['a']['1x'], 100)
    assert stats['a']['1x'][0] == pytest.approx(np.mean(runs) * 100)
    assert not np.all(stats['a']['1x'] == stats['b']['1x'])  # runs drawn apart


def test_one_run_is_the_image_bootstrap(paired):
    """With one run per model the run draw changes nothing: the figures
    are the image bootstrap's, a mean of weighted scores."""
    c = np.random.default_rng(2).random(100) < 0.6
    stats = paired.bootstrap({'a': {'1x': [paired.Accuracy(c)]}},
                             {'1x': 'test'}, resamples=50, seed=3)
    rng = np.random.default_rng(3)
    rng.integers(0, 1, size=(50, 1))  # the (trivial) run draw comes first
    w = rng.multinomial(100, np.full(100, 1 / 100), size=50)
    assert np.allclose(stats['a']['1x'][1:], 100 * (w @ c) / 100)
