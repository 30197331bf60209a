"""The file handling of ``tools/model_converters/`` (the key conversions:
:mod:`mmcpvt.utils.convert`): torch checkpoints read with
``weights_only=True`` and ``.safetensors`` files (timm's hub format) in,
holding a state dict; the destination checked before anything is read and
written atomically (never half a file)."""
import io
import os.path as osp

import torch

from mmcpvt.utils.atomic import atomic_write
from mmcpvt.utils.checkpoint import read_checkpoint, state_dict_of
from mmcpvt.utils.convert import CONVERTERS
from mmcpvt.utils.path import check_output

# From this size on, the conversion shows a progress bar over the tensors
# (official Swin-B / DeiT-B files: 350 MB): smaller ones convert in a blink
# and print only the report.
PROGRESS_MIN_BYTES = 100 * 2**20


def convert_file(src: str, dst: str, family: str, **kwargs) -> str:
    """Convert the checkpoint file ``src`` of ``family`` into an mmcpvt
    classifier checkpoint at ``dst`` (a progress bar over the tensors from
    ``PROGRESS_MIN_BYTES`` on); returns the report and where it saved.
    SystemExit for a file that it cannot convert."""
    try:
        stem = osp.splitext(osp.basename(src))[0]
        check_output('dst', dst, f'{stem}_mmcpvt.pth', inputs=[src])
        checkpoint = state_dict_of(read_checkpoint(src), src)
        big = osp.isfile(src) and osp.getsize(src) >= PROGRESS_MIN_BYTES
        converted, report = CONVERTERS[family](checkpoint, progress=big,
                                               **kwargs)
    except (FileNotFoundError, ValueError) as e:  # CheckpointError included
        raise SystemExit(f'error: {e}')
    with io.BytesIO() as f:
        torch.save({'state_dict': converted,
                    'meta': {'converted_from': src, 'family': family}}, f)
        atomic_write(f.getvalue(), dst)
    return f'{report.summary()}\nsaved {dst}'
