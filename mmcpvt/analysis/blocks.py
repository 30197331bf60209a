"""The blocks of a CPVT-, PVTPEG- or SwinPEG-like backbone and the token
maps they hand on, recorded by hooks on modules that are all called as
``module(tokens, hw_shape, ...)``; the backbone runs its own ``forward``.
What the instruments (:mod:`.position_probe`, :mod:`.equivariance`,
:mod:`.attention`) look at.
"""
from dataclasses import dataclass, field
from typing import Callable, Dict, List, Optional, Sequence, Tuple, Union

import torch
import torch.nn as nn

# The key of the tokens that the first block receives, as in peg_positions
INPUT = -1

Progress = Optional[Callable[[int, int], None]]


@dataclass(frozen=True)
class BlockInfo:
    """One analysable point of a backbone: its global ``index`` (0: the
    first block, or ``INPUT``), ``stage`` (0 for CPVT), ``block`` within the
    stage (-1 for ``INPUT``), ``stride`` (input pixels per token),
    ``peg_after`` (a PEG follows it; for ``INPUT``: a PEG at -1) and
    ``name`` ('input', 'block 3' or 'stage 1 block 0')."""
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
    stride: int
    # CPVT's position tables after encoders (before the PEG), keyed alike
    pos_embeds: nn.ModuleDict = field(default_factory=nn.ModuleDict)


def _stages(backbone: nn.Module) -> List[_Stage]:
    if hasattr(backbone, 'layers') and hasattr(backbone, 'patch_embed'):
        # CPVT and its subclasses: one stage of encoders
        return [_Stage(backbone.layers, backbone.pegs,
                       backbone.patch_embed.projection.stride[0],
                       backbone.pos_embeds)]
    if hasattr(backbone, 'patch_embeds') and hasattr(backbone, 'stages'):
        # PVTPEG: a patch embedding per stage
        strides = [e.projection.stride[0] for e in backbone.patch_embeds]
        for i in range(1, len(strides)):
            strides[i] *= strides[i - 1]
    elif hasattr(backbone, 'downsamples') and hasattr(backbone, 'stages'):
        # SwinPEG: patch embedding, then a 2x patch merging between stages
        p = backbone.patch_embed.projection.stride[0]
        strides = [p * 2**i for i in range(len(backbone.stages))]
    else:
        raise TypeError(
            f'{type(backbone).__name__} is no CPVT-like (layers, patch_embed)'
            f', PVTPEG-like (stages, patch_embeds) or SwinPEG-like (stages, '
            f'downsamples) backbone, the ones the analysis tools know')
    return [_Stage(*args)
            for args in zip(backbone.stages, backbone.pegs, strides)]


def list_blocks(backbone: nn.Module) -> List[BlockInfo]:
    """``INPUT`` and every block of ``backbone``, in order of execution."""
    stages = _stages(backbone)
    single = len(stages) == 1
    infos = [BlockInfo(INPUT, 0, -1, stages[0].stride,
                       str(INPUT) in stages[0].pegs, 'input')]
    for s, stage in enumerate(stages):
        for j in range(len(stage.blocks)):
            index = len(infos) - 1
            infos.append(BlockInfo(
                index, s, j, stage.stride, str(j) in stage.pegs,
                f'block {index}' if single else f'stage {s} block {j}'))
    return infos


def resolve_block(backbone: nn.Module, spec: Union[int, str,
                                                   Tuple[int, int]]) -> int:
    """The global index of a block given as an int (-1: the input),
    'input', 'STAGE.BLOCK' or (stage, block); a ValueError that names the
    allowed range for any other."""
    infos, stages = list_blocks(backbone), _stages(backbone)
    allowed = f'-1 (input) to {infos[-1].index}'
    if len(stages) > 1:
        depths = ', '.join(str(len(stage.blocks)) for stage in stages)
        allowed += (f', or STAGE.BLOCK (e.g. 1.0; the stages have {depths} '
                    f'blocks)')
    names = {'input': INPUT, str(INPUT): INPUT}
    for i in infos[1:]:
        names[str(i.index)] = names[f'{i.stage}.{i.block}'] = i.index
    key = f'{spec[0]}.{spec[1]}' if isinstance(spec, tuple) else str(spec)
    if key.strip() not in names:
        raise ValueError(f'block {key} out of range for this '
                         f'{type(backbone).__name__}; allowed: {allowed}')
    return names[key.strip()]


def block_module(backbone: nn.Module, index: int) -> nn.Module:
    info = list_blocks(backbone)[index + 1]
    return _stages(backbone)[info.stage].blocks[info.block]


def token_positions(H: int, W: int) -> torch.Tensor:
    """(H*W, 2) float64 (row, column) of an H x W map's tokens, row-major."""
    return torch.cartesian_prod(torch.arange(H), torch.arange(W)).double()


def run_hooked(backbone: nn.Module, images: torch.Tensor, batch_size: int,
               handles: list, progress: Progress = None):
    """Run ``backbone`` on ``images`` in batches, in eval mode without
    gradients (calling ``progress(done, total)`` after each batch); then
    restore its mode and remove the hook ``handles``."""
    device, training = next(backbone.parameters()).device, backbone.training
    try:
        backbone.eval()
        with torch.no_grad():
            for start in range(0, len(images), batch_size):
                backbone(images[start:start + batch_size].to(device))
                if progress:
                    progress(min(start + batch_size, len(images)),
                             len(images))
    finally:
        backbone.train(training)
        for h in handles:
            h.remove()


def block_features(backbone: nn.Module,
                   images: torch.Tensor,
                   blocks: Optional[Sequence[int]] = None,
                   batch_size: int = 16,
                   progress: Progress = None) -> Dict[int, torch.Tensor]:
    """The patch-token maps that each block hands on: ``{index: (N, C,
    H_i, W_i)}`` in float32 on the CPU, in the order of :func:`list_blocks`.

    For block ``i``: the tokens after the block and after a PEG that
    follows it, i.e. what the next block receives; for ``INPUT`` (-1): the
    tokens the first block receives (patch embedding, position embedding,
    PEG at -1). Class tokens are dropped. ``images`` (N, 3, H, W) are
    normalised; ``blocks`` are the global indices to keep (None: all);
    ``progress(done, total)`` is called after each batch of
    ``batch_size``. The backbone runs in eval mode under ``torch.no_grad``.
    """
    store: Dict[int, List[torch.Tensor]] = {
        i.index: [] for i in list_blocks(backbone)
        if blocks is None or i.index in blocks}

    def recorder(index):
        # as a pre-hook: what a block receives; as a forward hook: what the
        # module returns
        def hook(module, args, out=None):
            tokens, (H, W) = (args[0] if out is None else out), args[1]
            if out is not None and hasattr(module, 'out_hw_shape'):
                H, W = module.out_hw_shape((H, W))  # a PEG may crop the map
            tokens = tokens[:, tokens.shape[1] - H * W:].float()
            # (B, H*W, C) -> (B, C, H, W)
            store[index].append(tokens.transpose(1, 2).reshape(
                len(tokens), -1, H, W).cpu())

        return hook

    handles, first = [], 0
    for s, stage in enumerate(_stages(backbone)):
        n = len(stage.blocks)
        for j, block in enumerate(stage.blocks):
            if (j > 0 or s == 0) and first + j - 1 in store:
                handles.append(block.register_forward_pre_hook(
                    recorder(first + j - 1)))
        # after a stage's last block: the output of the last of the block,
        # the position table and the PEG that follow it
        if first + n - 1 in store:
            last = [stage.blocks[-1]] + [
                modules[str(n - 1)] for modules in (stage.pos_embeds,
                                                    stage.pegs)
                if str(n - 1) in modules
            ]
            handles.append(last[-1].register_forward_hook(
                recorder(first + n - 1)))
        first += n
    run_hooked(backbone, images, batch_size, handles, progress)
    return {i: torch.cat(maps) for i, maps in store.items()}
