"""Conversions between numpy arrays, TensorProtos and static (constant) values of graph tensors."""

from __future__ import annotations

import numpy as np

from kernflow.core.framework import dtypes as _dtypes
from kernflow.core.framework import tensor_codec
from kernflow.core.framework import tensor_shape as _ts
from kernflow.core.framework.tensor_codec import decode_string_list
from kernflow.core.framework.tensor_codec import encode_string_list

__all__ = ["make_tensor_proto", "make_ndarray", "shape_to_proto", "shape_from_proto",
           "constant_value", "register_constant_value", "to_numpy", "encode_string_list",
           "decode_string_list"]


def to_numpy(values, dtype=None) -> np.ndarray:
    """Converts a Python/numpy value to an ndarray with TF's default dtype rules.

    Python floats become float32 and ints int32 (int64 when they do not fit), unless `dtype`
    (a DType or anything `as_dtype` takes) says otherwise.

    Known `Dimension`s (``[x.shape[1], 10]``) count as their ints, as in TF1.

    Raises:
        TypeError: if the value cannot be represented in `dtype`.
        ValueError: if the value holds an unknown Dimension.
    """
    values = _dimension_values(values)
    if dtype is not None:
        dt = _dtypes.as_dtype(dtype).base_dtype
        if dt == _dtypes.string:
            return _to_string_array(values)
        arr = np.asarray(values)
        if arr.dtype.kind in "US" or arr.dtype == object and dt != _dtypes.string:
            raise TypeError(f"Expected {dt.name}, got {values!r} of type "
                            f"'{type(values).__name__}' instead.")
        npdt = dt.as_numpy_dtype
        if arr.dtype.kind == "f" and (dt.is_quantized or np.dtype(npdt).kind in "iub"):
            if not np.all(np.isfinite(arr)) or not np.array_equal(arr, np.trunc(arr)):
                raise TypeError(f"Expected {dt.name}, got {values!r} of type "
                                f"'{type(values).__name__}' instead.")
        if arr.dtype == npdt:
            return arr
        return arr.astype(npdt)
    if isinstance(values, np.ndarray):
        return values
    if isinstance(values, np.generic):
        return np.asarray(values)
    dt = _dtypes.result_dtype_for_python_value(values)
    if dt == _dtypes.string:
        return _to_string_array(values)
    return np.asarray(values, dtype=dt.as_numpy_dtype)


def _dimension_values(values):
    """`values` with each Dimension (at any list/tuple depth) replaced by its int."""
    if isinstance(values, _ts.Dimension):
        if values.value is None:
            raise ValueError("Cannot convert an unknown Dimension to a Tensor: ?")
        return values.value
    if isinstance(values, (list, tuple)) and any(isinstance(v, (_ts.Dimension, list, tuple))
                                                 for v in values):
        return [_dimension_values(v) for v in values]
    return values


def _to_string_array(values) -> np.ndarray:
    arr = np.asarray(values, dtype=object)
    flat = [v.encode() if isinstance(v, str) else bytes(v) for v in arr.reshape(-1)]
    out = np.empty(len(flat), dtype=object)
    out[:] = flat
    return out.reshape(arr.shape)


def shape_to_proto(shape):
    """Returns a TensorShapeProto of `shape` (unknown dims are -1)."""
    from kernflow.core.protobuf import tensor_shape_pb2
    shape = _ts.as_shape(shape)
    if shape.dim_values is None:
        return tensor_shape_pb2.TensorShapeProto(unknown_rank=True)
    return tensor_shape_pb2.TensorShapeProto(
        dim=[tensor_shape_pb2.TensorShapeProto.Dim(size=-1 if d is None else d) for d in shape.dim_values])


def shape_from_proto(proto) -> _ts.TensorShape:
    """Returns the TensorShape a TensorShapeProto describes."""
    if proto.unknown_rank:
        return _ts.TensorShape(None)
    return _ts.TensorShape([None if d.size < 0 else d.size for d in proto.dim])


def make_tensor_proto(values, dtype=None, shape=None):
    """Returns a TensorProto holding `values`: raw little-endian bytes, or string_val for strings
    (the bytes of `tensor_codec.tensor_to_proto`).

    Raises:
        TypeError: if the value cannot be represented in `dtype`, or `dtype` has no TensorProto
            encoding (resource, variant).
        ValueError: if `shape` is given and the value cannot be broadcast to it.
    """
    arr = to_numpy(values, dtype)
    if shape is not None:
        shape = [int(d) for d in shape]
        if arr.size == int(np.prod(shape, dtype=np.int64)):
            arr = arr.reshape(shape)
        elif arr.size == 1:
            arr = np.broadcast_to(arr.reshape(()), shape)
        else:
            raise ValueError(f"Too many elements provided. Needed at most {int(np.prod(shape))}, "
                             f"but received {arr.size}")
    if dtype is not None:
        dt = _dtypes.as_dtype(dtype).base_dtype
        if dt.as_numpy_dtype is np.object_ and dt != _dtypes.string:
            raise TypeError(f"Cannot make a TensorProto of a {dt.name} tensor: it has no encoding")
    return tensor_codec.tensor_to_proto(arr)


def make_ndarray(proto) -> np.ndarray:
    """Returns the ndarray a TensorProto holds (a fresh, writable array): `tensor_codec.proto_to_tensor`.

    A string tensor's elements are its ``string_val``, or, when it has ``tensor_content``, that
    content in TF's string-list encoding (`decode_string_list`), as TF's C++ ``Tensor::FromProto``
    reads it.

    Raises:
        InvalidArgumentError: if the dtype has no encoding, the shape is not fully defined, or the
            byte (or string) count does not match the dtype and shape (a malformed proto is its
            sender's error, as TF's "Cannot parse tensor from proto"; readers of stored tensors,
            e.g. checkpoints, check their own bytes and raise DataLossError).
    """
    return tensor_codec.proto_to_tensor(proto)


# op type -> fn(op) -> ndarray or None; lets op families teach constant_value about their ops.
_CONSTANT_VALUE_FNS = {}


def register_constant_value(op_type: str):
    """Decorator: registers how to compute an op's static value from its inputs' static values."""
    def deco(fn):
        _CONSTANT_VALUE_FNS[op_type] = fn
        return fn
    return deco


def constant_value(tensor):
    """Returns the value of `tensor` if it can be computed while building the graph, else None.

    Used by shape functions (a Reshape whose shape input is constant has a static shape).
    """
    from kernflow.core.framework import ops as _ops
    if not isinstance(tensor, _ops.Tensor):
        return to_numpy(tensor)
    op = tensor.op
    if op.type == "Const":
        return op.get_attr("value")
    if op.type == "Shape" and op.inputs[0].shape.is_fully_defined():
        return np.array(op.inputs[0].shape.as_list(), dtype=tensor.dtype.as_numpy_dtype)
    if op.type == "Size" and op.inputs[0].shape.is_fully_defined():
        return np.array(op.inputs[0].shape.num_elements(), dtype=tensor.dtype.as_numpy_dtype)
    if op.type == "Rank" and op.inputs[0].shape.rank is not None:
        return np.array(op.inputs[0].shape.rank, dtype=np.int32)
    if op.type in ("Identity", "StopGradient"):
        return constant_value(op.inputs[0])
    if op.type == "Cast":
        v = constant_value(op.inputs[0])
        return None if v is None else v.astype(op.get_attr("DstT").as_numpy_dtype)
    if op.type == "Pack":
        vals = [constant_value(t) for t in op.inputs]
        if any(v is None for v in vals):
            return None
        return np.stack(vals, axis=op.get_attr("axis"))
    fn = _CONSTANT_VALUE_FNS.get(op.type)
    return fn(op) if fn else None


def constant_value_as_shape(tensor) -> _ts.TensorShape:
    """Returns the partial shape a 1-D shape tensor describes (-1 or unknown entries are None)."""
    from kernflow.core.framework import ops as _ops
    v = constant_value(tensor)
    if v is not None:
        return _ts.TensorShape([None if d < 0 else int(d) for d in np.reshape(v, -1)])
    if isinstance(tensor, _ops.Tensor):
        op = tensor.op
        if op.type == "Shape":
            return op.inputs[0].shape
        if op.type == "Pack":
            dims = []
            for t in op.inputs:
                c = constant_value(t)
                dims.append(None if c is None or int(c) < 0 else int(c))
            return _ts.TensorShape(dims)
        n = tensor.shape.dim_values[0] if tensor.shape.rank == 1 else None
        return _ts.TensorShape([None] * n) if n is not None else _ts.TensorShape(None)
    return _ts.TensorShape(None)
