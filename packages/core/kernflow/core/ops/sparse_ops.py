"""Sparse ops: SparseTensor conversions, reorder/reshape/slice, sums, matmul, sparse segment sums.

OpDefs and wrappers (TF1 names: ``kf.sparse.*`` and top-level ``kf.sparse_*``); CPU kernels are in
kernflow.kernels.cpu.sparse, gradients in kernflow.core.grads.sparse_grad. An op takes a
SparseTensor as its three parts (indices [N, rank] int64, values [N], dense_shape [rank] int64).
Ops that need canonical (row-major, duplicate-free) indices say so and report the first
offending index with InvalidArgumentError, as TF does.
"""

from __future__ import annotations

from kernflow.core.framework import dtypes as _dtypes
from kernflow.core.framework import ops as _ops
from kernflow.core.framework import tensor_shape as _ts
from kernflow.core.framework import tensor_util
from kernflow.core.framework.op_def_library import apply_op
from kernflow.core.framework.op_def_registry import register_op
from kernflow.core.framework.sparse_tensor import (SparseTensor, SparseTensorValue,
                                                   convert_to_tensor_or_sparse_tensor,
                                                   sparse_placeholder)

__all__ = ["SparseTensor", "SparseTensorValue", "sparse_placeholder",
           "convert_to_tensor_or_sparse_tensor", "sparse_to_dense", "sparse_tensor_to_dense",
           "sparse_reorder", "sparse_reshape", "sparse_fill_empty_rows", "sparse_retain",
           "sparse_add", "sparse_tensor_dense_matmul", "sparse_reduce_sum", "sparse_slice",
           "sparse_segment_sum", "sparse_segment_mean", "sparse_segment_sqrt_n"]

# Op types of this family (the GPU plugin gives them no kernel: placement keeps them on the host).
SPARSE_OPS = ("SparseToDense", "SparseReorder", "SparseReshape", "SparseFillEmptyRows", "SparseAdd",
              "SparseAddGrad", "SparseTensorDenseAdd", "SparseTensorDenseMatMul", "SparseReduceSum",
              "SparseSlice", "SparseSliceGrad", "SparseSegmentSum", "SparseSegmentMean",
              "SparseSegmentSqrtN", "SparseSegmentSumWithNumSegments",
              "SparseSegmentMeanWithNumSegments", "SparseSegmentSqrtNWithNumSegments",
              "SparseSegmentMeanGrad", "SparseSegmentSqrtNGrad")

_S = _ts.TensorShape


def _rank_of(shape_t):
    """The dense rank given by a 1-D shape tensor (None if unknown)."""
    d = shape_t.shape.with_rank(1).dim_values[0]
    return d


def _nnz(indices_t):
    return indices_t.shape.with_rank(2).dim_values[0]


def _sparse_in_shapes(op, i=0):
    """Checks inputs i..i+2 as (indices [N, R], values [N], shape [R]); returns (N, R)."""
    ind, val, shp = (op.inputs[i + k].shape for k in range(3))
    ind, val = ind.with_rank(2), val.with_rank(1)
    r = shp.with_rank(1).dim_values[0]
    (n_ind, cols), (n_val,) = ind.dim_values, val.dim_values
    n = n_ind if n_ind is not None else n_val
    if n_ind is not None and n_val is not None and n_ind != n_val:
        raise ValueError(f"{op.type}: indices has {n_ind} rows but values has {n_val}")
    if cols is not None and r is not None and cols != r:
        raise ValueError(f"{op.type}: indices has {cols} columns but the shape has rank {r}")
    return n, (r if r is not None else cols)


def _to_dense_shape(op):
    return [tensor_util.constant_value_as_shape(op.inputs[1])]


def _reorder_shape(op):
    n, r = _sparse_in_shapes(op)
    return [_S([n, r]), _S([n])]


def _reshape_shape(op):
    n = op.inputs[0].shape.with_rank(2).dim_values[0]
    r = _rank_of(op.inputs[2])
    return [_S([n, r]), _S([r])]


def _fill_empty_rows_shape(op):
    n, r = _sparse_in_shapes(op)
    op.inputs[3].shape.with_rank(0)
    return [_S([None, r]), _S([None]), _S([None]), _S([n])]


def _sparse_add_shape(op):
    _, r = _sparse_in_shapes(op)
    _sparse_in_shapes(op, 3)
    return [_S([None, r]), _S([None]), _S([r])]


def _add_grad_shape(op):
    return [_S([op.inputs[1].shape.with_rank(2).dim_values[0]]),
            _S([op.inputs[2].shape.with_rank(2).dim_values[0]])]


def _dense_add_shape(op):
    return [op.inputs[3].shape]


def _matmul_shape(op):
    a = tensor_util.constant_value_as_shape(op.inputs[2]).with_rank(2)
    b = op.inputs[3].shape.with_rank(2)
    if op.get_attr("adjoint_a"):
        a = _S(list(reversed(a.dim_values)))
    if op.get_attr("adjoint_b"):
        b = _S(list(reversed(b.dim_values)))
    if a.dim_values[1] is not None and b.dim_values[0] is not None and a.dim_values[1] != b.dim_values[0]:
        raise ValueError(f"Cannot multiply A and B because inner dimension does not match: "
                         f"{a.dim_values[1]} vs. {b.dim_values[0]}.  Did you forget a transpose?  Dimensions "
                         f"of A: [{a.dim_values[0]}, {a.dim_values[1]}).  Dimensions of B: {b}")
    return [_S([a.dim_values[0], b.dim_values[1]])]


def _reduce_sum_shape(op):
    _sparse_in_shapes(op)
    dense = tensor_util.constant_value_as_shape(op.inputs[2])
    axes = tensor_util.constant_value(op.inputs[3])
    if dense.rank is None or axes is None:
        return [_S(None)]
    r = dense.rank
    axes = {int(a) % r for a in axes.reshape(-1)} if r else set()
    if op.get_attr("keep_dims"):
        return [_S([1 if i in axes else d for i, d in enumerate(dense.dim_values)])]
    return [_S([d for i, d in enumerate(dense.dim_values) if i not in axes])]


def _slice_shape(op):
    _, r = _sparse_in_shapes(op)
    return [_S([None, r]), _S([None]), _S([r])]


def _slice_grad_shape(op):
    return [_S([op.inputs[1].shape.with_rank(2).dim_values[0]])]


def _segment_shape(op):
    data = op.inputs[0].shape.with_rank_at_least(1)
    op.inputs[1].shape.with_rank(1)
    op.inputs[2].shape.with_rank(1)
    num = None
    if len(op.inputs) == 4:
        v = tensor_util.constant_value(op.inputs[3])
        num = None if v is None else int(v)
    if data.rank is None:
        return [_S(None)]
    return [_S([num] + list(data.dim_values[1:]))]


def _segment_grad_shape(op):
    g = op.inputs[0].shape
    v = tensor_util.constant_value(op.inputs[3])
    if g.rank is None:
        return [_S(None)]
    return [_S([None if v is None else int(v)] + list(g.dim_values[1:]))]


_SP = ["indices: int64", "values: T", "dense_shape: int64"]
_IDX = "Tindices: {int32, int64}"
_FLOATS = "T: {half, float, double}"
_NUM = "T: {half, float, double, int32, int64, complex64, complex128}"
_SEG_ATTRS = ["Tidx: {int32, int64} = int32", "Tsegmentids: {int32, int64} = int32"]

register_op("SparseToDense", inputs=["sparse_indices: Tindices", "output_shape: Tindices",
                                     "sparse_values: T", "default_value: T"],
            outputs=["dense: T"], attrs=["validate_indices: bool = true", "T: type", _IDX],
            shape_fn=_to_dense_shape,
            doc="Builds a dense tensor of shape output_shape holding default_value, with "
                "sparse_values (a vector, or a scalar for every index) at sparse_indices ([N, R], "
                "[N] or a scalar). validate_indices checks bounds, order and duplicates.")
register_op("SparseReorder", inputs=["input_indices: int64", "input_values: T", "input_shape: int64"],
            outputs=["output_indices: int64", "output_values: T"], attrs=["T: type"],
            shape_fn=_reorder_shape,
            doc="Sorts the entries of a SparseTensor into canonical row-major order.")
register_op("SparseReshape", inputs=["input_indices: int64", "input_shape: int64", "new_shape: int64"],
            outputs=["output_indices: int64", "output_shape: int64"], shape_fn=_reshape_shape,
            doc="Reshapes a SparseTensor (as Reshape does its dense value; one new dim may be -1); "
                "returns the new indices and the new dense shape.")
register_op("SparseFillEmptyRows", inputs=_SP + ["default_value: T"],
            outputs=["output_indices: int64", "output_values: T", "empty_row_indicator: bool",
                     "reverse_index_map: int64"], attrs=["T: type"], shape_fn=_fill_empty_rows_shape,
            doc="Adds an entry [row, 0, ...] = default_value to each empty row of a SparseTensor "
                "in canonical order; returns the filled tensor, which rows were empty, and each "
                "input entry's position in the output.")
register_op("SparseAdd", inputs=["a_indices: int64", "a_values: T", "a_shape: int64",
                                 "b_indices: int64", "b_values: T", "b_shape: int64",
                                 "thresh: Treal"],
            outputs=["sum_indices: int64", "sum_values: T", "sum_shape: int64"],
            attrs=[_NUM, "Treal: {half, float, double, int32, int64}"],
            shape_fn=_sparse_add_shape,
            doc="Adds two SparseTensors of one shape, both in canonical order; sums whose magnitude "
                "is below thresh are dropped.")
register_op("SparseAddGrad", inputs=["backprop_val_grad: T", "a_indices: int64", "b_indices: int64",
                                     "sum_indices: int64"],
            outputs=["a_val_grad: T", "b_val_grad: T"], attrs=[_NUM], shape_fn=_add_grad_shape,
            doc="The gradients of SparseAdd's a_values and b_values: each operand entry gets the "
                "gradient of the sum entry at its index (0 where the sum dropped it).")
register_op("SparseTensorDenseAdd", inputs=["a_indices: Tindices", "a_values: T", "a_shape: Tindices",
                                            "b: T"],
            outputs=["output: T"], attrs=[_NUM, _IDX], shape_fn=_dense_add_shape,
            doc="Adds a SparseTensor to a dense tensor of the same shape; returns a dense tensor.")
register_op("SparseTensorDenseMatMul", inputs=["a_indices: Tindices", "a_values: T", "a_shape: int64",
                                               "b: T"],
            outputs=["product: T"],
            attrs=["T: type", "Tindices: {int32, int64} = int64", "adjoint_a: bool = false",
                   "adjoint_b: bool = false"], shape_fn=_matmul_shape,
            doc="Multiplies a rank-2 SparseTensor A by a dense matrix B: op(A) @ op(B), op the "
                "adjoint where asked. Duplicate indices of A add up.")
register_op("SparseReduceSum", inputs=_SP[:1] + ["input_values: T", "input_shape: int64",
                                                 "reduction_axes: int32"],
            outputs=["output: T"], attrs=["keep_dims: bool = false", _NUM],
            shape_fn=_reduce_sum_shape,
            doc="Sums a SparseTensor over reduction_axes (missing entries are 0); returns a dense "
                "tensor.")
register_op("SparseSlice", inputs=_SP + ["start: int64", "size: int64"],
            outputs=["output_indices: int64", "output_values: T", "output_shape: int64"],
            attrs=["T: type"], shape_fn=_slice_shape,
            doc="The entries of a SparseTensor inside the box [start, start + size), re-indexed "
                "from start; the output shape is size clipped to the input's shape.")
register_op("SparseSliceGrad", inputs=["backprop_val_grad: T", "input_indices: int64",
                                       "input_start: int64", "output_indices: int64"],
            outputs=["val_grad: T"], attrs=[_NUM], shape_fn=_slice_grad_shape,
            doc="The gradient of SparseSlice's input values: each input entry that the slice kept "
                "gets its output entry's gradient, the others 0.")
for _kind, _types in (("Sum", "T: realnumbertype"), ("Mean", _FLOATS), ("SqrtN", _FLOATS)):
    _how = {"Sum": "sum", "Mean": "mean", "SqrtN": "sum divided by sqrt(count)"}[_kind]
    register_op(f"SparseSegment{_kind}", inputs=["data: T", "indices: Tidx", "segment_ids: Tsegmentids"],
                outputs=["output: T"], attrs=[_types] + _SEG_ATTRS, shape_fn=_segment_shape,
                doc=f"Row i of the output is the {_how} of the rows data[indices[j]] with "
                    f"segment_ids[j] == i (sorted ids; empty segments are 0). Output rows: "
                    f"segment_ids[-1] + 1.")
    register_op(f"SparseSegment{_kind}WithNumSegments",
                inputs=["data: T", "indices: Tidx", "segment_ids: Tsegmentids",
                        "num_segments: Tnumsegments"],
                outputs=["output: T"],
                attrs=[_types] + _SEG_ATTRS + ["Tnumsegments: {int32, int64} = int32"],
                shape_fn=_segment_shape,
                doc=f"As SparseSegment{_kind} with num_segments output rows (ids need not be "
                    f"sorted; ids >= num_segments are an error).")
for _kind in ("Mean", "SqrtN"):
    register_op(f"SparseSegment{_kind}Grad",
                inputs=["grad: T", "indices: Tidx", "segment_ids: Tsegmentids", "output_dim0: int32"],
                outputs=["output: T"], attrs=[_FLOATS] + _SEG_ATTRS, shape_fn=_segment_grad_shape,
                doc=f"The gradient of SparseSegment{_kind} w.r.t. data: output_dim0 rows, row "
                    f"indices[j] summing grad[segment_ids[j]] scaled as the forward op scaled it.")


# ---------------------------------------------------------------------------- wrappers
def _sp(x, what="sp_input"):
    x = convert_to_tensor_or_sparse_tensor(x)
    if not isinstance(x, SparseTensor):
        raise TypeError(f"Input {what} must be a SparseTensor, got {type(x).__name__}")
    return x


def sparse_to_dense(sparse_indices, output_shape, sparse_values, default_value=0,
                    validate_indices=True, name=None):
    """Converts a sparse representation into a dense tensor (TF1 `tf.sparse_to_dense`).

    Args:
        sparse_indices: int32/int64 [N, R] (or [N] or a scalar): where the values go.
        output_shape: int32/int64 [R]: the dense shape.
        sparse_values: [N] values or one scalar for every index.
        default_value: scalar for the other entries.
        validate_indices: check indices are in bounds, sorted and unique.
        name: op name.

    Returns:
        The dense tensor of shape `output_shape`.
    """
    sv = _ops.convert_to_tensor(sparse_values)
    return apply_op("SparseToDense", [sparse_indices, output_shape, sv,
                                      _ops.convert_to_tensor(default_value, dtype=sv.dtype)],
                    {"validate_indices": validate_indices}, name=name).outputs[0]


def sparse_tensor_to_dense(sp_input, default_value=None, validate_indices=True, name=None):
    """The dense tensor of a SparseTensor (`kf.sparse.to_dense`); missing entries are default_value.

    Raises:
        InvalidArgumentError (at run time): indices out of bounds or, when validate_indices,
            out of canonical order or repeated.
    """
    sp = _sp(sp_input)
    if default_value is None:
        default_value = _zero(sp.dtype)
    out = sparse_to_dense(sp.indices, sp.dense_shape, sp.values, default_value,
                          validate_indices, name=name or "SparseToDense")
    out.set_shape(sp.shape)
    return out


def _zero(dtype):
    dt = _dtypes.as_dtype(dtype).base_dtype
    if dt == _dtypes.string:
        return b""
    if dt == _dtypes.bool:
        return False
    return _ops.convert_to_tensor(0, dtype=dt)


def sparse_reorder(sp_input, name=None):
    """Returns `sp_input` with its entries in canonical row-major order (`kf.sparse.reorder`)."""
    sp = _sp(sp_input)
    op = apply_op("SparseReorder", [sp.indices, sp.values, sp.dense_shape], name=name)
    return SparseTensor(op.outputs[0], op.outputs[1], sp.dense_shape)


def sparse_reshape(sp_input, shape, name=None):
    """Reshapes a SparseTensor to `shape` (one dim may be -1) (`kf.sparse.reshape`).

    Raises:
        ValueError: a static element-count mismatch.
        InvalidArgumentError (at run time): the element counts differ, or two dims are -1.
    """
    sp = _sp(sp_input)
    shape = _ops.convert_to_tensor(shape, dtype=_dtypes.int64)
    op = apply_op("SparseReshape", [sp.indices, sp.dense_shape, shape], name=name)
    old, new = sp.shape, tensor_util.constant_value(shape)
    if old.is_fully_defined() and new is not None and (new >= 0).all():
        if old.num_elements() != int(new.prod()):
            raise ValueError(f"Cannot reshape a tensor with {old.num_elements()} elements to "
                             f"shape {list(new)} ({int(new.prod())} elements).")
    return SparseTensor(op.outputs[0], sp.values, op.outputs[1])


def sparse_fill_empty_rows(sp_input, default_value, name=None):
    """Fills each empty row of a 2-D+ SparseTensor with one default entry at column 0.

    Returns:
        (sp_ordered_output, empty_row_indicator): the filled SparseTensor (canonical order) and a
        bool vector, true where the row was empty.
    """
    sp = _sp(sp_input)
    dv = _ops.convert_to_tensor(default_value, dtype=sp.dtype)
    op = apply_op("SparseFillEmptyRows", [sp.indices, sp.values, sp.dense_shape, dv], name=name)
    return SparseTensor(op.outputs[0], op.outputs[1], sp.dense_shape), op.outputs[2]


def sparse_retain(sp_input, to_retain):
    """Keeps the entries of `sp_input` where the bool vector `to_retain` is true.

    Raises:
        ValueError: `to_retain` is not a vector, or its static length differs from the entry count.
    """
    from kernflow.core.ops import array_ops, math_ops
    sp = _sp(sp_input)
    to_retain = _ops.convert_to_tensor(to_retain)
    n_keep = to_retain.shape.with_rank(1).dim_values[0]
    n = sp.values.shape.with_rank(1).dim_values[0]
    if n_keep is not None and n is not None and n_keep != n:
        raise ValueError(f"Shapes ({n},) and ({n_keep},) are not compatible: to_retain must have "
                         f"one entry per value of sp_input")
    where = array_ops.reshape(math_ops.where(to_retain), [-1])
    return SparseTensor(array_ops.gather(sp.indices, where), array_ops.gather(sp.values, where),
                        array_ops.identity(sp.dense_shape))


def sparse_add(a, b, threshold=None, thresh=None):
    """Adds two SparseTensors (a SparseTensor), or a SparseTensor and a dense tensor (a Tensor).

    Args:
        a, b: SparseTensors (canonical order) or one SparseTensor and one dense tensor.
        threshold: sparse + sparse only: sums with magnitude below it are dropped (default 0).
        thresh: TF1's deprecated name of `threshold`.

    Raises:
        TypeError: neither operand is sparse.
    """
    a, b = convert_to_tensor_or_sparse_tensor(a), convert_to_tensor_or_sparse_tensor(b)
    if threshold is None:
        threshold = 0 if thresh is None else thresh
    if not isinstance(a, SparseTensor) and not isinstance(b, SparseTensor):
        raise TypeError("At least one input should be SparseTensor; do you mean to use kf.add()?")
    if isinstance(a, SparseTensor) and isinstance(b, SparseTensor):
        treal = a.dtype.real_dtype if a.dtype.is_complex else a.dtype
        thr = _ops.convert_to_tensor(threshold, dtype=treal, name="threshold")
        op = apply_op("SparseAdd", [a.indices, a.values, a.dense_shape, b.indices, b.values,
                                    b.dense_shape, thr])
        return SparseTensor(*op.outputs)
    if isinstance(b, SparseTensor):
        a, b = b, a
    return apply_op("SparseTensorDenseAdd", [a.indices, a.values, a.dense_shape,
                                             _ops.convert_to_tensor(b, dtype=a.dtype)]).outputs[0]


def sparse_tensor_dense_matmul(sp_a, b, adjoint_a=False, adjoint_b=False, name=None):
    """Multiplies a rank-2 SparseTensor by a dense matrix: op(sp_a) @ op(b) (a dense Tensor).

    Raises:
        ValueError: the inner dimensions differ statically.
        InvalidArgumentError (at run time): an index is out of range or the dims differ.
    """
    sp = _sp(sp_a, "sp_a")
    b = _ops.convert_to_tensor(b, dtype=sp.dtype, name="b")
    return apply_op("SparseTensorDenseMatMul", [sp.indices, sp.values, sp.dense_shape, b],
                    {"adjoint_a": bool(adjoint_a), "adjoint_b": bool(adjoint_b)},
                    name=name).outputs[0]


def sparse_reduce_sum(sp_input, axis=None, keepdims=None, reduction_axes=None, keep_dims=None):
    """Sums a SparseTensor over `axis` (all axes when None); returns a dense Tensor."""
    from kernflow.core.ops import array_ops
    sp = _sp(sp_input)
    axis = axis if axis is not None else reduction_axes
    keep = bool(keepdims if keepdims is not None else keep_dims)
    if axis is None:
        rank = sp.shape.rank
        axis = list(range(rank)) if rank is not None else \
            array_ops.range(array_ops.size(sp.dense_shape))
    return apply_op("SparseReduceSum", [sp.indices, sp.values, sp.dense_shape,
                                        _ops.convert_to_tensor(axis, dtype=_dtypes.int32)],
                    {"keep_dims": keep}).outputs[0]


def sparse_slice(sp_input, start, size, name=None):
    """The entries of `sp_input` in the box [start, start + size) as a SparseTensor."""
    sp = _sp(sp_input)
    op = apply_op("SparseSlice", [sp.indices, sp.values, sp.dense_shape,
                                  _ops.convert_to_tensor(start, dtype=_dtypes.int64),
                                  _ops.convert_to_tensor(size, dtype=_dtypes.int64)], name=name)
    return SparseTensor(*op.outputs)


def _segment(kind, data, indices, segment_ids, name, num_segments):
    if num_segments is None:
        return apply_op(f"SparseSegment{kind}", [data, indices, segment_ids], name=name).outputs[0]
    return apply_op(f"SparseSegment{kind}WithNumSegments", [data, indices, segment_ids, num_segments],
                    name=name).outputs[0]


def sparse_segment_sum(data, indices, segment_ids, name=None, num_segments=None):
    """Sums the rows data[indices[j]] by segment_ids[j] (`kf.sparse.segment_sum`).

    Args:
        data: a real tensor.
        indices: 1-D int32/int64 rows of data to take.
        segment_ids: 1-D int32/int64, as long as indices, sorted (unless num_segments is given).
        name: op name.
        num_segments: optional output row count (else segment_ids[-1] + 1).

    Returns:
        A tensor [num_segments] + data.shape[1:]; empty segments are 0.
    """
    return _segment("Sum", data, indices, segment_ids, name, num_segments)


def sparse_segment_mean(data, indices, segment_ids, name=None, num_segments=None):
    """As `sparse_segment_sum`, but each segment's mean (floating data)."""
    return _segment("Mean", data, indices, segment_ids, name, num_segments)


def sparse_segment_sqrt_n(data, indices, segment_ids, name=None, num_segments=None):
    """As `sparse_segment_sum`, but each segment's sum divided by sqrt(its row count)."""
    return _segment("SqrtN", data, indices, segment_ids, name, num_segments)


def sparse_from_dense(tensor, name=None):
    """The SparseTensor of the non-zero entries of a dense tensor (`kf.sparse.from_dense`)."""
    from kernflow.core.ops import array_ops, math_ops
    with _ops.name_scope(name, "dense_to_sparse", [tensor]):
        t = _ops.convert_to_tensor(tensor)
        idx = math_ops.where(math_ops.not_equal(t, _zero(t.dtype)))
        return SparseTensor(idx, array_ops.gather_nd(t, idx),
                            array_ops.shape(t, out_type=_dtypes.int64))
