"""Test (and evaluate) a checkpoint with an mmpretrain, mmdet or mmseg
config (its ``default_scope``). The checkpoint must be one of the model,
whole (:class:`mmcpvt.engine.CheckpointLoadHook`): one with some weights
left random measures nothing (a classifier checkpoint gives a detector mAP
0.000). Empty, truncated and unsafe files are refused too.

    python tools/test.py configs/cpvt/cpvt-tiny_4xb256_in1k.py CKPT
    python tools/test.py CONFIG CKPT --out preds.pkl        # predictions
    python tools/test.py CONFIG CKPT --out m.json --out-item metrics
    bash tools/dist_test.sh CONFIG CKPT 8
"""
import argparse
import os
import os.path as osp

import mmengine
from mmengine.config import Config

from mmcpvt.apis import cli
from mmcpvt.apis.cfg_options import parse_cfg_options
from mmcpvt.utils.checkpoint import require_file
from mmcpvt.utils.path import check_output, check_output_dir


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description='Test a checkpoint')
    parser.add_argument('config', help='test config file path')
    parser.add_argument('checkpoint', help='checkpoint file (path or URL)')
    parser.add_argument('--work-dir', help='the dir of the evaluation logs')
    parser.add_argument(
        '--out',
        help='where to save the results: a .pkl file of predictions '
        '(mmpretrain, mmdet), a directory of prediction maps (mmseg), or '
        'with --out-item metrics a .json/.yaml/.pkl file of the metrics')
    parser.add_argument('--out-item', choices=['pred', 'metrics'],
                        default='pred', help='what --out saves')
    parser.add_argument('--show-dir', help='save drawn predictions here')
    parser.add_argument(
        '--cfg-options', nargs='+', action='extend', metavar='KEY=VALUE',
        help='override settings in the config: key=value pairs, e.g. '
        'test_dataloader.batch_size=32; misspelt keys are refused')
    parser.add_argument('--launcher', default='none',
                        choices=['none', 'pytorch', 'slurm', 'mpi'])
    parser.add_argument('--local_rank', '--local-rank', type=int, default=0)
    args = parser.parse_args(argv)
    try:
        require_file(args.config, 'config')
        require_file(args.checkpoint, 'checkpoint')
        args.cfg_options = parse_cfg_options(args.cfg_options)
    except (ValueError, FileNotFoundError) as e:
        parser.error(str(e))
    os.environ.setdefault('LOCAL_RANK', str(args.local_rank))
    return args


def enable_visualization(cfg: Config, show_dir: str) -> None:
    """Turn on the library's visualization hook, saving to ``show_dir``."""
    hook = cfg.get('default_hooks', {}).get('visualization')
    if hook is None:
        raise ValueError(
            '--show-dir needs a visualization hook in default_hooks (e.g. '
            'visualization=dict(type="VisualizationHook")), and the config '
            'has none')
    scope = cfg.get('default_scope', None)
    if scope != 'mmdet' or osp.isabs(show_dir):  # (mmdet: in the work dir)
        check_output_dir('--show-dir', show_dir, 'drawn predictions')
    if scope == 'mmpretrain':
        # every image (the hook's default is one in 5000)
        hook.update(enable=True, out_dir=show_dir, interval=1)
    elif scope == 'mmdet':
        hook.update(draw=True, test_out_dir=show_dir)
    elif scope == 'mmseg':
        hook.update(draw=True)
        cfg.visualizer['save_dir'] = show_dir
    else:
        raise ValueError(f'--show-dir supports the mmpretrain, mmdet and '
                         f'mmseg scopes; the config\'s default_scope is '
                         f'{scope!r}')


# what --out may name: predictions are pickled, metrics dumped by mmengine
OUT_FORMATS = dict(pred=('.pkl', '.pickle'),
                   metrics=('.json', '.yaml', '.yml', '.pkl', '.pickle'))


def check_out(cfg: Config, args, scope: str) -> None:
    """Refuse an ``--out`` that cannot take what the run writes (a file, or
    mmseg's directory of maps, of the formats allowed) or is one of the
    files the test reads: the checkpoint, the config, the test set's
    annotation file and folders, the evaluator's annotation file."""
    dataset = cfg.get('test_dataloader', {}).get('dataset', {})
    data = [dataset.get('ann_file'),
            *(dataset.get('data_prefix') or {}).values()]
    evaluators = cfg.get('test_evaluator') or []
    read = [args.checkpoint, args.config] + [
        osp.join(dataset.get('data_root') or '', p) for p in data
        if isinstance(p, str) and p
    ] + [e.get('ann_file') for e in (
        evaluators if isinstance(evaluators, list) else [evaluators])]
    formats = OUT_FORMATS[args.out_item]
    if args.out_item == 'pred' and scope == 'mmseg':
        check_output_dir('--out', args.out, "mmseg's prediction maps", read)
        return
    check_output('--out', args.out, f'results{formats[0]}', read)
    if not args.out.endswith(formats):
        raise ValueError(f'--out {args.out}: with --out-item {args.out_item} '
                         f'it takes a file name ending in '
                         f'{", ".join(formats)}')


def merge_args(cfg: Config, args) -> Config:
    """Apply the command line to ``cfg``; SystemExit on unusable options,
    before the test runs."""
    cfg = cli.apply_common_args(cfg, args.config, args.work_dir,
                                args.launcher, args.cfg_options)
    cfg.load_from = args.checkpoint
    # a user's own config: the checkpoint loaded whole and weights-only; on
    # CUDA, NMS needs mmcv's CUDA ops, refused early
    cli.add_mmcpvt_hooks(cfg, cli.TEST_HOOKS)
    scope = cfg.get('default_scope', None)
    try:
        if args.show_dir:
            enable_visualization(cfg, args.show_dir)
        if args.out:
            check_out(cfg, args, scope)
    except ValueError as e:
        raise SystemExit(f'test.py: error: {e}') from None
    if args.out and args.out_item == 'pred':
        if scope == 'mmseg':
            # mmseg's IoUMetric writes prediction maps into a directory.
            cfg.test_evaluator.update(output_dir=args.out, keep_results=True)
        else:  # a metric that saves them (mmdet's encodes masks as RLE)
            evaluators = cfg.test_evaluator
            cfg.test_evaluator = [
                *(evaluators if isinstance(evaluators, list) else
                  [evaluators]),
                dict(type='DumpDetResults' if scope == 'mmdet' else
                     'DumpResults', out_file_path=args.out)]
    return cfg


def main(argv=None):
    args = parse_args(argv)
    cfg = merge_args(Config.fromfile(args.config), args)
    runner = cli.build_runner(cfg)
    with cli.checkpoint_errors('test.py', runner):
        metrics = runner.test()

    if args.out and args.out_item == 'metrics':
        mmengine.dump(metrics, args.out)
    if runner.rank == 0:
        print(f'Metrics of {args.checkpoint}:')
        for name, value in metrics.items():
            if isinstance(value, float):
                value = f'{value:.4f}'
            print(f'  {name}: {value}')


if __name__ == '__main__':
    main()
