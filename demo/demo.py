"""The demo (``make demo``; docs/demo.md): a model with PEGs and its learned-
PE twin trained side by side on generated data (``--seeds N``: N runs of
each), tested without fine-tuning at the training size and on larger inputs.
Compared twice: at the end of training, and at matched skill (the checkpoint
of the model ahead whose score is nearest the other's final one, both scored
at the training size on a validation split of the demo's own: other images
than the test sets, which choose nothing). 95 % intervals from a bootstrap
over each model's training runs and over the test images (paired between
the models), with Student's t over the runs (:func:`interval`). Exit status
1 if a step fails or a trained model does not beat its untrained self."""
import argparse
import functools
import glob
import json
import os
import os.path as osp
import pickle
import shutil
import subprocess
import sys
import time
import warnings
from collections import namedtuple
from contextlib import redirect_stdout
from types import SimpleNamespace as Task
from typing import Callable, Dict, Optional

import numpy as np

warnings.filterwarnings('ignore', 'pkg_resources is deprecated')
from mmcpvt.apis.cfg_options import parse_cfg_options  # noqa: E402
from mmcpvt.datasets.synthetic import coco, imagenet  # noqa: E402
from mmcpvt.evaluation.bootstrap import (Accuracy, bootstrap,  # noqa: E402
                                         cell, interval, plot)
from mmcpvt.utils.path import check_output_dir  # noqa: E402

REPO = osp.dirname(osp.dirname(osp.abspath(__file__)))

RESAMPLES, SEED = 1000, 0  # of the bootstrap


class CocoScore:
    """pycocotools' bbox mAP of a detections file with image ``i`` counted
    ``w[i]`` times: ``score(w)``. pycocotools' ``evaluate()`` once, then its
    ``accumulate()`` on weighted counts, vectorised (its own is too slow for
    thousands of resamples)."""

    def __init__(self, ann_file: str, dets_file: str):
        from pycocotools.coco import COCO
        from pycocotools.cocoeval import COCOeval
        with redirect_stdout(open(os.devnull, 'w')):
            gt = COCO(ann_file)
            ev = COCOeval(gt, gt.loadRes(dets_file), 'bbox')
            ev.evaluate()
        p, n, top = ev.params, len(ev.params.imgIds), ev.params.maxDets[-1]
        self.num_images, self.rec_thrs, self.cats = n, p.recThrs, []
        for k in range(len(p.catIds)):  # area 'all': the first range
            found = [(i, e) for i, e in enumerate(ev.evalImgs[
                k * len(p.areaRng) * n:][:n]) if e is not None]
            if not found:
                continue
            order = np.argsort(-np.concatenate(
                [e['dtScores'][:top] for _, e in found]), kind='mergesort')
            image = np.concatenate([np.full(len(e['dtScores'][:top]), i)
                                    for i, e in found])[order]
            match, ignore = (np.concatenate(
                [e[key][:, :top] for _, e in found], axis=1)[:, order]
                for key in ('dtMatches', 'dtIgnore'))
            gts = np.bincount([i for i, _ in found], [np.count_nonzero(
                e['gtIgnore'] == 0) for _, e in found], minlength=n)
            self.cats.append((image, (match > 0) & (ignore == 0),
                              (match == 0) & (ignore == 0), gts))

    def __call__(self, w: np.ndarray) -> float:
        precision = []
        for image, tp, fp, gts in self.cats:
            if w @ gts == 0:
                continue  # no object of this class: not averaged
            tps, fps = (np.cumsum(x * w[image], axis=1) for x in (tp, fp))
            recall, prec = tps / (w @ gts), tps / (tps + fps + np.spacing(1))
            prec = np.maximum.accumulate(prec[:, ::-1], axis=1)[:, ::-1]
            q = np.zeros((len(tps), len(self.rec_thrs)))
            for t in range(len(tps)):  # precision at each recall threshold
                at = np.searchsorted(recall[t], self.rec_thrs, side='left')
                q[t, at < tps.shape[1]] = prec[t, at[at < tps.shape[1]]]
            precision.append(q)
        return float(np.mean(precision)) if precision else -1.0


def top1(preds_file: str) -> Accuracy:
    """The :class:`Accuracy` of ``DumpResults``' predictions."""
    with open(preds_file, 'rb') as f:
        preds = sorted(pickle.load(f), key=lambda s: s['sample_idx'])
    return Accuracy([int(s['pred_label'][0]) == int(s['gt_label'][0])
                     for s in preds])


# canvas (its side) and scale (the test size): relative to the training ones
TestSet = namedtuple('TestSet', 'label canvas scale', defaults=(1.0, 1.0))
UNTRAINED, TRAIN_SIZE = TestSet('untrained'), TestSet('train size')
# the images the matched-skill checkpoint is chosen on, at the training size:
# not a test set (no row of the table)
VALIDATION = TestSet('validation')
SCALED = {s: TestSet(f'scaled {s:g}x', 1.0, s) for s in (1.5, 2.0)}
CANVAS = {c: TestSet(f'canvas {c:g}x', c, c) for c in (1.5, 2.0)}

# What differs between the tasks: models (PEG first), the data generator and
# its arguments (with --quick; a canvas test set's; the validation split's),
# --cfg-options for a data root, how a test keeps its predictions (keep) and
# scores them (score); comparable: training-size scores this close make
# "kept" compare equals (the matched-skill checkpoint must be this close);
# checkpoint_every: the iterations between the checkpoints that the
# matched-skill comparison searches.
#
# The validation split: another generator seed (1; the test images are seed
# 0's), so other scenes than the test sets, drawn as the training-size test
# set is. Half as many images as that set: the search scores nine checkpoints
# there (the model ahead's eight, the other's final one), where it scored
# the model ahead's seven earlier ones on the test images, and the chosen
# checkpoint is now tested at the training size too: about 20 % fewer
# images to run than before, so the demo takes about as long.
TASKS: Dict[str, Task] = {
    'det': Task(
        title='detection: RetinaNet with PVT-tiny, PEG vs learned PE (mmdet)',
        models=(('PEG', 'configs/demo/retinanet_pvt-t-peg_demo_coco.py'),
                ('learned PE',
                 'configs/demo/retinanet_pvt-t-learned-pe_demo_coco.py')),
        make_data=coco.make_coco, generator=coco.GENERATOR,
        # objects of 0.16-0.5 of the side: at 192 px, what the anchors cover
        data=dict(num_train=160, num_val=120, seed=0,
                  object_scale=[0.16, 0.5], objects_per_image=[1, 5]),
        quick_data=dict(num_train=60, num_val=16),
        # c^2 times the objects per image: as dense as in training
        canvas_data=lambda spec, c: dict(
            spec, num_train=0, canvas_scale=c, objects_per_image=[
                max(1, round(n * c**2)) for n in spec['objects_per_image']]),
        validation_data=lambda spec, quick: dict(
            spec, num_train=0, num_val=8 if quick else 60, seed=1),
        train_size=lambda cfg: cfg.scale[0],
        num_classes=lambda cfg: len(cfg.classes),
        # mAP over every detection: an untrained model scores none above
        # the default 0.05, and an empty result has no mAP
        options=lambda root: [f'{k}_dataloader.dataset.data_root={root}'
                              for k in ('train', 'val', 'test')] + [
            f'{k}_evaluator.ann_file={root}/annotations/instances_val2017.json'
            for k in ('val', 'test')] + ['model.test_cfg.score_thr=0.0'],
        keep=lambda cfg, out: cfg.test_evaluator.update(
            outfile_prefix=osp.join(out, 'dets')),
        score=lambda out, root: CocoScore(
            f'{root}/annotations/instances_val2017.json',
            osp.join(out, 'dets.bbox.json')),
        test_sets=(TRAIN_SIZE, SCALED[1.5], CANVAS[1.5], CANVAS[2.0]),
        metric='mAP', fmt='{:.3f}', comparable=0.05, checkpoint_every=30),
    'cls': Task(
        title='classification: CPVT-GAP, PEG vs learned PE (mmpretrain)',
        models=(('PEG', 'configs/demo/cpvt-tiny-gap_demo_imagenet.py'),
                ('learned PE',
                 'configs/demo/cpvt-tiny-learned-pe_demo_imagenet.py')),
        make_data=imagenet.make_imagenet, generator=imagenet.GENERATOR,
        data=dict(train_per_class=100, val_per_class=50, seed=0),
        quick_data=dict(train_per_class=20, val_per_class=6),
        canvas_data=lambda spec, c: dict(spec, train_per_class=0,
                                         canvas_scale=c),
        validation_data=lambda spec, quick: dict(
            spec, train_per_class=0, val_per_class=3 if quick else 25,
            seed=1),
        train_size=lambda cfg: cfg.img_size,
        num_classes=lambda cfg: cfg.num_classes,
        options=lambda root: [f'{k}_dataloader.dataset.data_root={root}'
                              for k in ('train', 'val', 'test')],
        keep=lambda cfg, out: setattr(cfg, 'test_evaluator', [
            cfg.test_evaluator, dict(type='DumpResults', out_file_path=osp
                                     .join(out, 'preds.pkl'))]),
        score=lambda out, root: top1(osp.join(out, 'preds.pkl')),
        test_sets=(TRAIN_SIZE, SCALED[1.5], SCALED[2.0], CANVAS[1.5],
                   CANVAS[2.0]),
        metric='top-1 %', fmt='{:.1f}', comparable=5.0,
        checkpoint_every=60),
}


def load_config(config: str, options=()):
    """The config, with ``--cfg-options`` applied as the tools apply them."""
    from mmengine.config import Config
    cfg = Config.fromfile(config, import_custom_modules=False)
    cfg.merge_from_dict(parse_cfg_options(list(options)))
    return cfg


def ensure_data(task: Task, path: str, spec: dict) -> dict:
    """The set at ``path``, made unless made there with the same ``spec``
    by the same generator code."""
    info = task.generator.read_info(path)
    wanted = dict(spec, generator=task.generator.code_id())
    if info is None or any(info.get(k) != v for k, v in wanted.items()):
        info = task.make_data(path, overwrite=info is not None, **spec)
    print(f'[demo] data: {path}, {info["num_train"]} train / '
          f'{info["num_val"]} val images', flush=True)
    return info


# One test of one checkpoint: the model (its index in the task's models),
# the seed of its training run, the test set's label, the checkpoint, the
# images (a data root) and their size, and the folder of its results.
Test = namedtuple('Test', 'model seed label checkpoint root size out')


def run_all(steps: list, progress: Callable = lambda: None,
            jobs: Optional[int] = None) -> int:
    """Run ``steps`` ``[(cmd, log file or None, threads)]``, ``jobs`` at a
    time (all at once by default), calling ``progress()`` meanwhile; if one
    fails, stop the others and start no more (its log's tail is shown).
    Returns the first failure's exit status, or 0."""
    waiting, procs, rc = list(steps), [], 0
    while not rc and (waiting or any(p.poll() is None for p, _ in procs)):
        while waiting and sum(p.poll() is None for p, _ in procs) < (
                jobs or len(steps)):
            cmd, log, threads = waiting.pop(0)
            procs.append((subprocess.Popen(
                cmd, stdout=log and open(log, 'w'),
                stderr=log and subprocess.STDOUT,
                env=dict(os.environ, OMP_NUM_THREADS=str(threads))), log))
        rc = next((p.returncode for p, _ in procs if p.returncode), 0)
        progress()
        time.sleep(1)
    for p, log in procs:
        if p.poll() is None:
            p.terminate()
        if p.wait() > 0:
            with open(log or os.devnull) as f:
                tail = ''.join(f.readlines()[-30:])
            print(f'[demo] FAILED (exit {p.returncode}): {" ".join(p.args)}'
                  f'\n{tail}', file=sys.stderr)
        rc = rc or p.returncode
    return rc


def evaluate_model(task_name: str, tests: list):
    """Run ``tests`` (:class:`Test` fields) one after the other, each with
    a runner as ``tools/test.py`` builds it, into its ``out`` folder."""
    from mmcpvt.apis.resolution import run_test, save_untrained, set_test_size
    task = TASKS[task_name]
    for t in map(Test._make, tests):
        name, config = task.models[t.model]
        cfg = load_config(config, task.options(t.root))
        set_test_size(cfg, t.size)
        os.makedirs(t.out, exist_ok=True)
        if t.label == UNTRAINED.label:  # its init table goes to a file
            save_untrained(cfg, t.checkpoint, osp.join(t.out, 'init.log'),
                           seed=t.seed)
        cfg.load_from, cfg.work_dir, cfg.launcher = t.checkpoint, t.out, 'none'
        task.keep(cfg, t.out)
        print(f'[demo] test {name}, seed {t.seed}, '
              f'{osp.basename(t.checkpoint)}: {t.label}, {t.size} px',
              flush=True)
        with open(osp.join(t.out, 'metrics.json'), 'w') as f:
            json.dump(run_test(cfg, osp.join(t.out, 'console.log')), f)


def evaluate(task_name: str, tests: list, cores: int) -> int:
    """``tests`` in at most ``cores`` processes at once, shared out so that
    each has about as many pixels to run as the others (the largest test
    first, to the least loaded). Returns the exit status, as run_all's."""
    groups = [[] for _ in range(min(cores, len(tests)))]
    for t in sorted(tests, key=lambda t: -t.size**2):
        min(groups, key=lambda g: sum(u.size**2 for u in g)).append(t)
    return run_all([([sys.executable, __file__, '--evaluate', json.dumps(
        [task_name, g])], None, max(1, cores // len(groups)))
        for g in groups])


def nearest(curve: Dict[int, float], target: float) -> int:
    """The iteration of ``curve`` (``{iteration: score}``) whose score is
    nearest ``target``; the earliest of a tie."""
    return min(sorted(curve), key=lambda k: abs(curve[k] - target))


def header(task: Task) -> list:
    (a, _), (b, _) = task.models
    return ['test set', 'size', f'{a}: {task.metric}', f'{b}: '
            f'{task.metric}', f'{a} - {b}', f'{a}: kept %', f'{b}: kept %',
            'kept: difference']


def report(task: Task, stats: dict, sizes: dict, pair: tuple,
           runs: int = 1) -> tuple:
    """The table rows of the models ``pair`` (keys of ``stats``, in the
    order of the task's models) on the tests both have, in the order of
    ``sizes``, and ``{test: {model or 'difference': {figure: [value, low,
    high]}}}`` of each one's score and "kept" (% of its training-size
    score), and the first minus the second: :func:`interval` of the
    bootstrap of ``runs`` training runs of each model."""
    a, b = pair
    rows, figures = [], {}
    for label, size in sizes.items():
        if label not in stats[a] or label not in stats[b]:
            continue
        v = {m: {task.metric: stats[m][label]} for m in pair}
        for m in () if label in (UNTRAINED.label, TRAIN_SIZE.label) else v:
            v[m]['kept %'] = 100 * stats[m][label] / stats[m][TRAIN_SIZE.label]
        v['difference'] = {k: v[a][k] - v[b][k] for k in v[a]}
        figures[label] = fig = {m: {k: interval(x, runs) for k, x in
                                    f.items()}
                                for m, f in v.items()}
        rows.append([label, f'{size} px'] + [cell(
            fig[m].get(k), task.fmt if k == task.metric else '{:.1f}',
            m == 'difference') for k in (task.metric, 'kept %')
            for m in (a, b, 'difference')])
    return rows, figures


def train(task: Task, runs: dict, data_root: str, epochs: int, iters: int,
          cores: int) -> int:
    """Train the runs ``{(model index, seed): work dir}``, as many at once
    as there are cores (both models of a seed together), with a checkpoint
    every ``task.checkpoint_every`` iterations and at the end; about ten
    progress lines per run. Returns the exit status."""
    names = [n for n, _ in task.models]
    jobs = min(cores, len(runs))
    threads = max(1, cores // jobs)
    print(f'[demo] {task.title}: train {len(runs) // len(names)} run(s) of '
          f'each, {jobs} at once, {threads} thread(s) each, {iters} '
          f'iterations, a checkpoint every {task.checkpoint_every}',
          flush=True)
    shown = dict.fromkeys(runs, 0)

    def progress():  # from the scalar logs
        for (i, s), d in runs.items():
            log = glob.glob(osp.join(d, '*', 'vis_data', 'scalars.json'))
            last = ([json.loads(r) for r in (open(log[0]) if log else ())
                     if '"loss"' in r and r.endswith('}\n')] or [{}])[-1]
            if last.get('step', 0) >= shown[i, s] + iters / 10:
                shown[i, s] = last['step']
                left = (iters - last['step']) * last['time'] / 60
                print(f'[demo] train {names[i]}, seed {s}: iter '
                      f'{last["step"]}/{iters}, loss {last["loss"]:.3f}, '
                      f'~{left:.1f} min left', flush=True)
    return run_all([([
        sys.executable, 'tools/train.py', task.models[i][1], '--work-dir', d,
        '--cfg-options', *task.options(data_root),
        f'train_cfg.val_begin={epochs + 1}',  # the demo tests
        f'randomness.seed={s}', 'default_hooks.checkpoint.by_epoch=False',
        f'default_hooks.checkpoint.interval={task.checkpoint_every}',
        # weights only: a third of the size (the demo resumes nothing)
        'default_hooks.checkpoint.save_optimizer=False'],
        f'{d}.train.log', threads) for (i, s), d in runs.items()],
        progress, jobs)


def test_runs(task_name: str, runs: dict, iters: int, sizes: dict,
              images: dict, cores: int) -> Optional[tuple]:
    """Test the runs ``{(model index, seed): work dir}``: the final
    checkpoints (and the untrained models) on every test set; then the
    search for matched skill, which reads the validation images alone
    (``images[VALIDATION.label]``, at the training size): the final
    checkpoints there say which model is ahead, its every checkpoint is
    scored there (the first model's earlier ones with the final tests: it
    is expected ahead), and the one whose score (mean over the runs) is
    nearest the other model's final one there, if within
    ``task.comparable``, is tested on the test sets. So the test images
    serve the final pair and the chosen checkpoint, and choose nothing.
    Returns ``({model: {test: [score per run]}}, {what the search
    found})``, or None if a step failed."""
    task = TASKS[task_name]
    names = [n for n, _ in task.models]
    seeds = range(len(runs) // len(names))

    def test(i, s, t, it):  # model i's run s on test set t, at iteration it
        d = runs[i, s]
        if t == UNTRAINED:
            return Test(i, s, t.label, osp.join(d, 'untrained.pth'),
                        images[t.label], sizes[t.label],
                        osp.join(d, 'test', 'untrained'))
        return Test(i, s, t.label, osp.join(d, f'iter_{it}.pth'),
                    images[t.label], sizes[t.label],
                    osp.join(d, 'test', f'iter_{it}',
                             t.label.replace(' ', '_')))

    score = functools.lru_cache(None)(lambda t: task.score(t.out, t.root))

    def scores(i, t, it):  # one per run
        return [score(test(i, s, t, it)) for s in seeds]

    def mean(i, t, it):  # over the runs, every image once
        return float(np.mean([x(np.ones(x.num_images))
                              for x in scores(i, t, it)]))
    tests = (UNTRAINED, ) + task.test_sets
    earlier = list(range(task.checkpoint_every, iters, task.checkpoint_every))

    def search(i):  # model i's earlier checkpoints on the validation images
        return [test(i, s, VALIDATION, it) for s in seeds for it in earlier]
    if evaluate(task_name, [test(i, s, t, iters) for i, s in runs
                            for t in tests + (VALIDATION, )] + search(0),
                cores):
        return None
    final = [mean(i, VALIDATION, iters) for i in range(len(names))]
    lead = int(final[1] > final[0])
    if lead and evaluate(task_name, search(lead), cores):
        return None
    curve = {it: mean(lead, VALIDATION, it) for it in earlier + [iters]}
    at = nearest(curve, final[1 - lead])
    found = dict(model=names[lead], other=names[1 - lead],
                 chosen_on=dict(images=images[VALIDATION.label],
                                num_images=score(test(
                                    lead, 0, VALIDATION, iters)).num_images,
                                size=sizes[VALIDATION.label]),
                 curve=curve, target=final[1 - lead], iteration=at,
                 difference=curve[at] - final[1 - lead],
                 within=task.comparable, name=None, figures=None)
    if at != iters and abs(found['difference']) <= task.comparable:
        if evaluate(task_name, [test(lead, s, t, at) for s in seeds
                                for t in task.test_sets], cores):
            return None
        found['name'] = f'{names[lead]} at iter {at}'
    all_scores = {names[i]: {t.label: scores(i, t, iters) for t in tests}
                  for i in range(len(names))}
    if found['name']:
        all_scores[found['name']] = {t.label: scores(lead, t, at)
                                     for t in task.test_sets}
    return all_scores, found


def matched_text(task: Task, found: dict, iters: int, seeds: int) -> str:
    """What the search for matched skill found, in a sentence or three."""
    signed = task.fmt.replace('{:', '{:+').format(found['difference'])
    lead, at, on = found['model'], found['iteration'], found['chosen_on']
    text = (f'Chosen on the {on["num_images"]} validation images '
            f'({on["images"]}, generator seed {on["seed"]}: none of them a '
            f'test image), at the training size: {lead}\'s checkpoints '
            f'({task.metric}{f", mean of {seeds} runs" * (seeds > 1)}): '
            + ', '.join(
                f'iter {k} {task.fmt.format(v)}'
                for k, v in found['curve'].items())
            + f'; {found["other"]}\'s final: '
            f'{task.fmt.format(found["target"])}. ')
    if found['name']:
        return text + (f'Matched skill: {lead} at iteration {at} of {iters} '
                       f'({signed} from it on the validation images); its '
                       'figures on the test sets are the rows "at matched '
                       'skill".')
    if at == iters and abs(found['difference']) <= task.comparable:
        return text + (f'No earlier checkpoint of {lead} is nearer: the '
                       'final pair is the comparison at matched skill.')
    return text + (f'No checkpoint of {lead} is within {task.comparable:g} '
                   f'(the nearest, iteration {at}, is {signed} away): no '
                   'comparison at matched skill.')


def run(task_name: str, quick: bool, data_root: Optional[str],
        work_dir: str, seeds: int) -> int:
    """Data, training, tests and report. Returns the exit status."""
    task, t0 = TASKS[task_name], time.time()
    cfg = load_config(task.models[0][1])
    size = task.train_size(cfg)
    spec = dict(task.data, num_classes=task.num_classes(cfg), size=size,
                **(task.quick_data if quick else {}))
    data_root = data_root or cfg.data_root.rstrip('/') + '_quick' * quick
    roots = {s.canvas: data_root if s.canvas == 1 else
             f'{data_root}_canvas{s.canvas:g}x' for s in task.test_sets}
    infos = {c: ensure_data(task, root, spec if c == 1 else
                            task.canvas_data(spec, c))
             for c, root in roots.items()}
    # beside the test sets, not among them: what the search reads
    validation_root = f'{data_root}_select'
    validation = ensure_data(task, validation_root,
                             task.validation_data(spec, quick))
    if glob.glob(osp.join(work_dir, '**', '*.train.log'), recursive=True):
        shutil.rmtree(work_dir)  # an earlier demo's: its results would mix
    names = [n for n, _ in task.models]
    runs = {(i, s): osp.join(work_dir, names[i].replace(' ', '_').lower(),
                             f'seed{s}')
            for s in range(seeds) for i in range(len(names))}
    for d in runs.values():
        os.makedirs(osp.dirname(d), exist_ok=True)
    cores = len(os.sched_getaffinity(0))
    epochs = cfg.train_cfg.max_epochs
    iters = epochs * -(-infos[1]['num_train'] // cfg.train_dataloader
                       .batch_size)
    print(f'[demo] logs: {work_dir}/', flush=True)
    if train(task, runs, data_root, epochs, iters, cores):
        return 1
    t_train = time.time()
    tests = (UNTRAINED, ) + task.test_sets
    sizes = {t.label: round(size * t.scale) for t in tests + (VALIDATION, )}
    images = dict({t.label: roots[t.canvas] for t in tests},
                  **{VALIDATION.label: validation_root})
    tested = test_runs(task_name, runs, iters, sizes, images, cores)
    if tested is None:
        return 1
    t_test = time.time()
    stats = bootstrap(tested[0], images, RESAMPLES, SEED)
    found = tested[1]
    found['chosen_on']['seed'] = validation['seed']
    rows, figures = report(task, stats, sizes, tuple(names), seeds)
    series = [(n, figures) for n in names]
    if found['name']:
        pair = [found['name'] if n == found['model'] else n for n in names]
        matched_rows, found['figures'] = report(task, stats, sizes,
                                                tuple(pair), seeds)
        rows += [[f'**at matched skill: {found["name"]} of {iters} against '
                  f'{found["other"]}**'] + [''] * 7] + matched_rows
        series.append((found['name'], found['figures']))
    minutes = [(t - t0) / 60 for t in (t_train, t_test, time.time())]
    title = (f'{task.title}: {task.metric}, no fine-tuning, on '
             f'{" / ".join(str(i["num_val"]) for i in infos.values())} images'
             f' ({", ".join(roots.values())}); training runs of each '
             f'model: {seeds} (seed {"0" if seeds == 1 else f"0-{seeds - 1}"}'
             f'); 95 % intervals from {RESAMPLES} bootstrap resamples of the '
             f'runs of each model and {RESAMPLES} of the images, paired '
             'between the models, value +- t * se (Student\'s t over the '
             'runs; *: excludes 0)' + (
                 '; one run: the intervals cover the test images only'
                 if seeds == 1 else ''))
    table = '\n'.join('| ' + ' | '.join(r) + ' |' for r in [
        header(task), ['---'] * 8] + rows)
    text = matched_text(task, found, iters, seeds)
    print(f'\n[demo] done in {minutes[2]:.1f} min (training {minutes[0]:.1f}'
          f', tests {minutes[1] - minutes[0]:.1f}, bootstrap '
          f'{minutes[2] - minutes[1]:.1f}): {work_dir}/comparison.md, .png, '
          f'results.json\n{title}\n{table}\n{text}')
    difference = figures[TRAIN_SIZE.label]['difference'][task.metric][0]
    if abs(difference) > task.comparable:
        print(f'[demo] note: the models differ by {difference:+.3g} at the '
              f'training size (more than {task.comparable:g}): "kept" of the '
              'final pair compares a better-trained model with a '
              'less-trained one')
    with open(osp.join(work_dir, 'comparison.md'), 'w') as f:
        f.write(f'{title}\n\n{table}\n\n{text}\n')
    panels = []
    for key in (task.metric, 'kept %'):  # no "kept" at the training size
        labels = [t.label for t in task.test_sets
                  if key in figures[t.label]['difference']]
        panels.append((key, 100 if key == 'kept %' else None, labels, {
            m: (c, [f[t][m][key] for t in labels])
            for c, (m, f) in enumerate(series)}))
    plot(panels, [osp.join(work_dir, 'comparison.png')], title)
    with open(osp.join(work_dir, 'results.json'), 'w') as f:
        json.dump(dict(task=task_name, models=dict(task.models), seeds=seeds,
                       iterations=iters, sizes=sizes, images=images,
                       resamples=RESAMPLES, seed=SEED, figures=figures,
                       matched=found), f, indent=1)
    worse = [n for n in names if stats[n][TRAIN_SIZE.label][0] <=
             stats[n][UNTRAINED.label][0]]
    if worse:
        print(f'[demo] trained {" and ".join(worse)} does not beat its '
              'untrained self at the training size', file=sys.stderr)
    return int(bool(worse))


def main(argv=None):
    parser = argparse.ArgumentParser(
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument('--task', choices=sorted(TASKS), default='det')
    parser.add_argument('--quick', action='store_true', help='less data')
    parser.add_argument('--seeds', type=int, default=1, help='training runs '
                        'of each model (seeds 0 to N-1); default: 1')
    parser.add_argument('--data-root', help="default: the config's (canvas "
                        'test sets beside it: <root>_canvas<c>x; the '
                        'validation images that choose the matched-skill '
                        'checkpoint: <root>_select)')
    parser.add_argument('--work-dir', help='default: work_dirs/demo_<task>')
    parser.add_argument('--evaluate', help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.seeds < 1:
        parser.error(f'--seeds must be 1 or more, got {args.seeds}')
    os.chdir(REPO)  # relative paths are the repository's
    work_dir = args.work_dir or (f'work_dirs/demo_{args.task}' +
                                 '_quick' * args.quick)
    try:
        check_output_dir('--work-dir', work_dir, 'the results')
    except ValueError as e:
        parser.error(str(e))
    if args.evaluate:  # tests, in a process of their own
        return evaluate_model(*json.loads(args.evaluate))
    sys.exit(run(args.task, args.quick, args.data_root, work_dir,
                 args.seeds))


if __name__ == '__main__':
    main()
