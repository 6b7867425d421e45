"""The array library a hand-written GPU kernel computes with: cupy on a GPU, numpy in tests.

The kernels of `indexing.py`, `pooling.py` and `sparse_apply.py` take an `ArrayModule` and use only
functions whose numpy and cupy semantics agree, so the CPU test suite runs the very code the GPU
runs (with numpy) against the CPU kernels. What differs between the two libraries lives here:
scatter-adds (``add.at`` in both, but cupy's only supports the dtypes of CUDA's atomicAdd), stable sorting and moving data to the host. Nothing here
imports cupy until a kernel is built for a GPU, so the module imports without one.

Also here: the segmented reduction the segment ops, ScatterNd and the sparse updates share.
"""

from __future__ import annotations

import dataclasses
import functools
from typing import Any, Callable

import numpy as np

from kernflow.core.framework import dtypes, op_def_registry

__all__ = ["ArrayModule", "DEVICE_DTYPES", "numpy_module", "cupy_module", "device_dtypes", "first_true",
           "fold_segments", "segment_sum"]

# dtypes with device memory (strings, resources and variants stay on the host).
DEVICE_DTYPES = (dtypes.bool, dtypes.int8, dtypes.int16, dtypes.int32, dtypes.int64, dtypes.uint8,
                 dtypes.uint16, dtypes.uint32, dtypes.uint64, dtypes.float16, dtypes.float32,
                 dtypes.float64, dtypes.complex64, dtypes.complex128)
# cupy.add.at's dtypes (CUDA atomicAdd's): others take the sort-and-scan path.
_CUPY_ATOMIC_ADD = frozenset(np.dtype(t) for t in ("float16", "float32", "float64", "int32", "uint32",
                                                   "uint64"))


@dataclasses.dataclass(frozen=True)
class ArrayModule:
    """An array library and the few operations numpy and cupy spell differently.

    Attributes:
        xp: the module (numpy or cupy).
        scatter_add: fn(a, indices, values): a[indices] += values, duplicates accumulating.
        atomic_add: dtypes `scatter_add` supports (others use a sort-and-scan reduction).
        to_host: fn(array) -> numpy array (one device->host copy on a GPU).
        argsort: fn(a, axis) -> indices of a stable sort along `axis`.
        training_rules: the CPU plugin's dense update rules (``kernels/cpu/training.py`` RULES),
            computing with this module's arrays.
    """
    xp: Any
    scatter_add: Callable
    atomic_add: frozenset
    to_host: Callable
    argsort: Callable
    training_rules: dict

    def device(self, a):
        """`a` as an array of this module (uploads a host array to the GPU)."""
        return self.xp.asarray(a)


def numpy_module(atomic_add: bool = True) -> ArrayModule:
    """numpy (for tests); `atomic_add=False` sends every scatter-add through the sort-and-scan path
    cupy takes for dtypes atomicAdd lacks."""
    from kernflow.kernels.cpu import training
    types = frozenset(np.dtype(t.as_numpy_dtype) for t in DEVICE_DTYPES) if atomic_add else frozenset()
    return ArrayModule(np, np.add.at, types, np.asarray,
                       lambda a, axis=-1: np.argsort(a, axis=axis, kind="stable"), training.RULES)


@functools.lru_cache(maxsize=None)
def cupy_module() -> ArrayModule:
    """cupy. Its argsort is documented stable (thrust's stable_sort_by_key) and takes no `kind`;
    the multi-dimensional path compares NaN as numpy does (greater than everything)."""
    import cupy

    from kernflow.kernels.gpu import generic
    return ArrayModule(cupy, cupy.add.at, _CUPY_ATOMIC_ADD, cupy.asnumpy,
                       lambda a, axis=-1: cupy.argsort(a, axis=axis),
                       generic.load_family("training").RULES)


def device_dtypes(op_type: str, attr: str = "T", int32: bool = False) -> list:
    """The dtypes a GPU kernel of `op_type` registers for `attr`: those the op allows that have
    device memory, int32 only if `int32` (an op whose `T` is int32 runs its CPU kernel on the host,
    see kernels.py)."""
    allowed = op_def_registry.get(op_type).attrs[attr].allowed or DEVICE_DTYPES
    return [t for t in DEVICE_DTYPES if t in allowed and (int32 or t != dtypes.int32)]


def first_true(am: ArrayModule, mask) -> int:
    """Flat index of the first True in `mask`, or -1: one small device->host read on a GPU."""
    xp = am.xp
    if mask.size == 0:
        return -1
    flat = mask.reshape(-1)
    k = xp.argmax(flat)
    return int(am.to_host(xp.where(flat[k], k, -1)))


def _segmented_scan(xp, op, keys, vals):
    """Inclusive scan of `op` along axis 0 within runs of equal (sorted) `keys`.

    Hillis-Steele: ceil(log2 n) steps of whole-array operations, no atomics and no host reads.
    After step d each row holds the fold of the up to 2**d rows of its run ending at it.
    """
    n = keys.shape[0]
    bshape = (-1,) + (1,) * (vals.ndim - 1)
    d = 1
    while d < n:
        same = (keys[d:] == keys[:-d]).reshape(bshape)
        tail = xp.where(same, op(vals[:-d], vals[d:]), vals[d:])
        vals = xp.concatenate([vals[:d], tail])
        d *= 2
    return vals


def fold_segments(am: ArrayModule, op, ids, rows, num: int, fill, dtype, *, from_fill: bool,
                  ids_sorted: bool = False):
    """Folds `op` over the rows of each segment.

    Args:
        op: a commutative, associative binary function of arrays (xp.add, xp.maximum...).
        ids: 1-D segment ids of `rows` (device); ids outside [0, num) are dropped.
        rows: [len(ids), ...] values.
        num: number of segments.
        fill: value of segments without rows.
        dtype: result (and accumulation) dtype.
        from_fill: start each fold from `fill` (``ufunc.at`` into a filled array, as the unsorted
            ops do) rather than from the segment's first row (``ufunc.reduceat``, the sorted ops).
        ids_sorted: `ids` are non-decreasing (saves the sort).

    Returns:
        [num, ...] array of `dtype`.
    """
    xp = am.xp
    inner = rows.shape[1:]
    rows = rows.astype(dtype, copy=False)
    # Row `num` of `out` collects the dropped rows (and, below, the partial folds).
    out = xp.full((num + 1,) + inner, fill, dtype)
    keep = (ids >= 0) & (ids < num)
    ids = xp.where(keep, ids, num)
    if ids.size == 0:
        return out[:num]
    if op is xp.add and fill == 0 and np.dtype(dtype) in am.atomic_add:
        am.scatter_add(out, ids, rows)
        return out[:num]
    if not ids_sorted:
        order = am.argsort(ids)
        ids, rows = ids[order], xp.take(rows, order, axis=0)
    vals = _segmented_scan(xp, op, ids, rows)
    if from_fill:
        vals = op(vals, xp.full((), fill, dtype))
    last = xp.concatenate([ids[1:] != ids[:-1], xp.ones((1,), bool)])
    # Each segment's fold sits at its last row; the other rows are written to row `num`.
    out[xp.where(last, ids, num)] = vals
    return out[:num]


def segment_sum(am: ArrayModule, out, ids, rows) -> None:
    """out[ids[i]] += rows[i] for every i (ids in range), in place."""
    xp = am.xp
    if ids.size == 0:
        return
    if np.dtype(out.dtype) in am.atomic_add:
        am.scatter_add(out, ids, rows)
        return
    out += fold_segments(am, xp.add, ids, rows, out.shape[0], 0, out.dtype, from_fill=True)
