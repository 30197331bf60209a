"""The mmcpvt demo (``make demo``): train and evaluate on built-in data.

``--task det`` (the default; object detection, mmdet), the user's main job:

1. generates a small synthetic set in the COCO 2017 layout
   (tools/dataset_converters/make_coco.py) into ``data/demo_coco``, unless
   the same set is already there;
2. evaluates the detector as initialised (the baseline to beat);
3. trains RetinaNet with the PVT-tiny + PEG backbone from
   ``configs/demo/retinanet_pvt-t-peg_demo_coco.py`` (which inherits
   ``configs/retinanet_pvt_tiny_peg_1x_coco.py`` and changes data root,
   classes, image scale, schedule and the ImageNet checkpoint, none here);
4. evaluates COCO bbox mAP with pycocotools at the training resolution and
   at 1.5x, never seen in training, and draws predictions into a PNG;
5. prints where everything went. The exit status is non-zero if a step
   failed or the trained detector does not beat the untrained one.

``--task cls`` (image classification, mmpretrain):

1. generates a small synthetic set in the ImageNet-1k layout
   (tools/dataset_converters/make_imagenet.py) into ``data/demo_imagenet``,
   unless the same set is already there;
2. trains CPVT-GAP (PEGs after encoders 0-4, shrunk to run on the CPU) from
   ``configs/demo/cpvt-tiny-gap_demo_imagenet.py`` with ``tools/train.py``;
3. tests the last checkpoint with ``tools/test.py`` at the training
   resolution and at larger ones never seen in training: the conditional
   position encoding has no table tied to the training size, so the same
   weights apply to any input size;
4. prints where everything went and the accuracies. The exit status is
   non-zero if any step failed.

The full output of each step is kept in the work directory
(``demo_train.out``, ``demo_test_<size>.out``); only progress lines are
echoed.
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

REPO = osp.dirname(osp.dirname(osp.abspath(__file__)))
sys.path.insert(0, osp.join(REPO, 'tools', 'dataset_converters'))
import make_coco  # noqa: E402
from make_imagenet import (generator_id, make_imagenet,  # noqa: E402
                           read_info)

CLS_CONFIG = 'configs/demo/cpvt-tiny-gap_demo_imagenet.py'
# Images per class; the classes, image size, data root and schedule are
# those of the config.
CLS_DATA = dict(train_per_class=100, val_per_class=25, seed=0)
# --quick: fewer images and epochs, about a minute in all.
QUICK = dict(train_per_class=60, max_epochs=10)

# Lines of the runner's log worth echoing while a step runs.
ECHO = re.compile(r'Epoch\((train|val|test)\)|Error|error:|Traceback')


def run_step(name: str, cmd: list, log_file: str, echo: bool = True,
             threads: str = '1') -> int:
    """Run ``cmd`` from the repository root; keep its output in
    ``log_file``, echo progress lines, and print the tail on failure."""
    print(f'[demo] {name}: {" ".join(cmd)}', flush=True)
    os.makedirs(osp.dirname(log_file), exist_ok=True)
    # One intra-op thread by default: the classification demo's model is
    # small, and two threads on a 2-core machine that is doing anything
    # else run 5-10x slower (measured). The detector passes threads=None
    # (all cores: its layers are large enough to use them).
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
            if echo and ECHO.search(line):
                print('    ' + line.rstrip()[-160:], flush=True)
    if proc.returncode != 0:
        print(f'[demo] {name} FAILED (exit {proc.returncode}); last lines '
              f'of {log_file}:', file=sys.stderr)
        sys.stderr.write(''.join(tail))
    return proc.returncode


def ensure_data(data_root: str, spec: dict, make=make_imagenet,
                read=read_info, generator=generator_id) -> str:
    """Generate the data set unless the same one is already there (made by
    ``make`` with the same ``spec``, and by the same ``generator`` code if
    the generator records one)."""
    info = read(data_root)
    wanted = dict(spec, generator=generator()) if generator else spec
    if info is not None and all(info.get(k) == v for k, v in wanted.items()):
        print(f'[demo] data: reusing {data_root} ({info["num_train"]} train '
              f'/ {info["num_val"]} val images)')
        return 'reused'
    t = time.time()
    info = make(data_root, overwrite=info is not None, **spec)
    print(f'[demo] data: wrote {info["num_train"]} train / {info["num_val"]} '
          f'val images of {info["num_classes"]} classes to {data_root} '
          f'({time.time() - t:.0f} s)')
    return 'generated'


def load_config(config: str):
    from mmengine.config import Config
    return Config.fromfile(
        osp.join(REPO, config), import_custom_modules=False)


def resize_options(cfg, size: int) -> list:
    """--cfg-options that set the test pipeline's resize and crop to
    ``size`` (keeping the config's resize/crop ratio)."""
    pipeline = cfg.test_dataloader.dataset.pipeline
    types = [t['type'] for t in pipeline]
    resize, crop = types.index('ResizeEdge'), types.index('CenterCrop')
    ratio = pipeline[resize]['scale'] / pipeline[crop]['crop_size']
    key = 'test_dataloader.dataset.pipeline'
    return [
        f'{key}.{resize}.scale={round(size * ratio)}',
        f'{key}.{crop}.crop_size={size}'
    ]


def train_log(work_dir: str):
    """The runner's text log of the training run in ``work_dir``."""
    # <work_dir>/<timestamp>/<timestamp>.log; the tests log one level deeper
    logs = glob.glob(osp.join(work_dir, '[0-9]*_[0-9]*', '*.log'))
    return max(logs, key=osp.getmtime) if logs else None


def run_cls(args) -> int:
    config = CLS_CONFIG
    cfg = load_config(config)
    train_size = cfg.img_size
    max_epochs = QUICK['max_epochs'] if args.quick else cfg.max_epochs
    spec = dict(CLS_DATA, num_classes=cfg.num_classes, size=train_size)
    if args.quick:
        spec['train_per_class'] = QUICK['train_per_class']
    data_root = args.data_root or (cfg.data_root + '_quick'
                                   if args.quick else cfg.data_root)
    test_sizes = args.test_sizes or [
        train_size, train_size * 3 // 2, train_size * 2]
    work_dir = args.work_dir or ('work_dirs/demo_cls_quick'
                                 if args.quick else 'work_dirs/demo_cls')
    data_abs, work_abs = osp.join(REPO, data_root), osp.join(REPO, work_dir)
    t0 = time.time()
    ensure_data(data_abs, spec)
    if osp.isfile(osp.join(work_abs, 'demo_train.out')):
        # a previous demo run: start afresh, so that the checkpoints listed
        # at the end are this run's
        shutil.rmtree(work_abs)

    options = [f'train_dataloader.dataset.data_root={data_root}',
               f'val_dataloader.dataset.data_root={data_root}',
               f'test_dataloader.dataset.data_root={data_root}']
    train_options = list(options)
    if args.quick:
        train_options += [f'train_cfg.max_epochs={max_epochs}',
                          'train_cfg.val_interval=2',
                          'default_hooks.checkpoint.interval=2',
                          f'param_scheduler.1.end={max_epochs}',
                          'default_hooks.logger.interval=5']
    py = sys.executable
    t = time.time()
    rc = run_step('train', [
        py, 'tools/train.py', config, '--work-dir', work_dir,
        '--cfg-options', *train_options
    ], osp.join(work_abs, 'demo_train.out'))
    train_s = time.time() - t
    if rc != 0:
        return rc
    ckpt = osp.join(work_abs, f'epoch_{max_epochs}.pth')
    if not osp.isfile(ckpt):
        print(f'[demo] training finished but {ckpt} is missing',
              file=sys.stderr)
        return 1

    results = {}
    for size in test_sizes:
        out = osp.join(work_abs, f'demo_test_{size}.json')
        rc = run_step(f'test at {size}x{size}', [
            py, 'tools/test.py', config, osp.relpath(ckpt, REPO),
            '--work-dir', osp.join(work_dir, f'test_{size}'),
            '--out', osp.relpath(out, REPO), '--out-item', 'metrics',
            '--cfg-options', *options, *resize_options(cfg, size)
        ], osp.join(work_abs, f'demo_test_{size}.out'), echo=False)
        if rc != 0:
            return rc
        with open(out) as f:
            results[size] = json.load(f)

    log = train_log(work_abs)
    ckpts = sorted(f for f in os.listdir(work_abs) if f.endswith('.pth'))
    print('\n[demo] classification demo done in '
          f'{time.time() - t0:.0f} s (training {train_s:.0f} s)')
    print(f'  data        {data_root}  (ImageNet layout, '
          f'{spec["num_classes"]} classes, {spec["train_per_class"]} train '
          f'+ {spec["val_per_class"]} val images each, {train_size} px)')
    print(f'  config      {config}')
    print(f'  work dir    {work_dir}')
    print(f'  checkpoints {", ".join(ckpts)}')
    print(f'  train log   {osp.relpath(log, REPO) if log else "(none)"}')
    print(f'  metrics     {work_dir}/demo_test_<size>.json')
    print('  validation accuracy of ' + osp.relpath(ckpt, REPO) + ':')
    for size, metrics in results.items():
        note = ('training resolution' if size == train_size else
                f'{size / train_size:.2g}x, never seen in training')
        top = '  '.join(f'{k.split("/")[-1]} {v:6.2f}%'
                        for k, v in sorted(metrics.items())
                        if k.startswith('accuracy/'))
        print(f'    {size:4d}x{size:<4d} {top}   ({note})')
    return 0


DET_CONFIG = 'configs/demo/retinanet_pvt-t-peg_demo_coco.py'
DET_DATA = dict(num_train=240, num_val=40, seed=0)
DET_QUICK = dict(num_train=60, max_epochs=1)


def save_untrained(config: str, path: str):
    """The demo detector as initialised, before any training: the
    baseline the trained one must beat."""
    import importlib

    import torch
    from mmengine.registry import init_default_scope

    import mmcpvt  # noqa: F401
    cfg = load_config(config)
    init_default_scope(cfg.default_scope)
    registry = importlib.import_module(f'{cfg.default_scope}.registry')
    torch.manual_seed(0)
    model = registry.MODELS.build(cfg.model)
    model.init_weights()
    torch.save({'state_dict': model.state_dict(), 'meta': {}}, path)


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


def run_det(args) -> int:
    config = DET_CONFIG
    cfg = load_config(config)
    train_size = cfg.scale[0]
    max_epochs = DET_QUICK['max_epochs'] if args.quick else cfg.max_epochs
    spec = dict(DET_DATA, num_classes=len(cfg.classes), size=train_size)
    if args.quick:
        spec['num_train'] = DET_QUICK['num_train']
    data_root = args.data_root or (cfg.data_root.rstrip('/') + '_quick'
                                   if args.quick else
                                   cfg.data_root.rstrip('/'))
    test_sizes = args.test_sizes or [train_size, train_size * 3 // 2]
    work_dir = args.work_dir or ('work_dirs/demo_det_quick'
                                 if args.quick else 'work_dirs/demo_det')
    data_abs, work_abs = osp.join(REPO, data_root), osp.join(REPO, work_dir)
    t0 = time.time()
    ensure_data(data_abs, spec, make_coco.make_coco, make_coco.read_info,
                generator=None)
    if osp.isdir(work_abs):
        shutil.rmtree(work_abs)  # this run's checkpoints and logs only
    os.makedirs(work_abs)

    ann = f'{data_root}/annotations/instances_val2017.json'
    options = [
        f'{loader}.dataset.data_root={data_root}/'
        for loader in ('train_dataloader', 'val_dataloader',
                       'test_dataloader')
    ] + [f'val_evaluator.ann_file={ann}', f'test_evaluator.ann_file={ann}',
         # mAP over every detection: an untrained model scores nothing
         # above the default 0.05, and an empty result has no mAP at all.
         'model.test_cfg.score_thr=0.0']
    py = sys.executable

    def test(name, ckpt, size, show_dir=None):
        out = osp.join(work_dir, f'demo_test_{name}_{size}.json')
        cmd = [py, 'tools/test.py', config, ckpt, '--work-dir',
               osp.join(work_dir, f'test_{name}_{size}'), '--out', out,
               '--out-item', 'metrics']
        if show_dir:
            cmd += ['--show-dir', show_dir]
        cmd += ['--cfg-options', *options,
                f'test_dataloader.dataset.pipeline.1.scale=({size},{size})']
        rc = run_step(f'test {name} model at {size}x{size}', cmd,
                      osp.join(work_abs, f'demo_test_{name}_{size}.out'),
                      echo=False, threads=None)
        if rc:
            return None
        with open(osp.join(REPO, out)) as f:
            return json.load(f)

    untrained = osp.join(work_dir, 'untrained.pth')
    save_untrained(config, osp.join(REPO, untrained))
    before = test('untrained', untrained, train_size)
    if before is None:
        return 1

    train_options = list(options)
    if args.quick:
        train_options += [f'train_cfg.max_epochs={max_epochs}',
                          f'train_cfg.val_interval={max_epochs}',
                          f'default_hooks.checkpoint.interval={max_epochs}',
                          f'param_scheduler.1.end={max_epochs}']
    t = time.time()
    rc = run_step('train', [
        py, 'tools/train.py', config, '--work-dir', work_dir,
        '--cfg-options', *train_options
    ], osp.join(work_abs, 'demo_train.out'), threads=None)
    train_s = time.time() - t
    ckpt = osp.join(work_dir, f'epoch_{max_epochs}.pth')
    if rc != 0:
        return rc
    if not osp.isfile(osp.join(REPO, ckpt)):
        print(f'[demo] training finished but {ckpt} is missing',
              file=sys.stderr)
        return 1

    results = {}
    for size in test_sizes:
        show = 'predictions' if size != train_size else None
        results[size] = test('trained', ckpt, size, show)
        if results[size] is None:
            return 1
    png = osp.join(work_dir, 'predictions.png')
    drawn = prediction_grid(work_abs, osp.join(REPO, png))

    log = train_log(work_abs)
    print('\n[demo] detection demo done in '
          f'{time.time() - t0:.0f} s (training {train_s:.0f} s)')
    print(f'  data        {data_root}  (COCO layout, classes '
          f'{", ".join(cfg.classes)}; {spec["num_train"]} train / '
          f'{spec["num_val"]} val images around {train_size} px)')
    print(f'  config      {config}  (inherits '
          'configs/retinanet_pvt_tiny_peg_1x_coco.py)')
    print(f'  work dir    {work_dir}')
    print(f'  checkpoint  {ckpt}  (untrained baseline: {untrained})')
    print(f'  train log   {osp.relpath(log, REPO) if log else "(none)"}')
    print(f'  metrics     {work_dir}/demo_test_<model>_<size>.json')
    if drawn:
        print(f'  predictions {png}  (ground truth left, predictions '
              f'right, at {test_sizes[-1]} px)')
    print('  COCO bbox mAP on the validation images (pycocotools):')

    def row(label, m, note):
        print(f'    {label:28s} mAP {m["coco/bbox_mAP"]:.3f}  mAP@50 '
              f'{m["coco/bbox_mAP_50"]:.3f}   ({note})')

    row(f'untrained, {train_size}x{train_size}', before, 'baseline')
    for size, m in results.items():
        note = ('training resolution' if size == train_size else
                f'{size / train_size:.2g}x, never seen in training')
        row(f'trained,   {size}x{size}', m, note)
    if results[train_size]['coco/bbox_mAP'] <= before['coco/bbox_mAP']:
        print('[demo] the trained detector does not beat the untrained one',
              file=sys.stderr)
        return 1
    return 0


TASKS = {'det': run_det, 'cls': run_cls}


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
        'size, 1.5x and 2x')
    return parser.parse_args(argv)


def main(argv=None):
    args = parse_args(argv)
    sys.exit(TASKS[args.task](args))


if __name__ == '__main__':
    main()
