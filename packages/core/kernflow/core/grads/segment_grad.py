"""Gradients of the segment reductions (kernflow.core.ops.segment_ops), with TF1's formulas.

Each data row gets the gradient of its segment's output row (a gather by segment id), scaled as
the reduction needs: by 1 / count for means, split evenly among the rows equal to the result for
max and min, by the product of the other rows for prod. Unsorted ops drop negative ids, whose
rows get a zero gradient. Segment ids and num_segments have none.
"""

from __future__ import annotations

from kernflow.core.framework import dtypes as _dtypes
from kernflow.core.framework import tensor_util
from kernflow.core.framework.gradient_registry import RegisterGradient
from kernflow.core.grads.array_grad import dense
from kernflow.core.ops import array_ops
from kernflow.core.ops import math_ops
from kernflow.core.ops import segment_ops


def _row_shape(data, ids, fill=1):
    """The shape ids.shape + [fill] * (data rank - ids rank): constant when ranks are known.

    Shaped so, a per-row value broadcasts against the rows of `data`.
    """
    dr, ir = data.shape.rank, ids.shape.rank
    if dr is not None and ir is not None and ids.shape.is_fully_defined():
        return ids.shape.as_list() + [fill] * (dr - ir)
    extra = (dr - ir) if dr is not None and ir is not None else array_ops.rank(data) - array_ops.rank(ids)
    return array_ops.concat([array_ops.shape_internal(ids, optimize=False),
                             array_ops.fill(array_ops.reshape(extra, [1]), fill)], 0)


def _as_rows(t, data, ids):
    """Reshapes t (shaped like ids) so that it broadcasts against data (no op when ranks match)."""
    dr, ir = data.shape.rank, ids.shape.rank
    if dr is not None and ir is not None and dr == ir:
        return t
    return array_ops.reshape(t, _row_shape(data, ids))


# ---------------------------------------------------------------------------- sorted
@RegisterGradient("SegmentSum")
def _segment_sum_grad(op, grad):
    return [array_ops.gather(dense(grad), op.inputs[1]), None]


@RegisterGradient("SegmentMean")
def _segment_mean_grad(op, grad):
    grad = dense(grad)
    data, ids = op.inputs
    ones = array_ops.ones(_row_shape(data, ids), dtype=grad.dtype.base_dtype)
    counts = segment_ops.segment_sum(ones, ids)
    return [array_ops.gather(math_ops.realdiv(grad, counts), ids), None]


def _segment_min_or_max_grad(op, grad):
    """Split evenly among the rows equal to their segment's result (ties share)."""
    grad = dense(grad)
    data, ids = op.inputs
    dt = grad.dtype.base_dtype
    is_selected = math_ops.equal(data, array_ops.gather(op.outputs[0], ids))
    num_selected = segment_ops.segment_sum(math_ops.cast(is_selected, dt), ids)
    gathered = array_ops.gather(math_ops.realdiv(grad, num_selected), ids)
    return [math_ops.where_v2(is_selected, gathered, array_ops.zeros([], dt)), None]


RegisterGradient("SegmentMax")(_segment_min_or_max_grad)
RegisterGradient("SegmentMin")(_segment_min_or_max_grad)


@RegisterGradient("SegmentProd")
def _segment_prod_grad(op, grad):
    """d out / d x_i = product of the segment's other rows (computed without dividing by zero).

    A segment with one zero: the zero's gradient is the product of the others, the rest get 0;
    with several zeros every gradient is 0.
    """
    grad = dense(grad)
    data, ids = op.inputs
    dt = data.dtype.base_dtype
    is_zero = math_ops.equal(data, array_ops.zeros([], dt))
    num_zeros = segment_ops.segment_sum(math_ops.cast(is_zero, _dtypes.int32), ids)
    grad = math_ops.where_v2(math_ops.greater(num_zeros, 1), array_ops.zeros([], dt), grad)
    non_zero = math_ops.where_v2(is_zero, array_ops.ones([], dt), data)
    non_zero_prod = segment_ops.segment_prod(non_zero, ids)
    by_el = math_ops.realdiv(array_ops.gather(op.outputs[0], ids), non_zero)
    partial = math_ops.where_v2(is_zero, array_ops.gather(non_zero_prod, ids), by_el)
    return [array_ops.gather(grad, ids) * partial, None]


# ---------------------------------------------------------------------------- unsorted
def _gather_drop_negatives(params, ids, clipped=None, is_positive=None):
    """params gathered at ids, with zero rows where the id is negative.

    Returns (gathered, clipped ids, is_positive shaped to broadcast against the gathered rows);
    is_positive is None when the ids are constants without negatives.
    """
    if clipped is None:
        v = tensor_util.constant_value(ids)
        if v is not None and (v.size == 0 or v.min() >= 0):
            return array_ops.gather(params, ids), ids, None  # no negative ids: nothing to drop
        clipped = math_ops.maximum(ids, array_ops.zeros([], ids.dtype.base_dtype))
    gathered = array_ops.gather(params, clipped)
    if is_positive is None:
        if clipped is ids:
            return gathered, ids, None
        is_positive = math_ops.greater_equal(ids, array_ops.zeros([], ids.dtype.base_dtype))
        is_positive = _as_rows(is_positive, gathered, ids)
    zero = array_ops.zeros([], gathered.dtype.base_dtype)
    return math_ops.where_v2(is_positive, gathered, zero), clipped, is_positive


@RegisterGradient("UnsortedSegmentSum")
def _unsorted_segment_sum_grad(op, grad):
    return [_gather_drop_negatives(dense(grad), op.inputs[1])[0], None, None]


def _unsorted_segment_min_or_max_grad(op, grad):
    grad = dense(grad)
    data, ids, num = op.inputs
    dt = grad.dtype.base_dtype
    gathered_out, clipped, is_positive = _gather_drop_negatives(op.outputs[0], ids)
    is_selected = math_ops.equal(data, gathered_out)
    if is_positive is not None:
        is_selected = math_ops.logical_and(is_selected, is_positive)
    num_selected = segment_ops.unsorted_segment_sum(math_ops.cast(is_selected, dt), ids, num)
    weighted = math_ops.realdiv(grad, num_selected)
    gathered, _, _ = _gather_drop_negatives(weighted, ids, clipped, is_positive)
    return [math_ops.where_v2(is_selected, gathered, array_ops.zeros([], dt)), None, None]


RegisterGradient("UnsortedSegmentMax")(_unsorted_segment_min_or_max_grad)
RegisterGradient("UnsortedSegmentMin")(_unsorted_segment_min_or_max_grad)


@RegisterGradient("UnsortedSegmentProd")
def _unsorted_segment_prod_grad(op, grad):
    """As SegmentProd's; rows with negative ids get 0."""
    grad = dense(grad)
    data, ids, num = op.inputs
    dt = data.dtype.base_dtype
    is_zero = math_ops.equal(data, array_ops.zeros([], dt))
    num_zeros = segment_ops.unsorted_segment_sum(math_ops.cast(is_zero, _dtypes.int32), ids, num)
    grad = math_ops.where_v2(math_ops.greater(num_zeros, 1), array_ops.zeros([], dt), grad)
    non_zero = math_ops.where_v2(is_zero, array_ops.ones([], dt), data)
    non_zero_prod = segment_ops.unsorted_segment_prod(non_zero, ids, num)
    gathered, clipped, _ = _gather_drop_negatives(grad, ids)
    by_el = math_ops.realdiv(array_ops.gather(op.outputs[0], clipped), non_zero)
    partial = math_ops.where_v2(is_zero, array_ops.gather(non_zero_prod, clipped), by_el)
    return [gathered * partial, None, None]
