"""Argument checks shared by the backbones: errors a user can act on."""
from typing import Iterable, Union


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
    return dict(arch)

