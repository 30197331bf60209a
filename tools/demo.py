"""The mmcpvt demo (``make demo``): train and evaluate on built-in data.

One flow runs every task of :data:`TASKS`:

1. generate a small synthetic set in the real on-disk layout
   (``tools/dataset_converters/``), unless the same set is already there;
2. evaluate the model as initialised, where the task compares against it
   (the baseline to beat);
3. train with ``tools/train.py`` on the task's demo config, printing the
   iteration and the time left;
4. test the last checkpoint with ``tools/test.py`` at the training
   resolution and at larger ones never seen in training: the conditional
   position encoding has no table tied to the training size, so the same
   weights apply to any input size;
5. plot the training loss per iteration from the runner's scalar log
   (``<work_dir>/loss_curve.png``, beside ``predictions.png``);
6. print where everything went and the metrics. The exit status is non-zero
   if a step failed or the trained model does not beat the untrained one.

``--task det`` (the default; object detection, mmdet) is the user's main
job: RetinaNet with the PVT-tiny + PEG backbone from
``configs/demo/retinanet_pvt-t-peg_demo_coco.py`` (which inherits
``configs/retinanet_pvt_tiny_peg_1x_coco.py``) on a COCO-layout set, COCO
bbox mAP with pycocotools, and a PNG of the predictions at the larger size.

``--task cls`` (image classification, mmpretrain): CPVT-GAP (PEGs after
encoders 0-4, shrunk to run on the CPU) from
``configs/demo/cpvt-tiny-gap_demo_imagenet.py`` on an ImageNet-layout set,
top-1 and top-5 accuracy.

The full output of each step is kept in the work directory
(``demo_train.out``, ``demo_test_<model>_<size>.out``); only progress lines
are echoed.
"""
import argparse
import glob
import json
import os
import os.path as osp
import re
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass
from typing import Callable, Dict, List, Optional, Tuple

REPO = osp.dirname(osp.dirname(osp.abspath(__file__)))
sys.path.insert(0, osp.join(REPO, 'tools', 'dataset_converters'))
import make_coco  # noqa: E402
import make_imagenet  # noqa: E402


def det_test_size(cfg, size: int) -> List[str]:
    """--cfg-options that resize the detector's test images to fit in
    ``size`` x ``size`` (aspect ratio kept, as the config does)."""
    types = [t['type'] for t in cfg.test_dataloader.dataset.pipeline]
    return [f'test_dataloader.dataset.pipeline.{types.index("Resize")}'
            f'.scale=({size},{size})']


def cls_test_size(cfg, size: int) -> List[str]:
    """--cfg-options that set the classifier's test resize and centre crop
    to ``size`` (keeping the config's resize/crop ratio)."""
    pipeline = cfg.test_dataloader.dataset.pipeline
    types = [t['type'] for t in pipeline]
    resize, crop = types.index('ResizeEdge'), types.index('CenterCrop')
    ratio = pipeline[resize]['scale'] / pipeline[crop]['crop_size']
    key = 'test_dataloader.dataset.pipeline'
    return [
        f'{key}.{resize}.scale={round(size * ratio)}',
        f'{key}.{crop}.crop_size={size}'
    ]


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


@dataclass(frozen=True)
class Metric:
    key: str  # as the evaluator names it
    label: str
    fmt: str  # format of the value


@dataclass(frozen=True)
class Task:
    """One demo: what differs between tasks. :func:`run` does the rest."""
    title: str
    config: str  # relative to the repository
    parent: str  # the config the demo config inherits
    layout: str  # of the generated data set
    make_data: Callable  # make_data(out, overwrite=..., **spec) -> info
    read_data: Callable  # read_data(out) -> info of a set it made, or None
    # The data set: the generator's arguments that are not in the config.
    data: dict
    # The data set's side, in pixels, and the number of classes.
    train_size: Callable  # (cfg) -> int
    num_classes: Callable  # (cfg) -> int
    # --cfg-options that point the config at a data root, and that set the
    # test resolution.
    data_options: Callable  # (cfg, data_root) -> list
    test_size_options: Callable  # (cfg, size) -> list
    test_scales: Tuple[float, ...]  # test sizes, x the training size
    metrics: Tuple[Metric, ...]  # the first one decides success
    metrics_title: str
    # Evaluate the initialised model first; the trained one must beat it.
    baseline: bool
    # --quick: changed data arguments and the number of epochs.
    quick_data: dict
    quick_epochs: int
    # OMP_NUM_THREADS of the steps (None: all cores).
    threads: Optional[str]
    draw: bool = False  # draw predictions at the largest test size
    # The generator's code version, compared with the one a set was made by.
    generator_id: Optional[Callable] = None


TASKS: Dict[str, Task] = {
    'det': Task(
        title='detection: RetinaNet, PVT-tiny + PEG backbone (mmdet)',
        config='configs/demo/retinanet_pvt-t-peg_demo_coco.py',
        parent='configs/retinanet_pvt_tiny_peg_1x_coco.py',
        layout='COCO',
        make_data=make_coco.make_coco,
        read_data=make_coco.read_info,
        # objects of 0.16-0.5 of the image side: at the config's 192 px,
        # the sizes its anchors cover
        data=dict(num_train=200, num_val=40, seed=0,
                  object_scale=[0.15, 0.4]),
        train_size=lambda cfg: cfg.scale[0],
        num_classes=lambda cfg: len(cfg.classes),
        data_options=det_data_options,
        test_size_options=det_test_size,
        test_scales=(1, 1.5),
        metrics=(Metric('coco/bbox_mAP', 'mAP', '{:.3f}'),
                 Metric('coco/bbox_mAP_50', 'mAP@50', '{:.3f}')),
        metrics_title='COCO bbox mAP on the validation images '
        '(pycocotools)',
        baseline=True,
        quick_data=dict(num_train=60),
        quick_epochs=1,
        threads=None,  # its layers are large enough to use every core
        draw=True),
    'cls': Task(
        title='classification: CPVT-GAP (mmpretrain)',
        config='configs/demo/cpvt-tiny-gap_demo_imagenet.py',
        parent='configs/cpvt/cpvt-tiny-gap-p0-4_4xb256_in1k.py',
        layout='ImageNet',
        make_data=make_imagenet.make_imagenet,
        read_data=make_imagenet.read_info,
        data=dict(train_per_class=100, val_per_class=25, seed=0),
        train_size=lambda cfg: cfg.img_size,
        num_classes=lambda cfg: cfg.num_classes,
        data_options=cls_data_options,
        test_size_options=cls_test_size,
        test_scales=(1, 1.5, 2),
        metrics=(Metric('accuracy/top1', 'top1', '{:6.2f}%'),
                 Metric('accuracy/top5', 'top5', '{:6.2f}%')),
        metrics_title='accuracy on the validation images',
        baseline=False,
        quick_data=dict(train_per_class=60),
        quick_epochs=10,
        # The model is small: two threads on a 2-core machine that is doing
        # anything else run it 5-10x slower than one.
        threads='1',
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

    def __init__(self, max_epochs: int, steps: int = 10):
        self.max_epochs = max_epochs
        self.steps = steps
        self.next = 0

    def __call__(self, line: str) -> Optional[str]:
        m = VAL_LOG.search(line)
        if m:
            metrics = METRIC.findall(line[m.end():])[:3]
            return f'[demo] train: validation after epoch {m.group(1)}: ' \
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
        text = f'[demo] train: iter {done}/{total} (epoch {epoch}/' \
               f'{self.max_epochs})'
        if 'loss' in fields:
            text += f', loss {float(fields["loss"]):.3f}'
        if 'time' in fields:
            sec = float(fields['time'])
            text += f', {sec:.2f} s/iter, ~{(total - done) * sec / 60:.1f} ' \
                    'min left'
        return text


def run_step(name: str, cmd: list, log_file: str, threads: Optional[str],
             progress: Optional[Callable] = None) -> int:
    """Run ``cmd`` from the repository root; keep its output in
    ``log_file``, echo what ``progress`` makes of its lines (errors as they
    are), and print the tail on failure."""
    print(f'[demo] {name}: {" ".join(cmd)}', flush=True)
    os.makedirs(osp.dirname(log_file), exist_ok=True)
    env = dict(os.environ)
    if threads is not None:
        env.setdefault('OMP_NUM_THREADS', threads)
    tail = []
    with open(log_file, 'w') as log, subprocess.Popen(
            cmd, cwd=REPO, env=env, stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT, text=True, bufsize=1) as proc:
        for line in proc.stdout:
            log.write(line)
            tail = (tail + [line])[-40:]
            shown = progress(line) if progress else None
            if shown:
                print(shown, flush=True)
            elif progress and ECHO.search(line):
                print('    ' + line.rstrip()[-160:], flush=True)
    if proc.returncode != 0:
        print(f'[demo] {name} FAILED (exit {proc.returncode}); last lines '
              f'of {log_file}:', file=sys.stderr)
        sys.stderr.write(''.join(tail))
    return proc.returncode


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
    info = task.make_data(path, overwrite=info is not None, **spec)
    print(f'[demo] data: wrote {info["num_train"]} train / {info["num_val"]} '
          f'val images of {info["num_classes"]} classes to {name} '
          f'({time.time() - t:.0f} s)', flush=True)
    return info


def load_config(config: str):
    from mmengine.config import Config
    return Config.fromfile(
        osp.join(REPO, config), import_custom_modules=False)


def save_untrained(config: str, path: str):
    """The model of ``config`` as initialised, before any training."""
    from mmengine.logging import MMLogger

    from mmcpvt.utils.evaluation import save_untrained as save

    # the current logger, at WARNING: no table of every parameter's init
    MMLogger.get_instance('mmcpvt_demo', log_level='WARNING')
    save(load_config(config), path)


def data_spec(task: Task, cfg, quick: bool = False) -> dict:
    """The generator's arguments for the data set of ``task``."""
    spec = dict(task.data, num_classes=task.num_classes(cfg),
                size=task.train_size(cfg))
    if quick:
        spec.update(task.quick_data)
    return spec


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


def prediction_grid(show_dir: str, out_png: str, num: int = 6) -> bool:
    """One PNG of the first ``num`` drawn test images (ground truth left,
    predictions right, as mmdet's visualizer draws them)."""
    from PIL import Image
    files = sorted(glob.glob(osp.join(show_dir, '**', '*.jpg'),
                             recursive=True))[:num]
    if not files:
        return False
    images = [Image.open(f).convert('RGB') for f in files]
    h = min(im.height for im in images)
    images = [im.resize((round(im.width * h / im.height), h))
              for im in images]
    cols = 2
    rows = -(-len(images) // cols)
    w = max(im.width for im in images)
    grid = Image.new('RGB', (cols * w, rows * h), 'white')
    for i, im in enumerate(images):
        grid.paste(im, ((i % cols) * w, (i // cols) * h))
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
    PNG at ``out_png`` (matplotlib's Agg canvas: no display needed)."""
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


def train_log(work_dir: str) -> Optional[str]:
    """The runner's text log of the training run in ``work_dir``."""
    logs = glob.glob(osp.join(work_dir, '[0-9]*_[0-9]*', '*.log'))
    return max(logs, key=osp.getmtime) if logs else None


def run(task: Task, quick: bool, data_root: Optional[str], work_dir: str,
        test_sizes: Optional[List[int]] = None) -> int:
    """Generate data, evaluate the untrained model (where the task has a
    baseline), train, test at each size and print a summary. Returns the
    exit status."""
    cfg = load_config(task.config)
    train_size = task.train_size(cfg)
    max_epochs = task.quick_epochs if quick else cfg.train_cfg.max_epochs
    spec = data_spec(task, cfg, quick)
    data_root = data_root or cfg.data_root.rstrip('/') + (
        '_quick' if quick else '')
    test_sizes = test_sizes or [round(train_size * s)
                                for s in task.test_scales]
    data_abs, work_abs = osp.join(REPO, data_root), osp.join(REPO, work_dir)
    steps = 2 + task.baseline + len(test_sizes)
    step = iter(range(1, steps + 1))

    def phase(text):
        print(f'[demo] ({next(step)}/{steps}) {text}', flush=True)

    t0 = time.time()
    print(f'[demo] {task.title}\n[demo] config {task.config}, work dir '
          f'{work_dir}', flush=True)
    phase(f'data: {data_root}')
    info = ensure_data(task, data_abs, spec, data_root)
    if glob.glob(osp.join(work_abs, 'demo_*.out')):
        # a previous demo run: start afresh, so that the checkpoints and
        # logs listed at the end are this run's
        shutil.rmtree(work_abs)
    os.makedirs(work_abs, exist_ok=True)

    options = task.data_options(cfg, data_root)
    py = sys.executable

    def test(model, ckpt, size, draw=False):
        out = osp.join(work_dir, f'demo_test_{model}_{size}.json')
        cmd = [py, 'tools/test.py', task.config, ckpt, '--work-dir',
               osp.join(work_dir, f'test_{model}_{size}'), '--out', out,
               '--out-item', 'metrics']
        if draw:
            cmd += ['--show-dir', 'predictions']
        cmd += ['--cfg-options', *options,
                *task.test_size_options(cfg, size)]
        t = time.time()
        phase(f'test the {model} model at {size}x{size}')
        rc = run_step(f'test {model} at {size}', cmd,
                      osp.join(work_abs, f'demo_test_{model}_{size}.out'),
                      task.threads)
        if rc:
            return None
        with open(osp.join(REPO, out)) as f:
            metrics = json.load(f)
        print(f'[demo] {model}, {size}x{size}: {scores(metrics)} '
              f'({time.time() - t:.0f} s)', flush=True)
        return metrics

    def scores(metrics):
        return '  '.join(f'{m.label} {m.fmt.format(metrics[m.key])}'
                         for m in task.metrics)

    before = None
    if task.baseline:
        untrained = osp.join(work_dir, 'untrained.pth')
        save_untrained(task.config, osp.join(REPO, untrained))
        before = test('untrained', untrained, train_size)
        if before is None:
            return 1

    train_options = options
    if max_epochs != cfg.train_cfg.max_epochs:
        train_options = options + schedule_options(cfg, max_epochs)
    phase(f'train for {max_epochs} epoch{"s" if max_epochs > 1 else ""} '
          f'(log: {work_dir}/demo_train.out)')
    t = time.time()
    rc = run_step('train', [
        py, 'tools/train.py', task.config, '--work-dir', work_dir,
        '--cfg-options', *train_options
    ], osp.join(work_abs, 'demo_train.out'), task.threads,
        progress=TrainProgress(max_epochs))
    train_s = time.time() - t
    if rc != 0:
        return rc
    ckpt = osp.join(work_dir, f'epoch_{max_epochs}.pth')
    if not osp.isfile(osp.join(REPO, ckpt)):
        print(f'[demo] training finished but {ckpt} is missing',
              file=sys.stderr)
        return 1
    print(f'[demo] train: done in {train_s:.0f} s', flush=True)

    results = {}
    for size in test_sizes:
        draw = task.draw and size == test_sizes[-1]
        results[size] = test('trained', ckpt, size, draw)
        if results[size] is None:
            return 1
    png = osp.join(work_dir, 'predictions.png')
    drawn = task.draw and prediction_grid(work_abs, osp.join(REPO, png))
    curve = loss_curve(work_dir)

    log = train_log(work_abs)
    ckpts = sorted(f for f in os.listdir(work_abs) if f.endswith('.pth'))
    print(f'\n[demo] done in {time.time() - t0:.0f} s (training '
          f'{train_s:.0f} s)')
    print(f'  data        {data_root}  ({task.layout} layout, '
          f'{info["num_classes"]} classes, {info["num_train"]} train / '
          f'{info["num_val"]} val images, {train_size} px)')
    print(f'  config      {task.config}  (inherits {task.parent})')
    print(f'  work dir    {work_dir}')
    print(f'  checkpoints {", ".join(ckpts)}')
    print(f'  train log   {osp.relpath(log, REPO) if log else "(none)"}')
    if curve:
        print(f'  loss curve  {curve}')
    print(f'  metrics     {work_dir}/demo_test_<model>_<size>.json')
    if drawn:
        print(f'  predictions {png}  (ground truth left, predictions '
              f'right, at {test_sizes[-1]} px)')
    print(f'  {task.metrics_title}:')

    def row(label, size, metrics, note):
        print(f'    {label:9s} {f"{size}x{size}":9s} {scores(metrics)}'
              f'   ({note})')

    if before is not None:
        row('untrained', train_size, before, 'baseline')
    for size, metrics in results.items():
        note = ('training resolution' if size == train_size else
                f'{size / train_size:.2g}x, never seen in training')
        row('trained', size, metrics, note)
    key = task.metrics[0].key
    if before is not None and train_size in results and \
            results[train_size][key] <= before[key]:
        print('[demo] the trained model does not beat the untrained one',
              file=sys.stderr)
        return 1
    return 0


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    parser.add_argument(
        '--task',
        choices=sorted(TASKS),
        default='det',
        help='det (default): RetinaNet with PVT-T + PEG on a COCO-layout '
        'set (mmdet); cls: CPVT-GAP image classification (mmpretrain)')
    parser.add_argument(
        '--quick',
        action='store_true',
        help='a smaller data set and fewer epochs: about a minute')
    parser.add_argument(
        '--data-root',
        help='where the data set goes (relative to the repository); '
        'defaults to the config\'s data_root (with a _quick suffix for '
        '--quick)')
    parser.add_argument(
        '--work-dir',
        help='defaults to work_dirs/demo_<task> (work_dirs/demo_<task>'
        '_quick with --quick)')
    parser.add_argument(
        '--test-sizes',
        type=lambda s: [int(x) for x in s.split(',')],
        help='comma-separated test resolutions; defaults to the training '
        'size and larger ones (det: 1.5x; cls: 1.5x and 2x)')
    return parser.parse_args(argv)


def main(argv=None):
    args = parse_args(argv)
    work_dir = args.work_dir or (f'work_dirs/demo_{args.task}' +
                                 ('_quick' if args.quick else ''))
    sys.exit(run(TASKS[args.task], args.quick, args.data_root, work_dir,
                 args.test_sizes))


if __name__ == '__main__':
    main()
