from .hooks import CheckpointLoadHook, CudaOpsHook, SeedHook
from .runner import LockedRunner, WorkDirInUseError, work_dir_lock

__all__ = [
    'CheckpointLoadHook', 'CudaOpsHook', 'LockedRunner', 'SeedHook',
    'WorkDirInUseError', 'work_dir_lock'
]
