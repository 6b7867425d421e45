"""Conversions between numpy arrays, TensorProtos and static (constant) values of graph tensors."""

from __future__ import annotations

import numpy as np

from kernflow.core.framework import dtypes as _dtypes
from kernflow.core.framework import tensor_shape as _ts

__all__ = ["make_tensor_proto", "make_ndarray", "shape_to_proto", "shape_from_proto",
           "constant_value", "register_constant_value", "to_numpy", "encode_string_list",
           "decode_string_list"]

_STRING = None


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
        if arr.dtype.kind == "f" and np.dtype(npdt).kind in "iub":
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
    """Returns a TensorProto holding `values`: raw little-endian bytes, or string_val for strings.

    Raises:
        ValueError: if `shape` is given and the value cannot be broadcast to it.
    """
    from kernflow.core.protobuf import tensor_pb2
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
    dt = _dtypes.as_dtype(dtype).base_dtype if dtype is not None else _dtypes.as_dtype(arr.dtype)
    p = tensor_pb2.TensorProto(dtype=dt.as_datatype_enum, tensor_shape=shape_to_proto(arr.shape))
    if dt == _dtypes.string:
        p.string_val.extend(arr.reshape(-1).tolist())
    else:
        p.tensor_content = np.ascontiguousarray(arr, dtype=np.dtype(dt.as_numpy_dtype).newbyteorder("<")).tobytes()
    return p


def make_ndarray(proto) -> np.ndarray:
    """Returns the ndarray a TensorProto holds (a fresh, writable array).

    A string tensor's elements are its ``string_val``, or, when it has ``tensor_content``, that
    content in TF's string-list encoding (`decode_string_list`), as TF's C++ ``Tensor::FromProto``
    reads it.

    Raises:
        InvalidArgumentError: if the byte count does not match the dtype and shape (a malformed
            proto is its sender's error, as TF's "Cannot parse tensor from proto"; readers of
            stored tensors, e.g. checkpoints, check their own bytes and raise DataLossError).
    """
    dt = _dtypes.as_dtype(proto.dtype)
    shape = [d.size for d in proto.tensor_shape.dim]
    if dt == _dtypes.string:
        content = proto.tensor_content
        items = decode_string_list(content, int(np.prod(shape, dtype=np.int64)), shape) if content \
            else list(proto.string_val)
        out = np.empty(len(items), dtype=object)
        out[:] = items
        return out.reshape(shape)
    npdt = np.dtype(dt.as_numpy_dtype).newbyteorder("<")
    n = int(np.prod(shape, dtype=np.int64))
    if len(proto.tensor_content) != n * npdt.itemsize:
        from kernflow.core.framework import errors
        raise errors.InvalidArgumentError(None, None, f"Cannot parse tensor from proto: TensorProto of "
                                          f"{dt.name}{shape} holds {len(proto.tensor_content)} "
                                          f"bytes, expected {n * npdt.itemsize}")
    arr = np.frombuffer(proto.tensor_content, dtype=npdt).reshape(shape)
    return arr.astype(dt.as_numpy_dtype, copy=True)


_MAX_STRING_BYTES = (1 << 32) - 1   # a length is a varint32


def encode_string_list(items) -> tuple[bytes, int]:
    """TF's encoding of a string tensor's elements as one ``tensor_content`` (``EncodeStringList``
    of tensorflow/core/platform/tensor_coding.cc): every element's length as a varint32, then
    every element's bytes.

    Args:
        items: the elements, a sequence of bytes-like objects.

    Returns:
        (the varint lengths, as bytes; the elements' total length): the content is the lengths
        followed by the elements, so a writer joins them with one copy.

    Raises:
        InvalidArgumentError: an element of 4 GiB or more (a varint32 cannot hold its length).
    """
    lengths = np.fromiter((len(v) for v in items), dtype=np.int64, count=len(items))
    if not len(lengths):
        return b"", 0
    if int(lengths.max()) > _MAX_STRING_BYTES:
        from kernflow.core.framework import errors
        raise errors.InvalidArgumentError(None, None, f"a string tensor element of {int(lengths.max())} "
                                          f"bytes is too long: at most {_MAX_STRING_BYTES} bytes")
    lengths = lengths.astype(np.uint64)
    nbytes = np.ones(len(lengths), np.int64)
    for k in range(1, 5):
        nbytes += lengths >= (1 << (7 * k))
    ends = np.cumsum(nbytes)
    starts = ends - nbytes
    out = np.empty(int(ends[-1]), np.uint8)
    for k in range(int(nbytes.max())):
        sel = nbytes > k
        byte = (lengths[sel] >> np.uint64(7 * k)) & np.uint64(0x7F)
        out[starts[sel] + k] = byte | np.where(nbytes[sel] > k + 1, 0x80, 0).astype(np.uint64)
    return out.tobytes(), int(lengths.sum())


def decode_string_list(content, n: int, shape=None) -> list:
    """The `n` elements (bytes) of a string tensor's ``tensor_content`` in TF's encoding (see
    `encode_string_list`); each element is copied once, out of `content`.

    Args:
        content: the encoded bytes (bytes, or a memoryview of received bytes).
        n: the number of elements the tensor's shape holds.
        shape: the tensor's shape, for error messages.

    Raises:
        InvalidArgumentError: lengths that do not parse, or do not add up to the bytes that follow
            them (TF's "Cannot parse tensor from proto").
    """
    def bad(why):
        from kernflow.core.framework import errors
        return errors.InvalidArgumentError(None, None, f"Cannot parse tensor from proto: string tensor "
                                           f"of shape {shape if shape is not None else [n]}: {why}")
    size = len(content)
    if n == 0:
        if size:
            raise bad(f"no elements, but {size} bytes of tensor_content")
        return []
    head = np.frombuffer(content, np.uint8, count=min(size, 5 * n))
    ends = np.flatnonzero(head < 0x80)[:n]
    if len(ends) < n:
        raise bad(f"tensor_content of {size} bytes holds fewer than {n} lengths")
    starts = np.empty(n, np.int64)
    starts[0] = 0
    starts[1:] = ends[:-1] + 1
    nbytes = ends - starts + 1
    if int(nbytes.max()) > 5:
        raise bad("a malformed length (a varint32 of more than 5 bytes)")
    lengths = np.zeros(n, np.uint64)
    for k in range(int(nbytes.max())):
        sel = nbytes > k
        lengths[sel] |= (head[starts[sel] + k].astype(np.uint64) & np.uint64(0x7F)) << np.uint64(7 * k)
    first = int(ends[-1]) + 1
    if int(lengths.max()) > _MAX_STRING_BYTES or first + int(lengths.sum()) != size:
        raise bad(f"its {n} lengths add up to {int(lengths.sum())} bytes, but {size - first} follow them")
    data, offset = _bytes_at(content)
    stops = np.cumsum(lengths.astype(np.int64)) + (first + offset)
    out = [data[a:b] for a, b in zip((stops - lengths.astype(np.int64)).tolist(), stops.tolist())]
    return out if type(data) is bytes else [v.tobytes() for v in out]


def _bytes_at(content) -> tuple:
    """(bytes object or memoryview, offset of `content` in it): slicing a bytes object makes each
    element with one copy, so a memoryview into received bytes is resolved to those bytes."""
    if type(content) is bytes:
        return content, 0
    mv = memoryview(content)
    base = mv.obj
    if type(base) is bytes and mv.contiguous and mv.itemsize == 1 and len(mv):
        offset = np.frombuffer(mv, np.uint8).ctypes.data - np.frombuffer(base, np.uint8).ctypes.data
        if 0 <= offset and offset + len(mv) <= len(base):
            return base, int(offset)
    return mv.cast("B") if mv.format != "B" else mv, 0


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
