"""Resource containers: per-device state (variables, queues...) that outlives steps."""

from __future__ import annotations

import threading

import numpy as np

from kernflow.core.framework import errors

__all__ = ["ResourceMgr", "Var", "is_state_buffer"]

DEFAULT_CONTAINER = "localhost"

# id(ndarray) -> Var for every live variable buffer, so a fetch that aliases a buffer is copied
# before it is handed to the user (in-place updates would otherwise change the user's array).
_state_buffers: dict[int, "Var"] = {}


def is_state_buffer(arr) -> bool:
    """True if `arr` (or the array it views) is the current buffer of some variable."""
    root = arr
    while isinstance(root, np.ndarray):
        if id(root) in _state_buffers:
            return True
        root = root.base
    return False


class Var:
    """A variable's state: a buffer that `Assign` replaces and update kernels change in place.

    Ref edges in the graph carry the Var itself; non-ref consumers get `read()`.
    """

    __slots__ = ("name", "dtype", "shape", "_value", "lock", "__weakref__")

    def __init__(self, name: str, dtype=None, shape=None):
        self.name = name
        self.dtype = dtype
        self.shape = shape
        self._value = None
        # Held by kernels with use_locking=True, so read-modify-write updates are atomic.
        self.lock = threading.Lock()

    @property
    def is_initialized(self) -> bool:
        return self._value is not None

    @property
    def value(self):
        return self._value

    def read(self):
        """Returns the current buffer. Raises FailedPreconditionError if never assigned."""
        v = self._value
        if v is None:
            raise errors.FailedPreconditionError(
                None, None, f"Attempting to use uninitialized value {self.name}")
        return v

    def assign(self, value) -> None:
        """Makes `value` the buffer (the Var owns it from now on)."""
        old = self._value
        if old is not None:
            _state_buffers.pop(id(old), None)
        self._value = value
        if isinstance(value, np.ndarray):
            _state_buffers[id(value)] = self

    def clear(self) -> None:
        self.assign(None)


class ResourceMgr:
    """Named resources in named containers, as in TF: (container, name) -> resource."""

    def __init__(self, default_container: str = DEFAULT_CONTAINER):
        self.default_container = default_container
        self._lock = threading.Lock()
        self._containers: dict[str, dict[str, object]] = {}
        # Bumped by every cleanup, so kernels may cache a resource until the next one.
        self.generation = 0

    def lookup_or_create(self, container: str, name: str, create):
        """Returns the resource, creating it with `create()` if absent."""
        c = container or self.default_container
        res = self._containers.get(c)
        if res is not None:  # the hot path: a dict read is atomic, no lock needed
            r = res.get(name)
            if r is not None:
                return r
        with self._lock:
            res = self._containers.setdefault(c, {})
            r = res.get(name)
            if r is None:
                r = res[name] = create()
            return r

    def cached_getter(self, container: str, name: str, create, check=None):
        """A function returning the resource (creating it if absent), cached until the next cleanup.

        The kernel of a stateful op (a variable, a queue) calls it on every run; the dict lookups
        happen only after a cleanup. `check(resource)`, if given, runs on each fresh lookup (e.g.
        that a shared queue has the expected component types).
        """
        cached = [None, -1]   # (resource, generation it was looked up in)

        def get():
            if cached[1] == self.generation:
                return cached[0]
            gen = self.generation
            r = self.lookup_or_create(container, name, create)
            if check is not None:
                check(r)
            cached[0], cached[1] = r, gen
            return r
        return get

    def lookup(self, container: str, name: str):
        """Returns the resource. Raises NotFoundError if absent."""
        c = container or self.default_container
        with self._lock:
            r = self._containers.get(c, {}).get(name)
        if r is None:
            raise errors.NotFoundError(None, None, f"Resource {c}/{name} does not exist.")
        return r

    def containers(self) -> list[str]:
        with self._lock:
            return list(self._containers)

    def cleanup(self, container: str | None = None) -> None:
        """Drops every resource of `container` (all containers when None)."""
        with self._lock:
            names = list(self._containers) if container is None else [container]
            dropped = [self._containers.pop(n, {}) for n in names]
            self.generation += 1
        for res in dropped:
            for r in res.values():
                close = getattr(r, "close_resource", None)
                if close is not None:
                    close()
                elif isinstance(r, Var):
                    r.clear()
