"""Numpy kernels of the sparse ops (kernflow.core.ops.sparse_ops).

Entries are located through their row-major linear index (``np.ravel_multi_index``): canonical
order is ascending linear index, duplicates are equal ones, and two sparse operands are merged by
sorting their linear indices. Errors name the op and the first offending entry, as TF's do.
"""

from __future__ import annotations

import numpy as np

from kernflow.core.framework import errors

DEVICE = "CPU"


def _invalid(ctx, msg: str):
    return errors.InvalidArgumentError(None, None, f"{ctx.op_type} node {ctx.name}: {msg}")


def _fmt(idx) -> str:
    return "[" + ",".join(str(int(i)) for i in np.atleast_1d(idx)) + "]"


def _check_sparse(ctx, indices, values, shape, prefix=""):
    """Checks the three parts' ranks and sizes; returns them as numpy arrays."""
    indices, values, shape = np.asarray(indices), np.asarray(values), np.asarray(shape)
    if indices.ndim != 2:
        raise _invalid(ctx, f"{prefix}indices should be a matrix, got shape {list(indices.shape)}")
    if values.ndim != 1 or values.shape[0] != indices.shape[0]:
        raise _invalid(ctx, f"{prefix}values should be a vector of {indices.shape[0]} entries "
                            f"(one per index), got shape {list(values.shape)}")
    if shape.ndim != 1 or shape.shape[0] != indices.shape[1]:
        raise _invalid(ctx, f"{prefix}shape should be a vector of {indices.shape[1]} dims (the "
                            f"indices' rank), got {shape.tolist()}")
    return indices, values, shape


def _check_bounds(ctx, indices, shape, prefix=""):
    bad = ((indices < 0) | (indices >= shape)).any(axis=1) if indices.size else np.zeros(0, bool)
    if bad.any():
        i = int(np.argmax(bad))
        raise _invalid(ctx, f"{prefix}indices[{i}] = {_fmt(indices[i])} is out of bounds: need "
                            f"0 <= index < {_fmt(shape)}")


def _linear(indices, shape):
    if indices.shape[0] == 0:
        return np.zeros(0, np.int64)
    if indices.shape[1] == 0:
        return np.zeros(indices.shape[0], np.int64)
    return np.ravel_multi_index(tuple(indices.T), tuple(int(d) for d in shape))


def _check_order(ctx, indices, lin, prefix=""):
    step = np.diff(lin)
    if step.size and (step <= 0).any():
        i = int(np.argmax(step <= 0)) + 1
        what = "is repeated" if step[i - 1] == 0 else "is out of order"
        raise _invalid(ctx, f"{prefix}indices[{i}] = {_fmt(indices[i])} {what}. Many sparse ops "
                            f"require sorted indices. Use `kf.sparse.reorder` to create a correctly "
                            f"ordered copy.")


# ---------------------------------------------------------------------------- kernels
def _sparse_to_dense(ctx):
    validate = ctx.get_attr("validate_indices")

    def compute(sparse_indices, output_shape, sparse_values, default_value):
        ind, shape, vals = np.asarray(sparse_indices), np.asarray(output_shape), np.asarray(sparse_values)
        if ind.ndim > 2:
            raise _invalid(ctx, f"sparse_indices should be a scalar, vector, or matrix, got shape "
                                f"{list(ind.shape)}")
        if shape.ndim > 1:
            raise _invalid(ctx, f"output_shape should be a scalar or vector, got shape "
                                f"{list(shape.shape)}")
        shape = shape.reshape(-1).astype(np.int64)
        n = ind.shape[0] if ind.ndim > 0 else 1
        ind = ind.reshape(n, -1) if ind.ndim < 2 else ind
        if ind.shape[1] != shape.size:
            raise _invalid(ctx, f"sparse_indices has {ind.shape[1]} columns but output_shape has "
                                f"{shape.size} dims")
        if vals.ndim > 1 or (vals.ndim == 1 and vals.shape[0] != n):
            raise _invalid(ctx, f"sparse_values has incorrect shape {list(vals.shape)}, should be "
                                f"[] or [{n}]")
        if np.ndim(default_value) != 0:
            raise _invalid(ctx, f"default_value should be a scalar, got shape "
                                f"{list(np.shape(default_value))}")
        if (shape < 0).any():
            raise _invalid(ctx, f"output_shape has a negative dim: {shape.tolist()}")
        _check_bounds(ctx, ind, shape)
        if validate:
            _check_order(ctx, ind, _linear(ind, shape))
        out = np.full(tuple(shape), default_value, dtype=vals.dtype)
        out[tuple(ind.T)] = vals
        return out
    return compute


def _sparse_reorder(ctx):
    def compute(input_indices, input_values, input_shape):
        ind, vals, shape = _check_sparse(ctx, input_indices, input_values, input_shape, "input_")
        _check_bounds(ctx, ind, shape)
        order = np.argsort(_linear(ind, shape), kind="stable")
        return ind[order], vals[order]
    return compute


def _sparse_reshape(ctx):
    def compute(input_indices, input_shape, new_shape):
        ind, shape, new = np.asarray(input_indices), np.asarray(input_shape), np.asarray(new_shape)
        if ind.ndim != 2 or shape.ndim != 1 or new.ndim != 1 or ind.shape[1] != shape.size:
            raise _invalid(ctx, f"input_indices [N, rank], input_shape [rank] and new_shape "
                                f"[new rank] expected, got shapes {list(ind.shape)}, "
                                f"{list(shape.shape)}, {list(new.shape)}")
        total = int(np.prod(shape))
        new = new.astype(np.int64).copy()
        unknown = np.flatnonzero(new == -1)
        if unknown.size > 1:
            raise _invalid(ctx, f"only one output dimension may be -1, not both {int(unknown[0])} "
                                f"and {int(unknown[1])}")
        if (new < -1).any():
            raise _invalid(ctx, f"size {int(np.argmax(new < -1))} must be non-negative, not "
                                f"{int(new[new < -1][0])}")
        known = int(np.prod(new[new >= 0]))
        if unknown.size:
            if known == 0 or total % known:
                raise _invalid(ctx, f"Input to reshape is a SparseTensor with {total} dense "
                                    f"values, but the requested shape requires a multiple of "
                                    f"{known}. (input_shape={shape.tolist()}, "
                                    f"new_shape={new_shape.tolist()})")
            new[unknown[0]] = total // known
        elif known != total:
            raise _invalid(ctx, f"Input to reshape is a tensor with {total} dense values, but the "
                                f"requested shape has {known}. (input_shape={shape.tolist()}, "
                                f"new_shape={new.tolist()})")
        lin = _linear(ind, shape)
        out = np.stack(np.unravel_index(lin, tuple(new)), axis=1) if new.size and ind.shape[0] \
            else np.zeros((ind.shape[0], new.size), np.int64)
        return out.astype(np.int64), new
    return compute


def _sparse_fill_empty_rows(ctx):
    def compute(indices, values, dense_shape, default_value):
        ind, vals, shape = _check_sparse(ctx, indices, values, dense_shape)
        if np.ndim(default_value) != 0:
            raise _invalid(ctx, f"default_value should be a scalar, got shape "
                                f"{list(np.shape(default_value))}")
        if shape.size == 0:
            raise _invalid(ctx, "dense_shape must not be empty (a SparseTensor of rank >= 1)")
        _check_bounds(ctx, ind, shape)
        rows = int(shape[0])
        empty = np.ones(rows, bool)
        empty[ind[:, 0]] = False
        new_rows = np.flatnonzero(empty)
        fill_ind = np.zeros((new_rows.size, shape.size), np.int64)
        fill_ind[:, 0] = new_rows
        all_ind = np.concatenate([ind.astype(np.int64), fill_ind])
        all_vals = np.concatenate([vals, np.full(new_rows.size, default_value, vals.dtype)])
        order = np.argsort(_linear(all_ind, shape), kind="stable")
        reverse = np.empty(order.size, np.int64)
        reverse[order] = np.arange(order.size)
        return all_ind[order], all_vals[order], empty, reverse[:ind.shape[0]]
    return compute


def _merge_sparse(ctx, a_ind, a_shape, b_ind, b_shape):
    """Linear indices of both operands, checked: same shape, canonical order."""
    if a_shape.tolist() != b_shape.tolist():
        raise _invalid(ctx, f"Operands do not have the same ranks or shapes: a_shape = "
                            f"{a_shape.tolist()} vs b_shape = {b_shape.tolist()}")
    for ind, p in ((a_ind, "a_"), (b_ind, "b_")):
        _check_bounds(ctx, ind, a_shape, p)
    la, lb = _linear(a_ind, a_shape), _linear(b_ind, a_shape)
    _check_order(ctx, a_ind, la, "a_")
    _check_order(ctx, b_ind, lb, "b_")
    return la, lb


def _sparse_add(ctx):
    def compute(a_indices, a_values, a_shape, b_indices, b_values, b_shape, thresh):
        a_ind, a_val, a_shape = _check_sparse(ctx, a_indices, a_values, a_shape, "a_")
        b_ind, b_val, b_shape = _check_sparse(ctx, b_indices, b_values, b_shape, "b_")
        if np.ndim(thresh) != 0:
            raise _invalid(ctx, f"The magnitude threshold must be a scalar, got shape "
                                f"{list(np.shape(thresh))}")
        la, lb = _merge_sparse(ctx, a_ind, a_shape, b_ind, b_shape)
        lin, inv = np.unique(np.concatenate([la, lb]), return_inverse=True)
        sums = np.zeros(lin.size, np.result_type(a_val, b_val))
        np.add.at(sums, inv, np.concatenate([a_val, b_val]))
        keep = np.abs(sums) >= thresh
        lin, sums = lin[keep], sums[keep]
        out = np.stack(np.unravel_index(lin, tuple(a_shape)), axis=1).astype(np.int64) \
            if lin.size and a_shape.size else np.zeros((lin.size, a_shape.size), np.int64)
        return out, sums, a_shape.copy()
    return compute


def _sparse_add_grad(ctx):
    def compute(backprop_val_grad, a_indices, b_indices, sum_indices):
        g, s = np.asarray(backprop_val_grad), np.asarray(sum_indices)
        a, b = np.asarray(a_indices), np.asarray(b_indices)
        if g.ndim != 1 or s.ndim != 2 or g.shape[0] != s.shape[0]:
            raise _invalid(ctx, f"backprop_val_grad [{s.shape[0] if s.ndim else '?'}] expected "
                                f"(one per sum index), got shape {list(g.shape)}")
        return _lookup(s, g, a), _lookup(s, g, b)
    return compute


def _lookup(keys, vals, queries):
    """vals at the rows of `keys` equal to each row of `queries`; 0 where there is none."""
    out = np.zeros(queries.shape[0], vals.dtype)
    if not keys.shape[0] or not queries.shape[0]:
        return out
    table = {tuple(r): i for i, r in enumerate(keys.tolist())}
    pos = np.array([table.get(tuple(r), -1) for r in queries.tolist()], np.int64)
    hit = pos >= 0
    out[hit] = vals[pos[hit]]
    return out


def _sparse_dense_add(ctx):
    def compute(a_indices, a_values, a_shape, b):
        ind, vals, shape = _check_sparse(ctx, a_indices, a_values, a_shape, "a_")
        b = np.asarray(b)
        if list(b.shape) != shape.tolist():
            raise _invalid(ctx, f"Dimensions of a and b do not match: a_shape = {shape.tolist()} "
                                f"vs b.shape = {list(b.shape)}")
        _check_bounds(ctx, ind, shape, "a_")
        out = b.copy()
        np.add.at(out, tuple(ind.T), vals)
        return out
    return compute


def _sparse_dense_matmul(ctx):
    adj_a, adj_b = ctx.get_attr("adjoint_a"), ctx.get_attr("adjoint_b")

    def compute(a_indices, a_values, a_shape, b):
        ind, vals, shape = _check_sparse(ctx, a_indices, a_values, a_shape, "a_")
        b = np.asarray(b)
        if shape.size != 2 or b.ndim != 2:
            raise _invalid(ctx, f"Tensor 'a_shape' and 'b' should be matrices (rank 2), got "
                                f"a_shape = {shape.tolist()} and b shape {list(b.shape)}")
        rows, cols = (int(shape[1]), int(shape[0])) if adj_a else (int(shape[0]), int(shape[1]))
        bm = b.conj().T if adj_b else b
        if bm.shape[0] != cols:
            raise _invalid(ctx, f"Cannot multiply A and B because inner dimension does not match: "
                                f"{cols} vs. {bm.shape[0]}.  Did you forget a transpose?  "
                                f"Dimensions of A: [{rows}, {cols}).  Dimensions of B: "
                                f"{list(b.shape)}")
        _check_bounds(ctx, ind, shape, "a_")
        r, c = (ind[:, 1], ind[:, 0]) if adj_a else (ind[:, 0], ind[:, 1])
        v = vals.conj() if adj_a else vals
        out = np.zeros((rows, bm.shape[1]), np.result_type(vals, b))
        np.add.at(out, r, v[:, None] * bm[c])
        return out
    return compute


def _sparse_reduce_sum(ctx):
    keep = ctx.get_attr("keep_dims")

    def compute(input_indices, input_values, input_shape, reduction_axes):
        ind, vals, shape = _check_sparse(ctx, input_indices, input_values, input_shape, "input_")
        rank = shape.size
        axes = np.asarray(reduction_axes).reshape(-1)
        bad = (axes < -rank) | (axes >= rank)
        if bad.any():
            raise _invalid(ctx, f"Invalid reduction dimension {int(axes[bad][0])}, for input with "
                                f"{rank} dimensions.")
        _check_bounds(ctx, ind, shape)
        axes = sorted({int(a) % rank for a in axes})
        kept_shape = [1 if i in axes else int(d) for i, d in enumerate(shape)]
        out = np.zeros(kept_shape, vals.dtype)
        kept_ind = ind.copy()
        kept_ind[:, axes] = 0
        np.add.at(out, tuple(kept_ind.T), vals)
        if keep:
            return out
        return out.reshape([int(d) for i, d in enumerate(shape) if i not in axes])
    return compute


def _sparse_slice(ctx):
    def compute(indices, values, shape, start, size):
        ind, vals, shp = _check_sparse(ctx, indices, values, shape)
        start, size = np.asarray(start).reshape(-1), np.asarray(size).reshape(-1)
        if start.size != shp.size or size.size != shp.size:
            raise _invalid(ctx, f"Expected start and size of {shp.size} entries (the input's "
                                f"rank), got {start.tolist()} and {size.tolist()}")
        if (start < 0).any() or (size < 0).any():
            raise _invalid(ctx, f"start and size must be non-negative, got {start.tolist()} and "
                                f"{size.tolist()}")
        lo = np.minimum(start, shp)
        hi = np.minimum(start + size, shp)
        keep = ((ind >= start) & (ind < hi)).all(axis=1) if ind.size else np.zeros(ind.shape[0], bool)
        return (ind[keep] - start).astype(np.int64), vals[keep], np.maximum(hi - lo, 0)
    return compute


def _sparse_slice_grad(ctx):
    def compute(backprop_val_grad, input_indices, input_start, output_indices):
        g = np.asarray(backprop_val_grad)
        keys = np.asarray(output_indices) + np.asarray(input_start)
        return _lookup(keys, g, np.asarray(input_indices))
    return compute


# ---------------------------------------------------------------------------- segment combiners
def _segment_rows(ctx, data, indices, segment_ids, num_segments=None):
    """Checks the inputs; returns (rows gathered, ids as int64, output row count)."""
    data, idx, ids = np.asarray(data), np.asarray(indices), np.asarray(segment_ids)
    if idx.ndim != 1 or ids.ndim != 1:
        raise _invalid(ctx, f"indices and segment_ids should be vectors, got shapes "
                            f"{list(idx.shape)} and {list(ids.shape)}")
    if idx.shape[0] != ids.shape[0]:
        raise _invalid(ctx, f"segment_ids and indices should have same size: "
                            f"{ids.shape[0]} vs. {idx.shape[0]}")
    if data.ndim < 1:
        raise _invalid(ctx, "data must be at least 1-D")
    bad = (idx < 0) | (idx >= data.shape[0])
    if bad.any():
        j = int(np.argmax(bad))
        raise _invalid(ctx, f"Index {int(idx[j])} out of range [0, {data.shape[0]}) at "
                            f"indices[{j}]")
    ids = ids.astype(np.int64)
    if num_segments is None:
        step = np.diff(ids)
        if step.size and (step < 0).any():
            j = int(np.argmax(step < 0)) + 1
            raise _invalid(ctx, f"segment ids are not increasing: segment_ids[{j}] = {ids[j]} "
                                f"follows {ids[j - 1]}")
        num = int(ids[-1]) + 1 if ids.size else 0
    else:
        num = int(num_segments)
    bad = (ids < 0) | (ids >= num)
    if bad.any():
        j = int(np.argmax(bad))
        raise _invalid(ctx, f"segment_ids[{j}] = {int(ids[j])} is out of range [0, {num})")
    return data[idx], ids, num


def _segment_factory(kind):
    def factory(ctx):
        npdt = np.dtype(ctx.output_dtypes[0].as_numpy_dtype)
        acc = np.float32 if npdt == np.float16 else npdt

        def compute(data, indices, segment_ids, num_segments=None):
            rows, ids, num = _segment_rows(ctx, data, indices, segment_ids, num_segments)
            out = np.zeros((num,) + rows.shape[1:], acc)
            np.add.at(out, ids, rows.astype(acc, copy=False))
            if kind != "Sum":
                counts = np.bincount(ids, minlength=num).astype(acc)
                scale = counts if kind == "Mean" else np.sqrt(counts)
                scale = np.maximum(scale, 1).reshape((-1,) + (1,) * (out.ndim - 1))
                out = out / scale
            return out.astype(npdt, copy=False)
        return compute
    return factory


def _segment_grad_factory(kind):
    def factory(ctx):
        npdt = np.dtype(ctx.output_dtypes[0].as_numpy_dtype)

        def compute(grad, indices, segment_ids, output_dim0):
            g, idx, ids = np.asarray(grad), np.asarray(indices), np.asarray(segment_ids).astype(np.int64)
            if idx.shape != ids.shape or idx.ndim != 1:
                raise _invalid(ctx, f"segment_ids and indices should have same size: "
                                    f"{list(ids.shape)} vs. {list(idx.shape)}")
            n0 = int(output_dim0)
            bad = (ids < 0) | (ids >= g.shape[0])
            if bad.any():
                j = int(np.argmax(bad))
                raise _invalid(ctx, f"Segment id {int(ids[j])} out of range [0, {g.shape[0]})")
            bad = (idx < 0) | (idx >= n0)
            if bad.any():
                j = int(np.argmax(bad))
                raise _invalid(ctx, f"Index {int(idx[j])} out of range [0, {n0})")
            counts = np.bincount(ids, minlength=g.shape[0]).astype(np.float64)
            scale = 1.0 / np.maximum(counts if kind == "Mean" else np.sqrt(counts), 1)
            rows = g[ids] * scale[ids].reshape((-1,) + (1,) * (g.ndim - 1)).astype(npdt)
            out = np.zeros((n0,) + g.shape[1:], npdt)
            np.add.at(out, idx, rows)
            return out
        return compute
    return factory


_FLOATS = ["float16", "float32", "float64"]
_REAL = _FLOATS + ["int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64"]


def register(registry, device=DEVICE):
    """Registers this family's CPU kernels."""
    table = {"SparseToDense": _sparse_to_dense, "SparseReorder": _sparse_reorder,
             "SparseReshape": _sparse_reshape, "SparseFillEmptyRows": _sparse_fill_empty_rows,
             "SparseAdd": _sparse_add, "SparseAddGrad": _sparse_add_grad,
             "SparseTensorDenseAdd": _sparse_dense_add,
             "SparseTensorDenseMatMul": _sparse_dense_matmul,
             "SparseReduceSum": _sparse_reduce_sum, "SparseSlice": _sparse_slice,
             "SparseSliceGrad": _sparse_slice_grad}
    for op, factory in table.items():
        registry.register(op, device, factory)
    for kind in ("Sum", "Mean", "SqrtN"):
        types = {"T": _REAL if kind == "Sum" else _FLOATS}
        registry.register(f"SparseSegment{kind}", device, _segment_factory(kind), constraints=types)
        registry.register(f"SparseSegment{kind}WithNumSegments", device, _segment_factory(kind),
                          constraints=types)
    for kind in ("Mean", "SqrtN"):
        registry.register(f"SparseSegment{kind}Grad", device, _segment_grad_factory(kind),
                          constraints={"T": _FLOATS})
