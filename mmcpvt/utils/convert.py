"""Converters from the official / timm / mmpretrain checkpoints to mmcpvt's
backbones: each maps a classification state dict of one family
(``BACKBONES``) to our keys (with ``with_head``, those of an mmpretrain
ImageClassifier) and reports what it mapped, what it dropped and why. The
backbones apply them at load time (a state-dict pre-hook), so a config can
point ``init_cfg`` straight at an official file.
"""
import re
import sys
from collections import Counter, OrderedDict, defaultdict
from dataclasses import dataclass, field
from typing import Callable, Dict, Tuple

import torch
from mmengine.utils import track_iter_progress

from .text import some


# A key that only each family's checkpoints have.
SIGNATURES = {
    # official / timm Twins-PCPVT, or mmpretrain's PCPVT
    'twins': r'pos_block\.\d+\.proj\.0\.weight'
             r'|(backbone\.)?position_encodings\.\d+\.proj\.weight',
    'deit': r'blocks\.\d+\.attn\.qkv\.weight',
    'swin': r'layers\.\d+\.blocks\.\d+\.attn\.qkv\.weight',
    'mmcpvt': r'(backbone\.)?(layers|stages)\.\d+\.(\d+\.)?ln1\.weight',
}
# The backbone each family's checkpoints are for, and its converter tool.
BACKBONES = {'twins': 'PVTPEG', 'deit': 'CPVT', 'swin': 'SwinPEG'}
TOOLS = {f: f'tools/model_converters/{f}2mmcpvt.py' for f in BACKBONES}
# Per family: what a complete checkpoint has beyond its signature key, and
# the key of a relative that shares the signature but not the network.
COMPLETE = {
    'twins': {r'patch_embeds\.\d+\.proj\.weight':
              'the patch embeddings (one per stage)',
              r'blocks\.\d+\.\d+\.attn\.q\.weight': 'the transformer blocks'},
    'deit': {r'patch_embed\.proj\.weight': 'the patch embedding'},
    'swin': {r'patch_embed\.proj\.weight': 'the patch embedding'},
}
RELATIVES = {
    'twins': (r'blocks\.\d+\.\d+\.attn\.qkv\.weight',
              'a Twins-SVT (ALTGVT) checkpoint: its locally-grouped attention '
              'has no counterpart in PVTPEG; only Twins-PCPVT converts'),
    'deit': (r'blocks\.\d+\.ls[12]\.(gamma|weight)',
             'a ViT with layer scale (DeiT III, CaiT), which CPVT lacks'),
    'swin': (r'.*\.(logit_scale|cpb_mlp\..*)',
             "a Swin V2 checkpoint: SwinPEG is Swin (V1), without V2's "
             'scaled cosine attention'),
}

# Renaming rules, ``(pattern, repl)``: the first whose pattern matches the
# whole key gives the new key (``repl``: a ``re`` template or a function of
# the match); a key that no rule matches has no counterpart in mmcpvt. Each
# converter puts its family's rules before these, shared by all three.
HEAD = r'head\.(fc\.)?(weight|bias)'  # timm's Swin: head.fc
BLOCK = r'((?:norm[12]|attn|mlp\.fc[12])\..*)'  # what a block holds
COMMON_RULES = [
    (HEAD, r'head.fc.\2'),
    (r'(patch_embeds?(?:\.\d+)?)\.proj\.(.*)', r'\1.projection.\2'),
    (r'(patch_embeds?(?:\.\d+)?\.norm\..*|norm\..*|cls_token)', r'\1'),
]
# Inside a transformer block: timm / official names -> ours (Swin's bias
# table is the block's in SwinPEG, not its attention's).
BLOCK_NAMES = {'.norm1.': '.ln1.', '.norm2.': '.ln2.',
               '.mlp.fc1.': '.ffn.layers.0.0.', '.mlp.fc2.': '.ffn.layers.1.',
               '.attn.relative_position_bias_table':
               '.relative_position_bias_table'}
# mmpretrain's PCPVT names -> the official ones, applied in order, so that
# one set of rules converts both (mmpretrain republishes the authors' weights
# as ``twins-pcpvt-*_3rdparty_*_in1k``, converted from timm's).
MMPRETRAIN_TWINS = [
    (r'^backbone\.', ''),
    (r'^position_encodings\.(\d+)\.proj\.', r'pos_block.\1.proj.0.'),
    (r'^patch_embeds\.(\d+)\.projection\.', r'patch_embeds.\1.proj.'),
    (r'^stages\.(\d+)\.(\d+)\.', r'blocks.\1.\2.'),
    (r'\.ffn\.layers\.0\.0\.', '.mlp.fc1.'),
    (r'\.ffn\.layers\.1\.', '.mlp.fc2.'),
]


@dataclass
class ConversionReport:
    """What a converter did: ``mapped`` (old key -> new key) and
    ``dropped`` (old key -> why)."""
    family: str
    mapped: Dict[str, str] = field(default_factory=dict)
    dropped: Dict[str, str] = field(default_factory=dict)

    def summary(self) -> str:
        lines = [f'{self.family}: mapped {len(self.mapped)} tensors, '
                 f'dropped {len(self.dropped)}']
        reasons = defaultdict(list)
        for key, why in self.dropped.items():
            reasons[why].append(key)
        for why, keys in reasons.items():
            lines.append(f'  dropped {len(keys)} ({why}): {some(keys, 4)}')
        return '\n'.join(lines)


def detect_family(state_dict) -> str:
    """The family whose signature key the state dict has, or 'unknown'."""
    for family, pattern in SIGNATURES.items():
        if any(re.fullmatch(pattern, k) for k in state_dict):
            return family
    return 'unknown'


def _groups(keys) -> str:
    """'blocks (30), pos_block (4)': keys counted by their first name."""
    count = Counter(k.split('.')[0] for k in keys)
    return ', '.join(f'{g} ({n})' for g, n in count.items())


def _check(state_dict, family: str):
    """Refuse a state dict of another family, of a relative of ``family``
    or lacking what the converter needs, naming what the file holds."""
    found = detect_family(state_dict)
    relative, what = RELATIVES[family]
    key = next((k for k in state_dict if re.fullmatch(relative, k)), None)
    missing = [(pattern, part) for pattern, part in COMPLETE[family].items()
               if not any(re.fullmatch(pattern, k) for k in state_dict)]
    if found != family:
        hint = (f'; use {TOOLS[found]}' if found in TOOLS else
                '; it is already in mmcpvt format' if found == 'mmcpvt'
                else '')
        problem = (f'expected a {family} checkpoint (a key like '
                   f'{SIGNATURES[family]!r}), but this looks like '
                   f'{found}{hint}')
    elif key is not None:
        problem = f'this {family} checkpoint is {what} (it has {key!r})'
    elif missing:
        pattern, part = missing[0]
        example = re.sub(r'\\d\+', '0', pattern).replace('\\', '')
        problem = (f'this {family} checkpoint lacks {part}: expected keys '
                   f'like {example!r}, found none. A partial or damaged '
                   'file? Convert the complete official / timm release')
    else:
        return
    raise ValueError(f'{problem}; the file has {len(state_dict)} tensors: '
                     f'{_groups(state_dict)} (e.g. {some(state_dict)})')


def _rename(key: str, rules: list):
    """The new name of ``key`` by ``rules`` and ``COMMON_RULES``, or None."""
    for pattern, repl in rules + COMMON_RULES:
        m = re.fullmatch(pattern, key)
        if m:
            new = repl(m) if callable(repl) else m.expand(repl)
            for old, ours in BLOCK_NAMES.items():
                new = new.replace(old, ours)
            return new
    return None


def _convert(state_dict, family: str, rules: list, drop: list,
             with_head: bool, progress: bool):
    """Check ``state_dict`` and rename its keys, leaving out those that
    match a ``(pattern, why)`` of ``drop``; with ``progress``, a progress bar
    over the tensors. Returns ``(the converted state dict, a report)``."""
    _check(state_dict, family)
    report = ConversionReport(family)
    if not with_head:
        drop = drop + [(HEAD, 'classifier head (backbone only)')]
    items = list(state_dict.items())
    if progress:  # asked for by the converter tools; here: it is this loop
        items = track_iter_progress(items, file=sys.stdout)
    out = OrderedDict()
    for key, value in items:
        why = next((w for p, w in drop if re.fullmatch(p, key)), None)
        new = None if why else _rename(key, rules)
        if new is None:
            report.dropped[key] = why or 'no counterpart in mmcpvt'
            continue
        out[new] = value
        report.mapped[key] = new
    if with_head:  # the keys of an mmpretrain ImageClassifier
        out = OrderedDict((k if k.startswith('head.') else f'backbone.{k}',
                           v) for k, v in out.items())
    return out, report


def _official_twins_names(state_dict) -> Tuple[dict, Dict[str, str]]:
    """``state_dict`` with mmpretrain's PCPVT names made official ones, and
    {official name: the file's name} (empty for an official / timm file)."""
    if not any(re.fullmatch(r'(backbone\.)?position_encodings\.\d+\..*', k)
               for k in state_dict):
        return state_dict, {}
    renamed, original = OrderedDict(), {}
    for key, value in state_dict.items():
        new = key
        for pattern, repl in MMPRETRAIN_TWINS:
            new = re.sub(pattern, repl, new)
        renamed[new], original[new] = value, key
    return renamed, original


def convert_twins(state_dict, with_head: bool = True, progress: bool = False
                  ) -> Tuple[OrderedDict, ConversionReport]:
    """Official Twins PCPVT / timm ``twins_pcpvt_*`` / mmpretrain ``PCPVT``
    -> PVTPEG keys; the report names the file's own keys."""
    state_dict, original = _official_twins_names(state_dict)
    num_stages = len({k.split('.')[1] for k in state_dict
                      if k.startswith('patch_embeds.')})
    rules = [
        (r'pos_block\.(\d+)\.(.*)', r'pegs.\1.0.\2'),
        (r'norm\.(.*)', rf'norms.{num_stages - 1}.\1'),
        (r'norm_after_stage(\d+)\.(.*)', r'norms.\1.\2'),  # mmpretrain's
        (r'blocks\.(\d+)\.(\d+)\.' + BLOCK, r'stages.\1.\2.\3'),
    ]
    out, report = _convert(state_dict, 'twins', rules, [], with_head,
                           progress)
    # Stages without spatial reduction: our attention fuses q and kv.
    for key in [k for k in out if k.endswith('.attn.q.weight')]:
        stem = key[:-len('q.weight')]
        if stem + 'sr.weight' in out:
            continue
        for kind in ('weight', 'bias'):
            if f'{stem}q.{kind}' in out:
                out[f'{stem}qkv.{kind}'] = torch.cat(
                    (out.pop(f'{stem}q.{kind}'), out.pop(f'{stem}kv.{kind}')))
    report.mapped = {original.get(k, k): v for k, v in report.mapped.items()}
    report.dropped = {original.get(k, k): v
                      for k, v in report.dropped.items()}
    return out, report


def convert_deit(state_dict, with_head: bool = True,
                 drop_pos_embed: bool = False, progress: bool = False
                 ) -> Tuple[OrderedDict, ConversionReport]:
    """Official DeiT / timm ``deit_*`` -> CPVT keys (``pos_embed='learned'``
    exactly; with ``drop_pos_embed``, a warm start for CPVT without it).

    Distilled DeiT's distillation token and head are dropped.
    """
    rules = [(r'pos_embed', 'pos_embed.pos_embed'),
             (r'blocks\.(\d+)\.' + BLOCK, r'layers.\1.\2')]
    drop = [(r'dist_token|head_dist\..*', 'distillation token / head'),
            (r'fc_norm\..*', 'GAP norm of ViT variants')]
    if drop_pos_embed:
        drop.append((r'pos_embed', 'learned position table removed '
                     '(--drop-pos-embed): CPVT uses PEGs'))
    if 'dist_token' in state_dict and 'pos_embed' in state_dict:
        # distilled DeiT: (1, 2 + N, C) -> drop the distillation slot
        state_dict, pe = dict(state_dict), state_dict['pos_embed']
        state_dict['pos_embed'] = torch.cat((pe[:, :1], pe[:, 2:]), 1)
    return _convert(state_dict, 'deit', rules, drop, with_head, progress)


def convert_swin(state_dict, with_head: bool = True, progress: bool = False
                 ) -> Tuple[OrderedDict, ConversionReport]:
    """Official Swin / timm ``swin_*`` -> SwinPEG keys.

    timm (1.x) puts the patch merging at the start of stage i > 0, the
    official code at the end of stage i < last; both map to
    ``downsamples.i``. The new PEG weights are not in the checkpoint.
    """
    shift = 0 if 'layers.0.downsample.reduction.weight' in state_dict else -1
    rules = [
        (r'layers\.(\d+)\.downsample\.(.*)',
         lambda m: f'downsamples.{int(m[1]) + shift}.{m[2]}'),
        (r'layers\.(\d+)\.blocks\.(\d+)\.' + BLOCK, r'stages.\1.\2.\3'),
    ]
    drop = [(r'.*relative_position_index|.*attn_mask',
             'buffer, recomputed by SwinPEG')]
    return _convert(state_dict, 'swin', rules, drop, with_head, progress)


CONVERTERS: Dict[str, Callable] = {
    'twins': convert_twins,
    'deit': convert_deit,
    'swin': convert_swin,
}
