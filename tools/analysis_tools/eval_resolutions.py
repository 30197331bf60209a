"""Evaluate checkpoints at several test resolutions, without fine-tuning.

The resolution sweep of the CPVT paper (Table 2: trained at 224, tested
at 160 to 512), for any mmpretrain classifier, mmdet detector or mmseg
segmentor: one ``runner.test()`` of the config's own test loop and
evaluator per (checkpoint, size), in this process. Only the test
pipeline's resize/crop changes with the size; a config whose test pipeline
has none of these transforms is refused. What a size means
(``--protocol``; the paper gives none):

- classification, ``resize-crop`` (default; DeiT's test transform): the
  shorter side resized to ``size * 256 // 224`` (224 -> 256, 384 -> 438),
  then the centre ``size`` x ``size`` crop;
- classification, ``resize``: the whole image resized to ``size`` x ``size``;
  both keep the config's resize backend and interpolation;
- detection and segmentation, ``short-side``: the test Resize's scale times
  ``size / min(scale)`` (mmdet's (1333, 800) at 640: (1066, 640)).

Learned position tables need nothing here: mmcpvt's learned PE and
mmpretrain's VisionTransformer resize their tables bicubically to the input
themselves. ``--no-checkpoint`` adds the config's model as initialised
(seed 0, saved to OUT/untrained.pth), labelled ``untrained``.

Output in ``--out-dir`` OUT: a table of the task's main metric
(accuracy/top1, coco/bbox_mAP, mIoU, else the evaluator's first), a row
per checkpoint and a column per size; ``eval_resolutions.json`` (every
metric of every run and each size's test pipeline, written after each
run); ``eval_resolutions.png`` (main metric vs size, the training size
marked); each run's logs in OUT/runs/<label>/<size>/.

Examples::

    python tools/analysis_tools/eval_resolutions.py \\
        configs/cpvt/cpvt-tiny_4xb256_in1k.py cpvt-tiny.pth \\
        --sizes 160 224 384 448 512
    python tools/analysis_tools/eval_resolutions.py CONFIG a.pth b.pth \\
        --labels seed0 seed1 --protocol resize --no-checkpoint
    python tools/analysis_tools/eval_resolutions.py \\
        configs/retinanet_pvt_tiny_peg_1x_coco.py epoch_12.pth \\
        --sizes 480 640 800 960
"""
import argparse
import copy
import datetime
import json
import os
import os.path as osp
import re
import time

from mmengine.config import Config

from mmcpvt.apis import cli
from mmcpvt.apis.cfg_options import parse_cfg_options
from mmcpvt.apis.resolution import (PROTOCOLS, config_task, describe,
                                    run_test, save_untrained, set_test_size,
                                    training_size)
from mmcpvt.utils.checkpoint import (read_checkpoint, require_file,
                                     state_dict_of)
from mmcpvt.utils.path import check_output_dir

PAPER_SIZES = [160, 224, 384, 448, 512]
# The largest test size: a 4096 x 4096 image is 48 MiB as float32, a ViT's
# attention over its 65536 tokens of 16 px 16 GiB per head and image.
MAX_SIZE = 4096
UNTRAINED = 'untrained'
# per task: the main metric (the table and the plot, where the evaluator
# reports it) and its format; per protocol: the x label of the plot
MAIN_METRIC = {'classification': ('accuracy/top1', '{:.2f}'),
               'detection': ('coco/bbox_mAP', '{:.3f}'),
               'segmentation': ('mIoU', '{:.2f}')}
XLABEL = {'resize-crop': 'test size (centre crop, px)',
          'resize': 'test size (whole image, px)',
          'short-side': 'test size (shorter side, px)'}


def parse_args(argv=None):
    parser = argparse.ArgumentParser(
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter)
    add = parser.add_argument
    add('config', help='mmpretrain, mmdet or mmseg config')
    add('checkpoint', nargs='*', help='checkpoint files, one row each (at '
        'least one, unless --no-checkpoint)')
    add('--sizes', nargs='+', default=PAPER_SIZES, type=int,
        help='test sizes in pixels (the crop side for resize-crop, the '
        'image side for resize, the shorter side for short-side), 1 to '
        f'{MAX_SIZE}. Defaults to the paper\'s '
        f'{" ".join(map(str, PAPER_SIZES))}')
    add('--protocol', choices=sorted(XLABEL),
        help='what a size means: resize-crop (classification, default) or '
        'resize (classification); short-side (detection and segmentation, '
        'their default). See above')
    add('--no-checkpoint', action='store_true', help='also (or only) '
        f'evaluate the model as initialised, labelled {UNTRAINED!r}')
    add('--labels', nargs='+', help='one name per checkpoint for the table, '
        'JSON and plot; defaults to the file names')
    add('--out-dir', help='defaults to work_dirs/eval_resolutions/<config '
        'name>')
    add('--cfg-options', nargs='+', action='extend', metavar='KEY=VALUE',
        help='override settings in the config, key=value pairs as in '
        'tools/test.py, e.g. test_dataloader.batch_size=32')
    args = parser.parse_args(argv)
    if not args.checkpoint and not args.no_checkpoint:
        parser.error('give at least one CHECKPOINT; to evaluate the model '
                     'as initialised, pass --no-checkpoint')
    args.out_dir = args.out_dir or osp.join(
        'work_dirs', 'eval_resolutions',
        osp.splitext(osp.basename(args.config))[0])
    try:
        require_file(args.config, 'config')
        cli.check_options(cli.checked(
            int, lambda v: 0 < v <= MAX_SIZE, f'a size is 1 to {MAX_SIZE} px '
            '(larger test images do not fit in memory)'), sizes=args.sizes)
        args.cfg_options = parse_cfg_options(args.cfg_options)
        check_output_dir('--out-dir', args.out_dir, 'the results')
    except (ValueError, FileNotFoundError) as e:
        parser.error(str(e))
    if args.labels is None:  # the file names, or the paths where two are equal
        names = [osp.basename(c) for c in args.checkpoint]
        args.labels = names if len(set(names)) == len(names) else list(
            args.checkpoint)
    elif len(args.labels) != len(args.checkpoint):
        parser.error(f'--labels gives {len(args.labels)} names for '
                     f'{len(args.checkpoint)} checkpoints')
    labels = args.labels + ([UNTRAINED] if args.no_checkpoint else [])
    if len(set(labels)) != len(labels):
        parser.error(f'the labels must differ, got {labels}')
    args.sizes = sorted(set(args.sizes))
    return parser, args


def load_config(parser, args):
    """The config and its test pipeline at each size; sets ``args.task``
    and ``args.protocol``."""
    cfg = Config.fromfile(args.config)
    # the runs' work dirs are under the output directory; one process
    cfg = cli.apply_common_args(cfg, args.config, args.out_dir,
                                cfg_options=args.cfg_options)
    missing = [k for k in ('test_dataloader', 'test_evaluator')
               if not cfg.get(k, None)]
    if missing:
        parser.error(f'{args.config} has no {" and no ".join(missing)}: '
                     'there is no test loop to run; add them to the config '
                     'or with --cfg-options')
    if not cfg.get('test_cfg', None):
        cfg.test_cfg = dict(type='TestLoop')
    cfg.resume = False  # a run loads its checkpoint, never resumes
    try:
        args.task = config_task(cfg)
        # a protocol of another task is refused by the rewrite
        args.protocol = args.protocol or PROTOCOLS[args.task][0]
        return cfg, {s: set_test_size(copy.deepcopy(cfg), s, args.protocol)
                     for s in args.sizes}
    except ValueError as e:
        parser.error(f'{args.config}: {e}')


def plot(path: str, results: dict, sizes: list, metric: str, train_size,
         title: str, xlabel: str) -> None:
    from matplotlib.figure import Figure  # no pyplot: no global backend

    fig = Figure(figsize=(6.4, 4.2))
    ax = fig.subplots()
    for label, metrics in results.items():
        ax.plot(sizes, [metrics[str(s)][metric] for s in sizes], marker='o',
                label=label)
    if train_size is not None:
        ax.axvline(train_size, color='grey', linestyle='--', linewidth=1,
                   label=f'training size ({train_size})')
    ax.set(xticks=sizes, xlabel=xlabel, ylabel=metric)
    ax.set_title(title, fontsize=10)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=100)


def main(argv=None):
    parser, args = parse_args(argv)
    cfg, pipelines = load_config(parser, args)
    try:
        for checkpoint in args.checkpoint:  # tensors mapped, not read
            state_dict_of(read_checkpoint(checkpoint, mmap=True), checkpoint)
    except (ValueError, FileNotFoundError) as e:
        parser.error(str(e))
    task, sizes, out_dir = args.task, args.sizes, args.out_dir
    os.makedirs(out_dir, exist_ok=True)
    name = osp.splitext(osp.basename(args.config))[0]
    train_size = training_size(cfg, task)
    models = list(zip(args.labels, args.checkpoint))
    if args.no_checkpoint:
        untrained = osp.join(out_dir, 'untrained.pth')
        save_untrained(cfg, untrained, osp.join(out_dir, 'untrained.log'))
        models.insert(0, (UNTRAINED, untrained))

    def say(text):
        print(f'[eval_resolutions] {text}', flush=True)

    def hms(seconds):
        return str(datetime.timedelta(seconds=round(seconds)))

    say(f'{name} ({task}, protocol {args.protocol}): {len(models)} '
        f'model(s) x {len(sizes)} size(s); output in {out_dir}')
    for s in sizes:
        say(f'  {s:>4} px: {describe(pipelines[s], task)}')

    json_path = osp.join(out_dir, 'eval_resolutions.json')
    results = {label: {} for label, _ in models}
    report = dict(
        config=args.config, task=task, scope=cfg.default_scope,
        protocol=args.protocol, metric=None, sizes=sizes,
        train_size=train_size,
        test_pipelines={str(s): p for s, p in pipelines.items()},
        models=[dict(label=label, checkpoint=ckpt,
                     untrained=label == UNTRAINED and args.no_checkpoint,
                     metrics=results[label]) for label, ckpt in models])
    fmt = MAIN_METRIC[task][1]
    total, t0 = len(models) * len(sizes), time.time()
    for label, ckpt in models:
        slug = re.sub(r'[^\w.-]+', '_', label)
        for i, size in enumerate(sizes, 1):
            run_cfg = copy.deepcopy(cfg)
            set_test_size(run_cfg, size, args.protocol)
            run_cfg.load_from = ckpt
            run_cfg.work_dir = osp.join(out_dir, 'runs', slug, str(size))
            run_cfg.experiment_name = f'{slug}_{size}'
            os.makedirs(run_cfg.work_dir, exist_ok=True)
            console = osp.join(run_cfg.work_dir, 'console.log')
            t = time.time()
            try:
                metrics = run_test(run_cfg, console)
            except Exception:
                say(f'{label} at {size} px failed; the runner\'s output is '
                    f'in {console}')
                raise
            results[label][str(size)] = metrics
            # the task's main metric where reported, else the first number
            numeric = [k for k, v in metrics.items() if isinstance(
                v, (int, float)) and not isinstance(v, bool)]
            if not numeric:
                parser.error(f'the evaluator reports no number: {metrics}')
            metric = MAIN_METRIC[task][0]
            metric = report['metric'] = (metric if metric in numeric else
                                         numeric[0])
            with open(json_path, 'w') as f:
                json.dump(report, f, indent=2)
            done, elapsed = sum(map(len, results.values())), time.time() - t0
            say(f'{label}: size {i}/{len(sizes)} ({size} px): {metric} '
                f'{fmt.format(metrics[metric])} ({time.time() - t:.0f} s; '
                f'elapsed {hms(elapsed)}, ETA '
                f'{hms(elapsed / done * (total - done))})')

    png_path = osp.join(out_dir, 'eval_resolutions.png')
    plot(png_path, results, sizes, metric, train_size,
         f'{name}: {metric}, no fine-tuning ({args.protocol})',
         XLABEL[args.protocol])
    print(f'\n{metric} at each test size, without fine-tuning '
          f'({task}, protocol {args.protocol}):')
    print(cli.text_table(
        ['model'] + [f'{s}*' if s == train_size else str(s) for s in sizes],
        [[label] + [fmt.format(m[str(s)][metric]) for s in sizes]
         for label, m in results.items()]))
    if train_size in sizes:
        print('* the training size')
    print(f'\nmetrics: {json_path}\nplot:    {png_path}')


if __name__ == '__main__':
    main()
