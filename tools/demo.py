"""The mmcpvt demo (``make demo``): a model with PEGs beside its learned-PE
twin, trained and tested on built-in data.

Both models of a task share the recipe, the data and the seed; only the
backbone's position encoding differs (PEGs, or a learned table made for the
training size and resized bicubically to other sizes, with no PEG). The flow
runs every task of :data:`TASKS`:

1. data: generate a small synthetic set in the real on-disk layout
   (``tools/dataset_converters/``), and test sets on larger canvases (1.5x
   and 2x the training canvas) whose objects keep the pixel sizes of the
   training images, unless the same sets are already there;
2. train: both models at once with ``tools/train.py`` (one process each,
   half the cores each), printing the iteration and the time left;
3. evaluate, without fine-tuning (one process per model): the model as
   initialised (the baseline each must beat) at the training size, and the
   trained model on every test set of :data:`TEST_SETS`: the validation
   images at the training size and scaled up, and the larger canvases;
4. report: a table (printed, ``comparison.md``, every metric in
   ``results.json``), a plot of the main metric per test set
   (``comparison.png``), the predictions of both models on the largest
   canvas (``predictions.png``, detection) and each model's training loss
   (``<model>/loss_curve.png``). The exit status is non-zero if a step
   failed or a trained model does not beat its untrained self.

The scaled-up test enlarges the objects with the image, which may help any
detector; the larger canvas keeps the objects at the training scale and
asks a position encoding about positions it never saw. What comes out is
reported as it is: the demo trains from scratch for minutes on a toy set.

``--task det`` (the default; object detection, mmdet) is the user's main
job: RetinaNet with PVT-tiny + PEG (``configs/demo/retinanet_pvt-t-peg_demo
_coco.py``, which inherits ``configs/retinanet_pvt_tiny_peg_1x_coco.py``)
and its twin ``configs/demo/retinanet_pvt-t-learned-pe_demo_coco.py`` on a
COCO-layout set, COCO bbox mAP with pycocotools.

``--task cls`` (image classification, mmpretrain): CPVT-GAP with PEGs after
encoders 0-4, shrunk to run on the CPU (``configs/demo/cpvt-tiny-gap_demo
_imagenet.py``), and its twin ``configs/demo/cpvt-tiny-learned-pe_demo
_imagenet.py`` on an ImageNet-layout set, top-1 and top-5 accuracy.

Each step's full output is kept in the work directory (``<model>/
demo_train.out``, ``eval/<model>/<test set>/console.log``); only progress
lines are echoed.
"""
import argparse
import glob
import json
import math
import multiprocessing
import os
import os.path as osp
import re
import shutil
import subprocess
import sys
import threading
import time
import warnings
from contextlib import redirect_stderr, redirect_stdout
from dataclasses import dataclass
from typing import Callable, Dict, List, Optional, Tuple

REPO = osp.dirname(osp.dirname(osp.abspath(__file__)))
# mmengine imports pkg_resources, which warns about itself (also in the
# evaluation processes, which run this module's top level first)
warnings.filterwarnings('ignore', 'pkg_resources is deprecated')
sys.path.insert(0, osp.join(REPO, 'tools', 'dataset_converters'))
import make_coco  # noqa: E402
import make_imagenet  # noqa: E402


def det_data_options(cfg, data_root: str) -> List[str]:
    ann = f'{data_root}/annotations/instances_val2017.json'
    return [
        f'{loader}.dataset.data_root={data_root}/'
        for loader in ('train_dataloader', 'val_dataloader',
                       'test_dataloader')
    ] + [f'val_evaluator.ann_file={ann}', f'test_evaluator.ann_file={ann}',
         # mAP over every detection: an untrained model scores nothing
         # above the default 0.05, and an empty result has no mAP at all.
         'model.test_cfg.score_thr=0.0']


def cls_data_options(cfg, data_root: str) -> List[str]:
    return [
        f'{loader}.dataset.data_root={data_root}'
        for loader in ('train_dataloader', 'val_dataloader',
                       'test_dataloader')
    ]


def det_canvas_data(spec: dict, canvas: float) -> dict:
    """The generator's arguments for a detection test set on a canvas
    ``canvas`` times the side of the training one: its validation images
    only, objects at their training pixel sizes and as densely placed (c^2
    times as many per image)."""
    fewest, most = spec.get('objects_per_image', (1, 5))
    return dict(spec, num_train=0, canvas_scale=canvas,
                objects_per_image=[max(1, round(fewest * canvas**2)),
                                   max(1, round(most * canvas**2))])


def cls_canvas_data(spec: dict, canvas: float) -> dict:
    """The same for classification: the one object of each image at its
    training pixel size, anywhere on the larger canvas."""
    return dict(spec, train_per_class=0, canvas_scale=canvas)


def slug(text: str) -> str:
    """A file name for ``text``: 'learned PE' -> 'learned_pe'."""
    return re.sub(r'[^\w.]+', '_', text.lower()).strip('_')


@dataclass(frozen=True)
class Model:
    name: str  # in the table, the plot and the progress lines
    config: str  # relative to the repository

    @property
    def slug(self) -> str:  # its folder in the work dir
        return slug(self.name)


@dataclass(frozen=True)
class TestSet:
    """The validation images of the training set (``canvas`` 1), or of a set
    generated on a canvas ``canvas`` times the training one's side with
    objects at the training scale; tested at ``scale`` times the training
    size (the test pipeline's resize, or resize and crop)."""
    label: str
    canvas: float = 1.0
    scale: float = 1.0

    @property
    def slug(self) -> str:
        return slug(self.label)


TRAIN_SIZE = TestSet('train size')
SCALED = {s: TestSet(f'scaled {s:g}x', 1.0, s) for s in (1.5, 2.0)}
CANVAS = {c: TestSet(f'canvas {c:g}x', c, c) for c in (1.5, 2.0)}
UNTRAINED = 'untrained'


@dataclass(frozen=True)
class Metric:
    key: str  # as the evaluator names it
    label: str
    fmt: str  # format of the value


@dataclass(frozen=True)
class Task:
    """One demo: what differs between tasks. :func:`run` does the rest."""
    title: str
    # The model with PEGs first, then its twin; the first one's config
    # gives the data set and the training size.
    models: Tuple[Model, ...]
    parent: str  # the config the PEG model's demo config inherits
    layout: str  # of the generated data set
    make_data: Callable  # make_data(out, overwrite=..., **spec) -> info
    read_data: Callable  # read_data(out) -> info of a set it made, or None
    # The data set: the generator's arguments that are not in the config.
    data: dict
    # The generator's arguments of a canvas test set, from the training
    # set's: (spec, canvas) -> spec.
    canvas_data: Callable
    # The data set's side, in pixels, and the number of classes.
    train_size: Callable  # (cfg) -> int
    num_classes: Callable  # (cfg) -> int
    # --cfg-options that point a config at a data root.
    data_options: Callable  # (cfg, data_root) -> list
    test_sets: Tuple[TestSet, ...]  # the first one is TRAIN_SIZE
    metrics: Tuple[Metric, ...]  # the first one decides success
    metrics_title: str
    # --quick: changed data arguments and the number of epochs.
    quick_data: dict
    quick_epochs: int
    # Most threads per process (None: half the cores each, as two run at
    # once).
    threads: Optional[int]
    draw: bool = False  # draw predictions on the last test set
    # The generator's code version, compared with the one a set was made by.
    generator_id: Optional[Callable] = None


TASKS: Dict[str, Task] = {
    'det': Task(
        title='detection: RetinaNet with PVT-tiny, PEG vs learned PE (mmdet)',
        models=(Model('PEG', 'configs/demo/retinanet_pvt-t-peg_demo_coco.py'),
                Model('learned PE',
                      'configs/demo/retinanet_pvt-t-learned-pe_demo_coco.py')),
        parent='configs/retinanet_pvt_tiny_peg_1x_coco.py',
        layout='COCO',
        make_data=make_coco.make_coco,
        read_data=make_coco.read_info,
        # objects of 0.16-0.5 of the image side: at the config's 192 px,
        # the sizes its anchors cover
        data=dict(num_train=160, num_val=40, seed=0,
                  object_scale=[0.16, 0.5], objects_per_image=[1, 5]),
        canvas_data=det_canvas_data,
        train_size=lambda cfg: cfg.scale[0],
        num_classes=lambda cfg: len(cfg.classes),
        data_options=det_data_options,
        test_sets=(TRAIN_SIZE, SCALED[1.5], CANVAS[1.5], CANVAS[2.0]),
        metrics=(Metric('coco/bbox_mAP', 'mAP', '{:.3f}'),
                 Metric('coco/bbox_mAP_50', 'mAP@50', '{:.3f}')),
        metrics_title='COCO bbox mAP (pycocotools)',
        quick_data=dict(num_train=80, num_val=16),
        quick_epochs=2,
        threads=None,
        draw=True),
    'cls': Task(
        title='classification: CPVT-GAP, PEG vs learned PE (mmpretrain)',
        models=(Model('PEG', 'configs/demo/cpvt-tiny-gap_demo_imagenet.py'),
                Model('learned PE',
                      'configs/demo/cpvt-tiny-learned-pe_demo_imagenet.py')),
        parent='configs/cpvt/cpvt-tiny-gap-p0-4_4xb256_in1k.py',
        layout='ImageNet',
        make_data=make_imagenet.make_imagenet,
        read_data=make_imagenet.read_info,
        data=dict(train_per_class=100, val_per_class=25, seed=0),
        canvas_data=cls_canvas_data,
        train_size=lambda cfg: cfg.img_size,
        num_classes=lambda cfg: cfg.num_classes,
        data_options=cls_data_options,
        test_sets=(TRAIN_SIZE, SCALED[1.5], SCALED[2.0], CANVAS[1.5],
                   CANVAS[2.0]),
        metrics=(Metric('accuracy/top1', 'top1', '{:.2f}%'),
                 Metric('accuracy/top5', 'top5', '{:.2f}%')),
        metrics_title='accuracy',
        quick_data=dict(train_per_class=40, val_per_class=10),
        quick_epochs=8,
        # The model is small: more than one thread each only adds
        # overhead.
        threads=1,
        generator_id=make_imagenet.generator_id),
}

# Lines of a step's output echoed as they are: errors.
ECHO = re.compile(r'Error|error:|Traceback')
TRAIN_LOG = re.compile(r'Epoch\(train\)\s*\[(\d+)\]\[\s*(\d+)/(\d+)\]')
FIELD = re.compile(r'(?<![\w/])(time|loss): ([\d.]+)')
# The validation results (its progress lines carry an eta, these do not).
VAL_LOG = re.compile(r'Epoch\(val\)\s*\[(\d+)\]\[[\s\d/]+\](?!.*\beta: )')
METRIC = re.compile(r'(\w+/\w+): (-?[\d.]+)')


class TrainProgress:
    """Turns the runner's ``Epoch(train) [e][i/n] ... time: t`` log lines
    into ``iter k/N, ~M min left`` lines, about ``steps`` of them over the
    run, and its validation results into one line each."""

    def __init__(self, max_epochs: int, steps: int = 10, name: str = ''):
        self.max_epochs = max_epochs
        self.steps = steps
        self.next = 0
        self.prefix = f'[demo] train {name}: ' if name else '[demo] train: '

    def __call__(self, line: str) -> Optional[str]:
        m = VAL_LOG.search(line)
        if m:
            metrics = METRIC.findall(line[m.end():])[:3]
            return f'{self.prefix}validation after epoch {m.group(1)}: ' \
                + ', '.join(f'{k} {float(v):.3f}' for k, v in metrics)
        m = TRAIN_LOG.search(line)
        if not m:
            return None
        epoch, i, n = map(int, m.groups())
        done, total = (epoch - 1) * n + i, self.max_epochs * n
        if done < self.next and done < total:
            return None
        self.next = done + max(total // self.steps, 1)
        fields = dict(FIELD.findall(line))
        text = f'{self.prefix}iter {done}/{total} (epoch {epoch}/' \
               f'{self.max_epochs})'
        if 'loss' in fields:
            text += f', loss {float(fields["loss"]):.3f}'
        if 'time' in fields:
            sec = float(fields['time'])
            text += f', {sec:.2f} s/iter, ~{(total - done) * sec / 60:.1f} ' \
                    'min left'
        return text


@dataclass
class Step:
    """A command of the flow: ``cmd`` run from the repository root, its
    output kept in ``log_file``, what ``progress`` makes of its lines
    echoed (errors as they are)."""
    name: str
    cmd: list
    log_file: str
    threads: Optional[int] = None  # OMP_NUM_THREADS
    progress: Optional[Callable] = None


def run_steps(steps: List[Step]) -> int:
    """Run ``steps`` at once; if one fails, stop the others. Returns the
    first non-zero exit status (0 if all succeed) and prints the tail of
    a failed step's output."""
    lock = threading.Lock()

    def say(text, file=sys.stdout):
        with lock:
            print(text, file=file, flush=True)

    def pump(step, proc, tail):
        with open(step.log_file, 'w') as log:
            for line in proc.stdout:
                log.write(line)
                tail[:] = (tail + [line])[-40:]
                shown = step.progress(line) if step.progress else None
                if shown:
                    say(shown)
                elif ECHO.search(line):
                    say('    ' + line.rstrip()[-160:])

    running = []
    for step in steps:
        say(f'[demo] {step.name}: {" ".join(step.cmd)}')
        os.makedirs(osp.dirname(step.log_file), exist_ok=True)
        env = dict(os.environ)
        if step.threads is not None:
            env['OMP_NUM_THREADS'] = str(step.threads)
        proc = subprocess.Popen(
            step.cmd, cwd=REPO, env=env, stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT, text=True, bufsize=1)
        tail: List[str] = []
        reader = threading.Thread(target=pump, args=(step, proc, tail))
        reader.start()
        running.append((step, proc, reader, tail))
    rc = 0
    while any(proc.poll() is None for _, proc, _, _ in running):
        failed = [p.returncode for _, p, _, _ in running if p.returncode]
        if failed and not rc:
            rc = failed[0]
            for _, proc, _, _ in running:
                if proc.poll() is None:
                    proc.terminate()
        time.sleep(0.5)
    for step, proc, reader, tail in running:
        reader.join()
        proc.stdout.close()
        if proc.returncode and not (rc and proc.returncode < 0):
            say(f'[demo] {step.name} FAILED (exit {proc.returncode}); last '
                f'lines of {step.log_file}:', file=sys.stderr)
            say(''.join(tail).rstrip(), file=sys.stderr)
        rc = rc or proc.returncode
    return rc


def ensure_data(task: Task, path: str, spec: dict,
                name: Optional[str] = None) -> dict:
    """Generate the data set at ``path`` unless the same one is already
    there (made with the same ``spec``, and by the same generator code where
    the generator records its version). Returns its description."""
    name = name or path
    info = task.read_data(path)
    wanted = dict(spec)
    if task.generator_id:
        wanted['generator'] = task.generator_id()
    wanted = json.loads(json.dumps(wanted))  # as the marker stores it
    if info is not None and all(info.get(k) == v for k, v in wanted.items()):
        print(f'[demo] data: reusing {name} ({info["num_train"]} train '
              f'/ {info["num_val"]} val images)', flush=True)
        return info
    t = time.time()
    info = task.make_data(path, overwrite=info is not None,
                          progress=sys.stdout.isatty(), **spec)
    print(f'[demo] data: wrote {info["num_train"]} train / {info["num_val"]} '
          f'val images of {info["num_classes"]} classes to {name} '
          f'({time.time() - t:.0f} s)', flush=True)
    return info


def load_config(config: str):
    from mmengine.config import Config
    return Config.fromfile(
        osp.join(REPO, config), import_custom_modules=False)


def apply_options(cfg, options: List[str]):
    """``cfg`` with ``--cfg-options`` strings applied, as the tools apply
    them."""
    from mmengine.config import DictAction
    parser = argparse.ArgumentParser()
    parser.add_argument('--cfg-options', nargs='+', action=DictAction)
    cfg.merge_from_dict(
        parser.parse_args(['--cfg-options', *options]).cfg_options)
    return cfg


def data_spec(task: Task, cfg, quick: bool = False) -> dict:
    """The generator's arguments for the data set of ``task``."""
    spec = dict(task.data, num_classes=task.num_classes(cfg),
                size=task.train_size(cfg))
    if quick:
        spec.update(task.quick_data)
    return spec


def test_roots(task: Task, data_root: str) -> Dict[float, str]:
    """The data root of each canvas of the task's test sets (1: the
    training set)."""
    return {s.canvas: data_root if s.canvas == 1 else
            f'{data_root}_canvas{s.canvas:g}x' for s in task.test_sets}


def schedule_options(cfg, max_epochs: int) -> List[str]:
    """--cfg-options that shorten the config's schedule to ``max_epochs``:
    validation and the checkpoint at its end, the epoch-based learning-rate
    schedulers ending there."""
    options = [f'train_cfg.max_epochs={max_epochs}',
               f'train_cfg.val_interval={max_epochs}',
               f'default_hooks.checkpoint.interval={max_epochs}']
    for i, scheduler in enumerate(cfg.param_scheduler):
        if scheduler.get('by_epoch', True) and \
                scheduler.get('end', 0) >= cfg.train_cfg.max_epochs:
            options.append(f'param_scheduler.{i}.end={max_epochs}')
    return options


def threads_each(task: Task, processes: int = 2) -> int:
    """Threads per process when ``processes`` run at once."""
    cores = len(os.sched_getaffinity(0)) if hasattr(
        os, 'sched_getaffinity') else (os.cpu_count() or 1)
    each = max(1, cores // processes)
    return min(each, task.threads) if task.threads else each


# ------------------------------------------------------------- evaluation
@dataclass(frozen=True)
class EvalRun:
    """One test of one model: the ``checkpoint`` on ``test_set`` (its data
    at ``data_root``, ``num_images`` of them), tested at ``size``."""
    label: str  # 'untrained' or the test set's label
    checkpoint: str
    test_set: TestSet
    data_root: str
    size: int
    num_images: int
    draw: bool = False

    @property
    def cost(self) -> float:  # relative: images x pixels
        return self.num_images * self.test_set.scale**2


def evaluate_model(task_name: str, model_index: int, runs: List[EvalRun],
                   out_dir: str, threads: int) -> None:
    """Test one model on each of ``runs`` in this process (an mmengine
    Runner per run, as ``tools/test.py`` builds it); write each run's
    metrics to ``out_dir/<label>.json`` and print a line with the time
    left. Runs in a process of its own (:func:`evaluate`)."""
    import torch
    torch.set_num_threads(threads)
    import mmcpvt  # noqa: F401  (registers the models)
    from mmcpvt.utils.evaluation import (run_test, save_untrained,
                                         set_test_size)
    task = TASKS[task_name]
    model = task.models[model_index]
    base = load_config(model.config)
    total, done, t0 = sum(r.cost for r in runs), 0.0, time.time()
    for i, run in enumerate(runs, 1):
        cfg = apply_options(base.copy(), task.data_options(
            base, run.data_root))
        set_test_size(cfg, run.size)
        run_dir = osp.join(REPO, out_dir, slug(run.label))
        os.makedirs(run_dir, exist_ok=True)
        checkpoint = osp.join(REPO, run.checkpoint)
        if run.label == UNTRAINED:
            # its table of every parameter's initialisation goes to a file
            with open(osp.join(run_dir, 'init.log'), 'w') as log, \
                    redirect_stdout(log), redirect_stderr(log):
                save_untrained(base, checkpoint)
        cfg.load_from = checkpoint
        cfg.work_dir = run_dir
        cfg.launcher = 'none'
        if run.draw:
            cfg.default_hooks.visualization.update(
                draw=True, test_out_dir='predictions')
        t = time.time()
        console = osp.join(run_dir, 'console.log')
        try:
            metrics = run_test(cfg, console)
        except Exception as e:
            print(f'[demo] evaluate {model.name}, {run.label}: FAILED '
                  f'({type(e).__name__}: {e}); the runner\'s output is in '
                  f'{osp.relpath(console, REPO)}', file=sys.stderr,
                  flush=True)
            raise SystemExit(1)
        with open(osp.join(REPO, out_dir, f'{slug(run.label)}.json'),
                  'w') as f:
            json.dump(metrics, f)
        done += run.cost
        left = (time.time() - t0) / done * (total - done)
        scores = '  '.join(f'{m.label} {m.fmt.format(metrics[m.key])}'
                           for m in task.metrics)
        print(f'[demo] evaluate {model.name} ({i}/{len(runs)}): {run.label}'
              f', {run.size} px: {scores} ({time.time() - t:.0f} s, ~'
              f'{left / 60:.1f} min left)', flush=True)


def evaluate(task_name: str, runs: Dict[int, List[EvalRun]], work_dir: str,
             threads: int) -> int:
    """:func:`evaluate_model` for every model at once, a process each
    (spawned: a fresh interpreter, no state of this one). Returns 0, or 1
    if one failed."""
    ctx = multiprocessing.get_context('spawn')
    procs = [
        ctx.Process(target=evaluate_model,
                    args=(task_name, index, model_runs,
                          eval_dir(work_dir, TASKS[task_name].models[index]),
                          threads))
        for index, model_runs in runs.items()
    ]
    for proc in procs:
        proc.start()
    rc = 0
    while any(proc.is_alive() for proc in procs):
        if any(proc.exitcode for proc in procs):
            rc = 1
            for proc in procs:
                proc.terminate()
        time.sleep(0.5)
    return rc or int(any(proc.exitcode for proc in procs))


def eval_dir(work_dir: str, model: Model) -> str:
    return osp.join(work_dir, 'eval', model.slug)


def read_results(task: Task, work_dir: str) -> Dict[str, Dict[str, dict]]:
    """``{model name: {run label: metrics}}`` from the evaluation's files."""
    results = {}
    for model in task.models:
        folder = osp.join(REPO, eval_dir(work_dir, model))
        results[model.name] = {}
        for label in [UNTRAINED] + [s.label for s in task.test_sets]:
            path = osp.join(folder, f'{slug(label)}.json')
            if osp.isfile(path):
                with open(path) as f:
                    results[model.name][label] = json.load(f)
    return results


# ----------------------------------------------------------------- report
def comparison_table(task: Task, results: dict, sizes: Dict[str, int],
                     markdown: bool = False) -> str:
    """A row per test set, a column per model (its metrics), the difference
    PEG - twin in the main metric, and the share of its training-size value
    that each model keeps on the set."""
    names = [m.name for m in task.models]
    main = task.metrics[0]
    heads = ['test set', 'size'] + [
        f'{name}: ' + ' / '.join(m.label for m in task.metrics)
        for name in names] + [
            f'{main.label}: {names[0]} - {names[1]}',
            f'{main.label} kept: ' + ' / '.join(names)]
    rows = []
    for label in [UNTRAINED] + [s.label for s in task.test_sets]:
        if not all(label in results.get(n, {}) for n in names):
            continue
        cells = [label, f'{sizes[label]} px']
        for name in names:
            cells.append(' / '.join(
                m.fmt.format(results[name][label][m.key])
                for m in task.metrics))
        value = {n: results[n][label][main.key] for n in names}
        cells.append(('{:+' + main.fmt[2:]).format(value[names[0]] -
                                                   value[names[1]]))
        cells.append('' if label in (UNTRAINED, TRAIN_SIZE.label) else
                     ' / '.join(kept(results[n], label, main.key)
                                for n in names))
        rows.append(cells)
    if markdown:
        lines = ['| ' + ' | '.join(heads) + ' |',
                 '|' + '---|' * len(heads)]
        lines += ['| ' + ' | '.join(r) + ' |' for r in rows]
        return '\n'.join(lines)
    widths = [max(len(r[i]) for r in rows + [heads])
              for i in range(len(heads))]
    return '\n'.join('    ' + '  '.join(
        c.ljust(w) if i < 2 else c.rjust(w)
        for i, (c, w) in enumerate(zip(r, widths))).rstrip()
        for r in [heads] + rows)


def kept(results: dict, label: str, key: str) -> str:
    """``results[label][key]`` as a share of the training-size value."""
    base = results.get(TRAIN_SIZE.label, {}).get(key)
    if not base or base <= 0:
        return '-'
    return f'{100 * results[label][key] / base:.0f}%'


def plot_comparison(task: Task, results: dict, out_png: str,
                    title: str) -> str:
    """Left: the main metric (solid) and the second one (dashed) per test
    set, a line per model. Right: the main metric as a share of the model's
    own value at the training size. A PNG (matplotlib's Agg canvas: no
    display needed)."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure
    labels = [s.label for s in task.test_sets]
    main = task.metrics[0]
    fig = Figure(figsize=(11, 4.4), dpi=100)
    FigureCanvasAgg(fig)
    absolute, relative = fig.subplots(1, 2)
    xs = range(len(labels))
    for n, model in enumerate(task.models):
        res = results[model.name]
        for metric, style in zip(task.metrics, ('-', '--')):
            ys = [res.get(label, {}).get(metric.key, math.nan)
                  for label in labels]
            absolute.plot(xs, ys, style, color=f'C{n}', marker='o',
                          label=f'{model.name}, {metric.label}')
        base = res.get(TRAIN_SIZE.label, {}).get(main.key) or math.nan
        relative.plot(xs, [100 * res.get(label, {}).get(main.key, math.nan)
                           / base for label in labels], '-', color=f'C{n}',
                      marker='o', label=model.name)
    absolute.set_ylabel(' / '.join(m.label for m in task.metrics))
    relative.set_ylabel(f'{main.label}, % of its value at the training size')
    relative.axhline(100, color='grey', linewidth=1, linestyle=':')
    for ax in (absolute, relative):
        ax.set_xticks(list(xs), labels)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
    fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    fig.savefig(out_png, format='png')
    return out_png


def prediction_grid(drawn: Dict[str, str], out_png: str,
                    num: int = 3) -> bool:
    """One PNG of the first ``num`` drawn test images: a row each, the
    ground truth, then each model's predictions. ``drawn`` maps a model's
    name to the folder mmdet's visualizer drew into (each image is its
    ground truth left and its predictions right)."""
    from PIL import Image, ImageDraw
    files = {name: sorted(glob.glob(osp.join(folder, '**', '*.jpg'),
                                    recursive=True))[:num]
             for name, folder in drawn.items()}
    names = list(files)
    common = [osp.basename(f) for f in files[names[0]]]
    if not common or any([osp.basename(f) for f in files[n]] != common
                         for n in names):
        return False
    rows = []
    for k in range(len(common)):
        panels = []
        for n, name in enumerate(names):
            with Image.open(files[name][k]) as im:
                im = im.convert('RGB')
                half = im.width // 2
                if n == 0:
                    panels.append(('ground truth', im.crop((0, 0, half,
                                                            im.height))))
                panels.append((name, im.crop((half, 0, im.width,
                                              im.height))))
        rows.append(panels)
    w = max(p.width for row in rows for _, p in row)
    h = max(p.height for row in rows for _, p in row)
    top = 16
    grid = Image.new('RGB', (len(rows[0]) * w, len(rows) * (h + top)),
                     'white')
    pen = ImageDraw.Draw(grid)
    for r, row in enumerate(rows):
        for c, (title, panel) in enumerate(row):
            y = r * (h + top)
            pen.text((c * w + 4, y + 2), title, fill='black')
            grid.paste(panel, (c * w, y + top))
    grid.save(out_png)
    return True


def read_loss_curves(scalars_json: str) -> Dict[str, Tuple[list, list]]:
    """The training losses per iteration in the runner's scalar log
    (mmengine's LocalVisBackend writes ``<work_dir>/<timestamp>/vis_data/
    scalars.json``, one JSON object a line; the ``<timestamp>.json`` beside
    it has the same lines): ``{'loss': (steps, values), 'loss_cls': ...}``,
    ``loss`` and its terms ``loss_*`` where the model logs them. Lines
    without a loss (validation results) are skipped."""
    curves: Dict[str, Tuple[list, list]] = {}
    keys = set()
    with open(scalars_json) as f:
        for n, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                record = json.loads(line)
            except json.JSONDecodeError as e:
                raise ValueError(f'{scalars_json}, line {n}: not JSON '
                                 f'({e}): {line.strip()[:80]!r}') from None
            keys.update(record)
            for key, value in record.items():
                if (key == 'loss' or key.startswith('loss_')) and \
                        'step' in record:
                    steps, values = curves.setdefault(key, ([], []))
                    steps.append(record['step'])
                    values.append(value)
    if 'loss' not in curves:
        raise ValueError(
            f'{scalars_json} has no training loss: no line has both "loss" '
            f'and "step" (keys found: {", ".join(sorted(keys)) or "none"}). '
            'The curve is read from the scalars.json of a training run '
            '(<work_dir>/<timestamp>/vis_data/, written by mmengine\'s '
            'LocalVisBackend every default_hooks.logger.interval '
            'iterations)')
    return curves


def plot_loss_curve(scalars_json: str, out_png: str) -> str:
    """The curves of :func:`read_loss_curves` against the iteration, as a
    PNG at ``out_png``."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure
    curves = read_loss_curves(scalars_json)
    fig = Figure(figsize=(6, 4), dpi=100)
    FigureCanvasAgg(fig)
    ax = fig.add_subplot()
    for key in ['loss'] + sorted(k for k in curves if k != 'loss'):
        steps, values = curves[key]
        ax.plot(steps, values, label=key,
                linewidth=2 if key == 'loss' else 1,
                marker='.' if len(steps) < 20 else None)
    ax.set_xlabel('iteration')
    ax.set_ylabel('training loss')
    ax.grid(alpha=0.3)
    ax.legend()
    fig.tight_layout()
    fig.savefig(out_png, format='png')
    return out_png


def train_scalars(work_dir: str) -> Optional[str]:
    """The runner's scalar log of the training run in ``work_dir``."""
    logs = glob.glob(
        osp.join(work_dir, '[0-9]*_[0-9]*', 'vis_data', 'scalars.json'))
    return max(logs, key=osp.getmtime) if logs else None


def loss_curve(work_dir: str) -> Optional[str]:
    """``<work_dir>/loss_curve.png`` (relative to the repository) of the
    training run in ``work_dir``; None, with the reason printed, where
    there is no loss to plot (the model is what the demo checks: it goes
    on)."""
    curve = osp.join(work_dir, 'loss_curve.png')
    scalars = train_scalars(osp.join(REPO, work_dir))
    try:
        if scalars is None:
            raise ValueError(
                f'no <timestamp>/vis_data/scalars.json in {work_dir} (the '
                "config's visualizer writes it with a LocalVisBackend)")
        plot_loss_curve(scalars, osp.join(REPO, curve))
    except ValueError as e:
        print(f'[demo] no loss curve: {e}', file=sys.stderr)
        return None
    return curve


# ------------------------------------------------------------------- flow
def run(task_name: str, quick: bool, data_root: Optional[str],
        work_dir: str) -> int:
    """Generate the data, train both models at once, evaluate both on every
    test set and report. Returns the exit status."""
    task = TASKS[task_name]
    cfg = load_config(task.models[0].config)
    train_size = task.train_size(cfg)
    max_epochs = task.quick_epochs if quick else cfg.train_cfg.max_epochs
    spec = data_spec(task, cfg, quick)
    data_root = data_root or cfg.data_root.rstrip('/') + (
        '_quick' if quick else '')
    roots = test_roots(task, data_root)
    work_abs = osp.join(REPO, work_dir)
    threads = threads_each(task, len(task.models))
    phases = iter(range(1, 5))

    def phase(text):
        print(f'[demo] ({next(phases)}/4) {text}', flush=True)

    t0 = time.time()
    print(f'[demo] {task.title}', flush=True)
    for model in task.models:
        print(f'[demo]   {model.name:10s} {model.config}', flush=True)
    print(f'[demo] work dir {work_dir}', flush=True)

    phase(f'data: {len(roots)} set(s) in the {task.layout} layout')
    infos = {}
    for canvas, root in roots.items():
        set_spec = spec if canvas == 1 else task.canvas_data(spec, canvas)
        infos[canvas] = ensure_data(task, osp.join(REPO, root), set_spec,
                                    root)
    if osp.isdir(work_abs) and (
            glob.glob(osp.join(work_abs, '*', 'demo_train.out')) or
            glob.glob(osp.join(work_abs, 'demo_*.out'))):
        # a previous demo run: start afresh, so that the checkpoints,
        # logs and results listed at the end are this run's
        shutil.rmtree(work_abs)
    os.makedirs(work_abs, exist_ok=True)

    py = sys.executable
    options = task.data_options(cfg, data_root)
    if max_epochs != cfg.train_cfg.max_epochs:
        options = options + schedule_options(cfg, max_epochs)
    phase(f'train both models at once for {max_epochs} epoch'
          f'{"s" if max_epochs > 1 else ""}, {threads} thread(s) each '
          f'(logs: {work_dir}/<model>/demo_train.out)')
    t = time.time()
    rc = run_steps([
        Step(f'train {m.name}',
             [py, 'tools/train.py', m.config, '--work-dir',
              osp.join(work_dir, m.slug), '--cfg-options', *options],
             osp.join(work_abs, m.slug, 'demo_train.out'), threads,
             TrainProgress(max_epochs, name=m.name)) for m in task.models
    ])
    train_s = time.time() - t
    if rc:
        return rc
    ckpts = {}
    for m in task.models:
        ckpts[m.name] = osp.join(work_dir, m.slug, f'epoch_{max_epochs}.pth')
        if not osp.isfile(osp.join(REPO, ckpts[m.name])):
            print(f'[demo] training finished but {ckpts[m.name]} is missing',
                  file=sys.stderr)
            return 1
    print(f'[demo] train: done in {train_s / 60:.1f} min', flush=True)

    sizes = {UNTRAINED: train_size}
    sizes.update({s.label: round(train_size * s.scale)
                  for s in task.test_sets})
    runs = {}
    for index, m in enumerate(task.models):
        runs[index] = [EvalRun(
            UNTRAINED, osp.join(eval_dir(work_dir, m), 'untrained.pth'),
            TRAIN_SIZE, data_root, train_size, infos[1]['num_val'])] + [
            EvalRun(s.label, ckpts[m.name], s, roots[s.canvas],
                    sizes[s.label], infos[s.canvas]['num_val'],
                    draw=task.draw and s == task.test_sets[-1])
            for s in task.test_sets]
    phase(f'evaluate both models at once, without fine-tuning: the '
          f'untrained model, then {len(task.test_sets)} test sets '
          f'({", ".join(s.label for s in task.test_sets)})')
    t = time.time()
    if evaluate(task_name, runs, work_dir, threads):
        return 1
    eval_s = time.time() - t

    phase('report')
    results = read_results(task, work_dir)
    title = (f'{task.metrics_title}, {infos[1]["num_val"]} validation '
             'images per test set, no fine-tuning')
    table = comparison_table(task, results, sizes)
    with open(osp.join(work_abs, 'comparison.md'), 'w') as f:
        f.write(f'{task.title}: {title}\n\n')
        f.write(comparison_table(task, results, sizes, markdown=True) + '\n')
    with open(osp.join(work_abs, 'results.json'), 'w') as f:
        json.dump(dict(
            task=task_name, train_size=train_size, sizes=sizes,
            models={m.name: m.config for m in task.models},
            test_sets={s.label: dict(canvas=s.canvas, scale=s.scale,
                                     data_root=roots[s.canvas])
                       for s in task.test_sets},
            results=results), f, indent=2)
    plot = plot_comparison(task, results,
                           osp.join(work_abs, 'comparison.png'),
                           f'{task.title}\n{title}')
    drawn = None
    if task.draw:
        last = task.test_sets[-1]
        drawn = osp.join(work_dir, 'predictions.png')
        folders = {m.name: osp.join(REPO, eval_dir(work_dir, m), last.slug)
                   for m in task.models}
        if not prediction_grid(folders, osp.join(REPO, drawn)):
            print('[demo] no predictions drawn', file=sys.stderr)
            drawn = None
    curves = [loss_curve(osp.join(work_dir, m.slug)) for m in task.models]

    print(f'\n[demo] done in {(time.time() - t0) / 60:.1f} min (training '
          f'{train_s / 60:.1f} min, evaluation {eval_s / 60:.1f} min)')
    info = infos[1]
    print(f'  data        {data_root}  ({task.layout} layout, '
          f'{info["num_classes"]} classes, {info["num_train"]} train / '
          f'{info["num_val"]} val images, {train_size} px)')
    for canvas, root in roots.items():
        if canvas != 1:
            print(f'              {root}  ({infos[canvas]["num_val"]} val '
                  f'images on a {canvas:g}x canvas, objects at the training '
                  'scale)')
    print(f'  configs     {", ".join(m.config for m in task.models)}  '
          f'(inherit {task.parent})')
    print(f'  work dir    {work_dir}  (checkpoints and logs in '
          f'{", ".join(m.slug for m in task.models)}/)')
    print(f'  results     {work_dir}/comparison.md, results.json')
    print(f'  plot        {osp.relpath(plot, REPO)}')
    if drawn:
        print(f'  predictions {drawn}  (on the {task.test_sets[-1].label} '
              f'set: ground truth, then {", ".join(results)})')
    for curve in curves:
        if curve:
            print(f'  loss curve  {curve}')
    print(f'  {title}:')
    print(table)

    key = task.metrics[0].key
    worse = [name for name, res in results.items()
             if res[TRAIN_SIZE.label][key] <= res[UNTRAINED][key]]
    if worse:
        print(f'[demo] trained {" and ".join(worse)} does not beat its '
              'untrained self at the training size', file=sys.stderr)
        return 1
    return 0


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    parser.add_argument(
        '--task',
        choices=sorted(TASKS),
        default='det',
        help='det (default): RetinaNet with PVT-T, PEG vs learned PE, on a '
        'COCO-layout set (mmdet); cls: CPVT-GAP vs its learned-PE twin '
        '(mmpretrain)')
    parser.add_argument(
        '--quick',
        action='store_true',
        help='smaller data sets and fewer epochs: a minute or two')
    parser.add_argument(
        '--data-root',
        help='where the training set goes (relative to the repository; the '
        'canvas test sets go beside it, <root>_canvas<c>x); defaults to the '
        'config\'s data_root (with a _quick suffix for --quick)')
    parser.add_argument(
        '--work-dir',
        help='defaults to work_dirs/demo_<task> (work_dirs/demo_<task>'
        '_quick with --quick)')
    return parser.parse_args(argv)


def main(argv=None):
    args = parse_args(argv)
    work_dir = args.work_dir or (f'work_dirs/demo_{args.task}' +
                                 ('_quick' if args.quick else ''))
    sys.exit(run(args.task, args.quick, args.data_root, work_dir))


if __name__ == '__main__':
    main()
