from .hooks import (CheckpointFitHook, CudaOpsHook, SeedHook,
                    WeightsOnlyLoadHook, WorkDirLockHook)
from .runner import LockedRunner

__all__ = [
    'CheckpointFitHook', 'CudaOpsHook', 'LockedRunner', 'SeedHook',
    'WeightsOnlyLoadHook', 'WorkDirLockHook'
]
