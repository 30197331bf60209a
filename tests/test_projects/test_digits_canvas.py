"""projects/digits_canvas/digits_canvas.py: the splits and canvases, the
training zoom, the no-decay group, early stopping, the paired bootstrap,
and a quick run as a user runs it.

The data checks are exact: canvas sizes, the digit at the training scale
on the larger canvases, the scaled-up scenes are the 1x scenes resized, the
zoom control is the scaled 2x scene cropped back to the 1x canvas.
"""
import importlib.util
import json
import math
import os.path as osp

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from tests.utils import ROOT, explain, run_tool

SCRIPT = osp.join(ROOT, 'projects', 'digits_canvas', 'digits_canvas.py')


def load_tool():
    spec = importlib.util.spec_from_file_location('_digits_canvas', SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


dc = load_tool()
import digits_report  # noqa: E402  (on sys.path since digits_canvas loaded)


def bbox(image, threshold=0.):
    """(top, left, height, width) of the pixels of a (1, H, W) image above
    ``threshold``."""
    rows, cols = (image[0] > threshold).nonzero().unbind(1)
    return (int(rows.min()), int(cols.min()),
            int(rows.max() - rows.min() + 1),
            int(cols.max() - cols.min() + 1))


@pytest.fixture(scope='module')
def data():
    settings = dc.Settings()
    return settings, dc.load_split(settings)


def test_splits_are_fixed_disjoint_and_stratified(data):
    settings, split = data
    sizes = {k: len(y) for k, (_, y) in split.items()}
    assert sum(sizes.values()) == 1797
    assert sizes == {'train': 1068, 'val': 189, 'test': 540}
    for _, y in split.values():
        assert set(y.tolist()) == set(range(10))
    # no digit in two splits
    flat = {k: {tuple(x.flatten().tolist()) for x in xs}
            for k, (xs, _) in split.items()}
    assert not flat['val'] & flat['test']
    again = dc.load_split(settings)
    for k in split:
        assert torch.equal(again[k][0], split[k][0])


def test_test_sets(data):
    settings, split = data
    x, y = split['test'][0][:20], split['test'][1][:20]
    sets = dc.make_test_sets(x, y, settings)
    assert list(sets) == list(dc.TEST_SETS)
    c, d = settings.canvas, settings.digit
    assert (c, d) == (32, 24)
    sizes = {'1x': c, 'canvas 1.5x': 48, 'canvas 2x': 64,
             'scaled 1.5x': 48, 'scaled 2x': 64, 'zoom 2x': c}
    for name, (images, labels) in sets.items():
        assert images.shape == (len(y), 1, sizes[name], sizes[name]), name
        assert torch.equal(labels, y)
    # larger canvas: the digit at the training scale, pasted whole
    digits = dc.upscale(x, d)
    for name in ('1x', 'canvas 1.5x', 'canvas 2x'):
        for image, digit in zip(sets[name][0], digits):
            assert bbox(image)[2:] == bbox(digit)[2:], name
            assert math.isclose(float(image.sum()), float(digit.sum()),
                                rel_tol=1e-5)
    # scaled up: the 1x scene resized, so the digit grows
    for name, size in (('scaled 1.5x', 48), ('scaled 2x', 64)):
        expected = F.interpolate(sets['1x'][0], size=(size, size),
                                 mode='bilinear', align_corners=False)
        assert torch.allclose(sets[name][0], expected)
    # the zoom control: the scaled 2x scene cut back to the 1x canvas by a
    # window centred on the digit (twice its 1x size)
    _, corners = dc.place(digits, c, torch.Generator().manual_seed(
        settings.test_seed))
    for i, (y0, x0) in enumerate(corners.tolist()):
        top, left = 2 * y0 + d - c // 2, 2 * x0 + d - c // 2
        assert torch.equal(sets['zoom 2x'][0][i], sets['scaled 2x'][0][
            i, :, top:top + c, left:left + c])


def test_random_zoom(data):
    settings, _ = data
    c = settings.canvas
    g = torch.Generator().manual_seed(0)
    # white squares in place of digits: a cut square would come out as a
    # rectangle, and a small one gives the zoom (its side grows d -> z d)
    d = c // 4
    squares = torch.ones(2000, 1, d, d)
    canvases, corners = dc.place(squares, c, g)
    zoomed = dc.random_zoom(canvases, corners, d, settings.max_zoom, g)
    sides = []
    for image in zoomed:
        _, _, h, w = bbox(image, 0.5)
        assert abs(h - w) <= 1
        sides.append(h / d)
    zoom = torch.tensor(sides)
    assert 0.95 <= float(zoom.min()) and float(zoom.max()) <= 3.05
    # the scaled 2x digit is well inside the range: about as many crops
    # zoom more than 2x (16 %) as RandomResizedCrop's area (0.08, 1) zooms
    # ImageNet beyond 512/224 (12 %)
    assert settings.max_zoom == 3
    assert 0.12 < float((zoom > 2).float().mean()) < 0.2
    assert torch.allclose(dc.random_zoom(canvases, corners, d, 1., g),
                          canvases, atol=1e-5)  # no zoom: the canvas
    # a crop smaller than the digit lies inside it: the canvas is all digit
    big = torch.ones(200, 1, settings.digit, settings.digit)
    canvases, corners = dc.place(big, c, g)
    zoomed = dc.random_zoom(canvases, corners, settings.digit, 3, g)
    full = (zoomed > 0.5).float().mean((1, 2, 3)) > 0.99
    area = (zoomed > 0.5).float().sum((1, 2, 3))
    assert bool(full.any()) and bool((area >= settings.digit**2 - 2
                                      * settings.digit).all())


def test_pegs_are_not_weight_decayed():
    settings = dc.Settings()
    variant = dc.VARIANTS[dc.VARIANT_NAMES.index('peg0-circular')]
    model = dc.build_model(dc.model_config(variant, settings))
    assert model.backbone.pegs['0'].proj[0].padding_mode == 'circular'
    decay, no_decay = dc.param_groups(model, 0.05)
    assert decay['weight_decay'] == 0.05 and no_decay['weight_decay'] == 0
    ids = {id(p) for p in no_decay['params']}
    names = {n for n, p in model.named_parameters() if id(p) in ids}
    pegs = {n for n, _ in model.named_parameters() if '.pegs.' in n}
    assert pegs and pegs <= names
    assert 'backbone.pegs.0.proj.0.weight' in names
    assert not any('attn' in n and n.endswith('weight') and 'norm' not in n
                   for n in names)
    assert len(decay['params']) + len(no_decay['params']) == len(
        list(model.parameters()))


def test_early_stopping_stops_at_patience_and_keeps_the_best():
    model = torch.nn.Linear(2, 1)
    stopper = dc.EarlyStopping(patience=3)
    weights, stops = [], []
    for epoch, score in enumerate([1, 3, 2, 3, 2, 9]):
        torch.nn.init.normal_(model.weight)  # "training"
        weights.append(model.weight.detach().clone())
        stops.append(stopper.step(epoch, score, model))
        if stops[-1]:
            break
    # epoch 1 is best (3; a tie is no improvement); 3 epochs later: stop
    assert stops == [False, False, False, False, True]
    assert stopper.best_epoch == 1 and stopper.best == 3
    model.load_state_dict(stopper.state)
    assert torch.equal(model.weight, weights[1])


def test_bootstrap():
    rng = np.random.default_rng(0)
    base = {t: rng.random((3, 400)) < 0.9 for t in ('1x', 'scaled 2x')}
    worse = dict(base, **{'scaled 2x': base['scaled 2x'] &
                          (rng.random((3, 400)) < 0.5)})
    out = digits_report.bootstrap(
        {'learned-pe': base, 'same': base, 'worse': worse}, 'learned-pe',
        500, 0)
    same = out['same']['scaled 2x']
    assert same['diff'] == [0, 0, 0]  # [value, low, high]
    assert same['kept'] == out['learned-pe']['scaled 2x']['kept']
    assert out['same']['1x']['kept'] == pytest.approx([100, 100, 100])
    kept, lo, hi = same['kept']
    assert lo < kept < hi
    diff, lo, hi = out['worse']['scaled 2x']['diff']
    assert hi < 0 and lo < diff < -30
    # the same draw for every model: a fixed seed gives the same interval
    again = digits_report.bootstrap({'learned-pe': base, 'worse': worse},
                                    'learned-pe', 500, 0)
    assert again['worse'] == out['worse']


def test_quick_run_end_to_end(tmp_path):
    """--quick as a user runs it, two models at once, with --instruments:
    early stopping is recorded, the per-image correctness adds up to the
    accuracies, the PEG model beats chance and loads back from its config
    and checkpoint, and trains to the same figures in this process."""
    out = tmp_path / 'out'
    proc = run_tool(SCRIPT, '--quick', '--variants', 'learned-pe', 'peg0',
                    '--seeds', '0', '--out-dir', str(out), '--jobs', '2',
                    '--instruments', timeout=240)
    assert proc.returncode == 0, explain(proc)
    assert 'ETA' in proc.stdout and '2 at a time' in proc.stdout
    results = json.loads((out / 'results.json').read_text())
    assert [(r['variant'], r['seed']) for r in results['runs']] == [
        ('learned-pe', 0), ('peg0', 0)]
    correct = np.load(out / 'correct.npz')
    settings = dc.quick_settings()
    for run in results['runs']:
        assert 1 <= run['best_epoch'] <= run['epochs'] <= settings.max_epochs
        val = run['val_accuracy']
        assert len(val) == run['epochs']
        assert run['best_epoch'] == 1 + int(np.argmax(val))
        assert (run['epochs'] == settings.max_epochs
                or run['epochs'] - run['best_epoch'] == settings.patience)
        for t, acc in run['accuracy'].items():
            c = correct[f'{run["variant"]}/seed0/{t}']
            assert c.shape == (540, ) and math.isclose(100 * c.mean(), acc)
    summary = results['summary']
    assert set(summary) == {'learned-pe', 'peg0'}
    assert summary['learned-pe']['kept']['scaled 2x']['diff'] == [0, 0, 0]
    assert summary['peg0']['kept']['1x']['kept'][0] == pytest.approx(100)
    table = (out / 'results.md').read_text()
    assert '| PEG at 0 |' in table and 'Kept minus learned PE' in table
    assert '<svg' in (out / 'accuracy.svg').read_text()
    attention = results['instruments']['peg0']['attention']
    assert osp.getsize(attention['matrix_png']) > 0
    assert osp.getsize(attention['queries_png']) > 0

    peg = results['runs'][1]
    acc = peg['accuracy']['1x']
    assert acc > 20, f'1x accuracy {acc:.1f} % after --quick; chance: 10 %'
    from models import build_model  # tools/, on sys.path with dc
    work_dir = out / 'peg0' / 'seed0'
    model, _, report = build_model(str(work_dir / 'config.py'),
                                   str(work_dir / 'checkpoint.pth'))
    assert report['loaded'] == report['total']
    x_test, y_test = dc.load_split(settings)['test']
    images, labels = dc.make_test_sets(x_test, y_test, settings)['1x']
    assert math.isclose(100 * dc.correct(model, images, labels).mean(), acc)

    # an image file through the saved config's test pipeline and the
    # model's preprocessor gives the model the canvas the tool tests on
    from mmengine.config import Config
    from PIL import Image

    from tests.test_analysis.helpers import tool_module
    image_from_file = tool_module(
        'tools/visualization/vis_attention.py').image_from_file
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
    assert again['val_accuracy'] == peg['val_accuracy']


def test_jobs_below_one_is_refused():
    proc = run_tool(SCRIPT, '--quick', '--jobs', '0', timeout=120)
    assert proc.returncode == 2, explain(proc)
    assert 'argument --jobs: must be 1 or more, got 0' in proc.stderr


def test_out_dir_that_is_a_file_is_refused_before_training(tmp_path,
                                                           capsys):
    a_file = tmp_path / 'results'
    a_file.write_text('')
    with pytest.raises(SystemExit) as e:
        dc.parse_args(['--quick', '--out-dir', str(a_file)])
    assert e.value.code == 2
    assert (f'--out-dir {a_file}: {a_file} is a file; it takes a directory '
            'for the results' in capsys.readouterr().err)
