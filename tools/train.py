"""Train a model from an mmpretrain, mmdet or mmseg config.

One entry for the three libraries: the config's ``default_scope``
('mmpretrain', 'mmdet' or 'mmseg') decides which one the runner builds
from, so this script imports none of them itself. It imports ``mmcpvt``,
which registers the CPVT modules and allow-lists mmengine's checkpoint
types for torch's ``weights_only`` loader (needed by ``--resume``).

Examples::

    python tools/train.py configs/cpvt/cpvt-tiny_4xb256_in1k.py
    python tools/train.py CONFIG --resume                 # latest in work_dir
    python tools/train.py CONFIG --resume work_dirs/x/epoch_2.pth
    bash tools/dist_train.sh CONFIG 8 --amp
"""
import argparse
import logging
import os
import os.path as osp
import sys

from mmengine.config import Config, DictAction
from mmengine.logging import print_log
from mmengine.runner import find_latest_checkpoint

try:
    import mmcpvt  # noqa: F401  (registers modules, checkpoint allow-list)
except ImportError:  # not installed: run from a clone
    sys.path.insert(0, osp.dirname(osp.dirname(osp.abspath(__file__))))
    import mmcpvt  # noqa: F401
from mmcpvt.utils.runner import apply_common_args, build_runner  # noqa: E402


def parse_args(argv=None):
    parser = argparse.ArgumentParser(
        description='Train a model (mmpretrain, mmdet or mmseg config)')
    parser.add_argument('config', help='train config file path')
    parser.add_argument(
        '--work-dir',
        help='the dir to save logs and models; defaults to the config\'s '
        'work_dir, else ./work_dirs/<config name>')
    parser.add_argument(
        '--resume',
        nargs='?',
        type=str,
        const='auto',
        help='resume from this checkpoint; without a value, resume from '
        'the latest checkpoint in the work directory')
    parser.add_argument(
        '--amp',
        action='store_true',
        help='enable automatic mixed precision training (needs a GPU)')
    parser.add_argument(
        '--auto-scale-lr',
        action='store_true',
        help='scale the learning rate by the actual total batch size over '
        'the config\'s auto_scale_lr.base_batch_size')
    parser.add_argument(
        '--no-validate',
        action='store_true',
        help='do not evaluate checkpoints during training')
    parser.add_argument(
        '--cfg-options',
        nargs='+',
        action=DictAction,
        help='override settings in the config: key=value pairs, merged '
        'into the config, e.g. train_dataloader.batch_size=32. A list is '
        'key="[a,b]" or key=a,b; nested lists/tuples key="[(a,b),(c,d)]". '
        'The quotation marks are necessary and no white space is allowed.')
    parser.add_argument(
        '--launcher',
        choices=['none', 'pytorch', 'slurm', 'mpi'],
        default='none',
        help='job launcher')
    # torch.distributed.launch / torchrun pass --local-rank (torch >= 2.0)
    # or --local_rank (older).
    parser.add_argument('--local_rank', '--local-rank', type=int, default=0)
    args = parser.parse_args(argv)
    if 'LOCAL_RANK' not in os.environ:
        os.environ['LOCAL_RANK'] = str(args.local_rank)

    if not osp.isfile(args.config):
        parser.error(f'config file not found: {args.config}')
    if (args.resume not in (None, 'auto') and '://' not in args.resume
            and not osp.isfile(args.resume)):
        parser.error(f'--resume checkpoint not found: {args.resume}')
    return args


def _has_accelerator() -> bool:
    from mmengine.device import (is_cuda_available, is_mlu_available,
                                 is_musa_available, is_npu_available)
    return (is_cuda_available() or is_npu_available() or is_mlu_available()
            or is_musa_available())


def merge_args(cfg: Config, args) -> Config:
    """Apply the command line to ``cfg``; SystemExit on unusable options."""
    cfg = apply_common_args(cfg, args)

    if args.no_validate:
        cfg.val_cfg = None
        cfg.val_dataloader = None
        cfg.val_evaluator = None

    if args.amp:
        if not _has_accelerator():
            raise SystemExit(
                'train.py: error: --amp needs a CUDA (or NPU/MLU/MUSA) '
                'device and none is available; train without --amp on '
                'the CPU')
        wrapper = cfg.optim_wrapper.get('type', 'OptimWrapper')
        if wrapper == 'AmpOptimWrapper':
            print_log('--amp: the config already uses AmpOptimWrapper',
                      logger='current', level=logging.WARNING)
        elif wrapper != 'OptimWrapper':
            raise SystemExit(
                f'train.py: error: --amp replaces optim_wrapper.type '
                f'"OptimWrapper" by "AmpOptimWrapper", but {args.config} '
                f'sets optim_wrapper.type="{wrapper}"; set '
                'optim_wrapper.type=AmpOptimWrapper in the config instead')
        else:
            cfg.optim_wrapper.type = 'AmpOptimWrapper'
            cfg.optim_wrapper.setdefault('loss_scale', 'dynamic')

    if args.auto_scale_lr:
        if 'base_batch_size' not in cfg.get('auto_scale_lr', {}):
            raise SystemExit(
                'train.py: error: --auto-scale-lr needs '
                'auto_scale_lr=dict(base_batch_size=N) in the config '
                f'({args.config} has none); add it, or pass --cfg-options '
                'auto_scale_lr.base_batch_size=N')
        cfg.auto_scale_lr.enable = True

    # resume: an explicit checkpoint > the latest one in work_dir
    if args.resume == 'auto':
        cfg.resume = True
        cfg.load_from = None
        if find_latest_checkpoint(cfg.work_dir) is None:
            print_log(
                f'--resume: no checkpoint in {cfg.work_dir} yet, training '
                'starts from scratch',
                logger='current',
                level=logging.WARNING)
    elif args.resume is not None:
        cfg.resume = True
        cfg.load_from = args.resume
    return cfg


def main(argv=None):
    args = parse_args(argv)
    cfg = Config.fromfile(args.config)
    cfg = merge_args(cfg, args)

    runner = build_runner(cfg)
    runner.train()


if __name__ == '__main__':
    main()
