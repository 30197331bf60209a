from .hooks import (CheckpointFitHook, EpochSeedHook, WeightsOnlyLoadHook,
                    WorkDirLockHook)

__all__ = [
    'CheckpointFitHook', 'EpochSeedHook', 'WeightsOnlyLoadHook',
    'WorkDirLockHook'
]
