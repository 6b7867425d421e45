"""Slicing: Slice, StridedSlice and Python indexing of Tensors (``t[1:, ..., kf.newaxis, -1]``).

Re-exported by `kernflow.core.ops.array_ops`; kernels in kernflow.kernels.cpu.array.
"""

from __future__ import annotations

import builtins
import numbers

import numpy as np

from kernflow.core.framework import dtypes as _dtypes
from kernflow.core.framework import ops as _ops
from kernflow.core.framework import tensor_shape as _ts
from kernflow.core.framework import tensor_util
from kernflow.core.framework.op_def_library import apply_op
from kernflow.core.framework.op_def_registry import register_op
from kernflow.core.ops.array_ops_common import (SliceSpecError, index_arg, partial_value,
                                                strided_slice_plan)
from kernflow.core.ops.array_ops_join import stack

__all__ = ["slice", "strided_slice", "newaxis"]

newaxis = None
_bslice = builtins.slice
_MASKS = ("begin_mask", "end_mask", "ellipsis_mask", "new_axis_mask", "shrink_axis_mask")


# ----------------------------------------------------------------------------- Slice
def _slice_shape(op):
    s = op.inputs[0].shape
    for t in op.inputs[1:]:
        t.shape.with_rank(1)
    begin, size = partial_value(op.inputs[1]), partial_value(op.inputs[2])
    n = len(begin) if begin is not None else len(size) if size is not None else None
    if begin is not None and size is not None and len(begin) != len(size):
        raise ValueError(f"Expected begin and size arguments to be 1-D tensors of the same size, "
                         f"but got {len(begin)} and {len(size)}")
    if s.rank is not None and n is not None and n != s.rank:
        raise ValueError(f"Expected begin and size arguments to have {s.rank} elements (the rank of "
                         f"the input), got {n}")
    r = s.rank if s.rank is not None else n
    if r is None:
        return [_ts.TensorShape(None)]
    begin = begin or [None] * r
    size = size or [None] * r
    dims = s.dim_values if s.rank is not None else [None] * r
    out = []
    for i, (d, b, z) in enumerate(zip(dims, begin, size)):
        if b is not None and b < 0:
            raise ValueError(f"Expected begin[{i}] >= 0, but got {b}")
        if z is not None and z < -1:
            raise ValueError(f"Expected size[{i}] >= -1, but got {z}")
        if d is not None and b is not None and b > d:
            raise ValueError(f"Expected begin[{i}] in [0, {d}], but got {b}")
        if z is not None and z >= 0:
            if d is not None and b is not None and b + z > d:
                raise ValueError(f"Expected size[{i}] in [0, {d - b}], but got {z}")
            out.append(z)
        elif z == -1 and d is not None and b is not None:
            out.append(d - b)
        else:
            out.append(None)
    return [_ts.TensorShape(out)]


register_op("Slice", inputs=["input: T", "begin: Index", "size: Index"], outputs=["output: T"],
            attrs=["T: type", "Index: {int32, int64}"], shape_fn=_slice_shape,
            doc="Extracts input[begin[i] : begin[i] + size[i]] per dimension (size -1: to the end).")


def slice(input_, begin, size, name=None):  # noqa: A001 - TF's name
    """Extracts a slice of `size` starting at `begin` from `input_`.

    Args:
        input_: the tensor.
        begin: 1-D int offsets, one per dimension.
        size: 1-D int sizes; -1 means "all remaining elements of that dimension".
    """
    return apply_op("Slice", [input_, index_arg(begin), index_arg(size)], name=name).outputs[0]


# ----------------------------------------------------------------------------- StridedSlice
def _strided_slice_shape(op):
    s = op.inputs[0].shape
    for t in op.inputs[1:]:
        t.shape.with_rank(1)
    b, e, st = (partial_value(t) for t in op.inputs[1:4])
    n = next((len(v) for v in (st, b, e) if v is not None), None)
    if s.rank is None or n is None:
        return [_ts.TensorShape(None)]
    b, e, st = (v if v is not None else [None] * n for v in (b, e, st))
    try:
        _, out = strided_slice_plan(list(s.dim_values), b, e, st, *(op.get_attr(m) for m in _MASKS))
    except SliceSpecError as err:
        raise ValueError(str(err)) from None
    return [_ts.TensorShape(out)]


register_op("StridedSlice", inputs=["input: T", "begin: Index", "end: Index", "strides: Index"],
            outputs=["output: T"],
            attrs=["T: type", "Index: {int32, int64}", "begin_mask: int = 0", "end_mask: int = 0",
                   "ellipsis_mask: int = 0", "new_axis_mask: int = 0", "shrink_axis_mask: int = 0"],
            shape_fn=_strided_slice_shape,
            doc="Python-style strided slicing: input[begin:end:strides] per dimension, with masks for "
                "omitted bounds, an ellipsis, new axes and indexed (shrunk) axes.")


def strided_slice(input_, begin, end, strides=None, begin_mask=0, end_mask=0, ellipsis_mask=0,
                  new_axis_mask=0, shrink_axis_mask=0, var=None, name=None):
    """Extracts a strided slice of `input_` (TF1 `tf.strided_slice`).

    Bit i of a mask refers to entry i of begin/end/strides: `begin_mask`/`end_mask` ignore that
    bound (full range), `ellipsis_mask` makes the entry an ellipsis, `new_axis_mask` inserts a
    dimension of 1, `shrink_axis_mask` indexes (removing the dimension).

    Args:
        input_: the tensor.
        begin, end, strides: 1-D int tensors of one length (strides default to ones).
        var: unused (TF's sliced-assignment hook).
    """
    del var
    if strides is None:
        if isinstance(begin, _ops.Tensor):
            strides = apply_op("OnesLike", [begin]).outputs[0]
        else:
            strides = [1] * len(begin)
    attrs = {"begin_mask": begin_mask, "end_mask": end_mask, "ellipsis_mask": ellipsis_mask,
             "new_axis_mask": new_axis_mask, "shrink_axis_mask": shrink_axis_mask}
    args = [input_, index_arg(begin), index_arg(end), index_arg(strides)]
    return apply_op("StridedSlice", args, attrs, name=name).outputs[0]


_BAD_INDEX = ("Only integers, slices (`:`), ellipsis (`...`), tf.newaxis (`None`) and scalar "
              "tf.int32/tf.int64 tensors are valid indices, got {!r}")


def _check_index(idx):
    if isinstance(idx, (numbers.Integral, _ts.Dimension)) and not isinstance(idx, bool):
        return idx.value if isinstance(idx, _ts.Dimension) else int(idx)
    if isinstance(idx, np.ndarray) and idx.ndim == 0 and idx.dtype.kind in "iu":
        return int(idx)
    if hasattr(idx, "_as_graph_element") and not isinstance(idx, _ops.Tensor):
        idx = _ops.convert_to_tensor(idx)
    if isinstance(idx, _ops.Tensor):
        if idx.dtype.base_dtype not in (_dtypes.int32, _dtypes.int64):
            raise TypeError(_BAD_INDEX.format(idx))
        if idx.shape.rank not in (None, 0):
            raise TypeError(_BAD_INDEX.format(idx))
        return idx
    raise TypeError(_BAD_INDEX.format(idx))


def _undefined(x) -> bool:
    return x is None or (isinstance(x, _ts.Dimension) and x.value is None)


def _slice_helper(tensor, slice_spec, var=None):
    """Tensor.__getitem__: translates a Python index into one StridedSlice (or a boolean_mask)."""
    if isinstance(slice_spec, bool) or \
            (isinstance(slice_spec, _ops.Tensor) and slice_spec.dtype.base_dtype == _dtypes.bool) or \
            (isinstance(slice_spec, np.ndarray) and slice_spec.dtype == bool):
        from kernflow.core.ops.array_ops_gather import boolean_mask
        return boolean_mask(tensor, slice_spec)
    if not isinstance(slice_spec, (list, tuple)):
        slice_spec = [slice_spec]
    begin, end, strides = [], [], []
    masks = dict.fromkeys(_MASKS, 0)
    for i, s in enumerate(slice_spec):
        bit = 1 << i
        if isinstance(s, _bslice):
            for val, out, mask in ((s.start, begin, "begin_mask"), (s.stop, end, "end_mask")):
                if _undefined(val):
                    out.append(0)
                    masks[mask] |= bit
                else:
                    out.append(_check_index(val))
            strides.append(1 if _undefined(s.step) else _check_index(s.step))
        elif s is Ellipsis:
            begin.append(0), end.append(0), strides.append(1)
            masks["ellipsis_mask"] |= bit
        elif s is newaxis:
            begin.append(0), end.append(0), strides.append(1)
            masks["new_axis_mask"] |= bit
        else:
            s = _check_index(s)
            begin.append(s)
            end.append(s + 1)
            strides.append(1)
            masks["shrink_axis_mask"] |= bit
    values = [tensor] + [x for x in begin + end + strides if isinstance(x, _ops.Tensor)]
    with _ops.name_scope(None, "strided_slice", values) as scope:
        if begin:
            wide = any(isinstance(x, _ops.Tensor) and x.dtype.base_dtype == _dtypes.int64
                       for x in begin + end + strides)
            packed = [_pack_index(v, wide) for v in (begin, end, strides)]
        else:
            empty = _ops.convert_to_tensor(np.zeros([0], np.int32))
            packed = [empty] * 3
        return strided_slice(tensor, *packed, **{k: v for k, v in masks.items()}, var=var,
                             name=scope)


def _pack_index(vals, wide):
    want = _dtypes.int64 if wide else None
    conv = []
    for v in vals:
        if isinstance(v, _ops.Tensor):
            if wide and v.dtype.base_dtype != _dtypes.int64:
                v = apply_op("Cast", [v], {"DstT": _dtypes.int64}).outputs[0]
        elif want is not None:
            v = np.int64(v)
        conv.append(v)
    return stack(conv)


_ops.Tensor._override_operator("__getitem__", _slice_helper)


# ----------------------------------------------------------------------------- static values
def _cv(t):
    return tensor_util.constant_value(t)


@tensor_util.register_constant_value("StridedSlice")
def _strided_slice_value(op):
    vals = [_cv(t) for t in op.inputs]
    if any(v is None for v in vals):
        return None
    v = vals[0]
    try:
        index, _ = strided_slice_plan(list(v.shape), *([int(x) for x in np.reshape(a, -1)]
                                                       for a in vals[1:]),
                                      *(op.get_attr(m) for m in _MASKS))
    except SliceSpecError:
        return None
    return np.array(v[index])


@tensor_util.register_constant_value("Slice")
def _slice_value(op):
    v, b, z = (_cv(t) for t in op.inputs)
    if v is None or b is None or z is None or np.size(b) != v.ndim or np.size(z) != v.ndim:
        return None
    idx = tuple(_bslice(int(bi), None if int(zi) == -1 else int(bi) + int(zi))
                for bi, zi in zip(np.reshape(b, -1), np.reshape(z, -1)))
    return np.array(v[idx])
