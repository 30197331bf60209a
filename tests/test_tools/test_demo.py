"""The demo (tools/demo.py, ``make demo``): a model with PEGs and its
learned-PE twin, trained side by side, tested on the training size, scaled
up and on larger canvases. The task table, the pieces of the flow, and both
tasks end to end with ``--quick``."""
import json
import os.path as osp
import re
import sys
import time

import numpy as np
import pytest
from PIL import Image

from tests.utils import ROOT, explain, run_tool

PNG_SIGNATURE = b'\x89PNG\r\n\x1a\n'


@pytest.fixture(scope='module')
def demo():
    sys.path.insert(0, osp.join(ROOT, 'tools'))
    import demo
    return demo


@pytest.mark.parametrize('name', ['det', 'cls'])
def test_demo_task_table(demo, name, tmp_path, capsys):
    """One table drives every demo task: both configs exist, build and run
    at every test size; the options the flow derives from the table (data
    root, --quick schedule) land on keys the config has; the generator makes
    the training set and the canvas test sets from the table's arguments."""
    import importlib

    import torch
    from mmengine.registry import init_default_scope

    import mmcpvt  # noqa: F401
    assert set(demo.TASKS) == {'det', 'cls'}
    task = demo.TASKS[name]
    assert [m.name for m in task.models] == ['PEG', 'learned PE']
    assert task.test_sets[0] == demo.TRAIN_SIZE
    assert {s.canvas for s in task.test_sets} == {1, 1.5, 2}
    assert osp.isfile(osp.join(ROOT, task.parent))
    cfgs = [demo.load_config(m.config) for m in task.models]
    cfg = cfgs[0]
    size = task.train_size(cfg)
    # the twins train on the same data at the same size
    assert {task.train_size(c) for c in cfgs} == {size}
    assert {c.data_root for c in cfgs} == {cfg.data_root}

    root = str(tmp_path / 'data')
    for c in cfgs:
        applied = demo.apply_options(
            c.copy(), task.data_options(c, root) +
            demo.schedule_options(c, task.quick_epochs))
        for loader in ('train', 'val', 'test'):
            dataset = applied[f'{loader}_dataloader'].dataset
            assert dataset.data_root.rstrip('/') == root
        assert applied.train_cfg.max_epochs == task.quick_epochs
        for scheduler in applied.param_scheduler:
            if scheduler.get('by_epoch', True):
                assert scheduler.end <= task.quick_epochs
    assert demo.test_roots(task, root) == {
        1: root, 1.5: root + '_canvas1.5x', 2: root + '_canvas2x'}

    # the generator takes the table's arguments (fewer, smaller images);
    # a second run finds the same set and keeps it
    spec = dict(demo.data_spec(task, cfg, quick=True), size=48,
                **{k: 1 for k in task.quick_data})
    info = demo.ensure_data(task, str(tmp_path / 'tiny'), spec)
    assert info['num_classes'] == task.num_classes(cfg)
    assert 'data: wrote' in capsys.readouterr().out
    again = demo.ensure_data(task, str(tmp_path / 'tiny'), spec)
    assert again['num_train'] == info['num_train']
    assert 'data: reusing' in capsys.readouterr().out
    canvas = demo.ensure_data(task, str(tmp_path / 'tiny2x'),
                              task.canvas_data(spec, 2.0))
    assert canvas['num_train'] == 0 and canvas['num_val'] == info['num_val']
    assert canvas['canvas_scale'] == 2.0

    init_default_scope(cfg.default_scope)
    registry = importlib.import_module(f'{cfg.default_scope}.registry')
    for c in cfgs:
        model = registry.MODELS.build(c.model).eval()
        for s in sorted({round(size * t.scale) for t in task.test_sets}):
            with torch.no_grad():
                out = model(torch.rand(1, 3, s, s), mode='tensor')
            out = out[0] if isinstance(out, tuple) else [out]
            assert all(torch.isfinite(o).all() for o in out)


def test_det_canvas_keeps_the_object_density(demo):
    spec = dict(num_train=200, num_val=40, objects_per_image=[1, 5])
    assert demo.det_canvas_data(spec, 2.0) == dict(
        num_train=0, num_val=40, objects_per_image=[4, 20],
        canvas_scale=2.0)
    assert demo.det_canvas_data(spec, 1.5)['objects_per_image'] == [2, 11]


def test_demo_train_progress(demo):
    """The runner's training log lines become iteration and time-left
    lines, about ten over the run, named by model; its validation results
    one line each."""
    progress = demo.TrainProgress(max_epochs=2, name='PEG')
    line = ('11/26 12:00:00 - mmengine - INFO - Epoch(train) [{e}][{i:3d}/'
            '100]  base_lr: 1.0e-04 lr: 1.0e-04  eta: 0:01:00  time: 0.5000'
            '  data_time: 0.0100  memory: 0  loss: 1.2500  loss_cls: 0.9')
    shown = [progress(line.format(e=e, i=i)) for e in (1, 2)
             for i in range(10, 101, 10)]
    assert shown[0] == ('[demo] train PEG: iter 10/200 (epoch 1/2), loss '
                        '1.250, 0.50 s/iter, ~1.6 min left')
    assert shown[-1].startswith('[demo] train PEG: iter 200/200 (epoch 2/2)')
    assert 5 <= sum(s is not None for s in shown) <= 11
    # validation: its results in one line, its progress lines not at all
    assert progress('Epoch(val) [2][ 5/10]    eta: 0:00:05  time: 0.5') is None
    assert progress(
        'Epoch(val) [2][10/10]    coco/bbox_mAP: 0.5000  coco/bbox_mAP_50: '
        '0.9000  coco/bbox_mAP_75: 0.6000  coco/bbox_mAP_s: -1.0000  '
        'data_time: 0.01  time: 0.4') == (
            '[demo] train PEG: validation after epoch 2: coco/bbox_mAP 0.500, '
            'coco/bbox_mAP_50 0.900, coco/bbox_mAP_75 0.600')


def test_comparison_table(demo):
    """A row per test set in the task's order (the untrained baseline
    first), both models' metrics, PEG minus the twin in the main one, and
    the share of its training-size value each model keeps."""
    task = demo.TASKS['det']

    def m(a, b):
        return {'coco/bbox_mAP': a, 'coco/bbox_mAP_50': b}

    results = {
        'PEG': {'untrained': m(0.001, 0.01), 'train size': m(0.6, 0.9),
                'scaled 1.5x': m(0.5, 0.8), 'canvas 1.5x': m(0.55, 0.85),
                'canvas 2x': m(0.5, 0.8)},
        'learned PE': {'untrained': m(0.002, 0.02),
                       'train size': m(0.65, 0.95),
                       'scaled 1.5x': m(0.5, 0.8),
                       'canvas 1.5x': m(0.4, 0.7), 'canvas 2x': m(0.3, 0.6)}}
    sizes = {'untrained': 192, 'train size': 192, 'scaled 1.5x': 288,
             'canvas 1.5x': 288, 'canvas 2x': 384}
    lines = demo.comparison_table(task, results, sizes).splitlines()
    assert [line.split()[0] for line in lines[1:]] == [
        'untrained', 'train', 'scaled', 'canvas', 'canvas']
    assert lines[0].split()[-11:] == ['mAP:', 'PEG', '-', 'learned', 'PE',
                                      'mAP', 'kept:', 'PEG', '/', 'learned',
                                      'PE']
    assert lines[2].split()[-7:] == ['0.600', '/', '0.900', '0.650', '/',
                                     '0.950', '-0.050']
    assert lines[5].split()[-4:] == ['+0.200', '83%', '/', '46%']
    assert '384 px' in lines[5]
    md = demo.comparison_table(task, results, sizes, markdown=True)
    assert md.splitlines()[0].startswith('| test set | size | PEG: mAP / '
                                         'mAP@50 |')
    assert ('| canvas 2x | 384 px | 0.500 / 0.800 | 0.300 / 0.600 | +0.200 '
            '| 83% / 46% |') in md
    # a test set one model lacks is left out
    del results['learned PE']['canvas 2x']
    assert 'canvas 2x' not in demo.comparison_table(task, results, sizes)


def test_run_steps_stops_the_others_when_one_fails(demo, tmp_path, capsys):
    """Two steps at once: the first failure's status is returned, its last
    lines are printed, and the other step is stopped rather than waited
    for."""
    py = sys.executable
    t = time.time()
    rc = demo.run_steps([
        demo.Step('fails', [py, '-c', 'print("boom"); raise SystemExit(3)'],
                  str(tmp_path / 'a.out')),
        demo.Step('sleeps', [py, '-c', 'import time; time.sleep(120)'],
                  str(tmp_path / 'b.out')),
    ])
    assert rc == 3
    assert time.time() - t < 60
    err = capsys.readouterr().err
    assert '[demo] fails FAILED (exit 3)' in err and 'boom' in err
    assert 'sleeps FAILED' not in err
    assert (tmp_path / 'a.out').read_text() == 'boom\n'


def _check_report(out, work_dir, task, metric_re):
    """What both quick runs leave: progress of both models, a table row per
    test set with both models, the result files."""
    for name in ('PEG', 'learned PE'):
        assert re.search(rf'\[demo\] train {name}: iter \d+/\d+ .*min left',
                         out), out[-3000:]
        assert re.search(rf'\[demo\] evaluate {name} \(\d+/\d+\): canvas 2x'
                         r'.*min left\)', out), out[-3000:]
    for label in ['untrained'] + [s.label for s in task.test_sets]:
        row = rf'^    {re.escape(label)} +\d+ px +{metric_re} +' \
            rf'{metric_re} +[+-]'
        assert re.search(row, out, re.M), (label, out[-3000:])
    with open(osp.join(work_dir, 'results.json')) as f:
        results = json.load(f)['results']
    assert set(results) == {'PEG', 'learned PE'}
    for res in results.values():
        assert set(res) == {'untrained'} | {s.label for s in task.test_sets}
    with open(osp.join(work_dir, 'comparison.png'), 'rb') as f:
        assert f.read(8) == PNG_SIGNATURE
    for name in ('comparison.md', 'peg/loss_curve.png',
                 'learned_pe/loss_curve.png', 'peg/demo_train.out',
                 'eval/learned_pe/canvas_2x/console.log'):
        assert osp.isfile(osp.join(work_dir, name)), name
    return results


def test_demo_cls_quick(demo, tmp_path):
    """``tools/demo.py --task cls --quick`` end to end: the data set and its
    canvas test sets, both models trained at once, tested on every set, the
    table and plot."""
    data_root, work_dir = str(tmp_path / 'data'), str(tmp_path / 'work')
    proc = run_tool('tools/demo.py', '--task', 'cls', '--quick',
                    '--data-root', data_root, '--work-dir', work_dir,
                    timeout=600)
    assert proc.returncode == 0, explain(proc)
    task = demo.TASKS['cls']
    _check_report(proc.stdout, work_dir, task,
                  r'[\d.]+% / [\d.]+%')
    for name in ('peg/epoch_8.pth', 'learned_pe/epoch_8.pth'):
        assert osp.isfile(osp.join(work_dir, name)), name
    # the 2x canvas: images twice the side
    with Image.open(osp.join(data_root + '_canvas2x', 'val',
                             'ILSVRC2012_val_00000001.JPEG')) as im:
        assert im.size == (128, 128)


def test_demo_det_quick(demo, tmp_path):
    """``tools/demo.py --quick`` (detection) end to end, with the picture
    of both models' predictions on the largest canvas."""
    data_root, work_dir = str(tmp_path / 'data'), str(tmp_path / 'work')
    proc = run_tool('tools/demo.py', '--quick', '--data-root', data_root,
                    '--work-dir', work_dir, timeout=900)
    assert proc.returncode == 0, explain(proc)
    task = demo.TASKS['det']
    _check_report(proc.stdout, work_dir, task, r'[\d.]+ / [\d.]+')
    # the canvas sets: larger images, objects of the training pixel sizes
    sides, boxes = {}, {}
    for canvas, root in demo.test_roots(task, data_root).items():
        with open(osp.join(root, 'annotations',
                           'instances_val2017.json')) as f:
            coco = json.load(f)
        sides[canvas] = np.median([i['width'] for i in coco['images']])
        boxes[canvas] = np.median([max(a['bbox'][2:])
                                   for a in coco['annotations']])
    assert sides[2] / sides[1] == pytest.approx(2, rel=0.15)
    assert boxes[2] / boxes[1] == pytest.approx(1, rel=0.25)
    # the picture: ground truth, PEG, learned PE side by side
    png = osp.join(work_dir, 'predictions.png')
    with Image.open(png) as im:
        assert im.format == 'PNG'
        assert im.width >= 3 * 0.75 * 384 and im.height >= 0.75 * 384
    assert 'predictions ' + png in proc.stdout
