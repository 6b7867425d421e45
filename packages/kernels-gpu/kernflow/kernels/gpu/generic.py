"""GPU kernels from the CPU kernels' source: the numpy code run against cupy.

The CPU plugin writes its kernels against the numpy API, and cupy implements that API on the GPU.
`load_family("math")` executes ``kernflow/kernels/cpu/math.py`` once more as a new module whose
``import numpy`` yields `xp`, a namespace that is cupy plus the few things cupy lacks (errstate,
numpy's exception and dtype helpers). The kernels so made compute on device arrays with the same
semantics as the CPU ones, and one source of truth stays per op. Kernels where this is slow or where
cupy differs are replaced by hand-written ones (`kernels.py`); `asarray` here never moves data
between host and device, so host-memory inputs (shapes, axes) stay numpy.
"""

from __future__ import annotations

import builtins
import contextlib
import importlib.util
import operator
import types

import numpy

__all__ = ["xp", "load_family"]


def _has(args, kinds) -> bool:
    for a in args:
        if isinstance(a, kinds):
            return True
        if isinstance(a, (list, tuple)) and a and _has(a, kinds):
            return True
    return False


# Functions that create arrays from sizes and scalars: on the device unless given host arrays.
_ALLOCATORS = frozenset({"zeros", "ones", "empty", "full", "eye", "identity", "arange", "linspace",
                         "array", "tri"})


def _dispatch(name, cupy_fn, numpy_fn):
    """Runs the cupy function when any argument is a device array, numpy's when the arguments are
    host arrays (shapes and axes in host memory), and allocators on the device otherwise."""
    import cupy
    dev, host = cupy.ndarray, (numpy.ndarray, numpy.generic)
    alloc = name in _ALLOCATORS
    seq_host = not alloc  # tuples/lists of numbers are shapes: reduce them on the host

    def up(a):
        if isinstance(a, numpy.ndarray):
            return cupy.asarray(a)
        if isinstance(a, list) and _has(a, numpy.ndarray):
            return [up(x) for x in a]
        return a

    def call(*args, **kw):
        vals = args + tuple(kw.values())
        if _has(vals, dev):
            if _has(args, numpy.ndarray):  # host index arrays meeting device data
                args = tuple(up(a) for a in args)
            return cupy_fn(*args, **kw)
        if _has(vals, host) or (seq_host and any(isinstance(a, (list, tuple)) for a in args)):
            return numpy_fn(*args, **kw)
        return cupy_fn(*args, **kw)
    call.__name__ = name
    return call


class _XP(types.ModuleType):
    """cupy, falling back to numpy for names cupy lacks (dtype helpers, constants); functions
    dispatch on where their arguments live (see `_dispatch`)."""

    def __getattr__(self, name):
        import cupy
        c = getattr(cupy, name, None)
        n = getattr(numpy, name, None)
        if c is None and n is None:
            raise AttributeError(name)
        if c is None:
            v = n
        elif callable(c) and callable(n) and not isinstance(c, type) and not isinstance(n, type) \
                and not hasattr(c, "reduce"):
            v = _dispatch(name, c, n)
        elif hasattr(c, "reduce") and callable(n):
            v = _Ufunc(name, c, n)
        else:
            v = c
        setattr(self, name, v)
        return v


class _Ufunc:
    """A ufunc that dispatches calls, `.reduce` and `.at` on where the arguments live."""

    def __init__(self, name, c, n):
        self._c, self._n = c, n
        self._call = _dispatch(name, c, n)
        self.reduce = _dispatch(name + ".reduce", c.reduce, n.reduce)
        c_at = _subtract_at if name == "subtract" else getattr(c, "at", None) or _no_at(name)
        self.at = _dispatch(name + ".at", c_at, n.at)
        self.accumulate = _dispatch(name + ".accumulate", getattr(c, "accumulate", None) or _no_at(name),
                                    n.accumulate)
        self.__name__ = name

    def __call__(self, *args, **kw):
        return self._call(*args, **kw)


def _subtract_at(a, indices, b):
    """cupy.subtract.at takes int32 and uint32 only: a - b at indices is a + (-b) at indices (for
    unsigned ints too, in their modular arithmetic)."""
    import cupy
    cupy.add.at(a, indices, cupy.negative(cupy.asarray(b)))


def _no_at(name):
    def f(*a, **k):
        raise NotImplementedError(f"{name}.at has no GPU implementation")
    return f


def _asarray(a, dtype=None, order=None, **kw):
    """numpy.asarray/cupy.asarray that keeps the data where it is."""
    import cupy
    if isinstance(a, cupy.ndarray):
        return a if dtype is None or a.dtype == dtype else a.astype(dtype)
    if isinstance(a, (list, tuple)) and _has(a, cupy.ndarray):
        return cupy.asarray(a, dtype=dtype)
    return numpy.asarray(a, dtype=dtype, order=order, **kw)


def _errstate(**_kw):
    return contextlib.nullcontext()  # CUDA math never traps: inf and nan come out as values


def _lib():
    import cupy

    def as_strided(x, shape=None, strides=None, subok=False, writeable=True):
        if isinstance(x, cupy.ndarray):
            return cupy.lib.stride_tricks.as_strided(x, shape, strides)
        return numpy.lib.stride_tricks.as_strided(x, shape, strides, subok, writeable)
    return types.SimpleNamespace(stride_tricks=types.SimpleNamespace(as_strided=as_strided))


xp = _XP("kernflow.kernels.gpu.xp")
xp.asarray = _asarray
xp.errstate = _errstate
xp.exceptions = numpy.exceptions


_real_import = builtins.__import__


def _import(name, globals=None, locals=None, fromlist=(), level=0):
    if name == "numpy":
        if "lib" not in xp.__dict__:
            import cupy
            xp.lib = _lib()
            xp.ndarray = cupy.ndarray
        return xp
    return _real_import(name, globals, locals, fromlist, level)


_builtins = dict(builtins.__dict__)
_builtins["__import__"] = _import
_loaded: dict[str, types.ModuleType] = {}


def load_family(name: str) -> types.ModuleType:
    """Returns ``kernflow.kernels.cpu.<name>`` executed with numpy bound to `xp` (cached)."""
    mod = _loaded.get(name)
    if mod is not None:
        return mod
    spec = importlib.util.find_spec(f"kernflow.kernels.cpu.{name}")
    src = spec.loader.get_source(spec.name)
    mod = types.ModuleType(f"kernflow.kernels.gpu.generic_{name}")
    mod.__file__ = spec.origin
    mod.__dict__["__builtins__"] = _builtins
    exec(compile(src, spec.origin, "exec"), mod.__dict__)  # noqa: S102 - our own package's source
    if "intra_op" in mod.__dict__:
        mod.intra_op = _device_intra_op()
    _loaded[name] = mod
    return mod


def _device_intra_op() -> types.ModuleType:
    """The CPU plugin's intra-op helpers as a family's device code sees them: its matmuls split
    numpy arrays over a thread pool in numpy calls, so device arrays take their own `@` instead."""
    from kernflow.kernels.cpu import intra_op
    shim = types.ModuleType("kernflow.kernels.gpu.generic_intra_op")
    shim.__dict__.update(intra_op.__dict__)
    shim.matmul = shim.batch_matmul = operator.matmul
    return shim
