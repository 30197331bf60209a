"""projects/digits_canvas/digits_canvas.py: the splits and canvases, the
training zoom, the no-decay group, the controls, the bootstrap over seeds
and digits, the learning-rate sweep on the validation digits, and a quick
run as a user runs it.

The data checks are exact: canvas sizes, the digit at the training scale
on the larger canvases, the scaled-up scenes are the 1x scenes resized, the
zoom control is the scaled 2x scene cut back to the 1x canvas with the
digit's centre where it was at 1x.
"""
import json
import math
import os.path as osp

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from mmcpvt.apis.model import build_model
from tests.utils import explain, load_script, run_tool

SCRIPT = 'projects/digits_canvas/digits_canvas.py'
dc = load_script(SCRIPT)
import digits_report  # noqa: E402  (imported with digits_canvas.py)


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
    # the zoom control: the scaled 2x scene cut back to the 1x canvas by the
    # window that keeps the digit's centre where it was at 1x (the scaled
    # centre is 2 y0 + d, the 1x one y0 + d / 2)
    _, corners = dc.place(digits, c, torch.Generator().manual_seed(
        settings.test_seed))
    for i, (y0, x0) in enumerate(corners.tolist()):
        top, left = y0 + d // 2, x0 + d // 2
        window = sets['scaled 2x'][0][i, :, top:top + c, left:left + c]
        assert torch.equal(sets['zoom 2x'][0][i], window)
        assert 0 <= top and top + c <= 2 * c


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


def test_controls_are_what_they_control(data):
    """The controls' backbones: a PEG before the first encoder, one without
    padding (no identity, the 8 x 8 map becomes 6 x 6), one with a learned
    table, and a fixed random one that training leaves as it was."""
    settings, split = data
    variants = {v['name']: v for v in dc.VARIANTS}
    models = {v: dc.build_model(dc.model_config(variants[v], settings))
              for v in dc.CONTROL_VARIANTS}
    assert list(models['peg-1'].backbone.pegs) == ['-1']
    nopad = models['peg0-nopad'].backbone.pegs['0']
    assert not nopad.with_identity and nopad.out_hw_shape((8, 8)) == (6, 6)
    assert models['peg0-le'].backbone.pos_embed.interpolation == 'bilinear'
    assert list(models['peg0-le'].backbone.pegs) == ['0']
    frozen = models['peg0-frozen']
    peg, qkv = (frozen.backbone.pegs['0'].proj[0].weight,
                frozen.backbone.layers[0].attn.qkv.weight)
    before = peg.detach().clone(), qkv.detach().clone()
    assert float(before[0].std()) > 0.1  # random, not zero
    canvases = dc.place(dc.upscale(split['val'][0], settings.digit),
                        settings.canvas, torch.Generator().manual_seed(0))[0]
    dc.train(frozen, split, settings, 0,
             (canvases[:32], split['val'][1][:32]), lr=1e-3, epochs=1)
    assert torch.equal(peg, before[0]) and not torch.equal(qkv, before[1])


def test_rope_variants_and_their_group():
    """--variants rope: the default run's variants, PEG at 0-2 and the RoPE
    variants, whose backbones rotate with the kind they name (RoPE-Mixed's
    frequencies undecayed, as timm's no_weight_decay asks)."""
    assert dc.parse_args(['--variants', 'rope']).variants == dc.ROPE_VARIANTS
    settings = dc.Settings()
    variants = {v['name']: v for v in dc.VARIANTS}
    kinds = {'rope-axial': ('axial', []), 'rope-mixed': ('mixed', []),
             'rope-dinov3': ('dinov3', []),
             'rope-mixed-peg0': ('mixed', ['0'])}
    for name, (kind, pegs) in kinds.items():
        assert name in dc.ROPE_VARIANTS
        model = dc.build_model(dc.model_config(variants[name], settings))
        assert model.backbone.rope.type == kind
        assert list(model.backbone.pegs) == pegs
        _, no_decay = dc.param_groups(model, 0.05)
        freqs = [p for n, p in model.named_parameters() if '.rope.' in n]
        assert all(any(p is q for q in no_decay['params']) for p in freqs)
        assert len(freqs) == (kind == 'mixed')


def test_reuse_takes_runs_of_the_same_recipe(tmp_path):
    """--reuse takes a run whose own learning rate and length are its
    variant's now, whatever the other variants' are; none of a run with
    other settings."""
    settings = dc.Settings()
    runs = [dict(variant=v, seed=0, lr=dc.lr_of(v, settings),
                 epochs=dc.epochs_of(v, settings))
            for v in ('learned-pe', 'peg0', 'peg0-matched')]
    (tmp_path / 'results.json').write_text(json.dumps(dict(
        settings=dc.asdict(settings), runs=runs)))
    np.savez(tmp_path / 'correct.npz', **{
        f'{r["variant"]}/seed0/{t}': np.ones(3, bool) for r in runs
        for t in dc.TEST_SETS})
    reuse = lambda s: sorted(  # noqa: E731
        v for v, _ in dc.reusable_runs(str(tmp_path), s))
    assert reuse(settings) == ['learned-pe', 'peg0', 'peg0-matched']
    other = dc.replace(settings, variant_lr=dict(settings.variant_lr,
                                                  **{'rope-mixed': 3e-3}))
    assert reuse(other) == ['learned-pe', 'peg0', 'peg0-matched']
    other = dc.replace(settings, variant_lr={}, variant_epochs={})
    assert reuse(other) == ['peg0']
    assert reuse(dc.replace(settings, canvas=40)) == []


def test_bootstrap_draws_seeds_then_digits():
    """Seeds that agree: a model identical to the reference differs by
    exactly 0. Seeds that disagree (one of three loses half its scaled 2x
    digits): the interval of kept over seeds and digits is far wider than
    the one over
    the digits alone (the seeds averaged first), from a resample that draws
    the losing seed three times to one that draws it never."""
    rng = np.random.default_rng(0)
    right = rng.random(400) < 0.9
    agree = {t: np.stack([right] * 3) for t in ('1x', 'scaled 2x')}
    lost = right & (rng.random(400) < 0.5)
    spread = dict(agree, **{'scaled 2x': np.stack([right, right, lost])})
    out, diff = digits_report.bootstrap(
        {'learned-pe': agree, 'same': agree, 'spread': spread},
        [('same', 'learned-pe'), ('spread', 'learned-pe')], 500, 0)
    assert diff['same']['learned-pe']['scaled 2x']['kept'] == [0, 0, 0, 1]
    assert out['same']['1x']['kept'] == pytest.approx([100, 100, 100])
    kept, lo, hi = out['spread']['scaled 2x']['kept']
    assert lo < 70 < kept < 90 < 99 < hi
    images_only, _ = digits_report.bootstrap(
        {'spread': {t: c.mean(0, keepdims=True) for t, c in spread.items()}},
        [], 500, 0)
    value, lo1, hi1 = images_only['spread']['scaled 2x']['kept']
    assert value == pytest.approx(kept)
    assert hi - lo > 3 * (hi1 - lo1)
    # the same draws for a fixed seed
    again, _ = digits_report.bootstrap(
        {'learned-pe': agree, 'same': agree, 'spread': spread}, [], 500, 0)
    assert again['spread'] == out['spread']


def test_the_sweeps_choose_on_validation_digits_only(tmp_path, monkeypatch):
    """--tune-lr trains each variant x seed x learning rate, never builds a
    test set, and chooses per variant the learning rate of the highest mean
    validation accuracy over the last epochs; --tune-epochs chooses the
    length whose final validation accuracy is nearest the one to match; a
    variant's own learning rate and length are the ones it trains with."""
    def no_test_sets(*args):
        raise AssertionError('the sweep built the test sets')

    monkeypatch.setattr(dc, 'make_test_sets', no_test_sets)
    settings = dc.quick_settings()
    settings.epochs = 6
    results = dc.tune(['no-pe', 'peg0'], [0, 1], settings, str(tmp_path),
                      lrs=[1e-4, 3e-3])
    assert len(results['runs']) == 8
    assert all('accuracy' not in r for r in results['runs'])
    for v, by_lr in results['score'].items():
        for lr, scores in by_lr.items():
            mine = [r for r in results['runs']
                    if r['variant'] == v and r['lr'] == lr]
            assert scores == [pytest.approx(np.mean(r['val_accuracy'][-5:]))
                              for r in sorted(mine, key=lambda r: r['seed'])]
        assert results['choice'][v] == max(by_lr,
                                           key=lambda lr: np.mean(by_lr[lr]))
    assert '**' in (tmp_path / 'tune.md').read_text()
    assert json.loads((tmp_path / 'tune.json').read_text())['choice'] == \
        results['choice']
    assert (tmp_path / 'val_accuracy_lr0.003.svg').is_file()

    lengths = dc.tune(['peg0'], [0], settings, str(tmp_path / 'epochs'),
                      epochs=[1, 4], match=30.)
    final = {n: lengths['score']['peg0'][n][0] for n in (1, 4)}
    assert final == {r['epochs']: r['val_accuracy'][-1]
                     for r in lengths['runs']}
    assert lengths['choice']['peg0'] == min(final,
                                            key=lambda n: abs(final[n] - 30))

    settings.variant_lr, settings.variant_epochs = {'peg0': 2e-3}, {'peg0': 3}
    assert dc.lr_of('peg0', settings) == 2e-3
    assert dc.lr_of('no-pe', settings) == settings.lr
    assert dc.epochs_of('peg0', settings) == 3
    assert dc.epochs_of('no-pe', settings) == 6
    assert dc.recipes(['no-pe', 'peg0'], settings) == (
        f'lr {settings.lr:g}, 6 epochs: no PE; lr 0.002, 3 epochs: PEG at 0')


def test_quick_run_end_to_end(tmp_path):
    """--quick as a user runs it, two models at once, with --instruments:
    every model trains the same epochs, the per-image correctness adds up
    to the accuracies, the PEG model beats chance and loads back from its
    config and checkpoint, and trains to the same figures in this process;
    --reuse takes the runs back instead of training them."""
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
        assert run['epochs'] == settings.epochs
        assert len(run['val_accuracy']) == len(run['train_loss']) == 5
        for t, acc in run['accuracy'].items():
            c = correct[f'{run["variant"]}/seed0/{t}']
            assert c.shape == (540, ) and math.isclose(100 * c.mean(), acc)
    summary = results['summary']
    assert set(summary) == {'learned-pe', 'peg0'}
    assert summary['learned-pe']['versus'] == {}
    diff = summary['peg0']['versus']['learned-pe']
    assert diff['1x']['accuracy'][0] == pytest.approx(
        results['runs'][1]['accuracy']['1x'] -
        results['runs'][0]['accuracy']['1x'])
    assert summary['peg0']['interval']['1x']['kept'][0] == pytest.approx(100)
    table = (out / 'results.md').read_text()
    assert '| PEG at 0 − learned PE |' in table
    assert "† also after Holm's correction over the 6 differences" in table
    for figure in ('accuracy.svg', 'val_accuracy.svg'):
        assert '<svg' in (out / figure).read_text()
        assert f']({figure})' in table

    # taken back, not trained: the same summary
    proc = run_tool(SCRIPT, '--quick', '--variants', 'learned-pe', 'peg0',
                    '--seeds', '0', '--out-dir', str(tmp_path / 'again'),
                    '--reuse', str(out), timeout=240)
    assert proc.returncode == 0, explain(proc)
    assert f'2 models (lr 0.003, 5 epochs: learned PE, PEG at 0) (2 taken ' \
        f'from {out})' in proc.stdout
    again = json.loads((tmp_path / 'again' / 'results.json').read_text())
    assert again['summary'] == summary
    attention = results['instruments']['peg0']['attention']
    assert osp.getsize(attention['matrix_png']) > 0
    assert osp.getsize(attention['queries_png']) > 0

    peg = results['runs'][1]
    acc = peg['accuracy']['1x']
    assert acc > 20, f'1x accuracy {acc:.1f} % after --quick; chance: 10 %'
    work_dir = out / 'peg0' / 'seed0'
    model, _, report = build_model(str(work_dir / 'config.py'),
                                   str(work_dir / 'checkpoint.pth'))
    assert report == dict(target='model', loaded=len(model.state_dict()))
    x_test, y_test = dc.load_split(settings)['test']
    images, labels = dc.make_test_sets(x_test, y_test, settings)['1x']
    assert math.isclose(100 * dc.correct(model, images, labels).mean(), acc)

    # an image file through the saved config's test pipeline and the
    # model's preprocessor gives the model the canvas the tool tests on
    from mmengine.config import Config
    from PIL import Image

    image_from_file = load_script(
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


@pytest.mark.parametrize('seeds, message', [
    (['0', '0'], '--seeds: each seed once, got [0, 0]'),
    (['-1'], 'argument --seeds: must be 0 or more, got -1')])
def test_bad_seeds_are_refused_before_training(seeds, message, capsys):
    """A seed twice trained every model and then died on its results."""
    with pytest.raises(SystemExit) as e:
        dc.parse_args(['--quick', '--seeds', *seeds])
    assert e.value.code == 2
    assert message in capsys.readouterr().err
