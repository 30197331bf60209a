from .hooks import (CheckpointFitHook, CudaOpsHook, EpochSeedHook,
                    WeightsOnlyLoadHook, WorkDirLockHook)

__all__ = [
    'CheckpointFitHook', 'CudaOpsHook', 'EpochSeedHook', 'WeightsOnlyLoadHook',
    'WorkDirLockHook'
]
