"""IndexedSlices: a sparse gradient (rows `indices` of a dense tensor of shape `dense_shape`)."""

from __future__ import annotations

import numpy as np

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

    @property
    def shape(self):
        """The static dense shape (a TensorShape; unknown dims where dense_shape is not constant)."""
        from kernflow.core.framework import tensor_shape, tensor_util
        if self._dense_shape is None:
            return tensor_shape.TensorShape(None)
        if isinstance(self._dense_shape, _ops.Tensor):
            return tensor_util.constant_value_as_shape(self._dense_shape)
        return tensor_shape.TensorShape([int(d) for d in self._dense_shape])

    def _as_graph_element(self):
        return self._values

    def __neg__(self):
        from kernflow.core.ops import math_ops
        return IndexedSlices(math_ops.negative(self._values), self._indices, self._dense_shape)

    def __repr__(self):
        return (f"IndexedSlices(indices={self._indices}, values={self._values}, "
                f"dense_shape={self._dense_shape})")


class IndexedSlicesValue:
    """The fetched value of an IndexedSlices: numpy values, indices and dense_shape."""

    def __init__(self, values, indices, dense_shape):
        self.values, self.indices, self.dense_shape = values, indices, dense_shape

    def __repr__(self):
        return (f"IndexedSlicesValue(values={self.values!r}, indices={self.indices!r}, "
                f"dense_shape={self.dense_shape!r})")

    def dense(self):
        """The dense numpy array (duplicate indices add up)."""
        out = np.zeros(self.dense_shape, dtype=self.values.dtype)
        np.add.at(out, self.indices, self.values)
        return out


def _densify(value, dtype=None, name=None, as_ref=False):
    """The dense Tensor of an IndexedSlices: its values summed into rows of zeros (duplicates add).

    Raises:
        ValueError: `dtype` differs from the values' type, or `value` has no dense_shape.
    """
    from kernflow.core.framework import dtypes as _dtypes
    from kernflow.core.framework import tensor_util
    from kernflow.core.ops import array_ops, segment_ops
    if dtype is not None and not _dtypes.as_dtype(dtype).is_compatible_with(value.dtype):
        raise ValueError(f"Tensor conversion requested dtype {_dtypes.as_dtype(dtype).name} for "
                         f"IndexedSlices with dtype {value.dtype.name}: {value}")
    if value.dense_shape is None:
        raise ValueError(f"Tensor conversion requested for IndexedSlices without dense_shape: {value}")
    dense_shape = value.dense_shape
    if isinstance(dense_shape, _ops.Tensor):
        static = tensor_util.constant_value(dense_shape)
    else:
        static = np.asarray(dense_shape, dtype=np.int64).reshape(-1)
    if static is not None:
        num = int(static[0])
    else:
        num = array_ops.strided_slice(dense_shape, [0], [1], shrink_axis_mask=1)
    out = segment_ops.unsorted_segment_sum(value.values, value.indices, num, name=name)
    if static is not None:
        out.set_shape([int(d) for d in static])
    return out


_ops.register_tensor_conversion_function(IndexedSlices, _densify)
