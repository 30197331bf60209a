"""Argument checks, declared once: a table ``ARGS`` of argument specs per
class (``dict(kernel_size=Int(1, odd=True), frozen=Flag())``), checked by
:func:`check_args` when the module is built, never in ``forward``.

Every refusal reads ``{owner}: {name} must be {allowed}, got {value};
change {where}{name}``: the class, the argument, what is allowed, the value
given and where to set it. A table entry may be a function of the values
checked so far that returns the spec (a range that depends on the arch).
"""
import inspect
import numbers


def describe(value) -> str:
    """``value`` as an error shows it: its repr, and its type where the repr
    alone would hide it (``True (a bool)``, ``'0' (a str)``)."""
    if isinstance(value, (bool, str, float)):
        return f'{value!r} (a {type(value).__name__})'
    return repr(value)


def is_int(value) -> bool:
    """An int, and not a bool (``True`` is no index or count here)."""
    return isinstance(value, numbers.Integral) and not isinstance(value, bool)


class Refused(Exception):
    """A spec's refusal: the error class, the text after the argument's
    name, and ``sub``, what follows the name (``'[3]'``, ``' of stage 2'``)."""

    def __init__(self, error, text, sub=''):
        super().__init__(text)
        self.error, self.text, self.sub = error, text, sub


class Spec:
    """What one argument may be: ``allowed`` in words; calling the spec
    returns the value (normalised) or raises :class:`Refused`."""
    allowed = ''

    def refuse(self, value, error=TypeError, got=None) -> Refused:
        got = got or (describe(value) if error is TypeError else repr(value))
        return Refused(error, f'must be {self.allowed}, got {got}')

    @staticmethod
    def nested(spec, value, sub):
        """``spec(value)``, its refusal naming ``sub`` (an entry, a key)."""
        try:
            return spec(value)
        except Refused as r:
            r.sub = sub + r.sub
            raise


class Int(Spec):
    """An int (not a bool) in ``low`` .. ``high`` (either open), odd if
    ``odd``; None too if ``none``."""

    def __init__(self, low=None, high=None, odd=False, none=False):
        self.low, self.high, self.odd, self.none = low, high, odd, none
        self.range = '' if low is None else f' >= {low}' if high is None \
            else f' from {low} to {high}'
        self.allowed = (f'{"None or " if none else ""}an '
                        f'{"odd " if odd else ""}int{self.range}')

    def __call__(self, value):
        if value is None and self.none:
            return None
        if not is_int(value):
            raise self.refuse(value)
        if (self.low is not None and value < self.low) or (
                self.high is not None and value > self.high) or (
                    self.odd and value % 2 == 0):
            raise self.refuse(value, ValueError)
        return int(value)


class Ints(Spec):
    """A sequence of ints (of ``length`` entries, if given), each
    ``Int(low)``: one per stage."""

    def __init__(self, low=None, length=None):
        self.item, self.length = Int(low), length
        self.allowed = (f'a sequence of {f"{length} " if length else ""}'
                        f'ints{self.item.range}')

    def __call__(self, value):
        if not isinstance(value, (tuple, list)):
            raise self.refuse(value)
        if self.length is not None and len(value) != self.length:
            raise self.refuse(value, ValueError)
        return tuple(
            self.nested(self.item, v, f'[{i}]') for i, v in enumerate(value))


class Size(Spec):
    """An image size: an int >= 1 or an (H, W) pair of them."""
    allowed = 'an int or an (H, W) pair of ints >= 1'

    def __call__(self, value):
        value = (value, value) if is_int(value) else value
        if not isinstance(value, (tuple, list)) or len(value) != 2:
            raise self.refuse(value)
        return Ints(1)(value)


class Rate(Spec):
    """A dropout or stochastic-depth rate: 1 would drop everything."""
    allowed = 'a number in [0, 1) (a probability; 0 turns it off)'

    def __call__(self, value):
        if not isinstance(value, numbers.Real) or isinstance(value, bool):
            raise self.refuse(value)
        if not 0 <= value < 1:
            raise self.refuse(value, ValueError)
        return float(value)


class Flag(Spec):
    """A bool (a str such as 'False' would read as True); None too if
    ``none``."""

    def __init__(self, none=False):
        self.none = none
        self.allowed = 'True, False or None' if none else 'True or False'

    def __call__(self, value):
        if not isinstance(value, bool) and not (value is None and self.none):
            raise self.refuse(value)
        return value


class Choice(Spec):
    """One of ``options``."""

    def __init__(self, *options):
        self.options, self.allowed = options, f'one of {options}'

    def __call__(self, value):
        if value not in self.options:
            raise self.refuse(value, ValueError)
        return value


class Indices(Spec):
    """An int or a sequence of ints in ``low`` .. ``high`` as a sorted
    tuple: block positions (``unique``: each once) or output indices
    (``num``: negative ones count from the end; at least one)."""

    def __init__(self, low, high, what, unique=False, num=None):
        self.low, self.high, self.unique, self.num = low, high, unique, num
        self.allowed = (f'{what}: an int or a sequence of ints'
                        f'{", each once" if unique else ""}')

    def __call__(self, value):
        seq = (value, ) if is_int(value) else value
        if not isinstance(seq, (tuple, list)):
            raise self.refuse(value)
        wrong = [describe(v) for v in seq if not is_int(v)]
        if wrong:
            raise self.refuse(value, got=f'{value!r}, which holds '
                              f'{", ".join(wrong)}')
        if not all(self.low <= v <= self.high for v in seq) or (
                self.num and not seq):
            raise self.refuse(value, ValueError)
        twice = sorted({v for v in seq if list(seq).count(v) > 1})
        if self.unique and twice:
            raise self.refuse(value, ValueError, got=f'{value!r}, which '
                              f'holds {", ".join(map(str, twice))} twice; '
                              f'give each position once')
        return tuple(sorted({v % self.num if self.num else int(v)
                             for v in seq}))


def positions(depth: int) -> Indices:
    """Block positions in ``depth`` blocks: -1 is before the first."""
    return Indices(-1, depth - 1, f'block indices from -1 (before the first '
                   f'block) to {depth - 1} (after the last)', unique=True)


def out_indices(num: int, what: str) -> Indices:
    return Indices(-num, num - 1, f'one or more indices of the {num} {what} '
                   f'from -{num} to {num - 1} (negative from the end)',
                   num=num)


class StagePositions(Spec):
    """One entry of :func:`positions` per stage of ``depths``."""

    def __init__(self, depths):
        self.depths = depths

    def __call__(self, value):
        if not isinstance(value, (tuple, list)) or len(value) != len(
                self.depths):
            raise Refused(ValueError, f'needs one entry per stage '
                          f'({len(self.depths)}), got {describe(value)}; use '
                          f'() for a stage without PEG')
        return [self.nested(positions(d), v, f' of stage {i}')
                for i, (v, d) in enumerate(zip(value, self.depths))]


class Cfg(Spec):
    """None or a dict of extra arguments of ``cls``, as a dict: a key that
    ``cls`` does not take (a misspelt ``kernal_size``) or that the owner
    passes itself (``set_by_owner``) is refused."""

    def __init__(self, cls, set_by_owner=()):
        self.cls, self.owned = cls, set_by_owner
        self.allowed = f'a dict of {cls.__name__} arguments or None'

    def __call__(self, value):
        if value is None:
            return {}
        if not isinstance(value, dict):
            raise self.refuse(value)
        params = inspect.signature(self.cls.__init__).parameters
        takes = [p for p, v in params.items() if p != 'self' and p not in
                 self.owned and v.kind is v.POSITIONAL_OR_KEYWORD]
        owned = sorted(k for k in value if k in self.owned)
        if owned:
            raise Refused(ValueError, f'sets {owned}, which the backbone '
                          f'sets itself; remove them (it takes {takes})')
        unknown = sorted(k for k in value if k not in takes)
        if unknown:
            raise Refused(ValueError, f'has unknown key(s) {unknown}; '
                          f'{self.cls.__name__} takes {takes}')
        return dict(value)


class Arch(Spec):
    """A name in ``zoo`` or a dict of exactly the keys of its entries:
    positive ints, or lists of them (one per stage, all as long)."""

    def __init__(self, zoo: dict):
        self.zoo, self.template = zoo, next(iter(zoo.values()))
        self.keys = sorted(self.template)
        self.allowed = (f'one of {sorted(set(zoo))} or a dict with keys '
                        f'{self.keys}')

    def __call__(self, value):
        if isinstance(value, str) and value.lower() in self.zoo:
            return dict(self.zoo[value.lower()])
        if not isinstance(value, dict):
            raise self.refuse(value, ValueError if isinstance(value, str)
                              else TypeError)
        missing = sorted(set(self.keys) - set(value))
        unknown = sorted(set(value) - set(self.keys))
        if missing or unknown:
            raise Refused(ValueError, f'lacks the keys {missing}' if missing
                          else f'has unknown key(s) {unknown}, which it does '
                          f'not read; it takes {self.keys}')
        out = {k: self.nested(Ints(1) if isinstance(self.template[k], list)
                              else Int(1), value[k], f' {k}')
               for k in self.keys}
        lengths = {k: len(v) for k, v in out.items() if isinstance(v, tuple)}
        if len(set(lengths.values())) > 1:
            raise Refused(ValueError, f'needs one entry per stage in each of '
                          f'{sorted(lengths)}, got lengths {lengths}')
        return {k: list(v) if k in lengths else v for k, v in out.items()}


def check_args(owner: str, values: dict, specs: dict,
               where: str = 'model.backbone.') -> dict:
    """The ``values`` (an ``__init__``'s ``locals()``) named in ``specs``,
    each checked by its spec and normalised. Specs given as functions of
    the values checked so far are resolved last."""
    out = {}
    for name in sorted(specs, key=lambda n: not isinstance(specs[n], Spec)):
        if name in values:
            spec = specs[name]
            spec = spec if isinstance(spec, Spec) else spec(out)
            try:
                out[name] = spec(values[name])
            except Refused as r:
                raise r.error(f'{owner}: {name}{r.sub} {r.text}; change '
                              f'{where}{name}') from None
    return out
