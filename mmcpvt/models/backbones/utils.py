"""Argument checks shared by the backbones: errors a user can act on."""
from typing import Iterable, Union

from ..checks import check_flag, check_int, check_rate, describe, is_int


def check_positive_int(name: str, value, owner: str, hint: str = '') -> int:
    return check_int(name, value, owner, low=1, hint=hint)


def check_positive_ints(name: str, value, owner: str,
                        hint: str = '') -> tuple:
    """A sequence of positive ints (one per stage)."""
    if not isinstance(value, (tuple, list)):
        raise TypeError(f'{owner}: {name} must be a sequence of positive '
                        f'ints, got {describe(value)}{hint}')
    return tuple(
        check_int(f'{name}[{i}]', v, owner, low=1, hint=hint)
        for i, v in enumerate(value))


def check_size(name: str, value, owner: str, hint: str = '') -> tuple:
    """An image size: a positive int or an (H, W) pair of them."""
    if is_int(value):
        value = (value, value)
    if not isinstance(value, (tuple, list)) or len(value) != 2:
        raise TypeError(f'{owner}: {name} must be an int or an (H, W) pair '
                        f'of ints, got {describe(value)}{hint}')
    return tuple(check_int(name, v, owner, low=1, hint=hint) for v in value)


# The checks of the arguments that several backbones take, by name
# (:meth:`BaseBackbone._check_args`).
ARG_CHECKS = {
    **dict.fromkeys(('in_channels', 'patch_size', 'window_size',
                     'mlp_ratio'), check_positive_int),
    'patch_sizes': check_positive_ints,
    'img_size': check_size,
    **dict.fromkeys(('drop_rate', 'attn_drop_rate', 'drop_path_rate'),
                    check_rate),
    **dict.fromkeys(('with_cp', 'norm_eval', 'qkv_bias', 'final_norm',
                     'norm_after_stage'), check_flag),
}


def check_choice(name: str, value, allowed: Iterable, owner: str):
    """Raise a ValueError naming the argument, the value and the choices."""
    allowed = tuple(allowed)
    if value not in allowed:
        raise ValueError(
            f'{owner}: {name}={value!r} is not supported; choose one of '
            f'{allowed}')


def resolve_arch(arch: Union[str, dict], arch_zoo: dict, essential: Iterable,
                 owner: str) -> dict:
    """Look ``arch`` up in ``arch_zoo``, or check a custom arch dict."""
    if isinstance(arch, str):
        key = arch.lower()
        if key not in arch_zoo:
            raise ValueError(
                f'{owner}: unknown arch {arch!r}; choose one of '
                f'{sorted(set(arch_zoo))} or pass a dict with keys '
                f'{sorted(essential)}')
        return dict(arch_zoo[key])
    if not isinstance(arch, dict):
        raise TypeError(f'{owner}: arch must be a str or a dict, got '
                        f'{type(arch).__name__}')
    missing = set(essential) - set(arch)
    if missing:
        raise ValueError(f'{owner}: the custom arch dict lacks the keys '
                         f'{sorted(missing)}; it needs {sorted(essential)}')
    hint = '; change it in model.backbone.arch'
    for key in essential:  # sizes and counts: positive ints, per stage
        value = arch[key]
        if isinstance(value, (tuple, list)):
            check_positive_ints(f'arch {key}', value, owner, hint)
        else:
            check_positive_int(f'arch {key}', value, owner, hint)
    return dict(arch)

