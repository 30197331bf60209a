"""The bootstrap of mmcpvt.evaluation.bootstrap (training runs, and test
images paired between models and test sets), its intervals (their coverage,
simulated), and its figures, saved alike."""
import numpy as np
import pytest

from mmcpvt.evaluation.bootstrap import (Accuracy, bootstrap, holm,
                                         interval, p_value, save_figure)


def nested(accuracies, num_images=400):
    """One run per accuracy (%), each right on the first images: runs that
    disagree by much, images that agree (an image one run gets right, every
    better run gets right too)."""
    return [np.arange(num_images) < num_images * a / 100 for a in accuracies]


def test_seeds_that_disagree_widen_the_interval():
    """Runs spread over 40 points, means 10 apart: the bootstrap over the
    images alone (runs averaged first) excludes 0; the one that draws the
    runs as well includes it."""
    a, b = nested([60, 70, 80, 90, 100]), nested([50, 60, 70, 80, 90])
    images = {'1x': 'test'}

    def difference(runs_a, runs_b):
        stats = bootstrap(
            {'a': {'1x': [Accuracy(c) for c in runs_a]},
             'b': {'1x': [Accuracy(c) for c in runs_b]}},
            images, resamples=2000, seed=0)
        return interval(stats['a']['1x'] - stats['b']['1x'], len(runs_a))

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
    are row 0's, and the image draws' are a mean of weighted scores."""
    c = np.random.default_rng(2).random(100) < 0.6
    stats = bootstrap({'a': {'1x': [Accuracy(c)]}}, {'1x': 'test'},
                      resamples=50, seed=3)
    rng = np.random.default_rng(3)
    rng.integers(0, 1, size=(50, 1))  # the (trivial) run draw comes first
    w = rng.multinomial(100, np.full(100, 1 / 100), size=50)
    assert np.allclose(stats['a']['1x'][1:51], stats['a']['1x'][0])
    assert np.allclose(stats['a']['1x'][51:], 100 * (w @ c) / 100)


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


def coverage(num_runs, sims=1000, seed_sd=6., images=300, accuracy=80.,
             resamples=200):
    """The share of ``sims`` simulated experiments whose 95 % interval of a
    model's accuracy holds the true one, for :func:`interval` and for the
    same interval with the normal quantile and the resamples' plain spread
    (no t, no n / (n - 1)): ``num_runs`` training runs, each with an
    accuracy drawn around ``accuracy`` with sd ``seed_sd`` points (the
    seeds' spread dominates), each scored on the same ``images`` test
    images: an image is right when a draw, shared by the runs for half
    the images (how hard the image is) and the run's own for the others,
    is under the run's accuracy."""
    rng = np.random.default_rng(0)
    hits = np.zeros(2)
    for k in range(sims):
        p = np.clip(rng.normal(accuracy, seed_sd, num_runs), 0, 100) / 100
        hard, shared = rng.random(images), rng.random(images) < 0.5
        runs = [Accuracy(np.where(shared, hard, rng.random(images)) < q)
                for q in p]
        row = bootstrap({'a': {'1x': runs}}, {'1x': 'test'}, resamples,
                        seed=k)['a']['1x']
        _, low, high = interval(row, num_runs)
        se = np.sqrt(np.var(row[1:resamples + 1], ddof=1) +
                     np.var(row[resamples + 1:], ddof=1))
        hits += [low <= accuracy <= high,
                 abs(row[0] - accuracy) <= 1.96 * se]
    return hits / sims


@pytest.mark.parametrize('num_runs', [3, 5])
def test_the_interval_holds_its_label_when_seeds_dominate(num_runs):
    """1000 simulated experiments (seed sd 6 points, 300 test images): the
    95 % interval covers the truth at least 93 % of the time with 5 runs
    (at least 91 % with 3); without Student's t and the n / (n - 1) the
    same resamples fall short of 93 %."""
    covered, plain = coverage(num_runs)
    print(f'coverage of the 95 % interval over {num_runs} runs: '
          f'{covered:.3f} (normal quantile, plain spread: {plain:.3f})')
    assert covered >= (0.93 if num_runs == 5 else 0.91)
    assert plain < 0.93


def test_one_run_is_the_images_normal_interval():
    """With one run only the images spread: value +- 1.96 sd of the image
    resamples (the run resamples, all the same run, add nothing)."""
    row = np.concatenate([[50.], np.full(1000, 50.), np.linspace(40, 60,
                                                                 1000)])
    sd = np.std(row[1001:], ddof=1)
    assert interval(row) == pytest.approx([50, 50 - 1.96 * sd, 50 + 1.96 * sd],
                                          rel=1e-3)
    runs = np.concatenate([[50.], np.linspace(45, 55, 1000), np.full(1000,
                                                                      50.)])
    two = interval(runs, runs=2)  # the runs alone: t(1) = 12.7, sqrt(2)
    assert two[2] - 50 == pytest.approx(
        12.706 * np.std(runs[1:1001], ddof=1) * np.sqrt(2), rel=1e-3)


def test_the_p_value_goes_with_the_interval():
    """Below 0.05 exactly where the 95 % interval excludes 0."""
    rng = np.random.default_rng(4)
    for centre in np.linspace(0, 6, 25):
        row = np.concatenate([[centre], centre + rng.normal(0, 2, 400)])
        low, high = interval(row, runs=5)[1:]
        assert (p_value(row, runs=5) < 0.05) == (low * high > 0)


def test_holm_steps_down():
    """m = 4 at 0.05: 0.01 < 0.0125, 0.015 < 0.0167, 0.03 > 0.025 stops (and
    0.04, below 0.05, is not reached); order does not matter."""
    assert holm([0.03, 0.01, 0.04, 0.015]) == [False, True, False, True]
    assert holm([0.2, 0.5]) == [False, False]
    assert holm([]) == []
