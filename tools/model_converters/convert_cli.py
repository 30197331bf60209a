"""Command line and file handling shared by the ``*2mmcpvt.py`` converters.

Reads torch checkpoints (``.pth`` / ``.pt`` / ``.bin``, written by
``torch.save``) with ``weights_only=True``, and ``.safetensors`` files (timm's
hub format), which ``torch.load`` reads through the ``safetensors`` package.
"""
import argparse
import os.path as osp
import zipfile

import torch

from mmcpvt.utils.convert import CONVERTERS, unwrap

ALLOWED = ('torch checkpoints written by torch.save (.pth, .pt, .bin) and '
           '.safetensors files')


def _not_a_checkpoint(path: str):
    """What ``path`` holds if torch.load cannot read it, else None."""
    with open(path, 'rb') as f:
        head = f.read(16)
    if not head:
        return 'an empty file'
    if path.endswith('.safetensors'):
        # 8-byte little-endian header size, then the JSON header
        return None if head[8:9] == b'{' else (
            f'no safetensors header (first bytes {head!r})')
    if zipfile.is_zipfile(path):
        with zipfile.ZipFile(path) as z:
            names = z.namelist()
        if any(n.endswith('data.pkl') for n in names):
            return None
        return (f'a zip archive that is not a torch file (members: '
                f'{", ".join(names[:3])}{" ..." if len(names) > 3 else ""})')
    if head.startswith(b'\x80'):  # a pickle: torch's legacy format
        return None
    text = head.decode('utf-8', errors='replace')
    if all(c.isprintable() or c.isspace() for c in text):
        return f'text ({text!r} ...)'
    return f'unrecognised data (first bytes {head!r})'


def load_checkpoint(path: str) -> dict:
    """The checkpoint in ``path``, loaded without running pickled code."""
    if not osp.isfile(path):
        raise FileNotFoundError(f'no checkpoint at {path}')
    found = _not_a_checkpoint(path)
    if found:
        raise ValueError(f'{path} is not a checkpoint: found {found}. '
                         f'Allowed: {ALLOWED}.')
    try:
        return torch.load(path, map_location='cpu', weights_only=True)
    except Exception as e:  # the unpickler names the refused global
        raise ValueError(
            f'{path} cannot be loaded with torch.load(weights_only=True): '
            f'{e}. Re-save its state dict alone, e.g. '
            f'torch.save(ckpt["model"], path), in an environment you '
            f'trust.') from None


def convert_file(src: str, dst: str, family: str, **kwargs) -> str:
    """Convert the checkpoint file ``src`` of ``family`` into an mmcpvt
    classifier checkpoint at ``dst``; returns the report's summary."""
    checkpoint = unwrap(load_checkpoint(src))
    converted, report = CONVERTERS[family](checkpoint, **kwargs)
    torch.save({'state_dict': converted,
                'meta': {'converted_from': src, 'family': family}}, dst)
    return report.summary()


def cli(family: str, doc: str, argv=None):
    """The command line of ``tools/model_converters/<family>2mmcpvt.py``."""
    parser = argparse.ArgumentParser(
        description=doc, formatter_class=argparse.RawTextHelpFormatter)
    parser.add_argument(
        'src', help='official / timm checkpoint (.pth, .pt, .bin or '
        '.safetensors)')
    parser.add_argument('dst', help='where to write the mmcpvt checkpoint')
    if family == 'deit':
        parser.add_argument(
            '--drop-pos-embed', action='store_true',
            help='leave the learned position table out (warm start for '
            'CPVT)')
    args = vars(parser.parse_args(argv))
    src, dst = args.pop('src'), args.pop('dst')
    try:
        print(convert_file(src, dst, family, **args))
    except (FileNotFoundError, ValueError) as e:
        raise SystemExit(f'error: {e}')
    print(f'saved {dst}')
