"""Prepare a checkpoint for publishing, as OpenMMLab's ``publish_model.py``
does: keep only ``meta`` and ``state_dict`` (AdamW's state alone is twice
the weights), and put the first 8 hex digits of the file's sha256 into its
name, as ``torch.hub.load_state_dict_from_url(..., check_hash=True)``
verifies. The input is read with ``weights_only=True``; ``meta`` is kept as
it is (config text included); with EMAHook, the EMA weights are kept.

    python tools/model_converters/publish_model.py \\
        work_dirs/cpvt-tiny_4xb256_in1k/epoch_300.pth \\
        checkpoints/cpvt-tiny_in1k.pth
    # -> checkpoints/cpvt-tiny_in1k-1a2b3c4d.pth (printed last)
"""
import argparse
import hashlib
import io
import os.path as osp

import torch

from mmcpvt.utils.atomic import atomic_write
from mmcpvt.utils.checkpoint import read_checkpoint, state_dict_of
from mmcpvt.utils.path import check_output

SAVE_KEYS = ('meta', 'state_dict')


def publish(in_file: str, out_file: str, save_keys=SAVE_KEYS) -> str:
    """Write the published form of ``in_file`` next to ``out_file``, named
    ``<out_file without .pth>-<sha256[:8]>.pth``; returns that path."""
    stem = osp.splitext(osp.basename(in_file))[0]
    check_output('OUT_FILE', out_file, f'{stem}.pth', inputs=[in_file])
    checkpoint = read_checkpoint(in_file)
    state_dict = state_dict_of(checkpoint, in_file)
    if 'state_dict' not in checkpoint:  # a bare (converted) or official one
        checkpoint = dict(state_dict=state_dict)
    absent = [k for k in save_keys if k not in checkpoint]
    if absent:
        raise ValueError(f'--save-keys {" ".join(absent)}: {in_file} has no '
                         f'such key (it has: {", ".join(checkpoint)})')
    removed = [k for k in checkpoint if k not in save_keys]
    checkpoint = {k: v for k, v in checkpoint.items() if k in save_keys}
    if removed:
        print(f'removed: {", ".join(removed)} (kept: '
              f'{", ".join(checkpoint)}; --save-keys keeps others)')

    with io.BytesIO() as f:
        torch.save(checkpoint, f)
        data = f.getvalue()
    stem = out_file[:-len('.pth')] if out_file.endswith('.pth') else out_file
    final = f'{stem}-{hashlib.sha256(data).hexdigest()[:8]}.pth'
    atomic_write(data, final)  # never half a file under the final name
    return final


def parse_args(argv=None):
    parser = argparse.ArgumentParser(
        description='Strip a checkpoint to meta and state_dict and name it '
        'after its sha256, for publishing',
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog=__doc__)
    parser.add_argument('in_file', help='the checkpoint to publish')
    parser.add_argument(
        'out_file', help='the published file\'s name before its hash: '
        'OUT_STEM.pth becomes OUT_STEM-<sha256[:8]>.pth')
    parser.add_argument(
        '--save-keys', nargs='+', default=list(SAVE_KEYS),
        help='top-level keys to keep, state_dict among them. Defaults to '
        'meta state_dict.')
    args = parser.parse_args(argv)
    if 'state_dict' not in args.save_keys:  # a file without weights
        parser.error(f'--save-keys {" ".join(args.save_keys)}: keep '
                     f'state_dict too, the weights are what is published')
    return args


def main(argv=None):
    args = parse_args(argv)
    try:
        print(publish(args.in_file, args.out_file, args.save_keys))
    except (FileNotFoundError, ValueError) as e:  # CheckpointError included
        raise SystemExit(f'error: {e}')


if __name__ == '__main__':
    main()
