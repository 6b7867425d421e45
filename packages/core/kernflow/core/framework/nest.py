"""Nested structures of values (lists, tuples, namedtuples, dicts): flatten and rebuild.

Dicts flatten in sorted key order, as TF's nest does. Anything else is a leaf (Tensors,
TensorArrays, IndexedSlices, numbers).
"""

from __future__ import annotations

__all__ = ["is_nested", "flatten", "pack_sequence_as", "map_structure", "assert_same_structure"]


def is_nested(x) -> bool:
    return isinstance(x, (list, tuple, dict))


def _children(x):
    if isinstance(x, dict):
        return [x[k] for k in sorted(x)]
    return list(x)


def flatten(structure) -> list:
    """The leaves of `structure`, depth first."""
    if not is_nested(structure):
        return [structure]
    out = []
    for c in _children(structure):
        out.extend(flatten(c))
    return out


def _rebuild(like, items):
    if isinstance(like, dict):
        keys = sorted(like)
        return type(like)((k, v) for k, v in zip(keys, items))
    if isinstance(like, tuple) and hasattr(like, "_fields"):   # namedtuple
        return type(like)(*items)
    return type(like)(items)


def pack_sequence_as(structure, flat_sequence):
    """Builds a structure shaped like `structure` from the leaves in `flat_sequence`.

    Raises:
        ValueError: if the number of leaves differs.
    """
    flat_sequence = list(flat_sequence)

    def build(s, pos):
        if not is_nested(s):
            return flat_sequence[pos], pos + 1
        items = []
        for c in _children(s):
            v, pos = build(c, pos)
            items.append(v)
        return _rebuild(s, items), pos

    n = len(flatten(structure))
    if n != len(flat_sequence):
        raise ValueError(f"Structure had {n} elements, but flat_sequence had {len(flat_sequence)}")
    return build(structure, 0)[0]


def assert_same_structure(a, b, check_types: bool = True) -> None:
    """Raises ValueError (TypeError for differing container types) unless a and b nest alike."""
    if is_nested(a) != is_nested(b):
        raise ValueError(f"The two structures don't have the same nested structure: {a!r} vs {b!r}")
    if not is_nested(a):
        return
    if check_types and type(a) is not type(b) and not (isinstance(a, list) and isinstance(b, list)):
        if not (type(a) in (list, tuple) and type(b) in (list, tuple)):
            raise TypeError(f"The two structures don't have the same sequence type: "
                            f"{type(a).__name__} vs {type(b).__name__}")
    if isinstance(a, dict) and sorted(a) != sorted(b):
        raise ValueError(f"The two dictionaries don't have the same keys: {sorted(a)} vs {sorted(b)}")
    ca, cb = _children(a), _children(b)
    if len(ca) != len(cb):
        raise ValueError(f"The two structures don't have the same number of elements: "
                         f"{len(ca)} vs {len(cb)}")
    for x, y in zip(ca, cb):
        assert_same_structure(x, y, check_types)


def map_structure(fn, *structures):
    """Applies fn to corresponding leaves and rebuilds the first structure's shape."""
    for s in structures[1:]:
        assert_same_structure(structures[0], s, check_types=False)
    flats = [flatten(s) for s in structures]
    return pack_sequence_as(structures[0], [fn(*xs) for xs in zip(*flats)])
