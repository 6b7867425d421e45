"""Numpy kernels of the segment ops (kernflow.core.ops.segment_ops).

Sorted ops reduce runs of equal ids with ``ufunc.reduceat``; unsorted ops scatter with
``ufunc.at``. Neither loops over rows in Python.
"""

from __future__ import annotations

import numpy as np

from kernflow.core.framework import errors

DEVICE = "CPU"

_UFUNCS = {"Sum": np.add, "Mean": np.add, "Prod": np.multiply, "Max": np.maximum, "Min": np.minimum}
_NUMBER = ["float16", "float32", "float64", "int8", "int16", "int32", "int64", "uint8", "uint16",
           "uint32", "uint64", "complex64", "complex128"]
_REAL = [t for t in _NUMBER if not t.startswith("complex")]


def _invalid(ctx, msg: str):
    return errors.InvalidArgumentError(None, None, f"{ctx.op_type} node {ctx.name}: {msg}")


def _acc_dtype(npdt):
    """Accumulation type: float32 for half sums/means (fewer rounding steps), else the type."""
    return np.dtype(np.float32) if npdt == np.float16 else np.dtype(npdt)


def _lowest(npdt):
    return np.finfo(npdt).min if npdt.kind == "f" else np.iinfo(npdt).min


def _highest(npdt):
    return np.finfo(npdt).max if npdt.kind == "f" else np.iinfo(npdt).max


def _divide_counts(sums, counts, npdt):
    counts = counts.reshape((-1,) + (1,) * (sums.ndim - 1))
    if npdt.kind in "iu":
        # TF's integer mean truncates toward zero (C++ division), unlike numpy's floor division.
        q = np.abs(sums) // counts
        return np.where(sums < 0, -q, q).astype(npdt, copy=False)
    return (sums / counts.astype(sums.real.dtype)).astype(npdt, copy=False)


def _sorted_factory(kind):
    ufunc = _UFUNCS[kind]
    fill = 1 if kind == "Prod" else 0

    def factory(ctx):
        npdt = np.dtype(ctx.output_dtypes[0].as_numpy_dtype)
        acc = _acc_dtype(npdt) if kind in ("Sum", "Mean", "Prod") else npdt

        def compute(data, segment_ids):
            data, ids = np.asarray(data), np.asarray(segment_ids)
            if ids.ndim != 1:
                raise _invalid(ctx, f"segment_ids should be a vector, got shape {list(ids.shape)}")
            if data.ndim < 1 or data.shape[0] != ids.shape[0]:
                raise _invalid(ctx, f"segment_ids should be the same size as dimension 0 of input: "
                                    f"segment_ids shape {list(ids.shape)}, data shape "
                                    f"{list(data.shape)}")
            n = ids.shape[0]
            if n == 0:
                return np.zeros((0,) + data.shape[1:], npdt)
            step = np.diff(ids)
            if step.size and step.min() < 0:
                i = int(np.argmax(step < 0)) + 1
                raise _invalid(ctx, f"segment ids are not increasing: segment_ids[{i}] = "
                                    f"{ids[i]} follows {ids[i - 1]}")
            rows = int(ids[-1]) + 1
            if ids[0] < 0:
                raise _invalid(ctx, f"Segment id {ids[0]} out of range [0, {rows}), possibly "
                                    f"because 'segment_ids' input is not sorted.")
            starts = np.flatnonzero(np.concatenate(([True], step != 0)))
            vals = ufunc.reduceat(data, starts, axis=0, dtype=acc)
            if kind == "Mean":
                vals = _divide_counts(vals, np.diff(np.append(starts, n)), npdt)
            if starts.size == rows:
                return vals.astype(npdt, copy=False)
            out = np.full((rows,) + data.shape[1:], fill, npdt)
            out[ids[starts]] = vals
            return out
        return compute
    return factory


def _unsorted_factory(kind):
    ufunc = _UFUNCS[kind]

    def factory(ctx):
        npdt = np.dtype(ctx.output_dtypes[0].as_numpy_dtype)
        fill = {"Sum": 0, "Prod": 1}.get(kind)
        if fill is None:
            fill = _lowest(npdt) if kind == "Max" else _highest(npdt)

        def compute(data, segment_ids, num_segments):
            data, ids = np.asarray(data), np.asarray(segment_ids)
            if np.ndim(num_segments) != 0:
                raise _invalid(ctx, f"num_segments should be a scalar, not shape "
                                    f"{list(np.shape(num_segments))}")
            num = int(num_segments)
            if num < 0:
                raise _invalid(ctx, f"num_segments must be non-negative, got {num}")
            if data.shape[:ids.ndim] != ids.shape:
                raise _invalid(ctx, f"data.shape = {list(data.shape)} does not start with "
                                    f"segment_ids.shape = {list(ids.shape)}")
            inner = data.shape[ids.ndim:]
            flat_ids = ids.reshape(-1)
            rows = data.reshape(flat_ids.shape + inner)
            over = flat_ids >= num
            if over.any():
                k = int(np.argmax(over))
                where = ",".join(str(int(i)) for i in np.unravel_index(k, ids.shape))
                raise _invalid(ctx, f"segment_ids[{where}] = {flat_ids[k]} is out of range "
                                    f"[0, {num})")
            keep = flat_ids >= 0
            if not keep.all():
                flat_ids, rows = flat_ids[keep], rows[keep]
            out = np.full((num,) + inner, fill, npdt)
            ufunc.at(out, flat_ids, rows)
            return out
        return compute
    return factory


def register(registry, device=DEVICE):
    """Registers this family's CPU kernels."""
    index = {"Tindices": ["int32", "int64"]}
    for kind in ("Sum", "Mean", "Prod", "Max", "Min"):
        types = _REAL if kind in ("Max", "Min") else _NUMBER
        registry.register(f"Segment{kind}", device, _sorted_factory(kind),
                          constraints=dict(index, T=types))
    for kind in ("Sum", "Prod", "Max", "Min"):
        types = _REAL if kind in ("Max", "Min") else _NUMBER
        registry.register(f"UnsortedSegment{kind}", device, _unsorted_factory(kind),
                          constraints=dict(index, T=types))
