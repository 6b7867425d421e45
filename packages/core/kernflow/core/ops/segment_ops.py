"""Segment reductions: sorted (Segment*) and unsorted (UnsortedSegment*) sum, mean, max, min, prod.

OpDefs and wrappers; CPU kernels are in kernflow.kernels.cpu.segment.

Sorted ops take 1-D `segment_ids`, one per row of `data`, in non-decreasing order; the output has
``segment_ids[-1] + 1`` rows and segments without ids are 0 (1 for prod). Unsorted ops take ids
whose shape is a prefix of `data`'s and a `num_segments` scalar; negative ids are dropped and empty
segments hold the reduction's identity (0, 1, the type's lowest value for max, highest for min).
"""

from __future__ import annotations

from kernflow.core.framework import tensor_shape as _ts
from kernflow.core.framework import tensor_util
from kernflow.core.framework.op_def_library import apply_op
from kernflow.core.framework.op_def_registry import register_op

__all__ = ["segment_sum", "segment_mean", "segment_max", "segment_min", "segment_prod",
           "unsorted_segment_sum", "unsorted_segment_max", "unsorted_segment_min",
           "unsorted_segment_prod"]

_INDEX_T = "Tindices: {int32, int64}"


def _sorted_shape(op):
    data = op.inputs[0].shape
    ids = op.inputs[1].shape.with_rank(1)
    data = data.with_rank_at_least(1)
    if data.rank is None:
        return [_ts.TensorShape(None)]
    n_ids, n_rows = ids.dim_values[0], data.dim_values[0]
    if n_ids is not None and n_rows is not None and n_ids != n_rows:
        raise ValueError(f"segment_ids should be the same size as dimension 0 of data: "
                         f"{n_ids} vs. {n_rows}")
    num = None
    v = tensor_util.constant_value(op.inputs[1])
    # Invalid constant ids leave the dim unknown: the kernel reports them when the op runs.
    if v is not None and v.ndim == 1 and not (v.size and (v[0] < 0 or (v[1:] < v[:-1]).any())):
        num = int(v[-1]) + 1 if v.size else 0
    return [_ts.TensorShape([num] + list(data.dim_values[1:]))]


def _unsorted_shape(op):
    data, ids = op.inputs[0].shape, op.inputs[1].shape
    ns_rank = op.inputs[2].shape.rank
    if ns_rank is not None and ns_rank != 0:
        raise ValueError(f"num_segments should be a scalar, not shape {op.inputs[2].shape}")
    v = tensor_util.constant_value(op.inputs[2])
    num = None if v is None else int(v)
    if num is not None and num < 0:
        raise ValueError(f"num_segments must be non-negative, got {num}")
    if data.rank is None or ids.rank is None:
        return [_ts.TensorShape(None)]
    if ids.rank > data.rank or not _ts.TensorShape(data.dim_values[:ids.rank]).is_compatible_with(ids):
        raise ValueError(f"segment_ids.shape = {ids} is not a prefix of data.shape = {data}")
    return [_ts.TensorShape([num] + list(data.dim_values[ids.rank:]))]


_SORTED_DOCS = {
    "Sum": "the sum of the rows of `data` with each segment id; empty segments are 0.",
    "Mean": "the mean of the rows of `data` with each segment id (integer means truncate toward "
            "zero); empty segments are 0.",
    "Max": "the maximum of the rows of `data` with each segment id; empty segments are 0.",
    "Min": "the minimum of the rows of `data` with each segment id; empty segments are 0.",
    "Prod": "the product of the rows of `data` with each segment id; empty segments are 1.",
}
for _kind, _doc in _SORTED_DOCS.items():
    _types = "realnumbertype" if _kind in ("Max", "Min") else "numbertype"
    register_op(f"Segment{_kind}", inputs=["data: T", "segment_ids: Tindices"], outputs=["output: T"],
                attrs=[f"T: {_types}", _INDEX_T], shape_fn=_sorted_shape,
                doc=f"Computes, along segments of the first dimension given by sorted 1-D "
                    f"segment_ids, {_doc} Output rows: segment_ids[-1] + 1.")

_UNSORTED_DOCS = {
    "Sum": "the sum of the entries of `data` with each segment id; empty segments are 0.",
    "Max": "the maximum of the entries of `data` with each segment id; empty segments are the "
           "lowest value of the type.",
    "Min": "the minimum of the entries of `data` with each segment id; empty segments are the "
           "highest value of the type.",
    "Prod": "the product of the entries of `data` with each segment id; empty segments are 1.",
}
for _kind, _doc in _UNSORTED_DOCS.items():
    _types = "realnumbertype" if _kind in ("Max", "Min") else "numbertype"
    register_op(f"UnsortedSegment{_kind}",
                inputs=["data: T", "segment_ids: Tindices", "num_segments: Tnumsegments"],
                outputs=["output: T"],
                attrs=[f"T: {_types}", _INDEX_T, "Tnumsegments: {int32, int64} = int32"],
                shape_fn=_unsorted_shape,
                doc=f"Computes, over segment_ids (shaped like a prefix of data's shape, in any "
                    f"order; negative ids are dropped), {_doc} Output: [num_segments] + "
                    f"data.shape[segment_ids.ndim:].")


def _sorted(kind, data, segment_ids, name):
    return apply_op(f"Segment{kind}", [data, segment_ids], name=name).outputs[0]


def _unsorted(kind, data, segment_ids, num_segments, name):
    return apply_op(f"UnsortedSegment{kind}", [data, segment_ids, num_segments],
                    name=name).outputs[0]


def segment_sum(data, segment_ids, name=None):
    """Computes the sum along segments of a tensor.

    Args:
        data: a tensor.
        segment_ids: 1-D int32/int64 tensor, sorted, as long as `data`'s first dimension.
        name: name of the op (defaults to "SegmentSum").

    Returns:
        A tensor with ``segment_ids[-1] + 1`` rows: row i is the sum of the rows of `data` whose
        id is i (0 when there are none).
    """
    return _sorted("Sum", data, segment_ids, name)


def segment_mean(data, segment_ids, name=None):
    """Computes the mean along segments of a tensor.

    Args:
        data: a tensor.
        segment_ids: 1-D int32/int64 tensor, sorted, as long as `data`'s first dimension.
        name: name of the op (defaults to "SegmentMean").

    Returns:
        A tensor with ``segment_ids[-1] + 1`` rows: row i is the mean of the rows of `data` whose
        id is i (0 when there are none; integer means truncate toward zero).
    """
    return _sorted("Mean", data, segment_ids, name)


def segment_max(data, segment_ids, name=None):
    """Computes the maximum along segments of a tensor.

    Args:
        data: a real tensor.
        segment_ids: 1-D int32/int64 tensor, sorted, as long as `data`'s first dimension.
        name: name of the op (defaults to "SegmentMax").

    Returns:
        A tensor with ``segment_ids[-1] + 1`` rows: row i is the elementwise max of the rows of
        `data` whose id is i (0 when there are none).
    """
    return _sorted("Max", data, segment_ids, name)


def segment_min(data, segment_ids, name=None):
    """Computes the minimum along segments of a tensor.

    Args:
        data: a real tensor.
        segment_ids: 1-D int32/int64 tensor, sorted, as long as `data`'s first dimension.
        name: name of the op (defaults to "SegmentMin").

    Returns:
        A tensor with ``segment_ids[-1] + 1`` rows: row i is the elementwise min of the rows of
        `data` whose id is i (0 when there are none).
    """
    return _sorted("Min", data, segment_ids, name)


def segment_prod(data, segment_ids, name=None):
    """Computes the product along segments of a tensor.

    Args:
        data: a tensor.
        segment_ids: 1-D int32/int64 tensor, sorted, as long as `data`'s first dimension.
        name: name of the op (defaults to "SegmentProd").

    Returns:
        A tensor with ``segment_ids[-1] + 1`` rows: row i is the product of the rows of `data`
        whose id is i (1 when there are none).
    """
    return _sorted("Prod", data, segment_ids, name)


def unsorted_segment_sum(data, segment_ids, num_segments, name=None):
    """Computes the sum along segments of a tensor, ids in any order.

    Args:
        data: a tensor.
        segment_ids: int32/int64 tensor whose shape is a prefix of `data`'s; negative ids are
            dropped, ids >= num_segments are an error.
        num_segments: scalar int32/int64: the number of output rows.
        name: name of the op (defaults to "UnsortedSegmentSum").

    Returns:
        A tensor of shape ``[num_segments] + data.shape[segment_ids.ndim:]``.
    """
    return _unsorted("Sum", data, segment_ids, num_segments, name)


def unsorted_segment_max(data, segment_ids, num_segments, name=None):
    """Computes the maximum along segments of a tensor, ids in any order.

    Args:
        data: a real tensor.
        segment_ids: int32/int64 tensor whose shape is a prefix of `data`'s; negative ids are
            dropped.
        num_segments: scalar int32/int64: the number of output rows.
        name: name of the op (defaults to "UnsortedSegmentMax").

    Returns:
        A tensor of shape ``[num_segments] + data.shape[segment_ids.ndim:]``; empty segments
        hold the lowest value of the type.
    """
    return _unsorted("Max", data, segment_ids, num_segments, name)


def unsorted_segment_min(data, segment_ids, num_segments, name=None):
    """Computes the minimum along segments of a tensor, ids in any order.

    Args:
        data: a real tensor.
        segment_ids: int32/int64 tensor whose shape is a prefix of `data`'s; negative ids are
            dropped.
        num_segments: scalar int32/int64: the number of output rows.
        name: name of the op (defaults to "UnsortedSegmentMin").

    Returns:
        A tensor of shape ``[num_segments] + data.shape[segment_ids.ndim:]``; empty segments
        hold the highest value of the type.
    """
    return _unsorted("Min", data, segment_ids, num_segments, name)


def unsorted_segment_prod(data, segment_ids, num_segments, name=None):
    """Computes the product along segments of a tensor, ids in any order.

    Args:
        data: a tensor.
        segment_ids: int32/int64 tensor whose shape is a prefix of `data`'s; negative ids are
            dropped.
        num_segments: scalar int32/int64: the number of output rows.
        name: name of the op (defaults to "UnsortedSegmentProd").

    Returns:
        A tensor of shape ``[num_segments] + data.shape[segment_ids.ndim:]``; empty segments
        hold 1.
    """
    return _unsorted("Prod", data, segment_ids, num_segments, name)
