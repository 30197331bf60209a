"""Per-block token maps of a backbone, for the analysis instruments.

:func:`block_features` returns, for every block of a CPVT-, PVTPEG- or
SwinPEG-like backbone, the patch tokens that the next block receives (after
the block and after a PEG that follows it), as maps; it only hooks the
modules and runs the backbone's own ``forward``. Models come from configs
through :mod:`mmcpvt.analysis.models`.
"""
import re
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Callable, Dict, List, Optional, Sequence, Tuple, Union

import torch
import torch.nn as nn

from mmcpvt.models.layers import nlc_to_nchw

# where build_model was before mmcpvt.analysis.models
from .models import build_model  # noqa: F401

# The key of the tokens before the first block (after the patch embedding,
# the position embedding and a PEG at position -1), as in ``peg_positions``.
INPUT = -1

Progress = Optional[Callable[[int, int], None]]


# ----------------------------------------------------------------- blocks


@dataclass(frozen=True)
class BlockInfo:
    """One analysable point of a backbone.

    Attributes:
        index (int): Global block number (0 = first block of the first
            stage), or ``INPUT`` (-1) for the tokens before the first block.
        stage (int): Stage of the block (0 for CPVT).
        block (int): Block number within its stage (-1 for ``INPUT``).
        stride (int): Input pixels per token at this block.
        peg_after (bool): A PEG follows the block (its output is what the
            next block receives); for ``INPUT``: a PEG at position -1.
        name (str): 'input', 'block 3' (one stage) or 'stage 1 block 0'.
    """
    index: int
    stage: int
    block: int
    stride: int
    peg_after: bool
    name: str


@dataclass
class _Stage:
    blocks: nn.ModuleList
    pegs: nn.ModuleDict
    hw_source: nn.Module  # its forward returns (tokens, (H, W)) of the stage
    stride: int
    # modules (x, hw_shape) -> x run between blocks, keyed like the PEGs:
    # CPVT's position tables after encoders (added before the PEG)
    pos_embeds: Optional[nn.ModuleDict] = None

    def after(self, j: int) -> List[nn.Module]:
        """What runs after block ``j``, in order."""
        return [
            modules[str(j)] for modules in (self.pos_embeds, self.pegs)
            if modules is not None and str(j) in modules
        ]


def _stride(patch_embed) -> int:
    stride = patch_embed.projection.stride
    return int(stride[0] if isinstance(stride, tuple) else stride)


def _stages(backbone: nn.Module) -> List[_Stage]:
    """The stages of a CPVT-, PVTPEG- or SwinPEG-like backbone."""
    if hasattr(backbone, 'layers') and hasattr(backbone, 'patch_embed'):
        # CPVT and its subclasses: one stage of encoders
        return [
            _Stage(backbone.layers, backbone.pegs, backbone.patch_embed,
                   _stride(backbone.patch_embed),
                   getattr(backbone, 'pos_embeds', None))
        ]
    if hasattr(backbone, 'patch_embeds') and hasattr(backbone, 'stages'):
        # PVTPEG: a patch embedding per stage
        stages, stride = [], 1
        for blocks, pegs, embed in zip(backbone.stages, backbone.pegs,
                                       backbone.patch_embeds):
            stride *= _stride(embed)
            stages.append(_Stage(blocks, pegs, embed, stride))
        return stages
    if hasattr(backbone, 'downsamples') and hasattr(backbone, 'stages'):
        # SwinPEG: patch embedding, then a 2x patch merging between stages
        p = _stride(backbone.patch_embed)
        sources = [backbone.patch_embed, *backbone.downsamples]
        return [
            _Stage(blocks, pegs, src, p * 2**i) for i, (blocks, pegs, src) in
            enumerate(zip(backbone.stages, backbone.pegs, sources))
        ]
    raise TypeError(
        f'{type(backbone).__name__} is not a backbone the analysis tools '
        f'know: they need a CPVT-like (layers, patch_embed), PVTPEG-like '
        f'(stages, patch_embeds) or SwinPEG-like (stages, downsamples) '
        f'backbone')


def list_blocks(backbone: nn.Module) -> List[BlockInfo]:
    """``INPUT`` and every block of ``backbone``, in order of execution."""
    stages = _stages(backbone)
    single = len(stages) == 1
    infos = [
        BlockInfo(INPUT, 0, -1, stages[0].stride,
                  str(INPUT) in stages[0].pegs, 'input')
    ]
    index = 0
    for s, stage in enumerate(stages):
        for j in range(len(stage.blocks)):
            name = f'block {index}' if single else f'stage {s} block {j}'
            infos.append(
                BlockInfo(index, s, j, stage.stride, str(j) in stage.pegs,
                          name))
            index += 1
    return infos


def _allowed(infos: List[BlockInfo]) -> str:
    last = infos[-1].index
    text = f'-1 (input) to {last}'
    if infos[-1].stage > 0:
        depths = [
            sum(1 for i in infos if i.stage == s and i.block >= 0)
            for s in range(infos[-1].stage + 1)
        ]
        text += (f', or STAGE.BLOCK (e.g. 1.0; the stages have '
                 f'{", ".join(map(str, depths))} blocks)')
    return text


def resolve_block(backbone: nn.Module, spec: Union[int, str,
                                                   Tuple[int, int]]) -> int:
    """The global index of a block given as an int (negative: -1 is the
    input), 'input', 'STAGE.BLOCK' or (stage, block).

    Raises:
        ValueError: out of range; the message names the allowed range.
    """
    infos = list_blocks(backbone)
    owner = type(backbone).__name__
    if isinstance(spec, str):
        text = spec.strip()
        if text == 'input':
            return INPUT
        m = re.fullmatch(r'(-?\d+)(?:\.(-?\d+))?', text)
        if m is None:
            raise ValueError(f'block {spec!r} is not a block of this {owner};'
                             f' allowed: {_allowed(infos)}')
        spec = int(m[1]) if m[2] is None else (int(m[1]), int(m[2]))
    if isinstance(spec, tuple):
        for info in infos:
            if info.block >= 0 and (info.stage, info.block) == spec:
                return info.index
        raise ValueError(f'block {spec[0]}.{spec[1]} out of range for this '
                         f'{owner}; allowed: {_allowed(infos)}')
    if not INPUT <= spec <= infos[-1].index:
        raise ValueError(f'block {spec} out of range for this {owner}; '
                         f'allowed: {_allowed(infos)}')
    return int(spec)


def block_module(backbone: nn.Module, index: int) -> nn.Module:
    """The block module with global ``index`` (not ``INPUT``)."""
    for stage in _stages(backbone):
        if index < len(stage.blocks):
            return stage.blocks[index]
        index -= len(stage.blocks)
    raise IndexError(index)


# --------------------------------------------------------------- features


def _to_map(tokens: torch.Tensor, hw_shape) -> torch.Tensor:
    """Tokens (B, extra + H*W, C) -> patch-token map (B, C, H, W) on the
    CPU in float32 (leading class tokens dropped)."""
    H, W = hw_shape
    tokens = tokens[:, tokens.shape[1] - H * W:]
    return nlc_to_nchw(tokens.detach().float(), hw_shape).contiguous().cpu()


@contextmanager
def _eval_mode(module: nn.Module):
    training = module.training
    module.eval()
    try:
        yield
    finally:
        module.train(training)


@contextmanager
def capture_block_features(backbone: nn.Module,
                           blocks: Optional[Sequence[int]] = None):
    """Hooks on ``backbone`` that record the maps of ``blocks`` (global
    indices, ``INPUT`` included; None: all) on every forward.

    Yields a dict ``{index: [map per forward, ...]}``; the hooks are removed
    on exit. See :func:`block_features`.
    """
    stages = _stages(backbone)
    infos = list_blocks(backbone)
    wanted = set(i.index for i in infos) if blocks is None else set(blocks)
    store: Dict[int, List[torch.Tensor]] = {i: [] for i in sorted(wanted)}
    hw: Dict[int, Tuple[int, int]] = {}
    handles = []

    def hw_hook(s):

        def hook(module, args, out):
            hw[s] = tuple(out[1])  # (tokens, (H, W))

        return hook

    def map_size(s, module, args, out):
        """The (H, W) of the tokens a module receives (its ``hw_shape``
        argument, CPVT's may differ from the stage's after a PEG without
        padding) or returns (a PEG says how it changes it)."""
        size = tuple(args[1]) if len(args) > 1 and args[1] is not None \
            else hw[s]
        if out is not None and hasattr(module, 'out_hw_shape'):
            size = tuple(module.out_hw_shape(size))
        return size

    def recorder(s, index, replace=False):
        # as a pre-hook: what a block receives (its first argument); as a
        # forward hook: what the module returns
        def hook(module, args, out=None):
            tokens = args[0] if out is None else out
            fmap = _to_map(tokens, map_size(s, module, args, out))
            if replace:  # a module that runs right after the recorded block
                store[index][-1] = fmap
            else:
                store[index].append(fmap)

        return hook

    first = 0
    try:
        for s, stage in enumerate(stages):
            handles.append(stage.hw_source.register_forward_hook(hw_hook(s)))
            n = len(stage.blocks)
            for j, block in enumerate(stage.blocks):
                index = first + j - 1  # what block j receives
                if (j > 0 or s == 0) and index in wanted:
                    handles.append(
                        block.register_forward_pre_hook(recorder(s, index)))
            # after a stage's last block: its output, or that of the
            # position table / PEG that follows it
            last = first + n - 1
            if last in wanted:
                handles.append(stage.blocks[-1].register_forward_hook(
                    recorder(s, last)))
                for module in stage.after(n - 1):
                    handles.append(module.register_forward_hook(
                        recorder(s, last, replace=True)))
            first += n
        yield store
    finally:
        for h in handles:
            h.remove()


def block_features(backbone: nn.Module,
                   images: torch.Tensor,
                   blocks: Optional[Sequence[int]] = None,
                   batch_size: int = 16,
                   progress: Progress = None) -> Dict[int, torch.Tensor]:
    """The patch-token maps that each block hands on.

    For block ``i`` (global index, see :func:`list_blocks`): the tokens
    after the block and after a PEG that follows it, i.e. what the next
    block receives; for ``INPUT`` (-1): the tokens the first block receives
    (patch embedding, position embedding, PEG at -1). Class tokens are
    dropped. The backbone runs its own ``forward`` in eval mode under
    ``torch.no_grad``; hooks record the tokens.

    Args:
        backbone (nn.Module): A CPVT, PVTPEG or SwinPEG (or subclass).
        images (Tensor): (N, 3, H, W), already normalised.
        blocks (Sequence[int], optional): Global indices to keep (``INPUT``
            allowed). Defaults to None: all.
        batch_size (int): Images per forward. Defaults to 16.
        progress (callable, optional): ``progress(done, total)`` after each
            batch.

    Returns:
        dict[int, Tensor]: ``{index: (N, C, H_i, W_i)}`` in float32 on the
        CPU, in the order of ``list_blocks``.
    """
    device = next(backbone.parameters()).device
    with _eval_mode(backbone), torch.no_grad(), capture_block_features(
            backbone, blocks) as store:
        for start in range(0, len(images), batch_size):
            backbone(images[start:start + batch_size].to(device))
            if progress is not None:
                progress(min(start + batch_size, len(images)), len(images))
    return {i: torch.cat(maps) for i, maps in store.items()}
