"""SparseTensor: a tensor given by the coordinates and values of its non-default entries.

Three dense tensors make one: int64 `indices` [N, rank], `values` [N] and int64 `dense_shape`
[rank]. Ops that take a SparseTensor take the three parts as separate inputs (kernflow.core.ops.
sparse_ops); a Session fetches one as a `SparseTensorValue` and feeds one from a SparseTensorValue
or an (indices, values, dense_shape) tuple (TF1's semantics).
"""

from __future__ import annotations

import collections

import numpy as np

from kernflow.core.framework import dtypes as _dtypes
from kernflow.core.framework import ops as _ops
from kernflow.core.framework import tensor_shape as _ts

__all__ = ["SparseTensor", "SparseTensorValue", "sparse_placeholder",
           "convert_to_tensor_or_sparse_tensor"]

SparseTensorValue = collections.namedtuple("SparseTensorValue", ["indices", "values", "dense_shape"])
SparseTensorValue.__doc__ = "The value of a SparseTensor: numpy indices, values and dense_shape."


class SparseTensor:
    """A sparse tensor: `values[i]` sits at `indices[i]` of a tensor of shape `dense_shape`.

    Entries not listed hold zero (or an op's default value). Ops expect indices in row-major
    (lexicographic) order without duplicates; `kf.sparse.reorder` puts them in that order.
    """

    @classmethod
    def from_value(cls, sparse_tensor_value):
        """A SparseTensor from a SparseTensorValue (constants) or returns a SparseTensor as is."""
        if isinstance(sparse_tensor_value, SparseTensor):
            return sparse_tensor_value
        v = sparse_tensor_value
        return cls(indices=v.indices, values=v.values, dense_shape=v.dense_shape)

    def __init__(self, indices, values, dense_shape):
        """Builds a SparseTensor.

        Args:
            indices: int64 tensor-like [N, rank].
            values: tensor-like [N].
            dense_shape: int64 tensor-like [rank].

        Raises:
            ValueError: the parts' static shapes disagree.
        """
        with _ops.name_scope(None, "SparseTensor", [indices, values, dense_shape]):
            self._indices = _ops.convert_to_tensor(indices, dtype=_dtypes.int64, name="indices")
            self._values = _ops.convert_to_tensor(values, name="values")
            self._dense_shape = _ops.convert_to_tensor(dense_shape, dtype=_dtypes.int64,
                                                       name="dense_shape")
        ish, vsh, dsh = self._indices.shape, self._values.shape, self._dense_shape.shape
        ish.with_rank(2)
        vsh.with_rank(1)
        dsh.with_rank(1)
        n_i, n_v = ish.as_list()[0] if ish.rank else None, vsh.as_list()[0] if vsh.rank else None
        if n_i is not None and n_v is not None and n_i != n_v:
            raise ValueError(f"SparseTensor: indices has {n_i} rows but values has {n_v} entries")
        r_i, r_d = (ish.as_list()[1] if ish.rank else None), (dsh.as_list()[0] if dsh.rank else None)
        if r_i is not None and r_d is not None and r_i != r_d:
            raise ValueError(f"SparseTensor: indices has {r_i} columns but dense_shape has rank {r_d}")

    indices = property(lambda self: self._indices)
    values = property(lambda self: self._values)
    dense_shape = property(lambda self: self._dense_shape)
    dtype = property(lambda self: self._values.dtype)
    op = property(lambda self: self._values.op)
    graph = property(lambda self: self._indices.graph)

    @property
    def shape(self):
        """The static dense shape (unknown dims where dense_shape is not a constant)."""
        from kernflow.core.framework import tensor_util
        shape = tensor_util.constant_value_as_shape(self._dense_shape)
        hint = getattr(self, "_shape_hint", None)  # a sparse_placeholder's declared shape
        return shape if hint is None else shape.merge_with(hint)

    def get_shape(self):
        return self.shape

    def _as_graph_element(self):
        return self

    def consumers(self):
        return list({id(o): o for t in (self._indices, self._values, self._dense_shape)
                     for o in t.consumers()}.values())

    def eval(self, feed_dict=None, session=None):
        """Runs the default (or given) session; returns a SparseTensorValue."""
        from kernflow.core.client import session as _session
        return _session._run_using_default_session(self, feed_dict, session)

    def __repr__(self):
        return (f"SparseTensor(indices={self._indices}, values={self._values}, "
                f"dense_shape={self._dense_shape})")

    __str__ = __repr__


def is_sparse(x) -> bool:
    """True for a SparseTensor or a SparseTensorValue."""
    return isinstance(x, (SparseTensor, SparseTensorValue))


def sparse_placeholder(dtype, shape=None, name=None):
    """A SparseTensor whose indices, values and dense_shape must all be fed (TF1 semantics).

    Args:
        dtype: the values' type.
        shape: the dense shape (a list, TensorShape or None); with a fully known shape the
            dense_shape part is a constant-valued placeholder default, else a placeholder.
        name: name prefix of the three placeholders.

    Returns:
        A SparseTensor; feed it a SparseTensorValue or an (indices, values, dense_shape) tuple.
    """
    from kernflow.core.ops import array_ops
    shape = _ts.as_shape(shape)
    rank = shape.rank
    prefix = name or "Placeholder"
    if shape.is_fully_defined():
        dense_shape = array_ops.placeholder_with_default(
            np.asarray(shape.as_list(), np.int64), [rank], name=f"{prefix}_shape")
    else:
        dense_shape = array_ops.placeholder(_dtypes.int64, [rank], name=f"{prefix}_shape")
    sp = SparseTensor(
        values=array_ops.placeholder(dtype, [None], name=name),
        indices=array_ops.placeholder(_dtypes.int64, [None, rank], name=f"{prefix}_indices"),
        dense_shape=dense_shape)
    sp._shape_hint = shape
    return sp


def convert_to_tensor_or_sparse_tensor(value, dtype=None, name=None):
    """Returns a SparseTensor (from one or a SparseTensorValue) as is, else convert_to_tensor.

    Raises:
        RuntimeError: a SparseTensor's dtype differs from `dtype`.
    """
    if isinstance(value, SparseTensorValue):
        value = SparseTensor.from_value(value)
    if isinstance(value, SparseTensor):
        if dtype is not None and not _dtypes.as_dtype(dtype).is_compatible_with(value.dtype):
            raise RuntimeError(f"Sparse dtype: requested = {_dtypes.as_dtype(dtype).name}, "
                               f"actual = {value.dtype.name}")
        return value
    return _ops.convert_to_tensor(value, dtype=dtype, name=name)
