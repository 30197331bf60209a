"""Loading a checkpoint into a model (:func:`load_checkpoint`) and whether
its tensors fit (:func:`check_state_dict_fits`, :class:`KeyMatch`: what
does not fit and why it most likely does not).

Why not only mmengine's ``load_state_dict``: it logs what does not fit and
loads the rest, so a checkpoint of another model trains or tests on at
random weights (a classifier checkpoint gave a detector mAP 0.000,
tests/test_utils/test_checkpoint_safety.py); here it is refused, with the
likely cause.
"""
import re
from collections import Counter
from typing import List, Mapping, Optional, Tuple

import torch.nn as nn
from mmengine.runner import CheckpointLoader

from .checkpoint import (CheckpointError, CheckpointMismatchError,
                         check_checkpoint, safe_load, unwrap,
                         weights_only_loads)
from .convert import BACKBONES, TOOLS, _groups, detect_family
from .text import some


def _shape(value):
    shape = getattr(value, 'shape', None)
    return None if shape is None else tuple(shape)


def _block(key: str) -> Optional[str]:
    """The numbered block a key belongs to: 'layers.2' of
    'layers.2.ln1.weight', 'stages.0.2' of 'stages.0.2.attn.kv.bias'; None
    for a key outside numbered blocks."""
    block = re.match(r'(?:[^.]+\.)*?\d+(?:\.\d+)*(?=\.|$)', key)
    return block and block.group()


def _lone_blocks(keys, other) -> List[str]:
    """The blocks of ``keys`` of which ``other`` has no key, where ``other``
    has blocks beside them (the same list: 'layers.2' beside 'layers.0'):
    another depth, not a new module ('pegs.0' where ``other`` has no PEG).
    """
    mine = {b for b in map(_block, keys) if b}
    theirs = {b for b in map(_block, other) if b}
    beside = {b.rsplit('.', 1)[0] for b in theirs}
    return sorted((b for b in mine - theirs if b.rsplit('.', 1)[0] in beside),
                  key=lambda b: [int(p) if p.isdigit() else p
                                 for p in b.split('.')])


def _guess_prefix(expected, offered) -> Optional[Tuple[str, str, int]]:
    """A prefix that would make the offered keys fit: ``('strip', p, n)``
    when the offered keys carry ``p`` too many, ``('add', p, n)`` when they
    lack it; ``n`` keys would then fit."""
    expected, offered = set(expected), set(offered)
    strip, add = Counter(), Counter()
    for keys, other, count in ((offered, expected, strip),
                               (expected, offered, add)):
        for k in keys:
            parts = k.split('.')
            for i in range(1, len(parts)):
                if '.'.join(parts[i:]) in other:
                    count['.'.join(parts[:i]) + '.'] += 1
                    break
    best = [(how, *c.most_common(1)[0]) for how, c in (('strip', strip),
                                                       ('add', add)) if c]
    return max(best, key=lambda b: b[2]) if best else None


class KeyMatch:
    """How the tensors ``offered`` fit those ``expected`` (both name ->
    tensor): ``matched``, ``missing`` (not offered), ``wrong_shape``
    (offered with another shape) and ``unexpected`` (offered, not expected)
    key lists. BatchNorm step counters are not counted."""

    def __init__(self, expected: Mapping, offered: Mapping):
        self.expected = {k: _shape(v) for k, v in expected.items()
                         if not k.endswith('num_batches_tracked')}
        self.offered = {k: _shape(v) for k, v in offered.items()}
        found = [k for k in self.expected if k in self.offered]
        self.missing = [k for k in self.expected if k not in self.offered]
        self.matched = [k for k in found
                        if self.offered[k] == self.expected[k]]
        self.wrong_shape = [k for k in found
                            if self.offered[k] != self.expected[k]]
        self.unexpected = [k for k in self.offered if k not in self.expected
                           and not k.endswith('num_batches_tracked')]
        # whole blocks beside blocks of the same list: another depth
        self.missing_blocks = _lone_blocks(self.missing, self.offered)
        self.extra_blocks = _lone_blocks(self.unexpected, self.expected)
        self.total = len(self.expected)

    def details(self, prefix: str = '') -> str:
        """The missing, wrong-shape and unexpected keys: counts and a few
        examples, one kind a line."""
        lines = []
        if self.missing:
            lines.append(f'missing {len(self.missing)}: '
                         f'{_groups(self.missing)} (e.g. '
                         f'{some(prefix + k for k in self.missing)})')
        if self.wrong_shape:
            shown = ', '.join(
                f'{prefix}{k}: checkpoint {self.offered[k]}, model '
                f'{self.expected[k]}' for k in self.wrong_shape[:2])
            more = ', ...' if len(self.wrong_shape) > 2 else ''
            lines.append(f'of another shape {len(self.wrong_shape)} (e.g. '
                         f'{shown}{more})')
        if self.unexpected:
            lines.append(f'in the checkpoint, not in the model '
                         f'{len(self.unexpected)} (e.g. '
                         f'{some(prefix + k for k in self.unexpected)})')
        return '\n'.join('  ' + line for line in lines)

    def unfit_line(self) -> str:
        """What did not fit, in one line ('' if all did): the tensors the
        model lacks, those of another shape and those the checkpoint lacks,
        named."""
        return '; '.join(
            f'{len(keys)} {what} ({some(keys, 8)})' for what, keys in (
                ('in the checkpoint, not in the model', self.unexpected),
                ('of another shape', self.wrong_shape),
                ('not in the checkpoint, left at their initialisation',
                 self.missing)) if keys)

    def likely_causes(self) -> List[str]:
        """What most likely went wrong, and where to change it."""
        found = []
        guess = _guess_prefix(self.expected, self.offered)
        if guess and guess[2] * 2 >= self.total:
            how, p, n = guess
            if how == 'strip':
                found.append(
                    f'the checkpoint\'s keys carry the prefix {p!r} ({n} '
                    f'tensors fit without it): load it with that prefix, '
                    f'e.g. init_cfg=dict(type=\'Pretrained\', checkpoint=..., '
                    f'prefix={p!r})')
            else:
                found.append(
                    f'the checkpoint\'s keys lack the prefix {p!r} ({n} '
                    f'tensors fit with it): it holds only that part of the '
                    f'model; load it into that part, e.g. model.'
                    f'{p}init_cfg=dict(type=\'Pretrained\', checkpoint=...)')
        family = detect_family(self.offered)
        if family in TOOLS:
            found.append(f'it looks like an official / timm {family} '
                         f'checkpoint, which is for {BACKBONES[family]} '
                         f'({TOOLS[family]} converts it)')
        if self.missing_blocks or self.extra_blocks:
            has = [f'{what} {some(blocks, 4)} that the {other} lacks'
                   for what, blocks, other in (
                       ('the checkpoint has', self.extra_blocks, 'model'),
                       ('the model has', self.missing_blocks, 'checkpoint'))
                   if blocks]
            found.append(f'a checkpoint of another depth: {"; ".join(has)} '
                         f'(compare the config\'s arch, depths or num_layers '
                         f'with the checkpoint\'s)')
        if self.wrong_shape and len(self.wrong_shape) >= len(self.missing):
            found.append('the keys fit but the shapes do not: a checkpoint '
                         'of another size (compare the config\'s arch, '
                         'embed_dims, depths with the checkpoint\'s)')
        fitted = {k.split('.')[0] for k in self.matched}
        unfit = {k.split('.')[0] for k in self.missing + self.wrong_shape}
        if fitted and self.missing and not fitted & unfit:
            parts = ', '.join(sorted(fitted))
            found.append(
                f'the checkpoint holds only the {parts} of this model (a '
                f'classifier or backbone checkpoint, not one of this '
                f'config): to train from it, use model.backbone.init_cfg='
                f'dict(type=\'Pretrained\', checkpoint=..., '
                f'prefix=\'backbone.\'); to test, use a checkpoint that '
                f'training this config wrote (work_dirs/<config>/epoch_N.pth '
                f'or iter_N.pth)')
        return found


USUAL_CAUSES = (
    'Usual causes: a checkpoint of another architecture or size; a missing '
    'or wrong prefix in init_cfg (prefix=\'backbone.\' for a classifier or '
    'detector checkpoint); an official file that '
    'tools/model_converters/*2mmcpvt.py must convert first.')


def check_state_dict_fits(expected: Mapping, offered: Mapping,
                          min_fraction: float = 0.5, owner: str = 'model',
                          prefix: str = '', why: str = '',
                          partial: bool = True) -> KeyMatch:
    """Raise :class:`CheckpointMismatchError` unless at least
    ``min_fraction`` of the ``expected`` tensors are in ``offered`` with
    their shapes; unless ``partial``, also if ``offered`` is not of this
    very architecture (tensors ``expected`` lacks, tensors of another shape,
    whole blocks missing beside blocks it has). ``owner`` names the model in
    the message, ``prefix`` goes before its keys there (``'backbone.'`` for
    a backbone of a detector), ``why`` says why the rule is what it is.
    Returns the :class:`KeyMatch`."""
    match = KeyMatch(expected, offered)
    enough = len(match.matched) >= min_fraction * match.total
    if enough and (partial or not (match.unexpected or match.wrong_shape
                                   or match.missing_blocks)):
        return match
    where = f' (keys {prefix}*)' if prefix else ''
    if enough:  # but not of this architecture
        unfit = [text for keys, text in (
            (match.unexpected, f'it has {len(match.unexpected)} tensors that '
             f'{owner} lacks'),
            (match.wrong_shape, f'{len(match.wrong_shape)} of another shape'),
            (match.missing_blocks, f'it lacks {len(match.missing_blocks)} of '
             f'its blocks')) if keys]
        head = f'the checkpoint is not one of {owner}{where}: ' + ', '.join(
            unfit)
    else:
        some = f'only {len(match.matched)}' if match.matched else 'none'
        got = (f'the checkpoint offers {len(match.offered)}' if match.offered
               else f'the checkpoint has no tensor under {prefix!r}' if prefix
               else 'the checkpoint has no tensors')
        head = (f'{some} of the {match.total} tensors of {owner}{where} are '
                f'in the checkpoint with their shapes ({got})')
    found = match.likely_causes()
    likely = 'Likely: ' + '; or '.join(found) + '.\n' if found else ''
    raise CheckpointMismatchError(
        f'{head}; {why}\n{match.details(prefix)}\n{likely}{USUAL_CAUSES}')


def _prefix_not_found(model, keys, prefix) -> CheckpointMismatchError:
    """mmengine asserts only 'backbone. is not in the pretrained model'."""
    match = KeyMatch(model.state_dict(), keys)
    if detect_family(keys) == getattr(model, 'checkpoint_family', None) or \
            len(match.matched) * 2 >= match.total:
        hint = ('its keys are the backbone\'s own, or those of an official '
                'checkpoint it converts: leave prefix out')
    else:
        hint = '; or '.join(match.likely_causes()) or USUAL_CAUSES
    return CheckpointMismatchError(
        f'no key of the checkpoint starts with prefix={prefix!r} (it has '
        f'{len(keys)} tensors, e.g. {some(keys)}). Likely: {hint}. Change '
        f'model.backbone.init_cfg.prefix.')


def load_checkpoint(model: nn.Module, filename: str,
                    prefix: Optional[str] = None,
                    setting: Optional[str] = None):
    """Load the checkpoint ``filename`` (a path or URL) into ``model``, or
    into ``model.backbone`` if it has no ``backbone.*`` key (an official or
    a converted backbone checkpoint); return the module loaded and torch's
    missing and unexpected keys. The backbones' ``init_cfg`` Pretrained and
    the tools load weights through this function alone.

    The file is checked first (:func:`check_checkpoint`), then read with
    ``weights_only``, a local file by :func:`safe_load` and any other scheme
    by mmengine's ``CheckpointLoader``; the backbones' pre-hook then converts
    official keys and refuses what does not fit. ``setting`` (e.g. ``'CPVT: init_cfg Pretrained'``) starts an
    error's message.
    """
    try:
        check_checkpoint(filename, state_dict=True)
        with weights_only_loads():
            # a local file by safe_load, which reads .safetensors on every
            # torch (torch.load, which mmengine's local loader calls, only
            # from 2.14 on); other schemes by mmengine's loader
            state = unwrap(
                safe_load(str(filename), map_location='cpu')
                if '://' not in str(filename) else
                CheckpointLoader.load_checkpoint(filename, map_location='cpu'))
        state = {re.sub(r'^module\.', '', k): v for k, v in state.items()}
        if prefix:
            if not any(k.startswith(prefix) for k in state):
                raise _prefix_not_found(model, state, prefix)
            state = {k[len(prefix):]: v for k, v in state.items()
                     if k.startswith(prefix)}
        if hasattr(model, 'backbone') and not any(
                k.startswith('backbone.') for k in state):
            model = model.backbone
        return model, model.load_state_dict(state, strict=False)
    except (CheckpointError, FileNotFoundError) as e:
        if setting is None:
            raise
        where = '' if str(filename) in str(e) else f'{filename!r}: '
        error = type(e)(f'{setting} {where}{e}')
        error.what = getattr(e, 'what', str(e))
        raise error from None
