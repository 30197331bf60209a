"""Converters from the official / timm checkpoints to mmcpvt's backbones.

Each converter maps a classification state dict of one family to our keys and
returns a :class:`ConversionReport` that says what was mapped and what was
dropped and why. Backbones apply the same converters at load time (a
state-dict pre-hook), so a config can point ``init_cfg`` straight at an
official file; ``TOOLS`` names the command-line converter of each family.
File handling (reading, checking, writing) is the tools' part:
``tools/model_converters/convert_cli.py``.

Families:
    twins: official Twins PCPVT / timm ``twins_pcpvt_*`` -> ``PVTPEG``
    deit: official DeiT / timm ``deit_*`` / ``vit_*`` -> ``CPVT``
    swin: official Swin / timm ``swin_*`` -> ``SwinPEG``
"""
import re
from collections import Counter, OrderedDict
from dataclasses import dataclass, field
from typing import Callable, Dict, List, Tuple

import torch

# A key that only each family's checkpoints have.
SIGNATURES = {
    'twins': re.compile(r'^pos_block\.\d+\.proj\.0\.weight$'),
    'deit': re.compile(r'^blocks\.\d+\.attn\.qkv\.weight$'),
    'swin': re.compile(r'^layers\.\d+\.blocks\.\d+\.attn\.qkv\.weight$'),
    'mmcpvt': re.compile(r'^(backbone\.)?(layers|stages)\.\d+\.(\d+\.)?ln1'
                         r'\.weight$'),
}
# The backbone each family's checkpoints are for.
BACKBONES = {'twins': 'PVTPEG', 'deit': 'CPVT', 'swin': 'SwinPEG'}
TOOLS = {
    'twins': 'tools/model_converters/twins2mmcpvt.py',
    'deit': 'tools/model_converters/deit2mmcpvt.py',
    'swin': 'tools/model_converters/swin2mmcpvt.py',
}


@dataclass
class ConversionReport:
    family: str
    mapped: Dict[str, str] = field(default_factory=dict)
    dropped: Dict[str, str] = field(default_factory=dict)

    def summary(self) -> str:
        lines = [f'{self.family}: mapped {len(self.mapped)} tensors, '
                 f'dropped {len(self.dropped)}']
        reasons = {}
        for key, why in self.dropped.items():
            reasons.setdefault(why, []).append(key)
        for why, keys in reasons.items():
            shown = ', '.join(keys[:4]) + (' ...' if len(keys) > 4 else '')
            lines.append(f'  dropped {len(keys)} ({why}): {shown}')
        return '\n'.join(lines)


def detect_family(state_dict) -> str:
    """The family whose signature key the state dict has, or 'unknown'."""
    for family, pattern in SIGNATURES.items():
        if any(pattern.match(k) for k in state_dict):
            return family
    return 'unknown'


def unwrap(checkpoint) -> dict:
    """The state dict inside an official, timm or mmengine checkpoint
    (``{'model': ...}`` in the DeiT / Swin / Twins releases)."""
    for key in ('state_dict', 'model', 'model_ema', 'module'):
        if isinstance(checkpoint, dict) and isinstance(
                checkpoint.get(key), dict):
            return checkpoint[key]
    return checkpoint


# What a complete checkpoint of each family has beyond its signature key:
# (pattern, what it is, an example key). A file without them (a partial
# save, a checkpoint of a relative) cannot be converted.
REQUIRED = {
    'twins': [(r'patch_embeds\.\d+\.proj\.weight',
               'the patch embeddings (one per stage)',
               'patch_embeds.0.proj.weight'),
              (r'blocks\.\d+\.\d+\.attn\.q\.weight',
               'the transformer blocks', 'blocks.0.0.attn.q.weight')],
    'deit': [(r'patch_embed\.proj\.weight', 'the patch embedding',
              'patch_embed.proj.weight')],
    'swin': [(r'patch_embed\.proj\.weight', 'the patch embedding',
              'patch_embed.proj.weight')],
}
# Keys of a relative that shares the signature but not the network: such a
# file would convert into nonsense. (pattern, what the file is)
RELATIVES = {
    'twins': [(r'blocks\.\d+\.\d+\.attn\.qkv\.weight',
               'a Twins-SVT (ALTGVT) checkpoint: its locally-grouped '
               'attention has no counterpart in PVTPEG; only Twins-PCPVT '
               'converts')],
    'deit': [(r'blocks\.\d+\.ls[12]\.(gamma|weight)',
              'a ViT with layer scale (DeiT III, CaiT): CPVT\'s blocks have '
              'none')],
    'swin': [(r'.*\.(logit_scale|cpb_mlp\..*)',
              'a Swin V2 checkpoint: SwinPEG is Swin (V1), without V2\'s '
              'scaled cosine attention')],
}


def _contents(state_dict) -> str:
    """'blocks (30), pos_block (4)' and a few keys: what a file holds."""
    groups = Counter(k.split('.')[0] for k in state_dict)
    sample = ', '.join(list(state_dict)[:3])
    return (f'{len(state_dict)} tensors: '
            f'{", ".join(f"{g} ({n})" for g, n in groups.items())} '
            f'(e.g. {sample}, ...)')


def _check_family(state_dict, expected: str):
    family = detect_family(state_dict)
    if family == expected:
        _check_complete(state_dict, expected)
        return
    hint = (f'; use {TOOLS[family]}' if family in TOOLS else
            '; it is already in mmcpvt format' if family == 'mmcpvt' else '')
    sample = ', '.join(list(state_dict)[:3])
    raise ValueError(
        f'expected a {expected} checkpoint (a key like '
        f'{SIGNATURES[expected].pattern!r}), but this looks like '
        f'{family} (keys {sample}, ...){hint}')


def _check_complete(state_dict, family: str):
    """Refuse a file of ``family`` that lacks what the converter needs, or
    that is a relative's (see ``REQUIRED``, ``RELATIVES``)."""
    for pattern, what in RELATIVES[family]:
        found = next((k for k in state_dict if re.fullmatch(pattern, k)),
                     None)
        if found:
            raise ValueError(
                f'this {family} checkpoint is {what} (it has {found!r}); the '
                f'file has {_contents(state_dict)}')
    for pattern, what, example in REQUIRED[family]:
        if not any(re.fullmatch(pattern, k) for k in state_dict):
            raise ValueError(
                f'this {family} checkpoint lacks {what}: expected keys '
                f'like {example!r}, found none; the '
                f'file has {_contents(state_dict)}. A partial or damaged '
                f'file? Convert the complete official / timm release.')


def _apply_rules(state_dict, rules: list, report: ConversionReport,
                 drop: List[Tuple[str, str]], progress: bool = False):
    """Rename keys by the first ``(pattern, repl)`` rule that matches the
    whole key; ``repl`` is a ``re`` template or a function of the match
    returning the new key (None: no counterpart). With ``progress``, a
    progress bar over the tensors."""
    out = OrderedDict()
    items = list(state_dict.items())
    # progress: asked for by the converter tools only; stays: it is this loop
    if progress:
        import sys

        from mmengine.utils import track_iter_progress
        items = track_iter_progress(items, file=sys.stdout)
    for key, value in items:
        why = next((w for p, w in drop if re.fullmatch(p, key)), None)
        if why is not None:
            report.dropped[key] = why
            continue
        new = None
        for pattern, repl in rules:
            m = re.fullmatch(pattern, key)
            if m:
                new = repl(m) if callable(repl) else m.expand(repl)
                break
        if new is None:
            report.dropped[key] = 'no counterpart in mmcpvt'
            continue
        out[new] = value
        report.mapped[key] = new
    return out


# Inside a transformer block: timm / official names -> ours.
BLOCK_SUFFIXES = [('norm1.', 'ln1.'), ('norm2.', 'ln2.'),
                  ('mlp.fc1.', 'ffn.layers.0.0.'),
                  ('mlp.fc2.', 'ffn.layers.1.'), ('attn.', 'attn.')]


def _block_key(prefix: str, suffix: str):
    for old, new in BLOCK_SUFFIXES:
        if suffix.startswith(old):
            return prefix + new + suffix[len(old):]
    return None


# The classifier of each family (timm's Swin: ``head.fc``) -> mmpretrain's.
HEAD_KEYS = {
    'head.weight': 'head.fc.weight', 'head.bias': 'head.fc.bias',
    'head.fc.weight': 'head.fc.weight', 'head.fc.bias': 'head.fc.bias'
}


def _start(state_dict, family: str, with_head: bool):
    """Check that ``state_dict`` is a complete checkpoint of ``family`` and
    move its classifier to mmpretrain's ``head.fc`` (or drop it). Returns
    ``(the rest, the head, a new report)``."""
    _check_family(state_dict, family)
    report = ConversionReport(family)
    head = OrderedDict()
    for key, new in HEAD_KEYS.items():
        if key in state_dict:
            if with_head:
                head[new] = state_dict[key]
                report.mapped[key] = new
            else:
                report.dropped[key] = 'classifier head (backbone only)'
    rest = OrderedDict(
        (k, v) for k, v in state_dict.items() if k not in HEAD_KEYS)
    return rest, head, report


def convert_twins(state_dict, with_head: bool = True, progress: bool = False
                  ) -> Tuple[OrderedDict, ConversionReport]:
    """Official Twins PCPVT / timm ``twins_pcpvt_*`` -> PVTPEG keys.

    With ``with_head``, the classifier goes to ``head.fc.*`` and backbone
    keys get the ``backbone.`` prefix (an mmpretrain ImageClassifier);
    otherwise the bare backbone keys are returned.
    """
    state_dict, head, report = _start(state_dict, 'twins', with_head)
    num_stages = 1 + max(
        int(k.split('.')[1]) for k in state_dict
        if k.startswith('patch_embeds.'))
    rules = [
        (r'patch_embeds\.(\d+)\.proj\.(.*)', r'patch_embeds.\1.projection.\2'),
        (r'patch_embeds\.(\d+)\.norm\.(.*)', r'patch_embeds.\1.norm.\2'),
        (r'pos_block\.(\d+)\.(.*)', r'pegs.\1.0.\2'),
        (r'norm\.(.*)', rf'norms.{num_stages - 1}.\1'),
        (r'blocks\.(\d+)\.(\d+)\.(.*)',
         lambda m: _block_key(f'stages.{m[1]}.{m[2]}.', m[3])),
    ]
    out = _apply_rules(state_dict, rules, report, drop=[], progress=progress)
    # Stages without spatial reduction: our attention fuses q and kv.
    for q_key in [k for k in out if re.match(r'.*\.attn\.q\.weight$', k)]:
        stem = q_key[:-len('q.weight')]
        if stem + 'sr.weight' in out:
            continue
        for kind in ('weight', 'bias'):
            if stem + f'q.{kind}' in out:
                out[stem + f'qkv.{kind}'] = torch.cat(
                    (out.pop(stem + f'q.{kind}'),
                     out.pop(stem + f'kv.{kind}')))
    return _finish(out, head, with_head), report


def convert_deit(state_dict, with_head: bool = True,
                 drop_pos_embed: bool = False, progress: bool = False
                 ) -> Tuple[OrderedDict, ConversionReport]:
    """Official DeiT / timm ``deit_*`` -> CPVT keys (``pos_embed='learned'``
    exactly; with ``drop_pos_embed``, a warm start for CPVT without it).

    Distilled DeiT's distillation token and head are dropped.
    """
    state_dict, head, report = _start(state_dict, 'deit', with_head)
    rules = [
        (r'cls_token', 'cls_token'),
        (r'pos_embed', 'pos_embed.pos_embed'),
        (r'patch_embed\.proj\.(.*)', r'patch_embed.projection.\1'),
        (r'norm\.(.*)', r'norm.\1'),
        (r'blocks\.(\d+)\.(.*)',
         lambda m: _block_key(f'layers.{m[1]}.', m[2])),
    ]
    drop = [(r'dist_token|head_dist\..*', 'distillation token / head'),
            (r'fc_norm\..*', 'GAP norm of ViT variants')]
    if drop_pos_embed:
        drop.append((r'pos_embed', 'learned position table removed '
                     '(--drop-pos-embed): CPVT uses PEGs'))
    out = _apply_rules(state_dict, rules, report, drop, progress)
    if 'pos_embed.pos_embed' in out and out['pos_embed.pos_embed'].shape[
            1] % 2 == 0 and 'dist_token' in report.dropped:
        # distilled DeiT: (1, 2 + N, C) -> drop the distillation slot
        pe = out['pos_embed.pos_embed']
        out['pos_embed.pos_embed'] = torch.cat((pe[:, :1], pe[:, 2:]), 1)
    return _finish(out, head, with_head), report


def convert_swin(state_dict, with_head: bool = True, progress: bool = False
                 ) -> Tuple[OrderedDict, ConversionReport]:
    """Official Swin / timm ``swin_*`` -> SwinPEG keys.

    timm (1.x) puts the patch merging at the start of stage i > 0, the
    official code at the end of stage i < last; both map to
    ``downsamples.i``. The new PEG weights are not in the checkpoint.
    """
    state_dict, head, report = _start(state_dict, 'swin', with_head)
    official = 'layers.0.downsample.reduction.weight' in state_dict
    shift = 0 if official else -1

    def downsample(m):
        return f'downsamples.{int(m.group(1)) + shift}.{m.group(2)}'

    rules = [
        (r'patch_embed\.proj\.(.*)', r'patch_embed.projection.\1'),
        (r'patch_embed\.norm\.(.*)', r'patch_embed.norm.\1'),
        (r'layers\.(\d+)\.blocks\.(\d+)\.attn\.relative_position_bias_table',
         r'stages.\1.\2.relative_position_bias_table'),
        (r'norm\.(.*)', r'norm.\1'),
        (r'layers\.(\d+)\.blocks\.(\d+)\.(.*)',
         lambda m: _block_key(f'stages.{m[1]}.{m[2]}.', m[3])),
    ]
    drop = [(r'.*relative_position_index|.*attn_mask',
             'buffer, recomputed by SwinPEG')]
    merged = OrderedDict()
    for key in list(state_dict):
        m = re.match(r'layers\.(\d+)\.downsample\.(.*)', key)
        if m:
            merged[downsample(m)] = state_dict[key]
            report.mapped[key] = downsample(m)
    rest = OrderedDict((k, v) for k, v in state_dict.items()
                       if k not in report.mapped)
    out = _apply_rules(rest, rules, report, drop, progress)
    out.update(merged)
    return _finish(out, head, with_head), report


def _finish(backbone: OrderedDict, head: OrderedDict, with_head: bool):
    if not with_head:
        return backbone
    out = OrderedDict((f'backbone.{k}', v) for k, v in backbone.items())
    out.update(head)
    return out


CONVERTERS: Dict[str, Callable] = {
    'twins': convert_twins,
    'deit': convert_deit,
    'swin': convert_swin,
}

