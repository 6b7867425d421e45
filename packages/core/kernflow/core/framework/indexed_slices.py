"""IndexedSlices: a sparse gradient (rows `indices` of a dense tensor of shape `dense_shape`)."""

from __future__ import annotations

from kernflow.core.framework import ops as _ops

__all__ = ["IndexedSlices", "IndexedSlicesValue"]


class IndexedSlices:
    """Rows `indices` of a tensor of shape `dense_shape` hold `values` (others are zero).

    Gather's gradient is an IndexedSlices, so an embedding's update touches only the looked-up rows.
    Converting it to a Tensor (any op taking it as input) densifies with unsorted_segment_sum.
    """

    def __init__(self, values, indices, dense_shape=None):
        self._values = values
        self._indices = indices
        self._dense_shape = dense_shape

    values = property(lambda self: self._values)
    indices = property(lambda self: self._indices)
    dense_shape = property(lambda self: self._dense_shape)
    name = property(lambda self: self._values.name)
    dtype = property(lambda self: self._values.dtype)
    op = property(lambda self: self._values.op)
    graph = property(lambda self: self._values.graph)
    device = property(lambda self: self._values.device)

    def _as_graph_element(self):
        return self._values

    def __neg__(self):
        from kernflow.core.ops import math_ops
        return IndexedSlices(math_ops.negative(self._values), self._indices, self._dense_shape)

    def __repr__(self):
        return f"IndexedSlices(indices={self._indices}, values={self._values}, dense_shape={self._dense_shape})"


class IndexedSlicesValue:
    """The fetched value of an IndexedSlices: numpy values, indices and dense_shape."""

    def __init__(self, values, indices, dense_shape):
        self.values, self.indices, self.dense_shape = values, indices, dense_shape

    def dense(self):
        import numpy as np
        out = np.zeros(self.dense_shape, dtype=self.values.dtype)
        np.add.at(out, self.indices, self.values)
        return out


def _densify(value, dtype=None, name=None, as_ref=False):
    from kernflow.core.ops import array_ops, math_ops
    if value.dense_shape is None:
        raise ValueError(f"Tensor conversion requested for IndexedSlices without dense_shape: {value}")
    num = array_ops.gather(value.dense_shape, 0) if hasattr(array_ops, "gather") else value.dense_shape[0]
    return math_ops.unsorted_segment_sum(value.values, value.indices, num, name=name) \
        if hasattr(math_ops, "unsorted_segment_sum") else _segment(value, num, name)


def _segment(value, num, name):
    from kernflow.core.ops import segment_ops
    return segment_ops.unsorted_segment_sum(value.values, value.indices, num, name=name)


_ops.register_tensor_conversion_function(IndexedSlices, _densify)
