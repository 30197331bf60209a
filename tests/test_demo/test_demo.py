"""The demo (demo/demo.py, ``make demo``): the task table, the scores and
their paired bootstrap (pycocotools' mAP reproduced, for any weighting of
the test images), the table, the matched-skill search (on the validation
images alone), and ``--task cls --quick`` end to end."""
import contextlib
import glob
import io
import json
import os
import os.path as osp
import re
import sys
import time

import numpy as np
import pytest

from tests.utils import explain, load_script, run_tool


@pytest.fixture(scope='module')
def demo():
    return load_script('demo/demo.py')


@pytest.mark.parametrize('name', ['det', 'cls'])
def test_demo_task_table(demo, name, tmp_path, capsys):
    """Both configs of a task build and run at every test size; the
    options the flow derives land on keys the configs have; the generator
    makes the training, canvas and validation sets from the table's
    arguments, and a second call keeps a set that is there. The validation
    split is drawn as the training-size test set is, from another seed:
    half as many images, none of them a test image."""
    import importlib

    import torch
    from mmengine.registry import init_default_scope

    import mmcpvt  # noqa: F401
    task = demo.TASKS[name]
    assert [m for m, _ in task.models] == ['PEG', 'learned PE']
    assert task.test_sets[0] == demo.TRAIN_SIZE
    cfgs = [demo.load_config(c) for _, c in task.models]
    size = task.train_size(cfgs[0])
    assert {task.train_size(c) for c in cfgs} == {size}
    root = str(tmp_path / 'data')
    for c in cfgs:
        applied = demo.load_config(c.filename, task.options(root))
        for loader in ('train', 'val', 'test'):
            assert applied[f'{loader}_dataloader'].dataset.data_root == root
        task.keep(applied, str(tmp_path))  # the evaluator takes the option

    spec = dict(task.data, num_classes=task.num_classes(cfgs[0]), size=48,
                **{k: 1 for k in task.quick_data})
    info = demo.ensure_data(task, str(tmp_path / 'tiny'), spec)
    assert info['num_classes'] == task.num_classes(cfgs[0])
    made = osp.getmtime(str(tmp_path / 'tiny'))
    time.sleep(0.01)
    again = demo.ensure_data(task, str(tmp_path / 'tiny'), spec)
    assert again['num_val'] == info['num_val']
    assert osp.getmtime(str(tmp_path / 'tiny')) == made
    canvas = demo.ensure_data(task, str(tmp_path / 'tiny2x'),
                              task.canvas_data(spec, 2.0))
    assert canvas['num_train'] == 0 and canvas['canvas_scale'] == 2.0
    full = dict(task.data, num_classes=task.num_classes(cfgs[0]), size=size)
    changed = {k: v for k, v in task.validation_data(full, False).items()
               if full.get(k) != v}
    train, count = dict(det=('num_train', 'num_val'), cls=(
        'train_per_class', 'val_per_class'))[name]
    assert changed == {train: 0, count: full[count] // 2, 'seed': 1}
    validation = demo.ensure_data(task, str(tmp_path / 'tiny_select'),
                                  task.validation_data(spec, True))
    assert validation['num_train'] == 0 and validation['seed'] == 1

    def pixels(root):  # of the validation (= test) images of a set
        return {open(f, 'rb').read() for f in glob.glob(osp.join(
            root, 'val*', '*.*')) if f.endswith(('.jpg', '.JPEG'))}
    assert pixels(str(tmp_path / 'tiny_select'))
    assert not pixels(str(tmp_path / 'tiny_select')) & pixels(
        str(tmp_path / 'tiny'))

    init_default_scope(cfgs[0].default_scope)
    registry = importlib.import_module(f'{cfgs[0].default_scope}.registry')
    for c in cfgs:
        model = registry.MODELS.build(c.model).eval()
        for s in sorted({round(size * t.scale) for t in task.test_sets}):
            with torch.no_grad():
                out = model(torch.rand(1, 3, s, s), mode='tensor')
            out = out[0] if isinstance(out, tuple) else [out]
            assert all(torch.isfinite(o).all() for o in out)


def _coco(tmp_path, rng, num_images=30, drop=(), thrice=()):
    """A random ground truth and detections (near hits, misses, a few crowd
    boxes) as files, and pycocotools' own mAP of them; the images of
    ``drop`` left out and those of ``thrice`` held three times."""
    from pycocotools.coco import COCO
    from pycocotools.cocoeval import COCOeval
    images, anns, dets = [], [], []
    for i in range(1, num_images + 1):
        for _ in range(rng.integers(0, 5)):
            c, (x, y), (w, h) = rng.integers(1, 4), rng.uniform(0, 150, 2), \
                rng.uniform(10, 50, 2)
            anns.append(dict(image_id=i, category_id=int(c), bbox=[x, y, w, h],
                             area=w * h, iscrowd=int(rng.random() < 0.05)))
            if rng.random() < 0.8:
                dets.append(dict(image_id=i, category_id=int(c), bbox=[
                    x + rng.normal(0, 4), y, w * rng.uniform(0.8, 1.2), h],
                    score=float(rng.random())))
        dets += [dict(image_id=i, category_id=int(rng.integers(1, 4)),
                      bbox=[*rng.uniform(0, 150, 2), 30, 30],
                      score=float(rng.random())) for _ in range(5)]
    copies = {i: 3 if i in thrice else 0 if i in drop else 1
              for i in range(1, num_images + 1)}
    images = [dict(id=i * 10 + k, width=200, height=200) for i, n in
              copies.items() for k in range(n)]
    anns = [dict(a, id=n, image_id=a['image_id'] * 10 + k) for n, (a, k) in
            enumerate(((a, k) for a in anns
                       for k in range(copies[a['image_id']])), 1)]
    dets = [dict(d, image_id=d['image_id'] * 10 + k) for d in dets
            for k in range(copies[d['image_id']])]
    gt_file, dt_file = str(tmp_path / 'gt.json'), str(tmp_path / 'dt.json')
    with open(gt_file, 'w') as f:
        json.dump(dict(images=images, annotations=anns, categories=[
            dict(id=c, name=str(c)) for c in (1, 2, 3)]), f)
    with open(dt_file, 'w') as f:
        json.dump(dets, f)
    with contextlib.redirect_stdout(io.StringIO()):
        gt = COCO(gt_file)
        ev = COCOeval(gt, gt.loadRes(dt_file), 'bbox')
        ev.evaluate()
        ev.accumulate()
        ev.summarize()
    return gt_file, dt_file, ev.stats[0]


def test_coco_score_is_pycocotools_for_any_resample(demo, tmp_path):
    """With every image once, the score is pycocotools' mAP; with image
    weights, it is pycocotools' mAP of the set holding each image as many
    times (an image left out, another three times)."""
    gt, dt, mean_ap = _coco(tmp_path, np.random.default_rng(1))
    score = demo.CocoScore(gt, dt)
    assert score.num_images == 30
    assert score(np.ones(30)) == pytest.approx(mean_ap, abs=1e-12)
    assert 0.05 < mean_ap < 0.95
    w = np.ones(30)
    w[4], w[2] = 0, 3  # images 5 and 3 (ids in sorted order)
    _, _, resampled = _coco(tmp_path, np.random.default_rng(1), drop={5},
                            thrice={3})
    assert resampled != pytest.approx(mean_ap)
    assert score(w) == pytest.approx(resampled, abs=1e-12)


def _figures(demo, a, b, a_train, b_train):
    """The report of two models, each of one training run, right on ``a``
    / ``b`` of the images of the 2x canvas and on ``a_train`` /
    ``b_train`` of the training-size ones."""
    task, score = demo.TASKS['cls'], demo.Accuracy
    stats = demo.bootstrap(
        {'PEG': {'train size': [score(a_train)], 'canvas 2x': [score(a)]},
         'learned PE': {'train size': [score(b_train)],
                        'canvas 2x': [score(b)]}},
        {'train size': 'data', 'canvas 2x': 'data_canvas2x'}, resamples=500)
    return demo.report(task, stats, {'train size': 64, 'canvas 2x': 128},
                       ('PEG', 'learned PE'))


def test_bootstrap_is_paired(demo):
    """A model against itself: every difference is 0 in every resample (a
    zero-width interval); one right on 90 % of the images against one right
    on 50 %: the difference's interval excludes 0 and holds the truth, and
    the table marks it."""
    rng = np.random.default_rng(0)
    a = rng.random(200) < 0.9
    rows, figures = _figures(demo, a, a, a, a)
    assert figures['canvas 2x']['difference']['top-1 %'] == [0, 0, 0]
    assert figures['canvas 2x']['difference']['kept %'] == [0, 0, 0]
    assert rows[1][4] == '+0.0 [+0.0, +0.0]'
    b = rng.random(200) < 0.5
    rows, figures = _figures(demo, a, b, a, a)
    value, low, high = figures['canvas 2x']['difference']['top-1 %']
    assert 0 < low < value < high and low < 40 < high
    assert rows[1][4].startswith(f'+{value:.1f}* [')
    # the kept difference: paired with the training-size images as well
    assert figures['canvas 2x']['difference']['kept %'][1] > 0
    assert demo.header(demo.TASKS['cls'])[:5] == [
        'test set', 'size', 'PEG: top-1 %', 'learned PE: top-1 %',
        'PEG - learned PE']
    assert rows[0][5:] == ['', '', '']  # no "kept" at the training size


def test_report_of_runs_that_disagree(demo):
    """Two training runs of each model, right on every image or on none:
    the interval of a difference, for two runs, is wider than what the
    runs span (Student's t with one degree of freedom), where counted as
    one run (the images alone) or with runs that agree it has no width; a
    model at an earlier checkpoint is reported against the other's final
    one by name."""
    ones, zeros = demo.Accuracy(np.ones(50)), demo.Accuracy(np.zeros(50))
    task, sizes = demo.TASKS['cls'], {'train size': 64}

    def figures(peg, twin, earlier=None):
        scores = {'PEG': {'train size': peg},
                  'learned PE': {'train size': twin}}
        if earlier:
            scores['PEG at iter 30'] = {'train size': earlier}
        return demo.bootstrap(scores, {'train size': 'data'}, resamples=400)

    stats = figures([ones, zeros], [zeros, zeros], [ones, ones])
    _, fig = demo.report(task, stats, sizes, ('PEG', 'learned PE'), runs=2)
    # PEG's runs: 100 and 0; a draw of two of them gives 0, 50 or 100
    value, low, high = fig['train size']['difference']['top-1 %']
    assert value == 50 and low < 0 and high > 100
    _, fig = demo.report(task, stats, sizes, ('PEG', 'learned PE'))
    assert fig['train size']['difference']['top-1 %'] == [50, 50, 50]
    _, fig = demo.report(task, figures([ones], [zeros]), sizes,
                         ('PEG', 'learned PE'))
    assert fig['train size']['difference']['top-1 %'] == [100, 100, 100]
    rows, fig = demo.report(task, stats, sizes,
                            ('PEG at iter 30', 'learned PE'), runs=2)
    assert set(fig['train size']) == {'PEG at iter 30', 'learned PE',
                                      'difference'}
    assert rows[0][2:5] == ['100.0 [100.0, 100.0]', '0.0 [0.0, 0.0]',
                            '+100.0* [+100.0, +100.0]']


def test_nearest_checkpoint(demo):
    """The matched-skill checkpoint: the iteration whose score is nearest
    the target, above or below it; the earliest of a tie."""
    curve = {30: 0.05, 60: 0.14, 90: 0.20, 240: 0.38}
    assert demo.nearest(curve, 0.155) == 60
    assert demo.nearest(curve, 0.19) == 90
    assert demo.nearest(curve, 0.5) == 240
    assert demo.nearest({60: 0.1, 30: 0.3}, 0.2) == 30


def _search(demo, monkeypatch, tmp_path, validation, test):
    """``test_runs`` of two runs of each classifier (240 iterations, a
    checkpoint every 60), the tests recorded rather than run and their
    scores made up: ``validation[model, iteration]`` (top-1 %) on the
    validation images, ``test[model, iteration]`` (0: untrained; 50 if not
    given) on every test set. Returns the tests asked for, call by call,
    and what ``test_runs`` returned."""
    task, calls = demo.TASKS['cls'], []
    monkeypatch.setattr(demo, 'evaluate',
                        lambda name, tests, cores: calls.append(tests) or 0)

    def score(out, root):
        i = int(re.search(r'model(\d)', out)[1])
        it = re.search(r'iter_(\d+)', out)
        value = validation[i, int(it[1])] if root == 'val' else test.get(
            (i, int(it[1]) if it else 0), 50)
        return demo.Accuracy(np.arange(100) < value)  # value % right
    monkeypatch.setitem(demo.TASKS, 'cls',
                        demo.Task(**dict(vars(task), score=score)))
    runs = {(i, s): str(tmp_path / f'model{i}' / f'seed{s}')
            for s in (0, 1) for i in (0, 1)}
    labels = [t.label for t in (demo.UNTRAINED, ) + task.test_sets]
    images = dict({label: f'test_{label}' for label in labels},
                  validation='val')
    sizes = {label: 64 for label in images}
    return calls, demo.test_runs('cls', runs, 240, sizes, images, cores=2)


@pytest.mark.parametrize('case', ['PEG ahead', 'twin ahead on validation',
                                  'none within'])
def test_matched_skill_is_chosen_on_the_validation_images(
        demo, monkeypatch, tmp_path, case):
    """The search reads the validation images alone: they say which model
    is ahead (here not what the test sets would say), its checkpoints are
    scored there, and the one nearest the other's final score there is
    chosen (on the test sets another would be nearest); only that one of
    the earlier checkpoints is then tested on the test sets, last; none if
    none is within 5 points."""
    test = {(0, 240): 95, (1, 240): 60, (0, 180): 60, (0, 120): 20,
            (0, 60): 10, (0, 0): 10, (1, 0): 10}  # on test: iter 180
    validation = {
        'PEG ahead': {(0, 60): 30, (0, 120): 50, (0, 180): 80, (0, 240): 90,
                      (1, 240): 52},
        'twin ahead on validation': {
            (0, 60): 10, (0, 120): 20, (0, 180): 40, (0, 240): 52,
            (1, 60): 30, (1, 120): 54, (1, 180): 80, (1, 240): 90},
        'none within': {(0, 60): 10, (0, 120): 20, (0, 180): 80,
                        (0, 240): 90, (1, 240): 52}}[case]
    calls, (scores, found) = _search(demo, monkeypatch, tmp_path,
                                     validation, test)
    lead = 1 if case == 'twin ahead on validation' else 0
    chosen = None if case == 'none within' else 120
    names = ['PEG', 'learned PE']
    assert (found['model'], found['other']) == (names[lead], names[1 - lead])
    assert found['curve'] == {it: validation[lead, it]
                              for it in (60, 120, 180, 240)}
    assert found['target'] == validation[1 - lead, 240]
    assert found['iteration'] == (180 if chosen is None else chosen)
    assert found['difference'] == pytest.approx(
        validation[lead, found['iteration']] - found['target'])
    assert found['chosen_on'] == dict(images='val', num_images=100, size=64)
    assert found['name'] == (chosen and f'{names[lead]} at iter {chosen}')

    tests = [t for call in calls for t in call]
    assert len(tests) == len(set(tests))  # each test once
    for t in tests:  # the validation images: at the training size, alone
        assert (t.root == 'val') == (t.label == 'validation') and t.size == 64
    task_sets = [t.label for t in demo.TASKS['cls'].test_sets]
    earlier = [t for t in tests if not t.checkpoint.endswith(
        ('iter_240.pth', 'untrained.pth'))]
    on_test = [t for t in earlier if t.root != 'val']
    assert sorted((t.model, t.seed, t.label) for t in on_test) == sorted(
        (lead, s, label) for s in (0, 1) for label in task_sets
        if chosen)
    assert all(t.checkpoint.endswith(f'iter_{chosen}.pth') for t in on_test)
    if chosen:  # after the search, in a call of its own
        assert calls[-1] == on_test
    searched = {(t.model, t.seed, osp.basename(t.checkpoint))
                for t in earlier if t.root == 'val'}
    assert {(lead, s, f'iter_{it}.pth') for s in (0, 1)
            for it in (60, 120, 180)} <= searched
    final = {(t.model, t.label) for t in tests
             if t.checkpoint.endswith(('iter_240.pth', 'untrained.pth'))}
    assert final == {(i, label) for i in (0, 1)
                     for label in ['untrained', 'validation'] + task_sets}
    # the validation images are no row of the table
    assert all('validation' not in by_test for by_test in scores.values())
    assert set(scores) == set(names) | ({found['name']} - {None})


def test_matched_text_names_the_validation_images(demo, monkeypatch,
                                                  tmp_path):
    """The sentence under the table says where the choice was made: on how
    many validation images, which, of which generator seed."""
    _, (_, found) = _search(demo, monkeypatch, tmp_path, {
        (0, 60): 30, (0, 120): 50, (0, 180): 80, (0, 240): 90,
        (1, 240): 52}, {})
    found['chosen_on']['seed'] = 1  # run() adds it, from the set made
    text = demo.matched_text(demo.TASKS['cls'], found, 240, 2)
    assert text.startswith('Chosen on the 100 validation images (val, '
                           'generator seed 1: none of them a test image), '
                           "at the training size: PEG's checkpoints (top-1 "
                           '%, mean of 2 runs): iter 60 30.0, iter 120 50.0,'
                           " iter 180 80.0, iter 240 90.0; learned PE's "
                           'final: 52.0. ')
    assert text.endswith('Matched skill: PEG at iteration 120 of 240 (-2.0 '
                         'from it on the validation images); its figures on '
                         'the test sets are the rows "at matched skill".')
    # the final checkpoint nearest, but not within the allowed distance:
    # no comparison at matched skill, not "the final pair"
    far = dict(found, name=None, iteration=240, difference=-38.0)
    assert demo.matched_text(demo.TASKS['cls'], far, 240, 2).endswith(
        'No checkpoint of PEG is within 5 (the nearest, iteration 240, is '
        '-38.0 away): no comparison at matched skill.')


def test_evaluate_shares_the_pixels_out(demo, monkeypatch):
    """The tests go to at most as many processes as cores, each test once,
    the 2x-canvas tests (4 times the pixels) apart, each process about as
    many pixels as the others."""
    steps = []
    monkeypatch.setattr(demo, 'run_all', lambda s: steps.extend(s) or 0)
    tests = [demo.Test(m, 0, label, 'c.pth', 'root', size, f'out{m}{label}')
             for m in (0, 1) for label, size in (
                 ('untrained', 192), ('train size', 192),
                 ('scaled 1.5x', 288), ('canvas 1.5x', 288),
                 ('canvas 2x', 384))]
    assert demo.evaluate('det', tests, cores=2) == 0
    groups = [[demo.Test(*t) for t in json.loads(cmd[-1])[1]]
              for cmd, _, threads in steps]
    assert len(groups) == 2 and {threads for _, _, threads in steps} == {1}
    assert sorted(sum(groups, [])) == sorted(tests)
    assert [sum(t.label == 'canvas 2x' for t in g) for g in groups] == [1, 1]
    pixels = [sum(t.size**2 for t in g) for g in groups]
    assert max(pixels) - min(pixels) <= 192**2
    steps.clear()
    demo.evaluate('det', tests[:1], cores=2)
    assert len(steps) == 1 and steps[0][2] == 2  # one process, both cores


def test_run_all_stops_the_others_when_one_fails(demo, tmp_path, capsys):
    """Two steps at once: the first failure's status is returned with its
    log's tail, and the other step is stopped rather than waited for."""
    py, t = sys.executable, time.time()
    rc = demo.run_all([
        ([py, '-c', 'print("boom"); raise SystemExit(3)'],
         str(tmp_path / 'a.log'), 1),
        ([py, '-c', 'import time; time.sleep(120)'], None, 1)])
    assert rc == 3 and time.time() - t < 60
    err = capsys.readouterr().err
    assert 'FAILED (exit 3)' in err and 'boom' in err
    assert err.count('FAILED') == 1


def test_run_all_runs_jobs_at_a_time(demo, tmp_path):
    """``jobs=1``: each step starts after the one before it has ended."""
    py, logs = sys.executable, [str(tmp_path / f'{i}.log') for i in range(3)]
    step = ('import time; print(time.time()); time.sleep(0.5); '
            'print(time.time())')
    assert demo.run_all([([py, '-c', step], log, 1) for log in logs],
                        jobs=1) == 0
    spans = [[float(x) for x in open(log).read().split()] for log in logs]
    assert all(a[1] <= b[0] for a, b in zip(spans, spans[1:]))


def test_det_evaluation_keeps_what_mmdet_scores(demo, tmp_path):
    """A detection test (the untrained model, on a few generated images)
    keeps its detections, and their CocoScore is the mAP mmdet printed."""
    from mmcpvt.datasets.synthetic.coco import make_coco
    root = str(tmp_path / 'data')
    make_coco(root, num_train=0, num_val=4, size=96, seed=0,
              object_scale=[0.3, 0.5])
    out = str(tmp_path / 'test')
    demo.evaluate_model('det', [demo.Test(0, 0, 'untrained', str(
        tmp_path / 'u.pth'), root, 96, out)])
    with open(osp.join(out, 'metrics.json')) as f:
        metrics = json.load(f)
    score = demo.TASKS['det'].score(out, root)
    assert score.num_images == 4
    assert score(np.ones(4)) == pytest.approx(metrics['coco/bbox_mAP'],
                                              abs=5e-4)


def test_demo_cls_quick(tmp_path):
    """``demo/demo.py --task cls --quick --seeds 2`` end to end: data, two
    runs of each model trained (two at a time; the runs of a model differ),
    tested on every set, checkpoints searched for matched skill on the
    validation images (an earlier checkpoint reaches a test set only if
    chosen), a table with intervals, the results file and the plot."""
    data_root, work_dir = str(tmp_path / 'data'), str(tmp_path / 'work')
    proc = run_tool('demo/demo.py', '--task', 'cls', '--quick', '--seeds',
                    '2', '--data-root', data_root, '--work-dir', work_dir,
                    timeout=900)
    assert proc.returncode == 0, explain(proc)
    out = proc.stdout
    for name in ('PEG', 'learned PE'):
        for seed in (0, 1):
            assert re.search(rf'\[demo\] train {name}, seed {seed}: iter '
                             r'\d+/\d+, loss [\d.]+, ~[\d.]+ min left',
                             out), out[-3000:]
    first_losses = set()
    for seed in (0, 1):
        log, = glob.glob(osp.join(work_dir, 'peg', f'seed{seed}', '*',
                                  'vis_data', 'scalars.json'))
        with open(log) as f:
            first_losses.add(json.loads(f.readline())['loss'])
    assert len(first_losses) == 2  # another seed, another run
    num = r'[+-]?[\d.]+'
    inter = rf'{num}\*? \[{num}, {num}\]'
    for label in ('untrained', 'train size'):
        assert re.search(rf'^\| {label} \| 64 px \| {inter} \| {inter} \| '
                         rf'{inter} \|  \|  \|  \|$', out, re.M), out[-3000:]
    for label, size in (('scaled 2x', 128), ('canvas 1.5x', 96)):
        assert re.search(rf'^\| {label} \| {size} px( \| {inter}){{6}} \|$',
                         out, re.M), out[-3000:]
    assert 'training runs of each model: 2 (seed 0-1)' in out
    with open(osp.join(work_dir, 'results.json')) as f:
        results = json.load(f)
    assert results['resamples'] == 1000 and results['seeds'] == 2
    fig = results['figures']['canvas 2x']
    assert set(fig) == {'PEG', 'learned PE', 'difference'}
    low, high = fig['difference']['kept %'][1:]
    assert low <= fig['difference']['kept %'][0] <= high
    # 105 iterations, a checkpoint every 60: the model ahead's at 60 and
    # at the end scored on the validation images (3 of each of the 10
    # classes, beside the data root) at the training size, the nearest one
    # chosen
    matched = results['matched']
    assert matched['chosen_on'] == dict(images=f'{data_root}_select',
                                        num_images=30, size=64, seed=1)
    assert results['images']['validation'] == f'{data_root}_select'
    assert 'Chosen on the 30 validation images' in out
    assert list(matched['curve']) == ['60', '105']
    assert matched['iteration'] == demo_nearest(matched)
    lead = matched['model']
    test_sets = {t.replace(' ', '_') for t in results['figures']
                 if t != 'untrained'}
    for model in ('peg', 'learned_pe'):
        ahead = model == lead.replace(' ', '_').lower()
        chosen = ahead and matched['figures'] is not None
        for seed in (0, 1):
            tested = osp.join(work_dir, model, f'seed{seed}', 'test')
            assert set(os.listdir(osp.join(tested, 'iter_105'))) == \
                test_sets | {'validation'}
            # PEG's earlier checkpoint is searched with the final tests
            # (expected ahead), the twin's only if it is ahead
            if model == 'peg' or ahead:
                assert set(os.listdir(osp.join(tested, 'iter_60'))) == (
                    test_sets | {'validation'} if chosen else {'validation'})
            else:
                assert not osp.exists(osp.join(tested, 'iter_60'))
    if matched['figures'] is not None:  # near enough: the second table
        assert matched['iteration'] == 60
        assert abs(matched['difference']) <= matched['within']
        assert re.search(rf'^\| \*\*at matched skill: {lead} at iter 60 of '
                         r'105 against .*\*\* \|', out, re.M), out[-3000:]
        assert set(matched['figures']['canvas 2x']) == {
            f'{lead} at iter 60', 'learned PE' if lead == 'PEG' else 'PEG',
            'difference'}
    else:
        assert re.search(f'No (earlier )?checkpoint of {lead} is (nearer|'
                         'within)', out), out[-3000:]
    with open(osp.join(work_dir, 'comparison.png'), 'rb') as f:
        assert f.read(8) == b'\x89PNG\r\n\x1a\n'
    assert osp.isfile(osp.join(work_dir, 'comparison.md'))


def demo_nearest(matched):
    """The iteration of ``results.json``'s curve nearest its target."""
    curve = {int(k): v for k, v in matched['curve'].items()}
    return min(sorted(curve), key=lambda k: abs(curve[k] - matched['target']))


def test_work_dir_that_is_a_file_is_refused(demo, tmp_path, capsys):
    a_file = tmp_path / 'results'
    a_file.write_text('')
    with pytest.raises(SystemExit) as e:
        demo.main(['--work-dir', str(a_file)])
    assert e.value.code == 2
    assert (f'--work-dir {a_file}: {a_file} is a file; it takes a directory '
            'for the results' in capsys.readouterr().err)
