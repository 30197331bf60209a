"""Lists in messages."""


def some(items, n: int = 3) -> str:
    """The first ``n`` of ``items``, for a message: 'a, b, c and 4 more'."""
    items = list(items)
    more = f' and {len(items) - n} more' if len(items) > n else ''
    return ', '.join(map(str, items[:n])) + more
