"""What tools/train.py and tools/test.py share: the common command-line
settings and building the runner of the config's library."""
import os.path as osp

from mmengine.config import Config


def apply_common_args(cfg: Config, args) -> Config:
    """``--launcher``, ``--cfg-options`` and ``--work-dir`` (CLI > config >
    ``./work_dirs/<config name>``)."""
    cfg.launcher = args.launcher
    if args.cfg_options is not None:
        cfg.merge_from_dict(args.cfg_options)
    if args.work_dir is not None:
        cfg.work_dir = args.work_dir
    elif cfg.get('work_dir', None) is None:
        cfg.work_dir = osp.join('./work_dirs',
                                osp.splitext(osp.basename(args.config))[0])
    return cfg


def build_runner(cfg: Config):
    """The runner; it switches to ``cfg.default_scope``, which imports the
    registries of mmpretrain, mmdet or mmseg as needed."""
    from mmengine.registry import RUNNERS
    from mmengine.runner import Runner
    if 'runner_type' not in cfg:
        return Runner.from_cfg(cfg)
    return RUNNERS.build(cfg)
