"""mmcpvt's fused CPU kernels (sources in ``csrc/``, built by setup.py).

They serve inference only (no autograd formula); the modules that use them
fall back to PyTorch's operators where a kernel is absent or does not apply.
"""
import importlib.machinery
import os.path as osp
import warnings
from typing import Optional

import torch

_LIBRARY = osp.join(osp.dirname(osp.dirname(osp.abspath(__file__))), '_ext')


def _load() -> bool:
    for suffix in importlib.machinery.EXTENSION_SUFFIXES:
        if osp.exists(_LIBRARY + suffix):
            try:
                torch.ops.load_library(_LIBRARY + suffix)
                return True
            except (OSError, RuntimeError) as e:
                warnings.warn(
                    f'mmcpvt: could not load the fused CPU kernels from '
                    f'{_LIBRARY + suffix} ({e}); running PyTorch\'s '
                    f'operators instead. Rebuild them for this torch with '
                    f'`pip install --no-build-isolation -e .`')
                return False
    return False


_AVAILABLE = _load()


def fused_ops_available() -> bool:
    """Whether the fused CPU kernels were built and loaded."""
    return _AVAILABLE


def peg_depthwise_(x: torch.Tensor, weight: torch.Tensor,
                   bias: Optional[torch.Tensor], hw_shape) -> torch.Tensor:
    """``x[:, e:] += bias + dwconv_k(x[:, e:])`` in place, the PEG with its
    identity, with zero padding (k-1)/2 over the (H, W) map of the last H*W
    tokens; the e = N - H*W leading tokens are left alone.

    Args:
        x (Tensor): float32 CPU tokens (B, N, C), each image's tokens dense.
        weight (Tensor): depth-wise kernel (C, 1, k, k), k odd.
        bias (Tensor, optional): (C,).
        hw_shape (tuple[int]): (H, W).

    Returns:
        Tensor: ``x``.
    """
    return torch.ops.mmcpvt.peg_depthwise_(x, weight, bias, *hw_shape)
