"""Train a model from an mmpretrain, mmdet or mmseg config (its
``default_scope``). mmcpvt's hooks (:mod:`mmcpvt.engine`) are added to a
config that lacks them. ``--resume`` without a path takes the newest intact
checkpoint of the work dir, and a resumed run trains as the uninterrupted
one would (with a GPU, bitwise equality also needs
``randomness=dict(seed=S, deterministic=True)``).

    python tools/train.py configs/cpvt/cpvt-tiny_4xb256_in1k.py
    python tools/train.py CONFIG --resume [work_dirs/x/epoch_2.pth]
    bash tools/dist_train.sh CONFIG 8 --amp
"""
import argparse
import os

from mmengine.config import Config

from mmcpvt.apis import cli
from mmcpvt.apis.cfg_options import parse_cfg_options
from mmcpvt.apis.cpu_dist import has_accelerator
from mmcpvt.apis.resume import set_resume
from mmcpvt.engine import WorkDirInUseError
from mmcpvt.utils.checkpoint import require_file


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description='Train a model')
    parser.add_argument('config', help='train config file path')
    parser.add_argument('--work-dir', help='the dir to save logs and models')
    parser.add_argument(
        '--resume', nargs='?', type=str, const='auto',
        help='resume from this checkpoint; without a value, from the newest '
        'intact checkpoint of the work dir (a fresh start if there is none)')
    parser.add_argument('--amp', action='store_true',
                        help='automatic mixed precision (needs a GPU)')
    parser.add_argument('--auto-scale-lr', action='store_true',
                        help='scale the lr by the actual batch size')
    parser.add_argument('--no-validate', action='store_true',
                        help='do not evaluate during training')
    parser.add_argument(
        '--cfg-options', nargs='+', action='extend', metavar='KEY=VALUE',
        help='override settings in the config: key=value pairs, e.g. '
        'train_dataloader.batch_size=32; a list is key="[a,b]". New keys '
        'that nobody would read (misspelt ones) are refused.')
    parser.add_argument('--launcher', default='none',
                        choices=['none', 'pytorch', 'slurm', 'mpi'])
    # torchrun passes --local-rank (torch >= 2.0), older launchers
    # --local_rank
    parser.add_argument('--local_rank', '--local-rank', type=int, default=0)
    args = parser.parse_args(argv)
    try:
        require_file(args.config, 'config')
        if args.resume not in (None, 'auto'):
            require_file(args.resume, '--resume checkpoint')
        args.cfg_options = parse_cfg_options(args.cfg_options)
    except (ValueError, FileNotFoundError) as e:
        parser.error(str(e))
    os.environ.setdefault('LOCAL_RANK', str(args.local_rank))
    return args


def merge_args(cfg: Config, args) -> Config:
    """Apply the command line to ``cfg``; SystemExit on unusable options."""
    cfg = cli.apply_common_args(cfg, args.config, args.work_dir,
                                args.launcher, args.cfg_options)
    for key, value in (cfg.get('train_cfg') or {}).items():
        if key in ('max_epochs', 'max_iters') and not (
                type(value) is int and value >= 1):  # else trains nothing
            raise SystemExit(f'train.py: error: train_cfg.{key} must be an '
                             f'int >= 1, got {value!r}')
    cli.add_mmcpvt_hooks(cfg)
    # its lock refuses a second training in the work dir, before the config
    # is written there (a config naming another runner goes without)
    cfg.setdefault('runner_type', 'mmcpvt.LockedRunner')
    if args.no_validate:
        cfg.val_cfg = cfg.val_dataloader = cfg.val_evaluator = None
    if args.amp:
        if not has_accelerator():
            raise SystemExit('train.py: error: --amp needs a CUDA (or NPU/MLU'
                             '/MUSA) device and none is available; train '
                             'without --amp on the CPU')
        wrapper = cfg.optim_wrapper.get('type', 'OptimWrapper')
        if wrapper not in ('OptimWrapper', 'AmpOptimWrapper'):
            raise SystemExit(
                f'train.py: error: --amp replaces optim_wrapper.type '
                f'"OptimWrapper" by "AmpOptimWrapper", but the config sets '
                f'"{wrapper}"; set optim_wrapper.type=AmpOptimWrapper there')
        cfg.optim_wrapper.type = 'AmpOptimWrapper'
        cfg.optim_wrapper.setdefault('loss_scale', 'dynamic')
    if args.auto_scale_lr:
        given = cfg.get('auto_scale_lr', {})
        if not isinstance(given, dict) or 'base_batch_size' not in given:
            raise SystemExit(
                'train.py: error: --auto-scale-lr needs auto_scale_lr=dict('
                'base_batch_size=N) in the config (N: the total batch size '
                f'its lr is for), and it has auto_scale_lr={given!r}; add '
                'it' + (', or pass --cfg-options auto_scale_lr.'
                        'base_batch_size=N' if isinstance(given, dict) else
                        f' to {args.config}'))
        cfg.auto_scale_lr.enable = True
    if args.resume is not None:
        set_resume(cfg, args.resume)
    return cfg


def main(argv=None):
    args = parse_args(argv)
    cfg = merge_args(Config.fromfile(args.config), args)
    if cfg.get('randomness', {}).get('deterministic', False):
        # cuBLAS refuses deterministic algorithms without it (PyTorch's
        # "Reproducibility" notes); read when CUDA starts
        os.environ.setdefault('CUBLAS_WORKSPACE_CONFIG', ':4096:8')
    runner = cli.build_runner(cfg)
    try:
        with cli.checkpoint_errors('train.py', runner):
            runner.train()
    except WorkDirInUseError as e:
        raise SystemExit(f'train.py: error: {e}') from None


if __name__ == '__main__':
    main()
