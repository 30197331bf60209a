"""Models, images and per-block token maps for the analysis tools.

A model is built from any of our configs (classifier, detector or
segmentor), optionally with a checkpoint, and its ``backbone`` analysed.
:func:`block_features` returns, for every block of the backbone, the patch
tokens that the next block receives (after the block and after a PEG that
follows it), as maps; it only hooks the modules and runs the backbone's own
``forward``.
"""
import copy
import importlib
import os.path as osp
import re
import sys
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Callable, Dict, List, Optional, Sequence, Tuple, Union

import torch
import torch.nn as nn
from mmengine.config import Config
from mmengine.logging import MMLogger
from mmengine.registry import init_default_scope

from mmcpvt.models.layers import nlc_to_nchw
from mmcpvt.utils.convert import unwrap

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


# ----------------------------------------------------------------- models


@contextmanager
def quiet_logs(level: str = 'WARNING'):
    """Raise the level of mmengine's current logger for a while (model
    initialisation reports every tensor at INFO)."""
    logger = MMLogger.get_current_instance()
    old = logger.level
    logger.setLevel(level)
    try:
        yield
    finally:
        logger.setLevel(old)


def _drop_pretrained(cfg):
    """Remove ``Pretrained`` init_cfg entries (nested dicts included): the
    weights come from the checkpoint given, or stay random."""
    if isinstance(cfg, dict):
        init = cfg.get('init_cfg')
        if isinstance(init, dict) and init.get('type') == 'Pretrained':
            cfg['init_cfg'] = None
        elif isinstance(init, list):
            cfg['init_cfg'] = [
                c for c in init
                if not (isinstance(c, dict) and c.get('type') == 'Pretrained')
            ] or None
        for value in cfg.values():
            _drop_pretrained(value)
    elif isinstance(cfg, (list, tuple)):
        for value in cfg:
            _drop_pretrained(value)


def load_config(config: Union[str, Config],
                cfg_options: Optional[dict] = None) -> Config:
    """A config from a file (or as given), with ``cfg_options`` merged."""
    path = config if isinstance(config, str) else config.filename
    if not isinstance(config, Config):
        if not osp.isfile(config):
            raise FileNotFoundError(f'config file not found: {config}')
        config = Config.fromfile(config)
    if cfg_options:
        from mmcpvt.utils.runner import check_cfg_options
        check_cfg_options(config, cfg_options, path)  # misspelt keys
        config.merge_from_dict(cfg_options)
    return config


def build_model(config: Union[str, Config],
                checkpoint: Optional[str] = None,
                cfg_options: Optional[dict] = None,
                device: str = 'cpu',
                seed: Optional[int] = 0):
    """The model of a classifier, detector or segmentor config, in eval
    mode.

    ``Pretrained`` init_cfg entries are dropped (the weights are the
    checkpoint's, or the config's random initialisation without one). The
    initialisation draws from a generator seeded with ``seed`` (None: the
    global one), so that untrained models are reproducible; the caller's
    random state is left as it was.

    Returns:
        tuple: ``(model, cfg, report)``; ``report`` is None without a
        checkpoint, else as :func:`load_weights` returns it. The backbone is
        ``get_backbone(model)``.
    """
    cfg = load_config(config, cfg_options)
    scope = cfg.get('default_scope', None) or 'mmpretrain'
    init_default_scope(scope)
    try:
        registry = importlib.import_module(f'{scope}.registry').MODELS
    except ImportError:
        from mmcpvt.registry import MODELS as registry
    model_cfg = copy.deepcopy(cfg.model)
    _drop_pretrained(model_cfg)
    with quiet_logs(), torch.random.fork_rng(devices=[]):
        if seed is not None:
            torch.manual_seed(seed)
        model = registry.build(model_cfg)
        model.init_weights()
    report = None
    if checkpoint is not None:
        report = load_weights(model, checkpoint)
    return model.to(device).eval(), cfg, report


def get_backbone(model: nn.Module) -> nn.Module:
    """``model.backbone`` (classifier, detector, segmentor), or the model
    itself if it is a backbone."""
    return getattr(model, 'backbone', model)


def load_weights(model: nn.Module, checkpoint: str) -> dict:
    """Load a checkpoint into ``model`` and say how much of it fitted.

    The file (or URL) is read by mmengine's checkpoint loader; a checkpoint
    of the whole model (keys ``backbone.*``, as the runner saves) goes into
    the model, any other (an official or converted backbone) into the
    backbone, where the backbone's load-time converter applies. Loading is
    not strict, but tensors of the wrong shape and a checkpoint of which no
    backbone tensor fits are refused.

    Returns:
        dict: ``target`` ('model' or 'backbone'), ``loaded`` / ``total``
        (tensors of the target), ``backbone_loaded`` / ``backbone_total``,
        ``missing`` and ``unexpected`` (key lists).
    """
    from mmengine.runner.checkpoint import _load_checkpoint
    if '://' not in checkpoint and not osp.isfile(checkpoint):
        raise FileNotFoundError(f'checkpoint file not found: {checkpoint}')
    state = unwrap(_load_checkpoint(checkpoint, map_location='cpu'))
    if not isinstance(state, dict):
        raise ValueError(f'{checkpoint}: no state dict found in it')
    state = {re.sub(r'^module\.', '', k): v for k, v in state.items()}
    backbone = get_backbone(model)
    whole = backbone is not model and any(
        k.startswith('backbone.') for k in state)
    target = model if whole else backbone
    try:
        # torch's loader: returns the missing / unexpected keys after the
        # backbone's converting pre-hook and refuses shape mismatches
        result = target.load_state_dict(state, strict=False)
    except RuntimeError as e:
        raise RuntimeError(
            f'{checkpoint} does not fit the config\'s model '
            f'({type(backbone).__name__} arguments differ?):\n{e}') from e
    def counted(names):  # BN step counters are no weights
        return [k for k in names if 'num_batches_tracked' not in k]

    keys = counted(target.state_dict())
    missing = counted(result.missing_keys)
    prefix = 'backbone.' if whole else ''
    b_keys = [k for k in keys if k.startswith(prefix)]
    b_missing = [k for k in missing if k.startswith(prefix)]
    report = dict(
        target='model' if whole else 'backbone',
        loaded=len(keys) - len(missing),
        total=len(keys),
        backbone_loaded=len(b_keys) - len(b_missing),
        backbone_total=len(b_keys),
        missing=missing,
        unexpected=list(result.unexpected_keys))
    if report['backbone_loaded'] == 0:
        sample = ', '.join(list(state)[:3])
        raise ValueError(
            f'{checkpoint}: none of the {len(b_keys)} tensors of the '
            f'{type(backbone).__name__} backbone is in it (its keys: '
            f'{sample}, ...); is it a checkpoint of this config?')
    return report


def describe_load(report: Optional[dict], checkpoint: Optional[str]) -> str:
    """One or two lines on what a checkpoint gave."""
    if report is None:
        return ('no checkpoint: random weights (the config\'s '
                'initialisation)')
    text = (f'checkpoint {checkpoint}: {report["loaded"]}/{report["total"]} '
            f'tensors of the {report["target"]} loaded (backbone '
            f'{report["backbone_loaded"]}/{report["backbone_total"]}), '
            f'{len(report["unexpected"])} unused')
    b_missing = [
        k for k in report['missing']
        if report['target'] == 'backbone' or k.startswith('backbone.')
    ]
    if b_missing:
        text += (f'\n  warning: backbone tensors left random: '
                 f'{", ".join(b_missing[:5])}'
                 f'{", ..." if len(b_missing) > 5 else ""}')
    return text


# ----------------------------------------------------------------- images


def _preprocess(model: nn.Module, inputs: list, data_samples=None):
    """uint8 (3, H, W) images -> the model's normalised batch."""
    pre = getattr(model, 'data_preprocessor', None)
    if pre is None:
        return torch.stack(inputs).float()
    data = dict(inputs=inputs)
    if data_samples is not None:
        data['data_samples'] = data_samples
    with torch.no_grad():
        return pre(data, False)['inputs'].cpu()


def random_images(model: nn.Module,
                  num_images: int,
                  img_size: Sequence[int],
                  seed: int = 0) -> torch.Tensor:
    """``num_images`` uniform-noise images (uint8, from a generator seeded
    with ``seed``) through the model's data preprocessor: (N, C, H, W), C
    the input channels of the backbone's first convolution (3 if none)."""
    H, W = img_size
    channels = next((m.in_channels for m in get_backbone(model).modules()
                     if isinstance(m, nn.Conv2d)), 3)
    g = torch.Generator().manual_seed(seed)
    imgs = torch.randint(0, 256, (num_images, channels, H, W), generator=g,
                         dtype=torch.uint8)
    return _preprocess(model, list(imgs))


def default_img_size(cfg: Config) -> Tuple[int, int]:
    """The backbone's ``img_size`` if the config sets one, else 224."""
    size = cfg.model.get('backbone', {}).get('img_size', 224)
    return (size, size) if isinstance(size, int) else tuple(size)


def dataset_images(cfg: Config, model: nn.Module,
                   num_images: int) -> torch.Tensor:
    """The first ``num_images`` images of the config's test dataloader
    (dataset and pipeline), through the model's data preprocessor, as one
    batch (N, 3, H, W) (padded to a common size where the preprocessor
    pads, as detectors and segmentors do)."""
    from mmengine.runner import Runner
    loader_cfg = copy.deepcopy(cfg.get('test_dataloader', None))
    if not loader_cfg:
        raise ValueError('the config has no test_dataloader; use '
                         '--random-images')
    loader_cfg.update(batch_size=num_images, num_workers=0,
                      persistent_workers=False)
    loader_cfg.pop('prefetch_factor', None)
    try:
        loader = Runner.build_dataloader(loader_cfg, seed=0)
        data = next(iter(loader))
    except Exception as e:  # a missing data set fails in many ways
        root = loader_cfg.get('dataset', {}).get('data_root', '?')
        raise RuntimeError(
            f'could not read the config\'s test data (data_root {root!r}): '
            f'{type(e).__name__}: {e}\nPrepare the data set, or use '
            f'--random-images') from e
    got = len(data['inputs'])
    if got < num_images:
        print(f'note: the test set has {got} images, fewer than '
              f'{num_images} asked for', file=sys.stderr)
    return _preprocess(model, data['inputs'], data.get('data_samples'))


def image_from_file(cfg: Config, model: nn.Module, path: str):
    """One image file through the config's test pipeline (annotation
    loading left out) and the model's data preprocessor.

    Returns:
        tuple: ``(batch (1, 3, H, W), rgb (H, W, 3) uint8)``, the second the
        image as the model sees it, for display.
    """
    from mmengine.dataset import Compose
    if not osp.isfile(path):
        raise FileNotFoundError(f'image file not found: {path}')
    pipeline = copy.deepcopy(
        cfg.get('test_dataloader', {}).get('dataset', {}).get('pipeline'))
    if not pipeline:
        pipeline = cfg.get('test_pipeline', None)
    if not pipeline:
        raise ValueError('the config has no test pipeline '
                         '(test_dataloader.dataset.pipeline)')
    pipeline = [t for t in pipeline if 'LoadAnnotations' not in t['type']]
    packed = Compose(pipeline)(dict(img_path=path, img_id=0))
    batch = _preprocess(model, [packed['inputs']], [packed['data_samples']])
    return batch, to_display(model, batch[0])


def to_display(model: nn.Module, image: torch.Tensor):
    """A normalised (3, H, W) model input back to an (H, W, 3) uint8 RGB
    array, with the preprocessor's mean and std."""
    pre = getattr(model, 'data_preprocessor', None)
    x = image.detach().float().cpu()
    if pre is not None and getattr(pre, '_enable_normalize', False):
        x = x * pre.std.cpu() + pre.mean.cpu()
    # mmpretrain says to_rgb, mmdet / mmseg _channel_conversion; without
    # it the model sees the BGR order the image was loaded in
    if pre is not None and not getattr(pre, 'to_rgb', getattr(
            pre, '_channel_conversion', True)):
        x = x.flip(0)
    return x.clamp(0, 255).round().byte().permute(1, 2, 0).numpy()


def stderr_progress(what: str) -> Callable[[int, int], None]:
    """A ``progress(done, total)`` that prints ``what: done/total`` on
    stderr."""

    def progress(done, total):
        print(f'{what}: {done}/{total}', file=sys.stderr, flush=True)

    return progress
