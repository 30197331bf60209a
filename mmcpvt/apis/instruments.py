"""What position_probe.py, translation_equivariance.py and vis_attention.py
share: the model, the images, the blocks and the results file. Their
``USAGE_ERRORS`` say what the user gave that cannot be used."""
import copy
import json
import os
import os.path as osp
import sys
from typing import List, Optional

import torch
import torch.nn as nn

from mmcpvt.analysis.blocks import list_blocks, resolve_block
from mmcpvt.utils.checkpoint import require_file
from mmcpvt.utils.path import check_output
from .cli import check_options, non_negative, positive
from .model import build_model, get_backbone, input_channels

USAGE_ERRORS = (ValueError, FileNotFoundError, RuntimeError, TypeError)


def load(config: str, checkpoint: Optional[str], device: str,
         cfg_options: Optional[dict] = None):
    """``(model, backbone, cfg)``; a backbone without blocks is a
    TypeError. Says on stderr what the checkpoint gave."""
    if checkpoint is not None:  # before anything is built
        require_file(checkpoint, 'checkpoint')
    model, cfg, report = build_model(config, checkpoint, device,
                                     cfg_options=cfg_options)
    backbone = get_backbone(model)
    list_blocks(backbone)  # a TypeError for another kind of backbone
    if report is None:
        text = 'no checkpoint: random weights (the config\'s initialisation)'
    else:
        text = (f'checkpoint {checkpoint}: the {report["target"]}\'s '
                f'{report["loaded"]} tensors loaded')
    print(text, file=sys.stderr)
    return model, backbone, cfg


def backbone_blocks_images(config: str, checkpoint: Optional[str],
                           device: str, cfg_options: Optional[dict],
                           blocks: Optional[List[str]], border: int,
                           num_images: int, random: bool,
                           img_size: Optional[int], out: Optional[str],
                           out_example: str):
    """The backbone, the BlockInfo of ``blocks`` (``--block`` values; None:
    all) and the images (``random`` ones of side ``img_size``, else the
    test data) of a probe or equivariance run; options checked first."""
    check_options(non_negative, border=border)
    check_options(positive, num_images=num_images, img_size=img_size)
    if img_size and not random:
        raise ValueError('--img-size is for --random-images; the test data '
                         'come at the size of the config\'s pipeline')
    if out is not None:
        check_output('--out', out, out_example, [config, checkpoint])
    model, backbone, cfg = load(config, checkpoint, device, cfg_options)
    wanted = {resolve_block(backbone, s) for s in blocks or ()}
    infos = [i for i in list_blocks(backbone)
             if not wanted or i.index in wanted]
    if not random:
        print(f'reading {num_images} images of the test data...',
              file=sys.stderr)
        return backbone, infos, dataset_images(cfg, model, num_images)
    size = img_size or cfg.model.get('backbone', {}).get('img_size', 224)
    H, W = (size, size) if isinstance(size, int) else size
    print(f'{num_images} random {H}x{W} images', file=sys.stderr)
    return backbone, infos, random_images(model, num_images, (H, W))


def size_option(random: bool, images: torch.Tensor) -> str:
    """How the user set the size of ``images``, for error messages."""
    H, W = images.shape[-2:]
    if random:
        return f'--img-size {H}' if H == W else f'{H}x{W} --random-images'
    return f'the {H}x{W} images of the config\'s test pipeline'


def write_results(out: Optional[str], images: torch.Tensor, config: str,
                  checkpoint: Optional[str], random: bool, border: int,
                  **results) -> None:
    """The run's settings and ``results`` as JSON in ``out``, if given."""
    if not out:
        return
    os.makedirs(osp.dirname(out) or '.', exist_ok=True)
    with open(out, 'w') as f:
        json.dump(dict(config=config, checkpoint=checkpoint,
                       num_images=len(images), random_images=random,
                       border=border, **results), f, indent=2)
    print(f'wrote {out}', file=sys.stderr)


def preprocess(model: nn.Module, inputs: list, data_samples=None):
    """uint8 (C, H, W) images -> the model's normalised (padded) batch; a
    bare backbone's: stacked as float."""
    pre = getattr(model, 'data_preprocessor', None)
    if pre is None:
        return torch.stack(inputs).float()
    with torch.no_grad():
        return pre(dict(inputs=inputs, data_samples=data_samples),
                   False)['inputs'].cpu()


def random_images(model: nn.Module, num_images: int, img_size):
    """Uniform uint8 noise (seed 0), preprocessed: (N, C, H, W), C the input
    channels of the backbone's first convolution (3 if none)."""
    imgs = torch.randint(0, 256, (num_images, input_channels(
        get_backbone(model)), *img_size), dtype=torch.uint8,
        generator=torch.Generator().manual_seed(0))
    return preprocess(model, list(imgs))


def dataset_images(cfg, model: nn.Module, num_images: int) -> torch.Tensor:
    """The first ``num_images`` images of the config's test dataloader,
    preprocessed as one batch."""
    from mmengine.runner import Runner
    loader_cfg = copy.deepcopy(cfg.get('test_dataloader', None))
    if not loader_cfg:
        raise ValueError('the config has no test_dataloader; use '
                         '--random-images')
    loader_cfg.update(batch_size=num_images, num_workers=0,
                      persistent_workers=False)
    loader_cfg.pop('prefetch_factor', None)
    try:
        data = next(iter(Runner.build_dataloader(loader_cfg, seed=0)))
    except Exception as e:  # a missing data set fails in many ways
        root = loader_cfg.get('dataset', {}).get('data_root', '?')
        raise RuntimeError(
            f'could not read the config\'s test data (data_root {root!r}): '
            f'{type(e).__name__}: {e}\nPrepare the data set, or use '
            f'--random-images') from e
    if len(data['inputs']) < num_images:
        print(f'note: the test set has {len(data["inputs"])} images, fewer '
              f'than {num_images} asked for', file=sys.stderr)
    return preprocess(model, data['inputs'], data.get('data_samples'))
