"""Argument checks, declared once: a table ``ARGS`` of argument specs per
class (``dict(kernel_size=Int(1, odd=True), frozen=Flag())``), checked by
:func:`check_args` when the module is built, never in ``forward``.

Every refusal reads ``{owner}: {name} must be {allowed}, got {value};
change {where}{name}``. A table entry may be a function of the values
checked so far that returns the spec (a range that depends on the arch).
"""
import inspect
import numbers


def describe(value) -> str:
    """``value`` as an error shows it, with its type where the repr alone
    would hide it (``True (a bool)``, ``'0' (a str)``)."""
    if isinstance(value, (bool, str, float)):
        return f'{value!r} (a {type(value).__name__})'
    return repr(value)


def is_int(value) -> bool:
    """An int, and not a bool (``True`` is no index or count here)."""
    return isinstance(value, numbers.Integral) and not isinstance(value, bool)


class Refused(Exception):
    """A refusal: the error class, the text after the argument's name and
    ``sub``, what follows the name (``'[3]'``, ``' of stage 2'``)."""

    def __init__(self, error, text, sub=''):
        super().__init__(text)
        self.error, self.text, self.sub = error, text, sub


class Spec:
    """What one argument may be (``allowed``, in words); calling the spec
    returns the value, normalised, or raises :class:`Refused`."""
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


class Value(Spec):
    """A single value: ``is_type(value)`` or a TypeError, then ``ok(value)``
    or a ValueError; returned as ``norm(value)``. The specs below differ
    only in these tests and in the words of ``allowed``."""

    def __init__(self, allowed, is_type, ok=None, norm=None):
        self.allowed, self.is_type = allowed, is_type
        self.ok, self.norm = ok, norm

    def __call__(self, value):
        if not self.is_type(value):
            raise self.refuse(value)
        if self.ok is not None and not self.ok(value):
            raise self.refuse(value, ValueError)
        return value if self.norm is None else self.norm(value)


def Int(low=None, high=None, odd=False, none=False) -> Value:
    """An int in ``low`` .. ``high`` (either open), odd if ``odd``; None
    too if ``none``."""
    within = ('' if low is None else f' >= {low}' if high is None else
              f' from {low} to {high}')
    return Value(
        f'{"None or " if none else ""}an {"odd " if odd else ""}int{within}',
        lambda v: is_int(v) or (none and v is None),
        lambda v: v is None or ((low is None or v >= low) and (
            high is None or v <= high) and not (odd and v % 2 == 0)))


class Ints(Spec):
    """A sequence of ints >= 1 (of ``length`` entries, if given)."""

    def __init__(self, length=None):
        self.length = length
        self.allowed = (f'a sequence of {f"{length} " if length else ""}'
                        f'ints >= 1')

    def __call__(self, value):
        if not isinstance(value, (tuple, list)):
            raise self.refuse(value)
        if self.length is not None and len(value) != self.length:
            raise self.refuse(value, ValueError)
        return tuple(
            self.nested(Int(1), v, f'[{i}]') for i, v in enumerate(value))


def Size() -> Value:
    """An image size: an int >= 1 or an (H, W) pair of them, as a pair."""
    def pair(v):
        return (v, v) if is_int(v) else v

    return Value('an int or an (H, W) pair of ints >= 1',
                 lambda v: isinstance(pair(v), (tuple, list)) and len(
                     pair(v)) == 2 and all(map(is_int, pair(v))),
                 lambda v: min(pair(v)) >= 1, lambda v: tuple(pair(v)))


def Rate() -> Value:
    """A dropout or stochastic-depth rate: 1 would drop everything."""
    return Value('a number in [0, 1) (a probability; 0 turns it off)',
                 lambda v: isinstance(v, numbers.Real) and not isinstance(
                     v, bool), lambda v: 0 <= v < 1, float)


def Flag(none=False) -> Value:
    """A bool (a str such as 'False' would read as True); None too if
    ``none``."""
    return Value('True, False or None' if none else 'True or False',
                 lambda v: isinstance(v, bool) or (none and v is None))


def Choice(*options) -> Value:
    """One of ``options``."""
    return Value(f'one of {options}', lambda v: True, lambda v: v in options)


class Indices(Spec):
    """An int or a sequence of ints in ``low`` .. ``high`` as a sorted
    tuple: block positions (``unique``: each once) or output indices
    (``num``: negative ones count from the end; at least one)."""

    def __init__(self, low, high, what, unique=False, num=None):
        self.low, self.high, self.unique, self.num = low, high, unique, num
        self.each = 'index' if num else 'position'  # (negative: from the end)
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
        seq = [v % self.num if self.num else int(v) for v in seq]
        twice = sorted({v for v in seq if seq.count(v) > 1})
        if self.unique and twice:
            raise self.refuse(value, ValueError, got=f'{value!r}, which '
                              f'holds {", ".join(map(str, twice))} twice; '
                              f'give each {self.each} once')
        return tuple(sorted(seq))


def positions(depth: int) -> Indices:
    """Block positions in ``depth`` blocks: -1 is before the first."""
    return Indices(-1, depth - 1, f'block indices from -1 (before the first '
                   f'block) to {depth - 1} (after the last)', unique=True)


def out_indices(num: int, what: str) -> Indices:
    return Indices(-num, num - 1, f'one or more indices of the {num} {what} '
                   f'from -{num} to {num - 1} (negative from the end)',
                   unique=True, num=num)


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
    """None or a dict of extra arguments of ``cls``: a key that ``cls``
    does not take (a misspelt ``kernal_size``) or that the owner passes
    itself (``set_by_owner``) is refused."""

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
        out = {k: self.nested(Ints() if isinstance(self.template[k], list)
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
    each checked by its spec and normalised; specs given as functions of
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
