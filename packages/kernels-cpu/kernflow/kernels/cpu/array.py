"""Numpy kernels of the array ops (kernflow.core.ops.array_ops).

Kernels return views where numpy does (reshape, transpose, slices); they never write to inputs.
Bad runtime arguments raise InvalidArgumentError with TF's wording, prefixed by op type and node.
"""

from __future__ import annotations

import numpy as np

from kernflow.core.framework import errors
from kernflow.core.ops.array_ops_common import SliceSpecError, strided_slice_plan
from kernflow.core.ops.array_ops_extra import bcast_reduce_indices
from kernflow.core.ops.array_ops_shape import range_size

DEVICE = "CPU"


def _error(ctx, msg):
    return errors.InvalidArgumentError(None, None, f"{ctx.op_type} {ctx.name}: {msg}")


def _shape_str(shape) -> str:
    return "[" + ",".join(str(d) for d in shape) + "]"


def _out_np(ctx, i=0):
    return np.dtype(ctx.output_dtypes[i].as_numpy_dtype)


def _ints(v) -> list:
    return [int(x) for x in np.reshape(v, -1)]


def _scalar_int(ctx, v, what):
    a = np.asarray(v)
    if a.size != 1:
        raise _error(ctx, f"{what} must be a scalar, got shape {_shape_str(a.shape)}")
    return int(a.reshape(-1)[0])


def _axis(ctx, a, rank, what="axis"):
    if not -rank <= a < rank:
        raise _error(ctx, f"Expected {what} in the range [{-rank}, {rank}), but got {a}")
    return a + rank if a < 0 else a


def _zero(dt):
    return b"" if dt == np.dtype(object) else 0


# ----------------------------------------------------------------------------- shapes
def _shape(ctx):
    dt = _out_np(ctx)
    return lambda x: np.array(np.shape(x), dtype=dt)


def _shape_n(ctx):
    dt = _out_np(ctx)
    return lambda *xs: tuple(np.array(np.shape(x), dtype=dt) for x in xs)


def _size(ctx):
    dt = _out_np(ctx).type
    return lambda x: dt(np.size(x))


def _fill(ctx):
    dt = _out_np(ctx)

    def compute(dims, value):
        d = np.asarray(dims)
        if d.ndim != 1:
            raise _error(ctx, f"dims must be a vector, got shape {_shape_str(d.shape)}")
        if np.ndim(value) != 0:
            raise _error(ctx, f"value must be a scalar, got shape {_shape_str(np.shape(value))}")
        dl = d.tolist()
        if any(x < 0 for x in dl):
            raise _error(ctx, f"dims must be non-negative, got {_shape_str(dl)}")
        return np.full(dl, value, dtype=dt)
    return compute


def _like(fill):
    def factory(ctx):
        dt = _out_np(ctx)
        v = _zero(dt) if fill == 0 else fill
        return lambda x: np.full(np.shape(x), v, dtype=dt)
    return factory


def _reshape(ctx):
    def compute(x, shape):
        s = np.asarray(shape)
        dims = s.tolist()
        if s.ndim != 1:
            raise _error(ctx, f"sizes input must be 1-D, not {_shape_str(s.shape)}")
        try:
            if any(d < -1 for d in dims):
                raise ValueError
            return np.reshape(x, dims)
        except ValueError:
            raise _reshape_error(ctx, np.size(x), dims) from None
    return compute


def _reshape_error(ctx, n, dims):
    unknown = [i for i, d in enumerate(dims) if d == -1]
    bad = [d for d in dims if d < -1]
    if bad:
        return _error(ctx, f"Size {dims.index(bad[0])} must be non-negative, not {bad[0]}")
    if len(unknown) > 1:
        return _error(ctx, f"Only one input size may be -1, not both {unknown[0]} and {unknown[1]}")
    product = int(np.prod([d for d in dims if d != -1], dtype=np.int64))
    if unknown:
        if product == 0:
            return _error(ctx, "Reshape cannot infer the missing input size for an empty tensor "
                          "unless all specified input sizes are non-zero")
        return _error(ctx, f"Input to reshape is a tensor with {n} values, but the requested shape "
                      f"requires a multiple of {product}")
    return _error(ctx, f"Input to reshape is a tensor with {n} values, but the requested shape has "
                  f"{product}")


def _expand_dims(ctx):
    def compute(x, dim):
        a = _scalar_int(ctx, dim, "'dim' input")
        shape = np.shape(x)
        r = len(shape)
        if not -r - 1 <= a <= r:
            raise _error(ctx, f"Tried to expand dim index {a} for tensor with {r} dimensions.")
        if a < 0:
            a += r + 1
        return np.reshape(x, shape[:a] + (1,) + shape[a:])
    return compute


def _squeeze(ctx):
    wanted = tuple(ctx.get_attr("squeeze_dims"))

    def compute(x):
        r = np.ndim(x)
        if not wanted:
            return np.squeeze(x)
        axes = []
        for d in wanted:
            if not -r <= d < r:
                raise _error(ctx, f"Tried to squeeze dim index {d} for input with {r} dimensions.")
            a = d + r if d < 0 else d
            if x.shape[a] != 1:
                raise _error(ctx, f"Can not squeeze dim[{a}], expected a dimension of 1, got "
                             f"{x.shape[a]}")
            axes.append(a)
        return np.squeeze(x, axis=tuple(set(axes)))
    return compute


def _transpose(conj):
    def factory(ctx):
        def compute(x, perm):
            p = _ints(perm)
            r = np.ndim(x)
            if len(p) != r:
                raise _error(ctx, f"transpose expects a vector of size {r}. But input(1) is a vector "
                             f"of size {len(p)}")
            norm = [a + r if a < 0 else a for a in p]
            if sorted(norm) != list(range(r)):
                raise _error(ctx, f"{_shape_str(p)} is not a valid permutation of {r} dimensions")
            y = np.transpose(x, norm)
            return np.conj(y) if conj else y
        return compute
    return factory


def _broadcast_to(ctx):
    def compute(x, shape):
        target = _ints(shape)
        try:
            return np.broadcast_to(x, target)  # a read-only view: kernels never write their inputs
        except ValueError:
            raise _error(ctx, f"Incompatible shapes: {_shape_str(np.shape(x))} vs. "
                         f"{_shape_str(target)}") from None
    return compute


def _range(ctx):
    dt = _out_np(ctx)

    def compute(start, limit, delta):
        try:
            n = range_size(start, limit, delta, dt.type)
        except ValueError as e:
            raise _error(ctx, str(e)) from None
        if dt.kind in "iu":
            return np.arange(int(start), int(start) + n * int(delta), int(delta), dtype=dt)[:n]
        return (np.asarray(start, dt) + np.arange(n, dtype=dt) * np.asarray(delta, dt)).astype(dt)
    return compute


# ----------------------------------------------------------------------------- join / split
def _concat(ctx):
    def compute(*args):
        values, axis = args[:-1], _scalar_int(ctx, args[-1], "axis")
        r = np.ndim(values[0])
        if r == 0:
            raise _error(ctx, "Can't concatenate scalars (use tf.stack instead)")
        a = _axis(ctx, axis, r, "concatenating dimensions")
        s0 = np.shape(values[0])
        for i, v in enumerate(values[1:], 1):
            s = np.shape(v)
            if len(s) != r or any(x != y for j, (x, y) in enumerate(zip(s0, s)) if j != a):
                raise _error(ctx, f"ConcatOp : Dimension mismatch in input {i}: shape[0] = "
                             f"{_shape_str(s0)} vs. shape[{i}] = {_shape_str(s)} (axis {a})")
        return np.concatenate(values, axis=a)
    return compute


def _pack(ctx):
    axis = ctx.get_attr("axis")

    def compute(*values):
        s0 = np.shape(values[0])
        for i, v in enumerate(values[1:], 1):
            if np.shape(v) != s0:
                raise _error(ctx, f"Shapes of all inputs must match: values[0].shape = "
                             f"{_shape_str(s0)} != values[{i}].shape = {_shape_str(np.shape(v))}")
        r = len(s0) + 1
        _axis(ctx, axis, r)
        return np.stack(values, axis=axis)
    return compute


def _unpack(ctx):
    num, axis = ctx.get_attr("num"), ctx.get_attr("axis")

    def compute(x):
        x = np.asarray(x)
        a = _axis(ctx, axis, x.ndim)
        if x.shape[a] != num:
            raise _error(ctx, f"Input shape axis {a} must equal {num}, got shape "
                         f"{_shape_str(x.shape)}")
        moved = np.moveaxis(x, a, 0)
        return tuple(moved[i, ...] for i in range(num))
    return compute


def _split(ctx):
    n = ctx.get_attr("num_split")

    def compute(split_dim, value):
        value = np.asarray(value)
        a = _axis(ctx, _scalar_int(ctx, split_dim, "split_dim"), value.ndim, "split_dim")
        d = value.shape[a]
        if d % n:
            raise _error(ctx, f"Number of ways to split should evenly divide the split dimension, "
                         f"but got split_dim {a} (size = {d}) and num_split {n}")
        return tuple(np.split(value, n, axis=a))
    return compute


def _split_sizes(ctx, size_splits, d, n) -> list:
    """SplitV's sizes along a dimension of `d`, the one -1 resolved; raises as TF does."""
    sizes = _ints(size_splits)
    if len(sizes) != n:
        raise _error(ctx, f"Number of split sizes {len(sizes)} must equal num_split {n}")
    unknown = [i for i, s in enumerate(sizes) if s == -1]
    known = sum(s for s in sizes if s != -1)
    if len(unknown) > 1 or any(s < -1 for s in sizes) or \
            (unknown and known > d) or (not unknown and known != d):
        raise _error(ctx, f"Determined shape must either match input shape along split_dim "
                     f"exactly if fully specified, or be less than the size of the input along "
                     f"split_dim if not fully specified.  Got: {known}")
    if unknown:
        sizes[unknown[0]] = d - known
    return sizes


def _split_v(ctx):
    n = ctx.get_attr("num_split")

    def compute(value, size_splits, split_dim):
        value = np.asarray(value)
        a = _axis(ctx, _scalar_int(ctx, split_dim, "split_dim"), value.ndim, "split_dim")
        sizes = _split_sizes(ctx, size_splits, value.shape[a], n)
        return tuple(np.split(value, np.cumsum(sizes)[:-1], axis=a))
    return compute


def _tile(ctx):
    def compute(x, multiples):
        m = _ints(multiples)
        if len(m) != np.ndim(x):
            raise _error(ctx, f"Expected multiples argument to be a vector of length {np.ndim(x)} "
                         f"but got length {len(m)}")
        for i, v in enumerate(m):
            if v < 0:
                raise _error(ctx, f"Expected multiples[{i}] >= 0, but got {v}")
        return np.tile(x, m)
    return compute


def _paddings(ctx, x, paddings):
    p = np.asarray(paddings)
    r = np.ndim(x)
    if p.ndim != 2 or p.shape[1] != 2:
        raise _error(ctx, f"paddings must be a matrix with 2 columns: {_shape_str(p.shape)}")
    if p.shape[0] != r:
        raise _error(ctx, f"The first dimension of paddings must be the rank of inputs"
                     f"{_shape_str(p.shape)} {_shape_str(np.shape(x))}")
    pl = p.tolist()
    for b, a in pl:
        if b < 0 or a < 0:
            raise _error(ctx, f"Paddings must be non-negative: {b} {a}")
    return pl


def _pad(ctx):
    dt = _out_np(ctx)
    zero = _zero(dt)

    def compute(x, paddings, constant_values=None):
        pl = _paddings(ctx, x, paddings)
        c = zero if constant_values is None else np.asarray(constant_values)
        if np.ndim(c):
            raise _error(ctx, f"constant_values must be a scalar. Got: {_shape_str(np.shape(c))}")
        if not pl:
            return np.array(x, dtype=dt)
        if dt == np.dtype(object):
            c = c.item() if isinstance(c, np.ndarray) else c
        return np.pad(x, pl, mode="constant", constant_values=c).astype(dt, copy=False)
    return compute


def _mirror_pad(ctx):
    mode = ctx.get_attr("mode")
    reflect = mode == "REFLECT"

    def compute(x, paddings):
        pl = _paddings(ctx, x, paddings)
        for d, (b, a) in zip(np.shape(x), pl):
            if reflect and (b >= d or a >= d) and (b or a):
                raise _error(ctx, f"paddings must be less than the dimension size: {b}, {a} not "
                             f"less than {d}")
            if not reflect and (b > d or a > d):
                raise _error(ctx, f"paddings must be no greater than the dimension size: {b}, {a} "
                             f"greater than {d}")
        if not pl:
            return np.array(x)
        return np.pad(x, pl, mode="reflect" if reflect else "symmetric")
    return compute


def _reverse(ctx):
    def compute(x, axis):
        r = np.ndim(x)
        axes = []
        for i, a in enumerate(_ints(axis)):
            if not -r <= a < r:
                raise _error(ctx, f"'axis'[{i}] = {a} is out of valid range [{-r}, {r})")
            a = a + r if a < 0 else a
            if a in axes:
                raise _error(ctx, f"axis {a} specified more than once.")
            axes.append(a)
        return np.flip(x, tuple(axes)) if axes else np.array(x)
    return compute


def _one_hot(ctx):
    axis = ctx.get_attr("axis")
    dt = _out_np(ctx)

    def compute(indices, depth, on_value, off_value):
        d = _scalar_int(ctx, depth, "depth")
        if d < 0:
            raise _error(ctx, f"depth must be non-negative, got: {d}")
        idx = np.asarray(indices)
        if not -1 <= axis <= idx.ndim:
            raise _error(ctx, f"Expected axis to be -1 or between [0, {idx.ndim}).  But received: "
                         f"{axis}")
        hot = idx[..., None] == np.arange(d, dtype=idx.dtype)
        out = np.where(hot, on_value, off_value).astype(dt, copy=False)
        if axis not in (-1, idx.ndim):
            out = np.moveaxis(out, -1, axis)
        return out
    return compute


# ----------------------------------------------------------------------------- slicing
def _slice(ctx):
    def compute(x, begin, size):
        b, z = _ints(begin), _ints(size)
        shape = np.shape(x)
        if len(b) != len(shape) or len(z) != len(shape):
            raise _error(ctx, f"Expected begin and size arguments to be 1-D tensors of size "
                         f"{len(shape)}, but got shapes [{len(b)}] and [{len(z)}] instead.")
        idx = []
        for i, (d, bi, zi) in enumerate(zip(shape, b, z)):
            if zi == -1:
                zi = d - bi
            if not 0 <= bi <= d:
                raise _error(ctx, f"Expected begin[{i}] in [0, {d}], but got {bi}")
            if not 0 <= zi <= d - bi:
                raise _error(ctx, f"Expected size[{i}] in [0, {d - bi}], but got {zi}")
            idx.append(slice(bi, bi + zi))
        return np.asarray(x)[tuple(idx)]
    return compute


def _strided_slice(ctx):
    masks = tuple(ctx.get_attr(m) for m in ("begin_mask", "end_mask", "ellipsis_mask",
                                             "new_axis_mask", "shrink_axis_mask"))
    cache = {}

    def compute(x, begin, end, strides):
        x = np.asarray(x)
        b, e, s = np.asarray(begin), np.asarray(end), np.asarray(strides)
        key = (x.shape, b.tobytes(), e.tobytes(), s.tobytes())
        index = cache.get(key)
        if index is None:
            try:
                index, _ = strided_slice_plan(list(x.shape), b.tolist(), e.tolist(), s.tolist(), *masks)
            except SliceSpecError as err:
                raise _error(ctx, str(err)) from None
            if len(cache) > 64:
                cache.clear()
            cache[key] = index
        r = x[index]
        return r if isinstance(r, np.ndarray) else np.array(r, dtype=x.dtype)
    return compute


def _gather(ctx):
    bd_attr = ctx.get_attr("batch_dims")

    def compute(params, indices, axis):
        params, idx = np.asarray(params), np.asarray(indices)
        if params.ndim == 0:
            raise _error(ctx, "params must be at least 1 dimensional")
        a = _axis(ctx, _scalar_int(ctx, axis, "axis"), params.ndim)
        n = params.shape[a]
        if idx.size and (idx.min() < 0 or idx.max() >= n):
            bad = tuple(np.argwhere((idx < 0) | (idx >= n))[0])
            raise _error(ctx, f"indices[{','.join(str(i) for i in bad)}] = {idx[bad]} is not in "
                         f"[0, {n})")
        bd = bd_attr + idx.ndim if bd_attr < 0 else bd_attr
        if bd == 0:
            return np.take(params, idx, axis=a)
        if bd > a or params.shape[:bd] != idx.shape[:bd]:
            raise _error(ctx, f"params.shape[:{bd}] = {_shape_str(params.shape[:bd])} must match "
                         f"indices.shape[:{bd}] = {_shape_str(idx.shape[:bd])} and batch_dims "
                         f"({bd}) must be <= axis ({a})")
        batch = params.shape[:bd]
        p = params.reshape((-1,) + params.shape[bd:])
        ix = idx.reshape((-1,) + idx.shape[bd:])
        out = [np.take(p[i], ix[i], axis=a - bd) for i in range(p.shape[0])]
        tail = params.shape[bd:a] + idx.shape[bd:] + params.shape[a + 1:]
        if not out:
            return np.zeros(batch + tail, dtype=params.dtype)
        return np.stack(out).reshape(batch + tail)
    return compute


def _unique(with_counts):
    def factory(ctx):
        idx_dt = ctx.get_attr("out_idx").as_numpy_dtype

        def compute(x):
            x = np.asarray(x)
            if x.ndim != 1:
                raise _error(ctx, f"unique expects a 1D vector, got {_shape_str(x.shape)}")
            if x.size == 0:
                empty = np.zeros(0, idx_dt)
                return (x, empty, empty) if with_counts else (x, empty)
            u, first, inverse, counts = np.unique(x, return_index=True, return_inverse=True,
                                                  return_counts=True)
            order = np.argsort(first, kind="stable")      # first-occurrence order, as TF
            rank = np.empty_like(order)
            rank[order] = np.arange(order.size)
            out = (u[order], rank[inverse.reshape(-1)].astype(idx_dt))
            return out + (counts[order].astype(idx_dt),) if with_counts else out
        return compute
    return factory


def _dynamic_partition(ctx):
    n = ctx.get_attr("num_partitions")

    def compute(data, partitions):
        data, p = np.asarray(data), np.asarray(partitions)
        if data.shape[:p.ndim] != p.shape:
            raise _error(ctx, f"data.shape must start with partitions.shape, got data.shape = "
                         f"{_shape_str(data.shape)}, partitions.shape = {_shape_str(p.shape)}")
        flat_p = p.reshape(-1)
        if flat_p.size and (flat_p.min() < 0 or flat_p.max() >= n):
            bad = tuple(np.argwhere((p < 0) | (p >= n))[0])
            raise _error(ctx, f"partitions[{','.join(str(i) for i in bad)}] = {p[bad]} is not in "
                         f"[0, {n})")
        flat_d = data.reshape((-1,) + data.shape[p.ndim:])
        order = np.argsort(flat_p, kind="stable")
        counts = np.bincount(flat_p, minlength=n)
        return tuple(np.split(flat_d[order], np.cumsum(counts)[:-1]))
    return compute


def _dynamic_stitch(ctx):
    n = ctx.get_attr("N")
    dt = _out_np(ctx)

    def compute(*args):
        idxs = [np.asarray(i) for i in args[:n]]
        data = [np.asarray(d) for d in args[n:]]
        rest = data[0].shape[idxs[0].ndim:]
        first = 0
        for m, (ix, d) in enumerate(zip(idxs, data)):
            if d.shape[:ix.ndim] != ix.shape or d.shape[ix.ndim:] != rest:
                raise _error(ctx, f"data[{m}].shape = {_shape_str(d.shape)} does not start with "
                             f"indices[{m}].shape = {_shape_str(ix.shape)} or its slices differ "
                             f"from {_shape_str(rest)}")
            if ix.size:
                if ix.min() < 0:
                    bad = tuple(np.argwhere(ix < 0)[0])
                    raise _error(ctx, f"indices[{m}][{','.join(map(str, bad))}] = {ix[bad]} is "
                                 f"negative")
                first = max(first, int(ix.max()) + 1)
        out = np.full((first,) + rest, _zero(dt), dtype=dt)
        for ix, d in zip(idxs, data):
            out[ix.reshape(-1)] = d.reshape((-1,) + rest)
        return out
    return compute


# ----------------------------------------------------------------------------- N-d gather/scatter
def _nd_check(ctx, idx, shape, what):
    k = idx.shape[-1]
    if k > len(shape):
        raise _error(ctx, f"indices.shape[-1] must be <= {what} rank, but saw indices shape: "
                     f"{_shape_str(idx.shape)} and {what} shape: {_shape_str(shape)}")
    flat = idx.reshape(int(np.prod(idx.shape[:-1], dtype=np.int64)), k)
    if flat.size:
        bad = np.nonzero(np.any((flat < 0) | (flat >= np.asarray(shape[:k], dtype=flat.dtype)), axis=1))[0]
        if bad.size:
            where = np.unravel_index(int(bad[0]), idx.shape[:-1])
            raise _error(ctx, f"indices[{','.join(map(str, where))}] = {_shape_str(flat[bad[0]])} "
                         f"does not index into {what} shape {_shape_str(shape)}")
    return tuple(np.moveaxis(idx, -1, 0)), k


def _gather_nd(ctx):
    def compute(params, indices):
        params, idx = np.asarray(params), np.asarray(indices)
        if idx.ndim == 0:
            raise _error(ctx, "indices must be at least a vector")
        index, k = _nd_check(ctx, idx, params.shape, "param")
        if k == 0:
            return np.array(np.broadcast_to(params, idx.shape[:-1] + params.shape))
        return params[index]
    return compute


def _scatter_nd(ctx):
    dt = _out_np(ctx)

    def compute(indices, updates, shape):
        idx, upd = np.asarray(indices), np.asarray(updates)
        out_shape = tuple(_ints(shape))
        if any(d < 0 for d in out_shape):
            raise _error(ctx, f"shape must be non-negative, got {_shape_str(out_shape)}")
        if idx.ndim == 0:
            raise _error(ctx, "indices must be at least a vector")
        index, k = _nd_check(ctx, idx, out_shape, "output")
        want = idx.shape[:-1] + out_shape[k:]
        if upd.shape != want:
            raise _error(ctx, f"updates.shape {_shape_str(upd.shape)} must be indices.shape[:-1] + "
                         f"shape[indices.shape[-1]:] = {_shape_str(want)}")
        out = np.zeros(out_shape, dtype=dt)
        if k == 0:
            out += upd.reshape((-1,) + out_shape).sum(axis=0).astype(dt)
        else:
            np.add.at(out, index, upd)
        return out
    return compute


def _invert_permutation(ctx):
    def compute(x):
        x = np.asarray(x)
        if x.ndim != 1:
            raise _error(ctx, f"invert_permutation expects a 1D vector, got {_shape_str(x.shape)}")
        n = x.size
        if x.size and (x.min() < 0 or x.max() >= n or np.unique(x).size != n):
            raise _error(ctx, f"{x.tolist()} is not a permutation of 0..{n - 1}")
        out = np.empty_like(x)
        out[x] = np.arange(n, dtype=x.dtype)
        return out
    return compute


def _bcast_args(ctx):
    dt = _out_np(ctx)

    def compute(s0, s1):
        try:
            r0, r1 = bcast_reduce_indices(_ints(s0), _ints(s1))
        except ValueError as e:
            raise _error(ctx, str(e)) from None
        return np.array(r0, dtype=dt), np.array(r1, dtype=dt)
    return compute


def _concat_offset(ctx):
    def compute(concat_dim, *shapes):
        shapes = [_ints(s) for s in shapes]
        r = len(shapes[0])
        a = _axis(ctx, _scalar_int(ctx, concat_dim, "concat_dim"), r, "concat_dim")
        out, offset = [], 0
        for i, s in enumerate(shapes):
            if len(s) != r or any(x != y for j, (x, y) in enumerate(zip(s, shapes[0])) if j != a):
                raise _error(ctx, f"input {i} has shape {_shape_str(s)}, which does not match "
                             f"{_shape_str(shapes[0])} outside dimension {a}")
            o = np.zeros(r, np.int32)
            o[a] = offset
            offset += s[a]
            out.append(o)
        return tuple(out)
    return compute


def _strided_slice_grad(ctx):
    masks = tuple(ctx.get_attr(m) for m in ("begin_mask", "end_mask", "ellipsis_mask",
                                             "new_axis_mask", "shrink_axis_mask"))
    dt = _out_np(ctx)

    def compute(shape, begin, end, strides, dy):
        dims = _ints(shape)
        try:
            index, out_dims = strided_slice_plan(dims, _ints(begin), _ints(end), _ints(strides), *masks)
        except SliceSpecError as err:
            raise _error(ctx, str(err)) from None
        dy = np.asarray(dy)
        if list(dy.shape) != out_dims:
            raise _error(ctx, f"dy has shape {_shape_str(dy.shape)}, the slice has "
                         f"{_shape_str(out_dims)}")
        out = np.zeros(dims, dtype=dt)
        out[index] = dy
        return out
    return compute


def _mirror_pad_grad(ctx):
    reflect = ctx.get_attr("mode") == "REFLECT"
    off = 1 if reflect else 0

    def compute(x, paddings):
        pl = _paddings(ctx, x, paddings)
        g = np.array(x)
        for ax, (b, a) in enumerate(pl):
            n = g.shape[ax] - b - a
            if n < 0 or b > n - off or a > n - off:
                raise _error(ctx, f"paddings {b}, {a} do not fit dimension {ax} of size "
                             f"{g.shape[ax]} in {'REFLECT' if reflect else 'SYMMETRIC'} mode")
            core = np.take(g, np.arange(b, b + n), axis=ax)
            if b:
                before = np.flip(np.take(g, np.arange(b), axis=ax), ax)
                sl = [slice(None)] * g.ndim
                sl[ax] = slice(off, off + b)
                core[tuple(sl)] += before
            if a:
                after = np.flip(np.take(g, np.arange(b + n, b + n + a), axis=ax), ax)
                sl = [slice(None)] * g.ndim
                sl[ax] = slice(n - off - a, n - off)
                core[tuple(sl)] += after
            g = core
        return g
    return compute


def register(registry, device=DEVICE):
    registry.register_simple("PlaceholderWithDefault", device, lambda x: x)
    registry.register_simple("StopGradient", device, lambda x: x)
    registry.register_simple("IdentityN", device, lambda *xs: xs)
    registry.register_simple("Rank", device, lambda x: np.int32(np.ndim(x)))
    simple = {
        "Shape": _shape, "ShapeN": _shape_n, "Size": _size, "Fill": _fill,
        "ZerosLike": _like(0), "OnesLike": _like(1), "Reshape": _reshape,
        "ExpandDims": _expand_dims, "Squeeze": _squeeze, "Transpose": _transpose(False),
        "ConjugateTranspose": _transpose(True), "BroadcastTo": _broadcast_to, "Range": _range,
        "ConcatV2": _concat, "Pack": _pack, "Unpack": _unpack, "Split": _split, "SplitV": _split_v,
        "Tile": _tile, "Pad": _pad, "PadV2": _pad, "MirrorPad": _mirror_pad, "ReverseV2": _reverse,
        "OneHot": _one_hot, "Slice": _slice, "StridedSlice": _strided_slice, "GatherV2": _gather,
        "DynamicPartition": _dynamic_partition, "DynamicStitch": _dynamic_stitch,
        "ParallelDynamicStitch": _dynamic_stitch, "GatherNd": _gather_nd, "ScatterNd": _scatter_nd,
        "InvertPermutation": _invert_permutation, "BroadcastGradientArgs": _bcast_args,
        "ConcatOffset": _concat_offset, "StridedSliceGrad": _strided_slice_grad,
        "MirrorPadGrad": _mirror_pad_grad, "Unique": _unique(False),
        "UniqueWithCounts": _unique(True),
    }
    for op_type, factory in simple.items():
        registry.register(op_type, device, factory)
