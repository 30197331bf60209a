"""tools/reproduction/digits_canvas.py: the digit canvases, and a quick
run as a user runs it whose PEG model learns.

The data checks are exact: canvas sizes, the digit at the training scale
on the larger canvases (its non-zero bounding box is that of the digit
pasted alone), the scaled-up scenes are the 1x scenes resized, and the
training zoom keeps the digit whole.
"""
import importlib.util
import json
import math
import os.path as osp

import pytest
import torch
import torch.nn.functional as F

from tests.utils import ROOT, explain, run_tool

SCRIPT = osp.join(ROOT, 'tools', 'reproduction', 'digits_canvas.py')


def load_tool():
    spec = importlib.util.spec_from_file_location('_digits_canvas', SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


dc = load_tool()


def bbox_size(image):
    """(height, width) of the non-zero pixels of a (1, H, W) image."""
    rows = image[0].nonzero()[:, 0]
    cols = image[0].nonzero()[:, 1]
    return (int(rows.max() - rows.min() + 1),
            int(cols.max() - cols.min() + 1))


@pytest.fixture(scope='module')
def data():
    settings = dc.Settings()
    split = dc.load_split(settings)
    return settings, split


def test_split_is_fixed_and_stratified(data):
    settings, (x_train, y_train, x_test, y_test) = data
    assert len(y_train) + len(y_test) == 1797
    assert x_train.shape[1:] == (1, 8, 8)
    assert 0 <= float(x_train.min()) and float(x_train.max()) <= 1
    assert set(y_test.tolist()) == set(range(10))
    again = dc.load_split(settings)
    assert torch.equal(again[3], y_test) and torch.equal(again[2], x_test)


def test_test_sets(data):
    settings, (_, _, x_test, y_test) = data
    x, y = x_test[:20], y_test[:20]
    sets = dc.make_test_sets(x, y, settings)
    assert list(sets) == list(dc.TEST_SETS)
    c = settings.canvas
    sizes = {'1x': c, 'canvas 1.5x': c * 3 // 2, 'canvas 2x': 2 * c,
             'scaled 1.5x': c * 3 // 2, 'scaled 2x': 2 * c}
    for name, (images, labels) in sets.items():
        assert images.shape == (len(y), 1, sizes[name], sizes[name]), name
        assert torch.equal(labels, y)
    # larger canvas: the digit at the training scale, pasted whole
    digits = dc.upscale(x, settings.digit)
    for name in ('1x', 'canvas 1.5x', 'canvas 2x'):
        images = sets[name][0]
        for i in range(len(y)):
            size = bbox_size(images[i])
            assert size == bbox_size(digits[i]), (name, i)
            assert max(size) <= settings.digit
            assert math.isclose(float(images[i].sum()),
                                float(digits[i].sum()), rel_tol=1e-5)
    # scaled up: the 1x scene resized, so the digit grows
    for name, size in (('scaled 1.5x', c * 3 // 2), ('scaled 2x', 2 * c)):
        expected = F.interpolate(sets['1x'][0], size=(size, size),
                                 mode='bilinear', align_corners=False)
        assert torch.allclose(sets[name][0], expected)
        grown = bbox_size(sets[name][0][0])
        assert max(grown) > max(bbox_size(sets['1x'][0][0]))


def test_random_zoom_keeps_the_digit(data):
    settings, _ = data
    d, c = settings.digit, settings.canvas
    g = torch.Generator().manual_seed(0)
    # white squares in place of digits: a cut square would come out as a
    # rectangle
    squares = torch.ones(64, 1, d, d)
    canvases, corners = dc.place(squares, c, g)
    zoomed = dc.random_zoom(canvases, corners, d, settings.max_zoom, g)
    assert zoomed.shape == canvases.shape
    sides = []
    for image in zoomed:
        rows, cols = (image[0] > 0.5).nonzero().unbind(1)
        h, w = int(rows.max() - rows.min() + 1), int(cols.max() -
                                                     cols.min() + 1)
        assert abs(h - w) <= 1, (h, w)
        assert d - 1 <= h <= settings.max_zoom * d + 1
        sides.append(h)
    assert max(sides) - min(sides) >= d / 2  # zooms spread over the range
    # no zoom: the canvas itself
    same = dc.random_zoom(canvases, corners, d, 1., g)
    assert torch.allclose(same, canvases, atol=1e-5)


def test_quick_run_end_to_end(tmp_path):
    """--quick as a user runs it, two models at once; its PEG model beats
    chance, loads back from its config and checkpoint with the same
    accuracy, and trains to the same figures in this process."""
    out = tmp_path / 'out'
    proc = run_tool(SCRIPT, '--quick', '--variants', 'no-pe', 'peg0',
                    '--seeds', '0', '--out-dir', str(out), '--jobs', '2',
                    timeout=240)
    assert proc.returncode == 0, explain(proc)
    assert 'ETA' in proc.stdout and '2 at a time' in proc.stdout
    results = json.loads((out / 'results.json').read_text())
    assert [(r['variant'], r['seed']) for r in results['runs']] == [
        ('no-pe', 0), ('peg0', 0)]
    for run in results['runs']:
        assert set(run['accuracy']) == set(dc.TEST_SETS)
        assert all(0 <= a <= 100 and math.isfinite(a)
                   for a in run['accuracy'].values())
    assert set(results['summary']) == {'no-pe', 'peg0'}
    table = (out / 'results.md').read_text()
    assert '| PEG at 0 |' in table and '| no PE |' in table
    assert (out / 'accuracy.png').stat().st_size > 0
    svg = (out / 'accuracy.svg').read_text()
    assert '<svg' in svg and 'PEG at 0' in svg  # text kept as text

    peg = results['runs'][1]
    acc = peg['accuracy']['1x']
    assert acc > 20, f'1x accuracy {acc:.1f} % after --quick; chance: 10 %'
    from mmcpvt.analysis import build_model
    work_dir = out / 'peg0' / 'seed0'
    model, _, report = build_model(str(work_dir / 'config.py'),
                                   str(work_dir / 'checkpoint.pth'))
    assert report['loaded'] == report['total']
    settings = dc.quick_settings()
    _, _, x_test, y_test = dc.load_split(settings)
    images, labels = dc.make_test_sets(x_test, y_test, settings)['1x']
    assert math.isclose(dc.accuracy(model, images, labels), acc)

    # an image file through the saved config's test pipeline and the
    # model's preprocessor gives the model the canvas the tool tests on
    from mmengine.config import Config
    from PIL import Image

    from mmcpvt.analysis.features import image_from_file
    canvas = (images[0, 0] * 255).round().byte()  # exact in 8 bits
    Image.fromarray(canvas.numpy()).save(tmp_path / 'digit.png')
    batch, _ = image_from_file(Config.fromfile(work_dir / 'config.py'),
                               model, str(tmp_path / 'digit.png'))
    assert batch.shape == (1, 1, *canvas.shape)
    with torch.no_grad():
        assert torch.allclose(model(batch, mode='tensor'),
                              dc.logits(model, canvas[None, None] / 255.),
                              atol=1e-5)

    # the same model trained here, one at a time: the job count changes
    # nothing (both use one thread)
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        again = dc.train_and_test('peg0', 0, settings, str(tmp_path / 'one'))
    finally:
        torch.set_num_threads(threads)
    assert again['accuracy'] == peg['accuracy']
    assert again['final_loss'] == peg['final_loss']


def test_jobs_below_one_is_refused():
    proc = run_tool(SCRIPT, '--quick', '--jobs', '0', timeout=120)
    assert proc.returncode == 2, explain(proc)
    assert '--jobs must be 1 or more, got 0' in proc.stderr
