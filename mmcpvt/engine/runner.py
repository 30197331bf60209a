"""The runner our configs name (``runner_type``), so that mmpretrain's,
mmdet's and mmseg's own ``tools/train.py`` build it too."""
from mmengine.runner import Runner

from mmcpvt.registry import register_runner
from .hooks import WorkDirLockHook


@register_runner
class LockedRunner(Runner):
    """mmengine's Runner that writes the config into the work dir when it
    trains, tests or validates, not when it is built (mmengine's does): a
    training first takes the work-dir lock (:class:`WorkDirLockHook`), so
    that a refused second training does not rewrite the config of the one
    that holds the work dir. Testing needs no lock."""

    def dump_config(self) -> None:
        pass  # called by Runner.__init__; written by train, val and test

    def train(self):
        if self.rank == 0:
            WorkDirLockHook.acquire(self.work_dir)
        Runner.dump_config(self)
        return super().train()

    def val(self):
        Runner.dump_config(self)
        return super().val()

    def test(self):
        Runner.dump_config(self)
        return super().test()
