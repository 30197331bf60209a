from .hooks import (CheckpointFitHook, CudaOpsHook, SeedHook,
                    WeightsOnlyLoadHook, WorkDirLockHook)

__all__ = [
    'CheckpointFitHook', 'CudaOpsHook', 'SeedHook', 'WeightsOnlyLoadHook',
    'WorkDirLockHook'
]
