"""``--cfg-options``: an item without ``key=`` is refused, and so is a key
that mmengine would add silently (a misspelt one: the run keeps the old
value), naming the key and what to do; a setting of a config variable gets
a warning naming the settings to change instead."""
import difflib
import inspect
import logging
from types import SimpleNamespace
from typing import Dict, List, Optional

from mmengine.config import Config, DictAction
from mmengine.logging import print_log

# keys whose value is one path, not parsed as a list
PATHS = ('load_from', )

# Top-level keys that mmengine's Runner reads besides the arguments of
# Runner.__init__ (Runner.from_cfg and the runner's cfg.get calls in
# mmengine 0.10), and `runner_type` (cli.build_runner).
_RUNNER_CFG_KEYS = ('runner_type', 'model_wrapper_cfg', 'sync_bn',
                    'find_unused_parameters', 'compile',
                    'activation_checkpointing', 'efficient_conv_bn_eval')

# How close a new key must be to an existing one to be taken for a
# misspelling of it (difflib ratio): 'backbon' of 'backbone' is 0.93,
# 'chekpoint' of 'checkpoint' 0.95; 'drop_path_rate' of 'drop_rate', a new
# argument beside an existing one, 0.78.
_TYPO_CUTOFF = 0.8


def parse_cfg_options(items: Optional[List[str]]) -> Optional[Dict]:
    """``--cfg-options`` items as a dict, each value parsed as mmengine's
    ``DictAction`` does (``a,b``: a list), except a ``PATHS`` key's: one
    path (``a,b.pth``, ``my runs/x.pth``) or None. ValueError for an item
    that is not ``key=value``."""
    if items is None:
        return None
    options = {}
    for item in items:
        key, equals, value = item.partition('=')
        if not key or not equals:
            raise ValueError(
                f'argument --cfg-options: {item!r} is not a setting: the '
                'form is key=value, e.g. train_dataloader.batch_size=32 or '
                'model.backbone.arch=small (no spaces around "=")')
        if key in PATHS:  # quotes stripped and None, as mmengine
            value = value.strip('\'"')
            options[key] = None if value == 'None' else value
        else:  # mmengine's parsing, through its public DictAction
            parsed = SimpleNamespace()
            DictAction([], 'options')(None, parsed, [item])
            options[key] = parsed.options[key]
    return options


def runner_keys() -> List[str]:
    """The top-level config keys that mmengine's runner reads."""
    from mmengine.runner import Runner
    keys = set(inspect.signature(Runner.__init__).parameters) - {'self', 'cfg'}
    return sorted(keys.union(_RUNNER_CFG_KEYS))


def _did_you_mean(key: str, choices, cutoff: float = 0.6) -> str:
    matches = difflib.get_close_matches(
        key, sorted({str(c) for c in choices}), n=3, cutoff=cutoff)
    return (' Did you mean ' + ' or '.join(map(repr, matches)) + '?'
            if matches else '')


def _check_key(cfg: Config, key: str, value, runner: List[str],
               config: str) -> Optional[str]:
    """Why setting the dotted ``key`` to ``value`` is refused, or None: a
    new top-level key passes only if the runner reads it, a new nested one
    only if it does not nearly spell a key beside it (else it is a new
    argument of what the dict builds, which its constructor checks); a key
    below a plain value, or below a list other than by an index in range,
    is refused, and so is text for a number (max_epochs=abc)."""
    in_child = (f'set it in a config that inherits this one (_base_ = '
                f'{config!r})')
    first, *rest = key.split('.')
    if first not in cfg:
        if first in runner:
            return None
        hint = _did_you_mean(first, list(cfg.keys()) + runner) or (
            f' New top-level keys may be those the runner reads: '
            f'{", ".join(runner)}; to add another on purpose, {in_child}.')
        return (f'the config has no top-level key {first!r}, and the '
                f'runner does not read one of that name: it would be '
                f'ignored.{hint}')
    node, where = cfg[first], first
    for part in rest:
        if isinstance(node, (list, tuple)):
            if not part.isdigit():
                return (f'{where} is a list; address an item by its index '
                        f'(0 to {len(node) - 1}), e.g. {where}.0.{part}.')
            if int(part) >= len(node):
                return (f'{where} has {len(node)} items (0 to '
                        f'{len(node) - 1}), no item {part}.')
            node = node[int(part)]
        elif not isinstance(node, dict):
            return (f'{where} is {node!r} in the config, not a dict, so it '
                    f'has no key {part!r}. Set {where} itself, or, to make '
                    f'it a dict, {in_child}.')
        elif part in node:
            node = node[part]
        else:
            hint = _did_you_mean(part, node.keys(), _TYPO_CUTOFF)
            return hint and (
                f'{where} has no key {part!r}.{hint} ({where} has: '
                f'{", ".join(map(str, node.keys()))}.) To add {part!r} on '
                f'purpose, {in_child}.')
        where += f'.{part}'
    if isinstance(node, (int, float)) and not isinstance(node, bool) and \
            isinstance(value, str):
        return f'{key} is a number in the config ({node}), got {value!r}.'
    return None


def _plain(value):
    """``value`` without the ``_scope_`` keys that mmengine adds to the
    variables of another library's base config, tuples as lists."""
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items() if k != '_scope_'}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    return value


def _nodes(node, prefix=''):
    """(dotted path, value) of ``node`` and of everything under it."""
    yield prefix, node
    items = (node.items() if isinstance(node, dict) else
             enumerate(node) if isinstance(node, (list, tuple)) else ())
    for k, v in items:
        yield from _nodes(v, f'{prefix}.{k}' if prefix else str(k))


def merge_cfg_options(cfg: Config, options: Optional[Dict],
                      config: str) -> None:
    """Merge ``--cfg-options`` into ``cfg`` (read from the file ``config``),
    warning about config variables. ValueError, one line per refused key
    (see :func:`_check_key`), and nothing merged if a key is refused."""
    if not options:
        return
    runner = runner_keys()
    errors = [f'--cfg-options {key}: {error}' for key in options
              if (error := _check_key(cfg, key, options[key], runner,
                                      config))]
    if errors:
        raise ValueError('\n'.join(errors))
    for key in options:
        name = key.split('.')[0]
        if name not in cfg or name in runner:
            continue
        # A variable (data_root, train_pipeline): the runner settings that
        # took its value when the config was read keep it. They are a copy
        # of it (a pipeline), or a value under a key it names (data_root ->
        # dataset.data_root, dataset_type -> dataset.type).
        old = _plain(cfg[name])
        users = [
            f'{path}{key[len(name):]}' for path, value in _nodes(cfg.to_dict())
            if '.' in path and path.split('.')[0] in runner
            and _plain(value) == old and (
                (isinstance(old, (dict, list)) and len(old) > 0) or
                name == path.split('.')[-1] or
                name.endswith('_' + path.split('.')[-1]))
        ][:6]
        print_log(
            f'--cfg-options {key}: {name} is a variable of the config, not a '
            f'setting the runner reads: the settings that used it were '
            f'filled in when the config was read, and they keep their '
            f'value. ' + (f'Set them instead: {", ".join(users)}.' if users
                          else 'Set those settings instead.'),
            logger='current', level=logging.WARNING)
    cfg.merge_from_dict(options)
