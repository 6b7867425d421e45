"""Gradients of the array ops (kernflow.core.ops.array_ops), with TF1's formulas.

Shapes known while the graph is built become constants (a Reshape to the input's static shape, a
Slice at constant offsets, a Tile's sum over constant axes), so a gradient graph built from static
shapes holds no Shape ops and skips ops that would not change anything; unknown shapes take TF's
run-time formulas.

GatherV2 along axis 0 returns an `IndexedSlices` (the gathered rows' gradients and their indices),
so an embedding's update touches only the rows looked up.
"""

from __future__ import annotations

import numpy as np

from kernflow.core.framework import dtypes as _dtypes
from kernflow.core.framework import ops as _ops
from kernflow.core.framework import tensor_util
from kernflow.core.framework.gradient_registry import NotDifferentiable, RegisterGradient
from kernflow.core.framework.indexed_slices import IndexedSlices
from kernflow.core.framework.op_def_library import apply_op
from kernflow.core.ops import array_ops
from kernflow.core.ops import math_ops
from kernflow.core.ops import segment_ops
from kernflow.core.ops.array_ops_common import partial_scalar

# Ops whose outputs do not depend differentiably on their inputs (TF marks them alike).
for _op_type in ("Const", "Shape", "ShapeN", "Size", "Rank", "ZerosLike", "OnesLike", "Range",
                 "StopGradient", "InvertPermutation", "BroadcastGradientArgs", "ConcatOffset", "Unique",
                 "UniqueWithCounts"):
    NotDifferentiable(_op_type)


# ---------------------------------------------------------------------------- helpers
def dense(grad):
    """`grad` as a Tensor (an IndexedSlices is summed into its dense shape)."""
    return _ops.convert_to_tensor(grad) if isinstance(grad, IndexedSlices) else grad


def static_dims(t):
    """t's dims as a list of ints when fully known, else None."""
    s = t.shape
    return s.as_list() if s.is_fully_defined() else None


def shape_of(t, dtype=_dtypes.int32):
    """t's shape: a constant of `dtype` when fully known statically, else a Shape op."""
    dims = static_dims(t)
    if dims is not None:
        return array_ops.constant(dims, dtype=dtype)
    return array_ops.shape_internal(t, optimize=False, out_type=dtype)


def reshape_like(grad, t):
    """Reshapes grad to t's shape, with a constant shape when at most one dim of t is unknown."""
    grad = dense(grad)
    s = t.shape
    if s.is_fully_defined() and grad.shape.is_fully_defined() and grad.shape.as_list() == s.as_list():
        return grad
    dims = s.dim_values
    if s.is_fully_defined() or (dims is not None and dims.count(None) == 1 and 0 not in dims):
        out = array_ops.reshape(grad, [-1 if d is None else d for d in dims])
    else:
        out = array_ops.reshape(grad, array_ops.shape_internal(t, optimize=False))
    out.set_shape(s)
    return out


def _const_ints(t):
    """The static value of a 1-D int tensor as a list of ints (None when unknown)."""
    v = tensor_util.constant_value(t)
    return None if v is None else [int(x) for x in np.reshape(v, -1)]


def _norm_axis(axis_t, rank):
    """A non-negative static axis, or None when the axis or a needed rank is unknown."""
    a = partial_scalar(axis_t)
    if a is None:
        return None
    if a < 0:
        return None if rank is None else a + rank
    return a


# ---------------------------------------------------------------------------- identity-like
@RegisterGradient("IdentityN")
def _identity_n_grad(op, *grads):
    return list(grads)


@RegisterGradient("OneHot")
def _one_hot_grad(op, grad):
    return [None, None, None, None]


@RegisterGradient("Fill")
def _fill_grad(op, grad):
    return [None, math_ops.reduce_sum(dense(grad))]


@RegisterGradient("Reshape")
def _reshape_grad(op, grad):
    return [reshape_like(grad, op.inputs[0]), None]


@RegisterGradient("ExpandDims")
def _expand_dims_grad(op, grad):
    return [reshape_like(grad, op.inputs[0]), None]


@RegisterGradient("Squeeze")
def _squeeze_grad(op, grad):
    return [reshape_like(grad, op.inputs[0])]


def _transpose_grad_of(op, grad, conjugate):
    p = op.inputs[1]
    perm = _const_ints(p)
    if perm is not None:
        r = len(perm)
        perm = [x + r if x < 0 else x for x in perm]
        if perm == list(range(r)) and not conjugate:
            return [dense(grad), None]
        inv = array_ops.constant(np.argsort(perm), dtype=p.dtype.base_dtype)
    else:
        inv = array_ops.invert_permutation(p)
    return [array_ops.transpose(dense(grad), inv, conjugate=conjugate), None]


@RegisterGradient("Transpose")
def _transpose_grad(op, grad):
    return _transpose_grad_of(op, grad, False)


@RegisterGradient("ConjugateTranspose")
def _conjugate_transpose_grad(op, grad):
    return _transpose_grad_of(op, grad, True)


@RegisterGradient("ReverseV2")
def _reverse_grad(op, grad):
    return [array_ops.reverse(dense(grad), op.inputs[1]), None]


@RegisterGradient("BroadcastTo")
def _broadcast_to_grad(op, grad):
    """Sums grad over the axes the input was broadcast along (constant axes when shapes are known)."""
    grad = dense(grad)
    x = op.inputs[0]
    in_dims, out_dims = static_dims(x), static_dims(op.outputs[0])
    if in_dims is not None and out_dims is not None:
        lead = len(out_dims) - len(in_dims)
        axes = list(range(lead)) + [lead + i for i, d in enumerate(in_dims)
                                    if d == 1 and out_dims[lead + i] != 1]
        if not axes:
            return [reshape_like(grad, x), None]
        g = math_ops.reduce_sum(grad, axes, keepdims=lead == 0)
        return [reshape_like(g, x), None]
    shape_t = op.inputs[1]
    in_shape = array_ops.shape_internal(x, optimize=False, out_type=shape_t.dtype.base_dtype)
    _, axes = array_ops.broadcast_gradient_args(shape_t, in_shape)
    g = array_ops.reshape(math_ops.reduce_sum(grad, axes, keepdims=True), in_shape)
    g.set_shape(x.shape)
    return [g, None]


# ---------------------------------------------------------------------------- join and split
@RegisterGradient("Pack")
def _pack_grad(op, grad):
    return array_ops.unstack(dense(grad), num=op.get_attr("N"), axis=op.get_attr("axis"))


@RegisterGradient("Unpack")
def _unpack_grad(op, *grads):
    return [array_ops.stack([dense(g) for g in grads], axis=op.get_attr("axis"))]


@RegisterGradient("Split")
def _split_grad(op, *grads):
    return [None, array_ops.concat([dense(g) for g in grads], op.inputs[0])]


@RegisterGradient("SplitV")
def _split_v_grad(op, *grads):
    return [array_ops.concat([dense(g) for g in grads], op.inputs[2]), None, None]


def _rank_of(values):
    for v in values:
        if v.shape.rank is not None:
            return v.shape.rank
    return None


@RegisterGradient("ConcatV2")
def _concat_grad(op, grad):
    """Splits grad back into the inputs' pieces: one SplitV when the sizes are static."""
    values, axis_t = op.inputs[:-1], op.inputs[-1]
    rank = _rank_of(values)
    a = _norm_axis(axis_t, rank)
    if isinstance(grad, IndexedSlices):
        if a == 0:
            return _concat_grad_sparse(values, grad) + [None]
        grad = dense(grad)
    if a is not None and rank is not None:
        sizes = [v.shape.dim_values[a] for v in values]
        unknown = sum(s is None for s in sizes)
        if unknown <= 1:
            parts = array_ops.split(grad, [-1 if s is None else s for s in sizes], axis=a)
            for p, v in zip(parts, values):
                p.set_shape(v.shape)
            return parts + [None]
    # Run-time sizes: the offset of each input within the output, then one Slice per input.
    if a is not None:
        dim = array_ops.constant(a, dtype=_dtypes.int32)
    else:
        dim = math_ops.cast(axis_t, _dtypes.int32)
        if rank is not None:
            dim = math_ops.floormod(dim, rank)
        else:
            dim = math_ops.floormod(dim, array_ops.rank(values[0]))
    shapes = array_ops.shape_n(list(values))
    offsets = array_ops.concat_offset(dim, shapes)
    out = []
    for v, off, size in zip(values, offsets, shapes):
        s = array_ops.slice(grad, off, size)
        s.set_shape(v.shape)
        out.append(s)
    return out + [None]


def _concat_grad_sparse(values, grad):
    """IndexedSlices gradient of a concat along axis 0: each input gets the rows in its range."""
    sizes = [v.shape.dim_values[0] if v.shape.rank is not None else None for v in values]
    idx_dt = grad.indices.dtype.base_dtype
    if all(s is not None for s in sizes):
        starts = np.concatenate([[0], np.cumsum(sizes)]).tolist()
        bounds = [(array_ops.constant(starts[i], idx_dt), array_ops.constant(starts[i + 1], idx_dt))
                  for i in range(len(values))]
    else:
        rows = [math_ops.cast(array_ops.shape_internal(v, optimize=False)[0], idx_dt) for v in values]
        start = array_ops.constant(0, idx_dt)
        bounds = []
        for r in rows:
            end = start + r
            bounds.append((start, end))
            start = end
    out = []
    for v, (lo, hi) in zip(values, bounds):
        inside = math_ops.logical_and(math_ops.greater_equal(grad.indices, lo),
                                      math_ops.less(grad.indices, hi))
        where = apply_op("Where", [inside]).outputs[0]
        keep = array_ops.reshape(where, [-1])
        out.append(IndexedSlices(array_ops.gather(grad.values, keep),
                                 array_ops.gather(grad.indices, keep) - lo, shape_of(v)))
    return out


# ---------------------------------------------------------------------------- slicing
@RegisterGradient("Slice")
def _slice_grad(op, grad):
    """Pads grad with zeros back to the input's shape."""
    grad = dense(grad)
    x, begin = op.inputs[0], op.inputs[1]
    idx_dt = begin.dtype.base_dtype
    in_dims, out_dims = static_dims(x), static_dims(op.outputs[0])
    b = _const_ints(begin)
    if in_dims is not None and out_dims is not None and b is not None:
        pads = [[bi, d - bi - o] for bi, d, o in zip(b, in_dims, out_dims)]
        if not any(p for row in pads for p in row):
            return [grad, None, None]
        return [array_ops.pad(grad, np.array(pads, idx_dt.as_numpy_dtype)), None, None]
    in_shape = array_ops.shape_internal(x, optimize=False, out_type=idx_dt)
    out_shape = array_ops.shape_internal(op.outputs[0], optimize=False, out_type=idx_dt)
    rank = x.shape.rank if x.shape.rank is not None else array_ops.rank(x)
    col = array_ops.stack([rank, 1])
    before = array_ops.reshape(begin, col)
    after = array_ops.reshape(in_shape - out_shape - begin, col)
    g = array_ops.pad(grad, array_ops.concat([before, after], 1))
    g.set_shape(x.shape)
    return [g, None, None]


_MASKS = ("begin_mask", "end_mask", "ellipsis_mask", "new_axis_mask", "shrink_axis_mask")


@RegisterGradient("StridedSlice")
def _strided_slice_grad(op, grad):
    x, begin, end, strides = op.inputs
    shape = shape_of(x, begin.dtype.base_dtype)
    g = array_ops.strided_slice_grad(shape, begin, end, strides, dense(grad),
                                     **{m: op.get_attr(m) for m in _MASKS})
    g.set_shape(x.shape)
    return [g, None, None, None]


@RegisterGradient("StridedSliceGrad")
def _strided_slice_grad_grad(op, grad):
    _, begin, end, strides, _ = op.inputs
    return [None, None, None, None,
            array_ops.strided_slice(dense(grad), begin, end, strides,
                                    **{m: op.get_attr(m) for m in _MASKS})]


# ---------------------------------------------------------------------------- tile and pad
@RegisterGradient("Tile")
def _tile_grad(op, grad):
    """Sums the copies: grad reshaped to [m0, d0, m1, d1, ...] and reduced over the m axes."""
    x, multiples = op.inputs
    dims = x.shape.dim_values if x.shape.rank is not None else None
    mult = _const_ints(multiples)
    sparse = isinstance(grad, IndexedSlices)
    if sparse:
        # Rows i and i + k * d0 of the tiled tensor are copies of row i of x.
        d0 = dims[0] if dims is not None and dims[0] is not None else \
            array_ops.shape_internal(x, optimize=False, out_type=grad.indices.dtype.base_dtype)[0]
        grad = segment_ops.unsorted_segment_sum(grad.values, math_ops.floormod(grad.indices, d0), d0)
    if dims is not None and mult is not None and len(mult) == len(dims):
        if sparse:
            mult = [1] + mult[1:]
        if all(m == 1 for m in mult):
            return [reshape_like(grad, x), None]
        if None not in dims or (dims.count(None) == 1 and 0 not in dims):
            split_shape, axes = [], []
            for m, d in zip(mult, dims):
                if m != 1:
                    axes.append(len(split_shape))
                    split_shape.append(m)
                split_shape.append(-1 if d is None else d)
            g = math_ops.reduce_sum(array_ops.reshape(grad, split_shape), axes)
            g.set_shape(x.shape)
            return [g, None]
    in_shape = array_ops.shape_internal(x, optimize=False, out_type=multiples.dtype.base_dtype)
    m = multiples
    if sparse:
        m = array_ops.concat([array_ops.ones([1], multiples.dtype.base_dtype), m[1:]], 0)
    split_shape = array_ops.reshape(array_ops.transpose(array_ops.stack([m, in_shape])), [-1])
    axes = array_ops.range(0, array_ops.size(split_shape), 2)
    g = math_ops.reduce_sum(array_ops.reshape(grad, split_shape), axes)
    g.set_shape(x.shape)
    return [g, None]


def _pad_grad(op, grad):
    """The slice of grad at the input's position."""
    grad = dense(grad)
    x, paddings = op.inputs[0], op.inputs[1]
    idx_dt = paddings.dtype.base_dtype
    pv = tensor_util.constant_value(paddings)
    in_dims = static_dims(x)
    nones = [None] * (len(op.inputs) - 1)
    if pv is not None:
        pv = np.reshape(pv, (-1, 2))
        if not pv.any():
            return [grad] + nones
        if in_dims is not None:
            return [array_ops.slice(grad, pv[:, 0].astype(idx_dt.as_numpy_dtype),
                                    np.array(in_dims, idx_dt.as_numpy_dtype))] + nones
        begin = pv[:, 0].astype(idx_dt.as_numpy_dtype)
    else:
        begin = paddings[:, 0]
    g = array_ops.slice(grad, begin, array_ops.shape_internal(x, optimize=False, out_type=idx_dt))
    g.set_shape(x.shape)
    return [g] + nones


RegisterGradient("Pad")(_pad_grad)
RegisterGradient("PadV2")(_pad_grad)


@RegisterGradient("MirrorPad")
def _mirror_pad_grad(op, grad):
    return [array_ops.mirror_pad_grad(dense(grad), op.inputs[1], op.get_attr("mode")), None]


@RegisterGradient("MirrorPadGrad")
def _mirror_pad_grad_grad(op, grad):
    return [array_ops.pad(dense(grad), op.inputs[1], op.get_attr("mode")), None]


# ---------------------------------------------------------------------------- gathering
@RegisterGradient("GatherV2")
def _gather_v2_grad(op, grad):
    params, indices, axis_t = op.inputs
    grad = dense(grad)
    bd = op.get_attr("batch_dims")
    if bd < 0:
        if indices.shape.rank is None:
            raise ValueError(f"The gradient of {op.name} with batch_dims {bd} < 0 needs indices of "
                             f"known rank")
        bd += indices.shape.rank
    a = _norm_axis(axis_t, params.shape.rank)
    if a == 0 and bd == 0:
        return [_gather_rows_grad(params, indices, grad), None, None]
    if a is not None and static_dims(params) is not None and static_dims(indices) is not None:
        return [_gather_grad_static(params, indices, a, bd, grad), None, None]
    return [_gather_grad_dynamic(params, indices, axis_t, a, bd, grad), None, None]


def _gather_rows_grad(params, indices, grad):
    """IndexedSlices(grad as [num_indices] + params.shape[1:], flat indices, shape(params))."""
    p = params.shape
    if p.is_fully_defined():
        dense_shape = array_ops.constant(p.as_list(), _dtypes.int32)
    else:
        with _ops.colocate_with(params):
            dense_shape = array_ops.shape_internal(params, optimize=False)
    if indices.shape.rank == 1:
        return IndexedSlices(grad, indices, dense_shape)
    flat = array_ops.reshape(indices, [-1])
    n = indices.shape.num_elements() if indices.shape.is_fully_defined() else None
    tail = p.dim_values[1:] if p.rank is not None else None
    if tail is not None and None not in tail and (n is not None or 0 not in tail):
        values = array_ops.reshape(grad, [-1 if n is None else n] + list(tail))
    else:
        size = array_ops.expand_dims(array_ops.size(indices), 0)
        values = array_ops.reshape(grad, array_ops.concat([size, dense_shape[1:]], 0))
        if p.rank is not None:
            values.set_shape([n] + list(p.dim_values[1:]))
    return IndexedSlices(values, flat, dense_shape)


def _gather_grad_static(params, indices, a, bd, grad):
    """Dense gradient for axis > 0 or batch_dims > 0 when every shape is known statically.

    The gathered axis is moved next to the batch dims, the batch dims are folded into the segment
    ids (id + batch_index * params.shape[axis]) and one unsorted_segment_sum adds up the rows.
    """
    pd, idims = static_dims(params), static_dims(indices)
    rank = len(pd)
    n = int(np.prod(idims[bd:], dtype=np.int64))
    values_shape = pd[:a] + [n] + pd[a + 1:]
    values = grad if grad.shape.as_list() == values_shape else array_ops.reshape(grad, values_shape)
    perm = list(range(bd)) + [a] + list(range(bd, a)) + list(range(a + 1, rank))
    if perm != list(range(rank)):
        values = array_ops.transpose(values, perm)
    rest = pd[bd:a] + pd[a + 1:]
    g = pd[a]
    if bd == 0:
        ids = indices if len(idims) == 1 else array_ops.reshape(indices, [-1])
        seg = segment_ops.unsorted_segment_sum(values, ids, g)
    else:
        batch = pd[:bd]
        b = int(np.prod(batch, dtype=np.int64))
        offsets = (np.arange(b) * g).reshape(batch + [1] * (len(idims) - bd))
        ids = array_ops.reshape(indices + offsets.astype(indices.dtype.as_numpy_dtype), [-1])
        values = array_ops.reshape(values, [b * n] + rest)
        seg = array_ops.reshape(segment_ops.unsorted_segment_sum(values, ids, b * g),
                                batch + [g] + rest)
    inv = list(range(bd)) + list(range(bd + 1, a + 1)) + [bd] + list(range(a + 1, rank))
    return seg if inv == list(range(rank)) else array_ops.transpose(seg, inv)


def _gather_grad_dynamic(params, indices, axis_t, a, bd, grad):
    """`_gather_grad_static` with run-time shapes."""
    i32 = _dtypes.int32
    ps = array_ops.shape_internal(params, optimize=False)
    rank = params.shape.rank if params.shape.rank is not None else array_ops.size(ps)
    if a is None:
        a = math_ops.floormod(math_ops.cast(axis_t, i32), rank)
    g = ps[a]
    values = array_ops.reshape(grad, array_ops.concat([ps[:a], [-1], ps[a + 1:]], 0))
    perm = array_ops.concat([array_ops.range(bd), array_ops.reshape(a, [1]),
                             array_ops.range(bd, a), array_ops.range(a + 1, rank)], 0)
    values = array_ops.transpose(values, perm)
    if bd == 0:
        seg = segment_ops.unsorted_segment_sum(values, array_ops.reshape(indices, [-1]), g)
    else:
        batch = ps[:bd]
        b = math_ops.reduce_prod(batch)
        ind_rank = indices.shape.rank if indices.shape.rank is not None else array_ops.rank(indices)
        offsets = array_ops.reshape(array_ops.range(b) * g,
                                    array_ops.concat([batch, array_ops.ones([ind_rank - bd], i32)], 0))
        ids = array_ops.reshape(indices + math_ops.cast(offsets, indices.dtype.base_dtype), [-1])
        vshape = array_ops.shape_internal(values, optimize=False)
        values = array_ops.reshape(values, array_ops.concat([[-1], vshape[bd + 1:]], 0))
        seg = segment_ops.unsorted_segment_sum(values, ids, b * g)
        seg = array_ops.reshape(seg, array_ops.concat([batch, array_ops.reshape(g, [1]),
                                                       vshape[bd + 1:]], 0))
    inv = array_ops.concat([array_ops.range(bd), array_ops.range(bd + 1, a + 1), [bd],
                            array_ops.range(a + 1, rank)], 0)
    out = array_ops.transpose(seg, inv)
    out.set_shape(params.shape)
    return out


@RegisterGradient("GatherNd")
def _gather_nd_grad(op, grad):
    params, indices = op.inputs
    grad = dense(grad)
    ref_shape = shape_of(params, indices.dtype.base_dtype)
    if indices.shape.rank == 2 and indices.shape.dim_values[-1] == 1:
        return [IndexedSlices(grad, array_ops.squeeze(indices, axis=[-1]), ref_shape), None]
    g = array_ops.scatter_nd(indices, grad, ref_shape)
    g.set_shape(params.shape)
    return [g, None]


@RegisterGradient("ScatterNd")
def _scatter_nd_grad(op, grad):
    return [None, array_ops.gather_nd(dense(grad), op.inputs[0]), None]


@RegisterGradient("DynamicPartition")
def _dynamic_partition_grad(op, *grads):
    """Stitches the partitions' gradients back at the positions their elements came from."""
    data, parts = op.inputs
    dims = static_dims(parts)
    if dims is not None:
        positions = array_ops.reshape(array_ops.range(int(np.prod(dims, dtype=np.int64))), dims)
    else:
        prefix = array_ops.shape_internal(parts, optimize=False)
        positions = array_ops.reshape(array_ops.range(math_ops.reduce_prod(prefix)), prefix)
    moved = array_ops.dynamic_partition(positions, parts, op.get_attr("num_partitions"))
    stitched = array_ops.parallel_dynamic_stitch(moved, [dense(g) for g in grads])
    return [reshape_like(stitched, data), None]


def _dynamic_stitch_grad(op, grad):
    n = op.get_attr("N")
    indices, data = op.inputs[:n], op.inputs[n:]
    if isinstance(grad, IndexedSlices):
        out = op.outputs[0]
        rows = out.shape.dim_values[0] if out.shape.rank is not None else None
        if rows is None:
            rows = array_ops.shape_internal(out, optimize=False)[0]
        grad = segment_ops.unsorted_segment_sum(grad.values, grad.indices, rows)
    out = []
    for i, d in zip(indices, data):
        g = array_ops.gather(grad, i)
        g.set_shape(d.shape)
        out.append(g)
    return [None] * n + out


RegisterGradient("DynamicStitch")(_dynamic_stitch_grad)
RegisterGradient("ParallelDynamicStitch")(_dynamic_stitch_grad)
