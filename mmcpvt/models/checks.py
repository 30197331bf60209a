"""Argument checks shared by the layers and the backbones: errors that say
what was given, what is allowed and where to change it.

All of them run when a module is built, never in ``forward``.
"""
import inspect
import numbers
from typing import Optional


def describe(value) -> str:
    """``value`` as an error shows it: its repr, and its type where the repr
    alone would hide it (``True (a bool)``, ``'0' (a str)``)."""
    if isinstance(value, (bool, str, float)):
        return f'{value!r} (a {type(value).__name__})'
    return repr(value)


def is_int(value) -> bool:
    """An int, and not a bool (``True`` is no block index or channel
    count here, though Python counts it as 1)."""
    return isinstance(value, numbers.Integral) and not isinstance(value, bool)


def check_int(name: str, value, owner: str, low: Optional[int] = None,
              high: Optional[int] = None, where: str = '',
              hint: str = '') -> int:
    """``value``, an int in ``low`` .. ``high`` (either may be open).

    Raises a TypeError for another type (a bool, float or str included) and
    a ValueError for an int out of range; ``where`` follows the name in the
    message (``' of stage 2'``), ``hint`` ends it.
    """
    if low is not None and high is not None:
        allowed = f'an int from {low} to {high}'
    elif low is not None:
        allowed = f'an int >= {low}'
    else:
        allowed = 'an int'
    if not is_int(value):
        raise TypeError(f'{owner}: {name}{where} must be {allowed}, got '
                        f'{describe(value)}{hint}')
    if (low is not None and value < low) or (high is not None
                                             and value > high):
        raise ValueError(f'{owner}: {name}{where} must be {allowed}, got '
                         f'{value}{hint}')
    return int(value)


def check_rate(name: str, value, owner: str, hint: str = '') -> float:
    """``value``, a probability in [0, 1): a dropout or stochastic-depth
    rate (1 would drop everything; DropPath would divide by 0)."""
    if not isinstance(value, numbers.Real) or isinstance(value, bool):
        raise TypeError(f'{owner}: {name} must be a number in [0, 1), got '
                        f'{describe(value)}{hint}')
    if not 0 <= value < 1:
        raise ValueError(f'{owner}: {name} must be in [0, 1) (a '
                         f'probability; 0 turns it off), got {value}{hint}')
    return float(value)


def check_flag(name: str, value, owner: str, hint: str = '') -> bool:
    """``value``, a bool (a str such as 'False' would read as True)."""
    if not isinstance(value, bool):
        raise TypeError(f'{owner}: {name} must be True or False, got '
                        f'{describe(value)}{hint}')
    return value


def check_cfg_keys(name: str, cfg, cls, owner: str, set_by_owner=(),
                   hint: str = '') -> dict:
    """``cfg`` (None or a dict of extra arguments of ``cls``) as a dict.

    Refuses keys that ``cls`` does not take (a misspelt ``kernal_size``
    would otherwise end in Python's "unexpected keyword argument") and the
    keys ``set_by_owner``, which the owner passes itself.
    """
    if cfg is None:
        return {}
    if not isinstance(cfg, dict):
        raise TypeError(f'{owner}: {name} must be a dict of '
                        f'{cls.__name__} arguments or None, got '
                        f'{describe(cfg)}{hint}')
    params = inspect.signature(cls.__init__).parameters
    allowed = [p for p in params
               if p != 'self' and p not in set_by_owner and
               params[p].kind is inspect.Parameter.POSITIONAL_OR_KEYWORD]
    owned = sorted(k for k in cfg if k in set_by_owner)
    if owned:
        raise ValueError(f'{owner}: {name} sets {owned}, which {owner} '
                         f'sets itself; remove them from {name} (it takes '
                         f'{allowed}){hint}')
    unknown = sorted(k for k in cfg if k not in allowed)
    if unknown:
        raise ValueError(f'{owner}: {name} has unknown key(s) {unknown}; '
                         f'{cls.__name__} takes {allowed}{hint}')
    return dict(cfg)
