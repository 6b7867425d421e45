"""Numpy kernels of the special elementwise math ops (kernflow.core.ops.math_ops_special).

numpy has no erf, lgamma or digamma: those map Python's `math` functions over the elements
(digamma by its recurrence and asymptotic series), which is exact to double precision and slow
only on very large tensors.
"""

from __future__ import annotations

import math

import numpy as np

from kernflow.core.framework import dtypes as _dtypes

DEVICE = "CPU"

_INTEGER = (_dtypes.int8, _dtypes.int16, _dtypes.int32, _dtypes.int64, _dtypes.uint8, _dtypes.uint16,
            _dtypes.uint32, _dtypes.uint64)
_INEXACT = (_dtypes.float16, _dtypes.float32, _dtypes.float64, _dtypes.complex64, _dtypes.complex128)


def _mapped(scalar_fn):
    """`scalar_fn` (on Python floats) over the elements of x, in x's dtype."""
    vec = np.vectorize(scalar_fn, otypes=[np.float64])

    def compute(x):
        x = np.asarray(x)
        if x.size == 0:
            return np.empty(x.shape, x.dtype)
        return vec(x.astype(np.float64)).astype(x.dtype, copy=False)
    return compute


def _lgamma(v):
    try:
        return math.lgamma(v)
    except ValueError:  # poles at 0, -1, -2, ...
        return math.inf


def _digamma(v):
    if math.isnan(v) or v == -math.inf:
        return math.nan
    if v <= 0 and v == math.floor(v):
        return math.nan
    acc = 0.0
    if v < 0:  # reflection: psi(1 - v) - psi(v) = pi / tan(pi v)
        acc = -math.pi / math.tan(math.pi * v)
        v = 1.0 - v
    while v < 6.0:
        acc -= 1.0 / v
        v += 1.0
    f = 1.0 / (v * v)
    series = f * (1 / 12 - f * (1 / 120 - f * (1 / 252 - f * (1 / 240 - f * (1 / 132)))))
    return acc + math.log(v) - 0.5 / v - series


def _quiet(fn):
    def compute(*xs):
        with np.errstate(all="ignore"):
            return fn(*xs)
    return compute


def _xlogy(x, y):
    return np.where(x == 0, np.zeros((), np.result_type(x, y)), x * np.log(y))


def _xdivy(x, y):
    return np.where(x == 0, np.zeros((), np.result_type(x, y)), x / y)


def _div_no_nan(x, y):
    return np.where(y == 0, np.zeros((), np.result_type(x, y)), x / np.where(y == 0, 1, y))


def _truncate_div_int(x, y):
    from kernflow.core.framework import errors
    if np.any(np.asarray(y) == 0):
        raise errors.InvalidArgumentError(None, None, "TruncateDiv: Integer division by zero")
    q = np.floor_divide(x, y)
    if q.dtype.kind == "i":
        q += (np.remainder(x, y) != 0) & (np.less(x, 0) != np.less(y, 0))
    return q


def _truncate_div_float(x, y):
    return np.trunc(np.true_divide(x, y))


def _truncate_mod(x, y):
    if np.asarray(x).dtype.kind == "i" and np.any(np.asarray(y) == 0):
        from kernflow.core.framework import errors
        raise errors.InvalidArgumentError(None, None, "TruncateMod: Integer division by zero")
    return np.fmod(x, y)


# op type -> numpy callable of the op's inputs; inf and nan results are routine (no warnings).
ELEMENTWISE = {
    "Tan": np.tan, "Asin": np.arcsin, "Acos": np.arccos, "Atan": np.arctan,
    "Sinh": np.sinh, "Cosh": np.cosh, "Asinh": np.arcsinh, "Acosh": np.arccosh, "Atanh": np.arctanh,
    "Erf": _mapped(math.erf), "Erfc": _mapped(math.erfc), "Lgamma": _mapped(_lgamma),
    "Digamma": _mapped(_digamma), "Rint": np.rint,
    "IsFinite": np.isfinite, "IsInf": np.isinf, "IsNan": np.isnan,
    "Atan2": np.arctan2, "Xlogy": _xlogy, "Xdivy": _xdivy, "DivNoNan": _div_no_nan,
    "TruncateMod": _truncate_mod,
}


def register(registry, device=DEVICE):
    for op, fn in ELEMENTWISE.items():
        registry.register_simple(op, device, _quiet(fn), fresh=True)
    registry.register_simple("TruncateDiv", device, _quiet(_truncate_div_float),
                             constraints={"T": _INEXACT}, fresh=True)
    registry.register_simple("TruncateDiv", device, _truncate_div_int, constraints={"T": _INTEGER},
                             fresh=True)
