"""The runner our configs name (``runner_type``), so that mmpretrain's,
mmdet's and mmseg's own ``tools/train.py`` build it too."""
from mmengine.runner import Runner

from mmcpvt.registry import register_runner
from .hooks import WorkDirLockHook


@register_runner
class LockedRunner(Runner):
    """mmengine's Runner that takes the work-dir lock
    (:class:`WorkDirLockHook`) before it writes the config into the work dir.

    The hook alone takes it at ``before_train``: by then the runner has
    rewritten the dumped config of a training that holds the work dir. Only
    the new timestamped log folder is made before the lock.
    """

    def dump_config(self) -> None:
        if self.rank == 0:
            WorkDirLockHook.acquire(self.work_dir)  # kept by the hook
        super().dump_config()
