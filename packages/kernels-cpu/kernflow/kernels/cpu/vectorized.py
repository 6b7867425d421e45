"""Faster numpy formulations of a few hot reductions and activations, shared by the CPU kernels.

numpy's ufunc loops are vectorized (SIMD) for contiguous operands, but several common shapes
fall off that path:

* ``np.maximum(x, 0)`` runs a scalar-broadcast loop that is 2-4x slower than maximum against a
  zeros array of x's size (float32 [512,128] on this machine: 57 vs 16 us; 1M elements: 750 vs
  190 us), so `relu_into` takes the maximum against a cached zeros chunk;
* ``np.add.reduce`` across the rows of a matrix, or along a short last axis, adds row by row
  (float32 [512,128] over axis 0: 16 us; [100000,3]: 1,850 us), where a matrix-vector product
  with a ones vector runs in BLAS (4.5 us and 52 us); `add_reduce` uses it for reductions over a
  leading or trailing run of axes of a contiguous float array (the accumulation order is BLAS's
  instead of numpy's, as TF's own reductions differ from numpy's);
* ``np.maximum.reduce`` along a short last axis (the classes of a batch of logits) is slow for
  the same reason; `row_max` reduces the transposed copy along its first axis instead.

The helpers keep numpy's results for NaN and inf (maximum propagates NaN either way).
"""

from __future__ import annotations

import numpy as np

__all__ = ["relu_into", "add_reduce", "row_max", "ones", "arange"]

_CHUNK = 1 << 18
_zeros: dict = {}
_ZEROS_DTYPES = frozenset(np.dtype(t) for t in (np.float32, np.float64, np.int32, np.int64))
_GEMV_DTYPES = frozenset(np.dtype(t) for t in (np.float32, np.float64))
# Longest trailing axis summed by a dot product (pairwise summation, numpy's for a contiguous
# axis, is more accurate on long rows; BLAS keeps several partial sums, fine up to here).
_MAX_DOT_ROW = 4096
_MAX_CACHED = 1 << 20
# Below this many elements numpy's reduction is as fast as the call into BLAS.
_MIN_DOT_SIZE = 2048


def _cached(cache: dict, key, make):
    """A read-only array from `cache` (cleared when it grows past 64 entries)."""
    a = cache.get(key)
    if a is None:
        if len(cache) > 64:
            cache.clear()
        a = cache[key] = make()
        a.flags.writeable = False
    return a


_ones: dict = {}
_aranges: dict = {}


def ones(n: int, dtype: np.dtype) -> np.ndarray:
    """A read-only ones vector of length n (cached up to 1M elements)."""
    if n > _MAX_CACHED:
        return np.ones(n, dtype)
    key = (n, dtype.char)
    a = _ones.get(key)
    return a if a is not None else _cached(_ones, key, lambda: np.ones(n, dtype))


def arange(n: int) -> np.ndarray:
    """np.arange(n), read-only and cached (row indices of a batch)."""
    return _cached(_aranges, n, lambda: np.arange(n))


def relu_into(x: np.ndarray, out: np.ndarray) -> np.ndarray:
    """max(x, 0) written into `out` (which may be x)."""
    dt = x.dtype
    if dt not in _ZEROS_DTYPES or not x.flags.c_contiguous or not out.flags.c_contiguous:
        return np.maximum(x, 0, out=out)
    z = _zeros.get(dt)
    if z is None:
        z = _zeros[dt] = np.zeros(_CHUNK, dt)
        z.flags.writeable = False
    xf, of = x.reshape(-1), out.reshape(-1)
    n = xf.size
    if n <= _CHUNK:
        np.maximum(xf, z[:n], out=of)
    else:
        for i in range(0, n, _CHUNK):
            j = min(i + _CHUNK, n)
            np.maximum(xf[i:j], z[:j - i], out=of[i:j])
    return out


def add_reduce(x, ax, keepdims: bool, dtype):
    """np.add.reduce(x, axis=ax, keepdims=keepdims, dtype=dtype), by BLAS where that is faster.

    `ax` is an int or a tuple of ints (possibly negative), as the reduction kernels pass it.
    """
    if type(x) is np.ndarray and x.size >= _MIN_DOT_SIZE and x.dtype in _GEMV_DTYPES and \
            x.flags.c_contiguous:
        r = _sum_by_dot(x, ax, keepdims, dtype)
        if r is not None:
            return r
    return np.add.reduce(x, axis=ax, keepdims=keepdims, dtype=dtype)


def _sum_by_dot(x, ax, keepdims, dtype):
    """The sum as ones @ x (leading axes) or x @ ones (trailing axes), else None."""
    nd = x.ndim
    axes = (ax,) if type(ax) is int else ax
    k = len(axes)
    if not 0 < k < nd or x.dtype != dtype:
        return None
    if k == 1:
        a = axes[0]
        if not -nd <= a < nd:
            return None   # numpy raises the AxisError the kernel reports
        lo = hi = a % nd
    else:
        seen = set()
        for a in axes:
            if not -nd <= a < nd:
                return None
            seen.add(a % nd)
        if len(seen) != k:
            return None
        lo, hi = min(seen), max(seen)
    shape = x.shape
    if hi == k - 1:                # leading axes
        rows = 1
        for d in shape[:k]:
            rows *= d
        rest = shape[k:]
        r = np.dot(ones(rows, x.dtype), x.reshape(rows, -1)).reshape(rest)
        return r.reshape((1,) * k + rest) if keepdims else r
    if lo == nd - k:               # trailing axes
        lead = shape[:nd - k]
        cols = x.size // max(1, _prod(lead))
        if cols > _MAX_DOT_ROW:
            return None
        r = np.dot(x.reshape(-1, cols), ones(cols, x.dtype)).reshape(lead)
        return r.reshape(lead + (1,) * k) if keepdims else r
    return None


def _prod(dims) -> int:
    n = 1
    for d in dims:
        n *= d
    return n


def row_max(x: np.ndarray) -> np.ndarray:
    """max(x, axis=-1, keepdims=True) of a non-empty 2-D array (rows may be many, columns few)."""
    n, c = x.shape
    if c <= 64 and n >= 8:
        return np.maximum.reduce(np.ascontiguousarray(x.T), axis=0).reshape(n, 1)
    return np.maximum.reduce(x, axis=-1, keepdims=True)
