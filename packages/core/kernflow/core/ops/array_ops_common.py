"""Helpers shared by the array op modules and their kernels.

* Partial static values of small integer tensors (shape vectors, begin/end indices): which elements
  are known while the graph is built, so shape functions infer as much as possible
  (``reshape(x, [kf.shape(y)[0], -1])``).
* `strided_slice_plan`: TF's StridedSlice semantics (masks, ellipsis, new and shrunk axes) turned
  into a numpy index and an output shape; used by the shape function (with unknown entries) and
  by the CPU kernel (with every entry known).
"""

from __future__ import annotations

import numpy as np

from kernflow.core.framework import ops as _ops
from kernflow.core.framework import tensor_shape as _ts
from kernflow.core.framework import tensor_util

__all__ = ["partial_value", "partial_scalar", "partial_shape", "strided_slice_plan", "SliceSpecError",
           "normalize_axis", "is_tensorlike", "index_arg"]


class SliceSpecError(ValueError):
    """An invalid strided-slice specification (the message reads like TF's)."""


def is_tensorlike(v) -> bool:
    return isinstance(v, _ops.Tensor) or hasattr(v, "_as_graph_element")


def index_arg(v):
    """An integer-index argument: an empty Python list becomes an int32 tensor (not float32).

    TF converts Python values for an index input to the type attr's default (int32); apply_op
    would infer float32 for `[]`.
    """
    if is_tensorlike(v) or not isinstance(v, (list, tuple, np.ndarray)):
        return v
    try:
        empty = np.size(v) == 0
    except TypeError:  # a list holding tensors: packed by the conversion function
        return v
    return np.zeros(np.shape(v), np.int32) if empty else v


def normalize_axis(axis: int, rank: int, what: str = "axis") -> int:
    """Maps a possibly negative axis into [0, rank); raises ValueError outside [-rank, rank)."""
    if not -rank <= axis < rank:
        raise ValueError(f"{what} {axis} is out of bounds: must be in [{-rank}, {rank})")
    return axis + rank if axis < 0 else axis


def partial_scalar(t):
    """The static int value of scalar tensor `t`, or None when unknown."""
    if not isinstance(t, _ops.Tensor):
        return int(np.asarray(t))
    v = tensor_util.constant_value(t)
    if v is not None:
        v = np.asarray(v)
        return int(v) if v.ndim == 0 and v.dtype.kind in "iu" else None
    op = t.op
    if op.type in ("Identity", "StopGradient", "Cast"):
        return partial_scalar(op.inputs[0])
    if op.type == "StridedSlice" and op.get_attr("shrink_axis_mask"):
        vals = _strided_slice_of_partial(op)
        if vals is not None and not isinstance(vals, list):
            return vals
    return None


def partial_value(t):
    """Static elements of 1-D int tensor `t`: a list of int-or-None, or None if its length is unknown."""
    if not isinstance(t, _ops.Tensor):
        v = np.asarray(t)
        return [int(x) for x in v.reshape(-1)] if v.ndim == 1 else None
    v = tensor_util.constant_value(t)
    if v is not None:
        v = np.asarray(v)
        if v.ndim == 1 and v.dtype.kind in "iu":
            return [int(x) for x in v]
        return None
    op = t.op
    out = None
    if op.type == "Shape":
        s = op.inputs[0].shape
        out = list(s.dim_values) if s.rank is not None else None
    elif op.type == "Pack" and op.get_attr("axis") == 0 and all(x.shape.rank == 0 for x in op.inputs):
        out = [partial_scalar(x) for x in op.inputs]
    elif op.type == "ConcatV2" and partial_scalar(op.inputs[-1]) in (0, -1):
        parts = [partial_value(x) for x in op.inputs[:-1]]
        out = None if any(p is None for p in parts) else [d for p in parts for d in p]
    elif op.type in ("Identity", "StopGradient", "Cast"):
        out = partial_value(op.inputs[0])
    elif op.type == "StridedSlice" and not op.get_attr("shrink_axis_mask"):
        r = _strided_slice_of_partial(op)
        out = r if isinstance(r, list) else None
    elif op.type == "Fill":
        dims = tensor_util.constant_value(op.inputs[0])
        if dims is not None and np.size(dims) == 1:
            out = [partial_scalar(op.inputs[1])] * int(np.reshape(dims, -1)[0])
    if out is None and t.shape.rank == 1 and t.shape.dim_values[0] is not None:
        out = [None] * t.shape.dim_values[0]
    return out


def partial_shape(t) -> _ts.TensorShape:
    """The partial shape described by 1-D shape tensor `t` (-1 and unknown entries become None)."""
    vals = partial_value(t)
    if vals is None:
        return _ts.TensorShape(None)
    return _ts.TensorShape([None if d is None or d < 0 else d for d in vals])


def _strided_slice_of_partial(op):
    """Applies a StridedSlice with constant begin/end/strides to the partial value of its input."""
    src = partial_value(op.inputs[0])
    if src is None:
        return None
    b, e, s = (tensor_util.constant_value(x) for x in op.inputs[1:4])
    if b is None or e is None or s is None:
        return None
    try:
        index, _ = strided_slice_plan([len(src)], [int(x) for x in b], [int(x) for x in e],
                                      [int(x) for x in s], *(op.get_attr(m) for m in _MASKS))
    except SliceSpecError:
        return None
    if any(i is None for i in index) or len(index) != 1:
        return None
    arr = np.empty(len(src), dtype=object)
    arr[:] = src
    r = arr[index[0]]
    return r if isinstance(index[0], int) else list(r)


_MASKS = ("begin_mask", "end_mask", "ellipsis_mask", "new_axis_mask", "shrink_axis_mask")


def strided_slice_plan(dims, begin, end, strides, begin_mask=0, end_mask=0, ellipsis_mask=0,
                       new_axis_mask=0, shrink_axis_mask=0):
    """Resolves a StridedSlice specification against an input shape, with TF's semantics.

    Args:
        dims: the input's dims (a list of int-or-None; the rank must be known).
        begin, end, strides: lists of int-or-None of one length (the sparse spec).
        *_mask: TF's bit masks over the sparse spec.

    Returns:
        (index, out_dims): `index` is a tuple usable as a numpy index when every entry is known
        (None for a new axis, an int for a shrunk axis, a slice otherwise; an unknown slice is
        None too, so callers with unknown entries only read out_dims); `out_dims` is the output
        shape as a list of int-or-None.

    Raises:
        SliceSpecError: for a zero stride, several ellipses, an index out of range on a shrunk
            axis, or more indices than the input has dimensions.
    """
    n = len(strides)
    if len(begin) != n or len(end) != n:
        raise SliceSpecError(f"Expected begin, end, and strides to be 1D equal size tensors, but got "
                             f"shapes [{len(begin)}], [{len(end)}], and [{n}] instead.")
    ell = [i for i in range(n) if ellipsis_mask >> i & 1]
    if len(ell) > 1:
        raise SliceSpecError("Multiple ellipses in slice spec not allowed")
    entries = list(range(n))
    if not ell:
        entries.append("...")  # implicit trailing ellipsis
        ell_pos = n
    else:
        ell_pos = ell[0]
    rank = len(dims)
    regular_after = sum(1 for i in range(ell_pos + 1, n) if not new_axis_mask >> i & 1)
    index, out_dims = [], []
    full = 0
    for i in entries:
        if i == "..." or ellipsis_mask >> i & 1:
            stop = min(rank - regular_after, rank)
            while full < stop:
                index.append(slice(None))
                out_dims.append(dims[full])
                full += 1
            continue
        if new_axis_mask >> i & 1:
            index.append(None)
            out_dims.append(1)
            continue
        if full >= rank:
            raise SliceSpecError(f"Index out of range using input dim {full}; input has only {rank} dims")
        ix, d = _plan_dim(i, dims[full], begin[i], end[i], strides[i], begin_mask >> i & 1,
                          end_mask >> i & 1, shrink_axis_mask >> i & 1)
        index.append(ix)
        if not shrink_axis_mask >> i & 1:
            out_dims.append(d)
        full += 1
    return tuple(index), out_dims


def _plan_dim(i, dim, b, e, s, bm, em, shrink):
    """One dense dim: returns (numpy index item or None when unknown, output size or None)."""
    if s is not None and s == 0:
        raise SliceSpecError(f"strides[{i}] must be non-zero")
    if shrink:
        if s is not None and s <= 0:
            raise SliceSpecError("only stride 1 allowed on non-range indexing.")
        if b is None or dim is None:
            return None, 1
        x = b + dim if b < 0 else b
        if not 0 <= x < dim:
            raise SliceSpecError(f"slice index {b} of dimension {i} out of bounds.")
        return x, 1
    if s is None or dim is None:
        return None, None
    lo, hi = (0, dim) if s > 0 else (-1, dim - 1)

    def canonical(x, masked, is_end):
        if masked:
            if s > 0:
                return hi if is_end else lo
            return lo if is_end else hi
        if x is None:
            return None
        x = x + dim if x < 0 else x
        return min(max(x, lo), hi)

    cb, ce = canonical(b, bm, False), canonical(e, em, True)
    if cb is None or ce is None:
        return None, None
    length = ce - cb
    size = 0 if length == 0 or (length < 0) != (s < 0) else -(-length // s)
    if size == 0:
        return slice(0, 0), 0
    return slice(cb, None if ce < 0 else ce, s), size
