"""GPU kernels of the indexing ops: ConcatV2, SplitV, GatherNd, ScatterNd, DynamicPartition,
TopKV2 and the segment reductions.

Each kernel factory takes ``(ctx, am=None)``: `am` is the array library (`array_module`), cupy
unless a test passes numpy. Semantics, checks and error messages are the CPU kernels'
(``kernels/cpu/array.py``, ``nn.py``, ``segment.py``, whose host-side helpers are reused), except
where noted: as TF's GPU kernel, GatherNd does not check its indices (a check costs a device->host
read every step) and gives zeros for out-of-range ones. Shape-like arguments (axis, size_splits,
shape, k, num_segments) are host memory; indices, segment ids and partitions are device memory.
Ops whose output size depends on the data (DynamicPartition, the sorted segment ops) and the
checks the CPU kernels make on ids (ScatterNd, segment ids, partitions) cost one small
device->host read each, as in TF.
"""

from __future__ import annotations

import numpy as np

from kernflow.core.framework.op_def_registry import call_site
from kernflow.kernels.cpu import segment as cpu_segment
from kernflow.kernels.cpu.array import _axis, _error, _ints, _scalar_int, _shape_str, _split_sizes
from kernflow.kernels.cpu.nn import _top_k_arg
from kernflow.kernels.gpu.array_module import (cupy_module, device_dtypes, first_true, fold_segments,
                                               segment_sum)

__all__ = ["register"]


def _where(shape, k) -> str:
    return ",".join(str(int(i)) for i in np.unravel_index(k, shape))


# ----------------------------------------------------------------------------- join / split
def _concat(ctx, am=None):
    am = am or cupy_module()

    def compute(*args):
        values, axis = args[:-1], _scalar_int(ctx, args[-1], "axis")
        r = values[0].ndim
        if r == 0:
            raise _error(ctx, "Can't concatenate scalars (use tf.stack instead)")
        a = _axis(ctx, axis, r, "concatenating dimensions")
        s0 = values[0].shape
        for i, v in enumerate(values[1:], 1):
            s = v.shape
            if len(s) != r or any(x != y for j, (x, y) in enumerate(zip(s0, s)) if j != a):
                raise _error(ctx, f"ConcatOp : Dimension mismatch in input {i}: shape[0] = "
                             f"{_shape_str(s0)} vs. shape[{i}] = {_shape_str(s)} (axis {a})")
        return am.xp.concatenate(values, axis=a)
    return compute


def _split_v(ctx, am=None):
    am = am or cupy_module()
    n = ctx.get_attr("num_split")

    def compute(value, size_splits, split_dim):
        a = _axis(ctx, _scalar_int(ctx, split_dim, "split_dim"), value.ndim, "split_dim")
        sizes = _split_sizes(ctx, size_splits, value.shape[a], n)
        return tuple(am.xp.split(value, np.cumsum(sizes)[:-1].tolist(), axis=a))
    return compute


# ----------------------------------------------------------------------------- N-d gather/scatter
def _nd_rank_check(ctx, idx, shape, what) -> int:
    if idx.ndim == 0:
        raise _error(ctx, "indices must be at least a vector")
    k = idx.shape[-1]
    if k > len(shape):
        raise _error(ctx, f"indices.shape[-1] must be <= {what} rank, but saw indices shape: "
                     f"{_shape_str(idx.shape)} and {what} shape: {_shape_str(shape)}")
    return k


def _linear(xp, idx, dims):
    """Row-major linear index into `dims` of each row of `idx` [m, len(dims)], and its validity."""
    lin = xp.zeros(idx.shape[:1], np.int64)
    ok = xp.ones(idx.shape[:1], bool)
    for j, d in enumerate(dims):
        c = idx[:, j].astype(np.int64)
        ok &= (c >= 0) & (c < d)
        lin = lin * d + c
    return lin, ok


def _gather_nd(ctx, am=None):
    am = am or cupy_module()
    xp = am.xp

    def compute(params, indices):
        idx = am.device(indices)
        k = _nd_rank_check(ctx, idx, params.shape, "param")
        lead, inner = idx.shape[:-1], params.shape[k:]
        if k == 0:
            return xp.array(xp.broadcast_to(params, lead + params.shape))
        nrows = int(np.prod(params.shape[:k], dtype=np.int64))
        lin, ok = _linear(xp, idx.reshape(-1, k), params.shape[:k])
        if nrows == 0 or lin.size == 0:
            return xp.zeros(lead + inner, params.dtype)
        rows = xp.take(params.reshape((nrows,) + inner), xp.where(ok, lin, 0), axis=0)
        rows = xp.where(ok.reshape((-1,) + (1,) * len(inner)), rows, xp.zeros((), params.dtype))
        return rows.reshape(lead + inner)
    return compute


def _scatter_nd(ctx, am=None):
    am = am or cupy_module()
    xp = am.xp
    dt = np.dtype(ctx.output_dtypes[0].as_numpy_dtype)

    def compute(indices, updates, shape):
        idx = am.device(indices)
        out_shape = tuple(_ints(shape))
        if any(d < 0 for d in out_shape):
            raise _error(ctx, f"shape must be non-negative, got {_shape_str(out_shape)}")
        k = _nd_rank_check(ctx, idx, out_shape, "output")
        if k:
            flat = idx.reshape(-1, k)
            lin, ok = _linear(xp, flat, out_shape[:k])
            bad = first_true(am, ~ok)   # the one device->host read
            if bad >= 0:
                raise _error(ctx, f"indices[{_where(idx.shape[:-1], bad)}] = "
                             f"{_shape_str(am.to_host(flat[bad]))} does not index into output shape "
                             f"{_shape_str(out_shape)}")
        want = idx.shape[:-1] + out_shape[k:]
        if updates.shape != want:
            raise _error(ctx, f"updates.shape {_shape_str(updates.shape)} must be indices.shape[:-1] + "
                         f"shape[indices.shape[-1]:] = {_shape_str(want)}")
        out = xp.zeros(out_shape, dtype=dt)
        if k == 0:
            out += updates.reshape((-1,) + out_shape).sum(axis=0).astype(dt)
            return out
        nrows = int(np.prod(out_shape[:k], dtype=np.int64))
        inner = out_shape[k:]
        segment_sum(am, out.reshape((nrows,) + inner), lin,
                    updates.reshape((-1,) + inner).astype(dt, copy=False))
        return out
    return compute


# ----------------------------------------------------------------------------- partition
def _dynamic_partition(ctx, am=None):
    am = am or cupy_module()
    xp = am.xp
    n = ctx.get_attr("num_partitions")

    def compute(data, partitions):
        p = am.device(partitions)
        if data.shape[:p.ndim] != p.shape:
            raise _error(ctx, f"data.shape must start with partitions.shape, got data.shape = "
                         f"{_shape_str(data.shape)}, partitions.shape = {_shape_str(p.shape)}")
        inner = data.shape[p.ndim:]
        flat = p.reshape(-1).astype(np.int64)
        m = flat.size
        if m == 0:
            empty = data.reshape((0,) + inner)
            return tuple(empty for _ in range(n))
        bad = (flat < 0) | (flat >= n)
        bucket = xp.where(bad, n, flat)
        # Unique keys: their order is the stable order by partition whatever the sort.
        order = am.argsort(bucket * m + xp.arange(m, dtype=np.int64))
        bounds = xp.searchsorted(bucket[order], xp.arange(n + 2, dtype=np.int64))
        # Output sizes (and whether any partition is out of range): one device->host read, as
        # TF's GPU kernel reads its partition counts.
        b = [int(v) for v in am.to_host(bounds)]
        if b[n + 1] > b[n]:
            k = first_true(am, bad)
            raise _error(ctx, f"partitions[{_where(p.shape, k)}] = {am.to_host(flat[k])} is not "
                         f"in [0, {n})")
        rows = xp.take(data.reshape((m,) + inner), order[:b[n]], axis=0)
        return tuple(rows[b[i]:b[i + 1]] for i in range(n))
    return compute


# ----------------------------------------------------------------------------- top-k
def _top_k(ctx, am=None):
    am = am or cupy_module()
    xp = am.xp

    def compute(x, k):
        k = _top_k_arg(ctx, x, k)
        n = x.shape[-1]
        shape = x.shape[:-1] + (k,)
        if k == 0 or x.size == 0:
            return xp.zeros(shape, x.dtype), xp.zeros(shape, np.int32)
        rows = x.reshape(-1, n)
        # Descending values, NaN first (sorts put NaN last), equal values in increasing index
        # order, as the CPU kernel's stable sort gives. Not relying on the sort's stability: a
        # first sort groups equal values, a second orders each group by index through unique
        # lexsort-style keys (group rank * n + index, below n**2).
        first = am.argsort(rows, axis=-1)[:, ::-1]
        v = xp.take_along_axis(rows, first, axis=-1)
        same = v[:, 1:] == v[:, :-1]
        if v.dtype.kind == "f":
            same |= xp.isnan(v[:, 1:]) & xp.isnan(v[:, :-1])
        group = xp.concatenate([xp.zeros((v.shape[0], 1), np.int64),
                                xp.cumsum(~same, axis=1, dtype=np.int64)], axis=1)
        order = am.argsort(group * n + first, axis=-1)[:, :k]
        idx = xp.take_along_axis(first, order, axis=-1).astype(np.int32)
        return xp.take_along_axis(rows, idx, axis=-1).reshape(shape), idx.reshape(shape)
    return compute


# ----------------------------------------------------------------------------- segments
_FOLDS = {"Sum": "add", "Mean": "add", "Prod": "multiply", "Max": "maximum", "Min": "minimum"}


def _sorted_rows(am, ctx, ids) -> int:
    """Checks non-empty sorted `ids` as the CPU kernel does; returns the output's row count.

    One device->host read: the first decrease and the first and last ids.
    """
    xp = am.xp
    if ids.shape[0] > 1:
        dec = ids[1:] < ids[:-1]
        j = xp.argmax(dec)
        first_dec = xp.where(dec[j], j, -1)
    else:
        first_dec = xp.asarray(-1)
    info = am.to_host(xp.stack([first_dec.astype(np.int64), ids[0].astype(np.int64),
                                ids[-1].astype(np.int64)]))
    if info[0] >= 0:
        i = int(info[0]) + 1
        pair = am.to_host(ids[i - 1:i + 1])
        raise cpu_segment._invalid(ctx, f"segment ids are not increasing: segment_ids[{i}] = "
                                        f"{pair[1]} follows {pair[0]}")
    rows = int(info[2]) + 1
    if info[1] < 0:
        raise cpu_segment._invalid(ctx, f"Segment id {info[1]} out of range [0, {rows}), possibly "
                                        f"because 'segment_ids' input is not sorted.")
    return rows


def _mean(xp, sums, counts, npdt):
    counts = xp.maximum(counts, 1).reshape((-1,) + (1,) * (sums.ndim - 1))
    if npdt.kind in "iu":
        # TF's integer mean truncates toward zero (C++ division), unlike floor division.
        q = xp.abs(sums) // counts
        return xp.where(sums < 0, -q, q).astype(npdt, copy=False)
    return (sums / counts.astype(sums.real.dtype)).astype(npdt, copy=False)


def _sorted_segment(kind):
    def factory(ctx, am=None):
        am = am or cupy_module()
        xp = am.xp
        op = getattr(xp, _FOLDS[kind])
        npdt = np.dtype(ctx.output_dtypes[0].as_numpy_dtype)
        acc = cpu_segment._acc_dtype(npdt) if kind in ("Sum", "Mean", "Prod") else npdt
        fill = 1 if kind == "Prod" else 0

        def compute(data, segment_ids):
            ids = am.device(segment_ids)
            if ids.ndim != 1:
                raise cpu_segment._invalid(ctx, f"segment_ids should be a vector, got shape "
                                                f"{list(ids.shape)}")
            if data.ndim < 1 or data.shape[0] != ids.shape[0]:
                raise cpu_segment._invalid(ctx, f"segment_ids should be the same size as dimension 0 "
                                                f"of input: segment_ids shape {list(ids.shape)}, data "
                                                f"shape {list(data.shape)}")
            if ids.shape[0] == 0:
                return xp.zeros((0,) + data.shape[1:], npdt)
            rows = _sorted_rows(am, ctx, ids)
            vals = fold_segments(am, op, ids, data, rows, fill, acc, from_fill=False, ids_sorted=True)
            if kind == "Mean":
                bounds = xp.searchsorted(ids, xp.arange(rows + 1, dtype=ids.dtype))
                vals = _mean(xp, vals, bounds[1:] - bounds[:-1], npdt)
            return vals.astype(npdt, copy=False)
        return compute
    return factory


def _unsorted_segment(kind):
    def factory(ctx, am=None):
        am = am or cupy_module()
        xp = am.xp
        op = getattr(xp, _FOLDS[kind])
        npdt = np.dtype(ctx.output_dtypes[0].as_numpy_dtype)
        fill = {"Sum": 0, "Prod": 1}.get(kind)
        if fill is None:
            fill = cpu_segment._lowest(npdt) if kind == "Max" else cpu_segment._highest(npdt)

        def compute(data, segment_ids, num_segments):
            ids = am.device(segment_ids)
            if np.ndim(num_segments) != 0:
                raise cpu_segment._invalid(ctx, f"num_segments should be a scalar, not shape "
                                                f"{list(np.shape(num_segments))}")
            num = int(num_segments)
            if num < 0:
                raise cpu_segment._invalid(ctx, f"num_segments must be non-negative, got {num}")
            if data.shape[:ids.ndim] != ids.shape:
                raise cpu_segment._invalid(ctx, f"data.shape = {list(data.shape)} does not start with "
                                                f"segment_ids.shape = {list(ids.shape)}")
            inner = data.shape[ids.ndim:]
            flat = ids.reshape(-1)
            k = first_true(am, flat >= num)   # the one device->host read
            if k >= 0:
                raise cpu_segment._invalid(ctx, f"segment_ids[{_where(ids.shape, k)}] = "
                                                f"{am.to_host(flat[k])} is out of range [0, {num})")
            return fold_segments(am, op, flat, data.reshape(flat.shape + inner), num, fill, npdt,
                                 from_fill=True)
        return compute
    return factory


# ----------------------------------------------------------------------------- registration
def register(registry, device="GPU") -> set:
    """Registers this module's kernels (dtype T int32 excluded: it runs on the host); returns the
    op types they cover."""
    def reg(op, factory, host=(), fresh=False, attr="T", int32=False):
        registry.register(op, device, factory, constraints={attr: device_dtypes(op, attr, int32)},
                          host_memory=host, fresh=fresh, site=call_site())
    reg("ConcatV2", _concat, ("axis",), fresh=True)
    reg("SplitV", _split_v, ("size_splits", "split_dim"))
    # GatherNd's type attr is Tparams: no host kernel covers its int32 params.
    reg("GatherNd", _gather_nd, fresh=True, attr="Tparams", int32=True)
    reg("ScatterNd", _scatter_nd, ("shape",), fresh=True)
    reg("DynamicPartition", _dynamic_partition)
    reg("TopKV2", _top_k, ("k",), fresh=True)
    ops = {"ConcatV2", "SplitV", "GatherNd", "ScatterNd", "DynamicPartition", "TopKV2"}
    for kind in _FOLDS:
        reg(f"Segment{kind}", _sorted_segment(kind))
        ops.add(f"Segment{kind}")
        if kind != "Mean":
            reg(f"UnsortedSegment{kind}", _unsorted_segment(kind), ("num_segments",))
            ops.add(f"UnsortedSegment{kind}")
    return ops
