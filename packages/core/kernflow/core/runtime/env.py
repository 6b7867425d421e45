"""Environment settings read on hot paths (every RPC, every pull), without `os.environ.get`'s cost.

`os.environ.get` encodes the name and decodes the value on every call (~0.5 us); a worker serving
four peers read ``KERNFLOW_TRANSPORT`` and ``KERNFLOW_LOCAL_CHANNEL`` thousands of times a second,
8% of a ps task's interpreter time (py-spy, tools/bench_async_training.py). An `EnvVar` looks its
pre-encoded name up in the mapping `os.environ` keeps in step with the process environment (every
`os.environ[...] = ...`, `del` and pytest's monkeypatch go through it) and decodes a value only when
it changed, so a setting changed at run time still takes effect on the next read, as before.
"""

from __future__ import annotations

import os

__all__ = ["EnvVar"]

# os.environ's own storage: encoded names -> encoded values on POSIX (CPython's os._Environ).
_DATA = getattr(os.environ, "_data", None)
_ENCODE = getattr(os.environ, "encodekey", None)


class EnvVar:
    """One environment variable, read with `get` (its value, or `default` when unset).

    Args:
        name: the variable's name.
    """

    __slots__ = ("name", "_key", "_raw", "_value")

    def __init__(self, name: str):
        self.name = name
        self._key = _ENCODE(name) if _DATA is not None and _ENCODE is not None else None
        self._raw, self._value = None, None

    def get(self, default: str = "") -> str:
        if self._key is None:   # not CPython's os._Environ: the plain lookup
            return os.environ.get(self.name, default)
        raw = _DATA.get(self._key)
        if raw is None:
            return default
        if raw is not self._raw:   # set or changed since the last read: decode it once
            self._value = os.environ[self.name]
            self._raw = raw
        return self._value
