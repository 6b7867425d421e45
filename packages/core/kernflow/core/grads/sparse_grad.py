"""Gradients of the sparse ops (kernflow.core.ops.sparse_ops), with TF1's formulas.

Indices and shapes have none; a values input gets the output gradient at the entries it moved to.
"""

from __future__ import annotations

from kernflow.core.framework import dtypes as _dtypes
from kernflow.core.framework.gradient_registry import NotDifferentiable, RegisterGradient
from kernflow.core.grads.array_grad import dense
from kernflow.core.ops import array_ops
from kernflow.core.ops import math_ops
from kernflow.core.ops import segment_ops
from kernflow.core.ops import sparse_ops  # noqa: F401 - declares the ops
from kernflow.core.framework.op_def_library import apply_op

for _op in ("SparseReshape", "SparseAddGrad", "SparseSliceGrad", "SparseSegmentMeanGrad",
            "SparseSegmentSqrtNGrad"):
    NotDifferentiable(_op)


@RegisterGradient("SparseToDense")
def _sparse_to_dense_grad(op, grad):
    indices, _, values, _ = op.inputs
    grad = dense(grad)
    if indices.shape.rank is not None and indices.shape.rank < 2:
        indices = array_ops.reshape(indices, [-1, 1]) if indices.shape.rank == 1 else \
            array_ops.reshape(indices, [1, -1])
    vg = array_ops.gather_nd(grad, indices)
    dg = math_ops.reduce_sum(grad) - math_ops.reduce_sum(vg)
    if values.shape.rank == 0:
        vg = math_ops.reduce_sum(vg)
    return [None, None, vg, dg]


@RegisterGradient("SparseReorder")
def _sparse_reorder_grad(op, _, grad):
    indices, _, shape = op.inputs
    n = array_ops.shape(indices, out_type=_dtypes.int64)[0]
    perm = apply_op("SparseReorder", [indices, array_ops.range(n), shape]).outputs[1]
    return [None, array_ops.gather(grad, array_ops.invert_permutation(perm)), None]


@RegisterGradient("SparseFillEmptyRows")
def _fill_empty_rows_grad(op, _, grad_values, *unused):
    vg = array_ops.gather(grad_values, op.outputs[3])
    return [None, vg, None, math_ops.reduce_sum(grad_values) - math_ops.reduce_sum(vg)]


@RegisterGradient("SparseAdd")
def _sparse_add_grad(op, _, grad_values, unused):
    a_g, b_g = apply_op("SparseAddGrad", [grad_values, op.inputs[0], op.inputs[3],
                                          op.outputs[0]]).outputs
    return [None, a_g, None, None, b_g, None, None]


@RegisterGradient("SparseTensorDenseAdd")
def _sparse_dense_add_grad(op, grad):
    grad = dense(grad)
    return [None, array_ops.gather_nd(grad, op.inputs[0]), None, grad]


@RegisterGradient("SparseTensorDenseMatMul")
def _sparse_dense_matmul_grad(op, grad):
    """d b = op_b(op_a(A)^T @ grad); d values[k] = <grad row of A's entry, b' row of its column>."""
    ind, vals, shape, b = op.inputs
    adj_a, adj_b = op.get_attr("adjoint_a"), op.get_attr("adjoint_b")
    grad = dense(grad)
    ind64 = math_ops.cast(ind, _dtypes.int64)
    a = sparse_ops.SparseTensor(ind64, vals, shape)
    gb = sparse_ops.sparse_tensor_dense_matmul(a, grad, adjoint_a=not adj_a)
    if adj_b:
        gb = array_ops.transpose(gb)
    bm = array_ops.transpose(b) if adj_b else b
    rows, cols = ind64[:, 0], ind64[:, 1]
    if adj_a:
        rows, cols = cols, rows
    gv = math_ops.reduce_sum(array_ops.gather(grad, rows) * array_ops.gather(bm, cols), axis=1)
    return [None, gv, None, gb]


@RegisterGradient("SparseReduceSum")
def _sparse_reduce_sum_grad(op, grad):
    from kernflow.core.grads.math_grad import _reduced_shape
    ind, _, shape, axes = op.inputs
    kept = math_ops.cast(_reduced_shape(shape, axes), _dtypes.int64)
    scale = math_ops.floordiv(shape, kept)
    g = array_ops.reshape(dense(grad), kept)
    return [None, array_ops.gather_nd(g, math_ops.floordiv(ind, scale)), None, None]


@RegisterGradient("SparseSlice")
def _sparse_slice_grad(op, _, grad_values, unused):
    g = apply_op("SparseSliceGrad", [grad_values, op.inputs[0], op.inputs[3],
                                     op.outputs[0]]).outputs[0]
    return [None, g, None, None, None]


def _dim0(data):
    return array_ops.shape(data)[0]


def _segment_sum_grad(op, grad):
    data, idx, ids = op.inputs[:3]
    g = array_ops.gather(dense(grad), ids)
    out = [segment_ops.unsorted_segment_sum(g, idx, _dim0(data)), None, None]
    return out + [None] * (len(op.inputs) - 3)


def _segment_scaled_grad(kind):
    def fn(op, grad):
        data, idx, ids = op.inputs[:3]
        g = apply_op(f"SparseSegment{kind}Grad", [dense(grad), idx, ids, _dim0(data)]).outputs[0]
        return [g, None, None] + [None] * (len(op.inputs) - 3)
    return fn


for _suffix in ("", "WithNumSegments"):
    RegisterGradient(f"SparseSegmentSum{_suffix}")(_segment_sum_grad)
    RegisterGradient(f"SparseSegmentMean{_suffix}")(_segment_scaled_grad("Mean"))
    RegisterGradient(f"SparseSegmentSqrtN{_suffix}")(_segment_scaled_grad("SqrtN"))
