"""The GPU check: one command, run first on a GPU machine that has torch but
no OpenMMLab package and no network, that installs the carried set
(``tools/install/gpu_wheels.sh``), compiles mmcv's CUDA ops
(``tools/install/build_mmcv.sh``) and trains and tests the README's models
through the OpenMMLab stack on generated data. Every step runs in its own
process with a time limit, so one that fails or hangs does not stop the
rest; its output goes to OUT_DIR/logs/. Python steps run with faulthandler:
a crash, or a step stopped at its limit (SIGABRT), leaves the stacks of all
threads in its log, and the summary shows a failed step's last lines. The
summary table comes last, on stdout and in OUT_DIR/summary.md.

    tools/install/gpu_wheels.sh 3.12 .whl              # here: the carried set
    python3 tools/install/gpu_check.py OUT_DIR         # there: about 8 min
    .venv/bin/python tools/install/gpu_check.py OUT_DIR --cpu --carried DIR
        # the same steps on the CPU at tiny sizes (DIR: gpu_wheels.sh's set
        # for this Python), as the test suite runs them

Standard library only: it runs before anything is installed. The carried
wheels go to OUT_DIR/site, first on every step's PYTHONPATH; mmcv is built
(or found) in this interpreter's environment.
"""
import argparse
import glob
import json
import os
import os.path as osp
import shutil
import signal
import subprocess
import sys
import time

ROOT = osp.dirname(osp.dirname(osp.dirname(osp.abspath(__file__))))
TAIL = 25  # log lines shown for a failed step

# Sizes per mode. gpu: enough iterations for a detector trained from scratch
# to show its loss falling; cpu: the fewest that run every step.
SIZES = dict(
    gpu=dict(coco=dict(train=128, val=16, size=320), det_scale=(1333, 800),
             det_epochs=3, det_warmup=20,
             ade=dict(train=64, val=8, size=256), seg_crop=512,
             seg_scale=(2048, 512), seg_iters=100, workers=4,
             imagenet=dict(classes=10, train=64, val=8), cls_batch=64,
             cls_epochs=2, bench=['--runs', '4', '--min-time', '1']),
    cpu=dict(coco=dict(train=4, val=2, size=96), det_scale=(128, 96),
             det_epochs=2, det_warmup=2,
             ade=dict(train=4, val=2, size=96), seg_crop=64,
             seg_scale=(128, 64), seg_iters=4, workers=2,
             imagenet=dict(classes=5, train=2, val=1), cls_batch=4,
             cls_epochs=1, bench=['--runs', '2', '--min-time', '0.1',
                                  '--sizes', '64']))

# The configs the steps train: the README's, inheriting the real file by its
# path; only data, sizes, schedule and the backbone's checkpoint (none: no
# weights can be downloaded there) are overridden.
DET = """\
_base_ = {root!r} + '/configs/retinanet_pvt_tiny_peg_1x_coco.py'
data_root = {data!r} + '/coco/'
classes = {classes!r}
# every detection kept: a detector trained for a few steps has a mAP too
model = dict(backbone=dict(init_cfg=None),
             bbox_head=dict(num_classes=len(classes)),
             test_cfg=dict(score_thr=0.0))
train_pipeline = [
    dict(type='LoadImageFromFile'),
    dict(type='LoadAnnotations', with_bbox=True),
    dict(type='Resize', scale={det_scale!r}, keep_ratio=True),
    dict(type='RandomFlip', prob=0.5),
    dict(type='PackDetInputs')]
test_pipeline = [
    dict(type='LoadImageFromFile'),
    dict(type='Resize', scale={det_scale!r}, keep_ratio=True),
    dict(type='LoadAnnotations', with_bbox=True),
    dict(type='PackDetInputs', meta_keys=('img_id', 'img_path', 'ori_shape',
                                          'img_shape', 'scale_factor'))]
data = dict(data_root=data_root, metainfo=dict(classes=classes))
train_dataloader = dict(num_workers={workers},
                        dataset=dict(**data, pipeline=train_pipeline))
val_dataloader = dict(num_workers={workers},
                      dataset=dict(**data, pipeline=test_pipeline))
test_dataloader = val_dataloader
val_evaluator = dict(ann_file=data_root + 'annotations/instances_val2017.json')
test_evaluator = val_evaluator
train_cfg = dict(max_epochs={det_epochs}, val_interval={det_epochs})
param_scheduler = [dict(type='LinearLR', start_factor=0.01, by_epoch=False,
                        begin=0, end={det_warmup})]
default_hooks = dict(logger=dict(interval=1))
randomness = dict(seed=0)
"""
SEG = """\
_base_ = {root!r} + '/configs/pvt_peg/fpn_pvt-t-peg_4xb4-80k_ade20k-512x512.py'
data_root = {data!r} + '/ade/ADEChallengeData2016/'
crop_size = ({seg_crop}, {seg_crop})
model = dict(data_preprocessor=dict(size=crop_size),
             backbone=dict(init_cfg=None),
             decode_head=dict(num_classes={num_classes}))
check = dict(type='mmcpvt.CheckSegMap', num_classes={num_classes})
train_pipeline = [
    dict(type='LoadImageFromFile'),
    dict(type='LoadAnnotations', reduce_zero_label=True), check,
    dict(type='RandomResize', scale={seg_scale!r}, ratio_range=(0.5, 2.0),
         keep_ratio=True),
    dict(type='RandomCrop', crop_size=crop_size, cat_max_ratio=0.75),
    dict(type='RandomFlip', prob=0.5),
    dict(type='PhotoMetricDistortion'),
    dict(type='PackSegInputs')]
test_pipeline = [
    dict(type='LoadImageFromFile'),
    dict(type='Resize', scale={seg_scale!r}, keep_ratio=True),
    dict(type='LoadAnnotations', reduce_zero_label=True), check,
    dict(type='PackSegInputs')]
data = dict(data_root=data_root, metainfo=dict(classes={classes!r}))
train_dataloader = dict(num_workers={workers},
                        dataset=dict(**data, pipeline=train_pipeline))
val_dataloader = dict(num_workers={workers},
                      dataset=dict(**data, pipeline=test_pipeline))
test_dataloader = val_dataloader
train_cfg = dict(max_iters={seg_iters}, val_interval={seg_iters})
param_scheduler = [dict(type='PolyLR', eta_min=0., power=0.9, begin=0,
                        end={seg_iters}, by_epoch=False)]
default_hooks = dict(logger=dict(interval=1),
                     checkpoint=dict(interval={seg_iters}))
randomness = dict(seed=0)
"""
CLS = """\
_base_ = {root!r} + '/configs/cpvt/cpvt-tiny_4xb256_in1k.py'
data_root = {data!r} + '/imagenet/'
model = dict(head=dict(num_classes={classes}))
data_preprocessor = dict(num_classes={classes})
train_dataloader = dict(batch_size={cls_batch}, num_workers={workers},
                        dataset=dict(data_root=data_root))
val_dataloader = dict(batch_size={cls_batch}, num_workers={workers},
                      dataset=dict(data_root=data_root))
test_dataloader = val_dataloader
train_cfg = dict(max_epochs={cls_epochs}, val_interval={cls_epochs})
default_hooks = dict(logger=dict(interval=1))
randomness = dict(seed=0)
"""

# After the carried set: versions, where each package comes from, and an
# mmcv op on the device (as mmcpvt.CudaOpsHook runs one).
IMPORTS = """\
import importlib, os, sys, torch
from importlib import metadata
import distutils  # mmengine's collect_env; Python >= 3.12: setuptools' shim
site, found = os.path.realpath(sys.argv[1]), []
for name in ('mmengine', 'mmcv', 'mmdet', 'mmseg', 'mmpretrain', 'mmcpvt',
             'pycocotools', 'shapely', 'ftfy'):
    m = importlib.import_module(name)
    where = os.path.realpath(m.__file__)
    version = getattr(m, '__version__', None) or metadata.version(name)
    print(name, version, where)
    found.append(f'{name} {version}' + ' (carried)' * where.startswith(site))
import mmcv.ops
boxes = torch.tensor([[0., 0., 1., 1.]], device=sys.argv[2])
keep = mmcv.ops.nms(boxes, boxes.new_ones(1), .5)[1].tolist()
print('imported: ' + ', '.join(found) + f'; mmcv.ops.nms on {sys.argv[2]} '
      f'kept {keep}')
"""
# mmcv's version query, which ended the process with a segmentation fault in
# the one CUDA build tried on a GPU machine before: a step of its own, last,
# after the toolchain and the libraries its compiled ops load.
TOOLCHAIN = """\
import importlib.util, subprocess
ext = importlib.util.find_spec('mmcv._ext').origin
for cmd in (['gcc', '--version'], ['nvcc', '--version'], ['ldd', ext]):
    try:
        print(subprocess.run(cmd, capture_output=True, text=True).stdout)
    except OSError as e:
        print(cmd[0], e)
"""
VERSION_QUERY = """\
from mmcv.ops import get_compiler_version, get_compiling_cuda_version
print('compiler', get_compiler_version())
print('CUDA', get_compiling_cuda_version())
"""


class Step:
    """A named command (or several, run in turn) with a time limit;
    ``figure(out, log)`` reads its result from the files it wrote; a step
    runs only where the step it ``needs`` passed."""

    def __init__(self, name, cmds, limit, figure=None, needs=None):
        self.name, self.cmds, self.limit = name, cmds, limit
        self.figure, self.needs = figure, needs
        self.status, self.seconds, self.result = 'skipped', 0., ''


def run_step(step, log, env, deadline, cwd):
    """Run ``step`` in ``cwd`` within its limit and the deadline; its
    status."""
    start = time.monotonic()
    with open(log, 'w') as f:
        for cmd in step.cmds:
            left = min(step.limit - (time.monotonic() - start),
                       deadline - time.monotonic())
            if left <= 0:
                return 'out of time'
            f.write('$ ' + ' '.join(cmd) + '\n')
            f.flush()
            proc = subprocess.Popen(cmd, cwd=cwd, env=env, stdout=f,
                                    stderr=subprocess.STDOUT,
                                    start_new_session=True)
            try:
                code = proc.wait(timeout=left)
            except subprocess.TimeoutExpired:
                # faulthandler writes every thread's stack on SIGABRT
                os.killpg(proc.pid, signal.SIGABRT)
                try:
                    proc.wait(timeout=15)
                except subprocess.TimeoutExpired:
                    os.killpg(proc.pid, signal.SIGKILL)
                    proc.wait()
                return f'timed out ({left:.0f} s)'
            if code:
                name = (signal.Signals(-code).name if code < 0 else
                        f'exit {code}')
                return f'failed ({name})'
    return 'ok'


def loss_figure(work_dir):
    """The first and the last training loss the runner logged."""
    def figure(out, log):
        found = []
        for path in sorted(glob.glob(osp.join(out, work_dir, '*', 'vis_data',
                                              'scalars.json'))):
            with open(path) as f:
                rows = [json.loads(line) for line in f]
            found += [(r['step'], r['loss']) for r in rows if 'loss' in r]
        (i0, l0), (i1, l1) = found[0], found[-1]
        return f'loss {l0:.3f} (iter {i0}) -> {l1:.3f} (iter {i1})'
    return figure


def metric_figure(name, key):
    def figure(out, log):
        with open(osp.join(out, name)) as f:
            metrics = json.load(f)
        found = [f'{k} {v:.4g}' for k, v in metrics.items()
                 if k.endswith(key)]
        if not found:
            raise KeyError(f'no {key} in {name}: {metrics}')
        return ', '.join(found)
    return figure


def log_figure(prefix):
    """The output lines of a step that start with ``prefix``, joined."""
    def figure(out, log):
        with open(log) as f:
            return '; '.join(line.strip() for line in f
                             if line.startswith(prefix))
    return figure


def bench_figure(out, log):
    with open(osp.join(out, 'throughput.json')) as f:
        results = json.load(f)
    return '; '.join(
        f"{r['job']['ours']['what']}: ours/theirs {r['ratio']:.3f} "
        f"[{r['ci95'][0]:.3f}, {r['ci95'][1]:.3f}]" for r in results)


def steps(args, out, site, py, device):
    """The steps, in the order they run."""
    s = SIZES['cpu' if args.cpu else 'gpu']
    data, cfgs, amp = osp.join(out, 'data'), osp.join(out, 'configs'), \
        [] if args.cpu else ['--amp']
    classes = ('person', 'bicycle', 'car', 'motorcycle')
    ade_classes = ('wall', 'building', 'sky', 'floor')
    fill = dict(s, root=ROOT, data=data, classes=classes)
    os.makedirs(cfgs, exist_ok=True)
    for name, text, extra in (
            ('det.py', DET, {}),
            ('seg.py', SEG, dict(classes=ade_classes, num_classes=4)),
            ('cls.py', CLS, dict(classes=s['imagenet']['classes']))):
        with open(osp.join(cfgs, name), 'w') as f:
            f.write(text.format(**dict(fill, **extra)))
    det, seg, cls = (osp.join(cfgs, n) for n in ('det.py', 'seg.py',
                                                   'cls.py'))
    pyf = [py, '-X', 'faulthandler']
    tool = lambda path, *a: [*pyf, osp.join(ROOT, path), *a]  # noqa: E731
    wheels = sorted(w for w in glob.glob(osp.join(args.carried, '*.whl'))
                    if not osp.basename(w).startswith('setuptools-'))
    coco, ade, imnet = s['coco'], s['ade'], s['imagenet']
    work = lambda name: osp.join(out, 'work', name)  # noqa: E731

    def test(train, what, config, checkpoint, key):
        """tools/test.py of ``train``'s last checkpoint: the metric
        ending in ``key``."""
        metrics = f'{what}_metrics.json'
        return Step(
            train.name.split(':')[0] + ': tools/test.py', [tool(
                'tools/test.py', config, osp.join(work(what), checkpoint),
                '--work-dir', work(what + '_test'), '--out',
                osp.join(out, metrics), '--out-item', 'metrics')], 90,
            metric_figure(metrics, key), needs=train)

    mmdet_train = osp.join(site, 'mmdet', '.mim', 'tools', 'train.py')
    det_train = Step(
        'RetinaNet PVT-T+PEG: tools/train.py' + ' --amp' * bool(amp),
        [tool('tools/train.py', det, '--work-dir', work('det'), *amp)], 240,
        loss_figure('work/det'))
    seg_train = Step(
        'Semantic FPN PVT-T+PEG: tools/train.py',
        [tool('tools/train.py', seg, '--work-dir', work('seg'))], 180,
        loss_figure('work/seg'))
    return [
        Step('install the carried set', [[
            py, '-m', 'pip', 'install', '--quiet', '--no-index', '--no-deps',
            '--target', site, *wheels]], 120,
            lambda o, log: f'{len(wheels)} wheels into {site}'),
        Step("mmcv's ops (build_mmcv.sh)", [[
            'bash', osp.join(ROOT, 'tools', 'install', 'build_mmcv.sh'), py
        ]], 420, log_figure('[mmcv]')),
        Step('imports, an mmcv op on the device',
             [[*pyf, '-c', IMPORTS, site, device]], 120,
             log_figure('imported')),
        Step('data (make_coco, make_ade20k, make_imagenet)', [
            tool('tools/dataset_converters/make_coco.py', '--out',
                 osp.join(data, 'coco'), '--num-train', str(coco['train']),
                 '--num-val', str(coco['val']), '--size', str(coco['size']),
                 '--num-classes', '4', '--no-progress', '--overwrite'),
            tool('tools/dataset_converters/make_ade20k.py', '--out',
                 osp.join(data, 'ade'), '--num-train', str(ade['train']),
                 '--num-val', str(ade['val']), '--size', str(ade['size']),
                 '--num-classes', '4', '--no-progress', '--overwrite'),
            tool('tools/dataset_converters/make_imagenet.py', '--out',
                 osp.join(data, 'imagenet'), '--num-classes',
                 str(imnet['classes']), '--train-per-class',
                 str(imnet['train']), '--val-per-class', str(imnet['val']),
                 '--no-progress', '--overwrite')], 120),
        det_train,
        test(det_train, 'det', det, f"epoch_{s['det_epochs']}.pth",
             '/bbox_mAP'),
        Step("RetinaNet PVT-T+PEG: mmdet's own train.py", [[
            *pyf, mmdet_train, det, '--work-dir', work('det_mmdet'), *amp,
            '--cfg-options', 'train_cfg.max_epochs=1',
            'train_cfg.val_interval=1', 'train_dataloader.dataset.indices=8'
        ]], 150, loss_figure('work/det_mmdet')),
        seg_train,
        test(seg_train, 'seg', seg, f"iter_{s['seg_iters']}.pth", 'mIoU'),
        Step('CPVT-Ti: tools/train.py',
             [tool('tools/train.py', cls, '--work-dir', work('cls'))], 120,
             loss_figure('work/cls')),
        Step('throughput: RetinaNet PVT-T+PEG / mmdet RetinaNet PVT-T', [tool(
            'tools/analysis_tools/benchmark.py', '--pairs',
            'retinanet-pvt-tiny-peg:retinanet-pvt-tiny@mmdet', '--train',
            '--device', device, '--amp', 'fp32' if args.cpu else 'bf16',
            *s['bench'], '--json', osp.join(out, 'throughput.json'))], 240,
            bench_figure),
        Step("mmcv's version query", [[
            *pyf, '-c', TOOLCHAIN], [*pyf, '-c', VERSION_QUERY]], 60,
            log_figure(('compiler', 'CUDA'))),
    ]


def environment(py):
    """One line: Python, torch, CUDA, the GPU, cores."""
    probe = ('import sys, torch; gpu = torch.cuda.is_available(); '
             'print("Python", sys.version.split()[0], "| torch", '
             'torch.__version__, "| CUDA", torch.version.cuda, "|", '
             'torch.cuda.get_device_name() + " sm_%d%d" % '
             'torch.cuda.get_device_capability() if gpu else "no GPU")')
    found = subprocess.run([py, '-c', probe], capture_output=True, text=True)
    return (found.stdout.strip() or found.stderr.strip()[-200:]) + \
        f' | {os.cpu_count()} cores'


def main(argv=None):
    parser = argparse.ArgumentParser(
        description=__doc__.split('\n\n')[0],
        formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument('out', metavar='OUT_DIR', help='where everything '
                        'is written (created; may exist)')
    parser.add_argument('--carried', default=osp.join(ROOT, '.whl'),
                        help="gpu_wheels.sh's folder (default: %(default)s)")
    parser.add_argument('--cpu', action='store_true', help='the CPU build '
                        'and tiny sizes: the steps proven without a GPU')
    parser.add_argument('--budget', type=float, default=480, help='seconds '
                        'for all steps (default: %(default)s); a step that '
                        'would start later is skipped')
    args = parser.parse_args(argv)
    if not glob.glob(osp.join(args.carried, 'mmcv-*.tar.gz')):
        parser.error(f'--carried {args.carried}: no mmcv sdist there; make '
                     'the carried set with tools/install/gpu_wheels.sh')
    out = osp.abspath(args.out)
    site, logs = osp.join(out, 'site'), osp.join(out, 'logs')
    os.makedirs(logs, exist_ok=True)
    py = sys.executable
    device = 'cpu' if args.cpu else 'cuda'
    # build_mmcv.sh's cache, kept in OUT_DIR: a wheel that an earlier run
    # built and that was carried back in (DIR/mmcv_cache) is installed
    # instead of compiled again
    cache = osp.join(out, 'mmcv_cache')
    if osp.isdir(osp.join(args.carried, 'mmcv_cache')):
        shutil.copytree(osp.join(args.carried, 'mmcv_cache'), cache,
                        dirs_exist_ok=True)
    env = dict(
        os.environ, PYTHONPATH=os.pathsep.join(
            [site, *filter(None, [os.environ.get('PYTHONPATH')])]),
        PYTHONFAULTHANDLER='1', PYTHONUNBUFFERED='1', MPLBACKEND='Agg',
        # build_mmcv.sh: pip takes the carried set, never an index
        PIP_NO_INDEX='1', PIP_FIND_LINKS=osp.abspath(args.carried),
        MMCPVT_CACHE=cache,
        MAX_JOBS=os.environ.get('MAX_JOBS', str(os.cpu_count())))
    if args.cpu:
        env['FORCE_CUDA'] = '0'
    header = f'gpu_check{" --cpu" * args.cpu}: {environment(py)}'
    print(header, flush=True)
    deadline = time.monotonic() + args.budget
    todo = steps(args, out, site, py, device)
    for i, step in enumerate(todo, 1):
        log = osp.join(logs, f'{i:02d}.log')
        if step.needs and step.needs.status != 'ok':
            step.status = f'skipped (needs: {step.needs.name})'
        else:
            start = time.monotonic()
            # in OUT_DIR, not the clone: python -c imports from its working
            # folder first, and mmcpvt is to come from the carried set
            step.status = run_step(step, log, env, deadline, out)
            step.seconds = time.monotonic() - start
        if step.status == 'ok' and step.figure:
            try:
                step.result = step.figure(out, log)
            except Exception as e:  # a figure that cannot be read is said
                step.result = f'no figure: {type(e).__name__}: {e}'
        elif step.seconds:  # it ran and failed
            with open(log, errors='replace') as f:
                lines = f.readlines()[-TAIL:]
            print(f'\n--- {step.name}: {step.status}; the last lines of '
                  f'{log}:\n' + ''.join(lines), flush=True)
        print(f'[{i}/{len(todo)}] {step.name}: {step.status} '
              f'({step.seconds:.0f} s) {step.result}', flush=True)
    # checkpoints are not needed after the tests (and would travel back)
    for path in glob.glob(osp.join(out, 'work', '*', '*.pth')):
        os.remove(path)
    rows = [f'| {i} | {s.name} | {s.status} | {s.seconds:.0f} | '
            f'{s.result.replace("|", "/")} |' for i, s in enumerate(todo, 1)]
    table = '\n'.join([header, '', '| # | step | status | s | figure |',
                       '|---|---|---|---|---|', *rows])
    with open(osp.join(out, 'summary.md'), 'w') as f:
        f.write(table + '\n')
    print('\n' + table)
    return 0 if all(s.status == 'ok' for s in todo) else 1


if __name__ == '__main__':
    sys.exit(main())
