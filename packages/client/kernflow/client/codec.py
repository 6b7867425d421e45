"""Tensors on the wire: numpy arrays as TensorProtos and as chunked RecvTensor streams.

Numeric tensors always travel as raw little-endian bytes (`TensorProto.tensor_content`, or the
`content` of RecvTensor chunks), never element by element and never pickled; string tensors use
repeated `string_val` bytes. A RecvTensor stream's first message carries dtype, shape and
`total_bytes`; every message carries the next slice of the bytes, cut from a memoryview of the
C-contiguous array (one copy per chunk, into the message) and written straight into a preallocated
array on the receiving side.

For string tensors, `total_bytes` is the sum of the strings' byte lengths and the elements are
spread over the messages' `string_val` fields in order.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator

import numpy as np

from kernflow.core.framework import dtypes as _dtypes
from kernflow.core.framework import errors
from kernflow.core.framework import tensor_util
from kernflow.core.protobuf import tensor_pb2
from kernflow.core.protobuf import tensor_shape_pb2
from kernflow.core.runtime.resource_mgr import Var
from kernflow.client.protobuf import worker_pb2

__all__ = ["CHUNK_BYTES", "tensor_to_proto", "proto_to_tensor", "iter_recv_chunks",
           "assemble_recv_chunks", "to_host_array"]

CHUNK_BYTES = 4 << 20


def to_host_array(value) -> np.ndarray:
    """Returns `value` as a numpy array in host memory (device arrays such as cupy's are copied).

    Raises:
        TypeError: for values that are not tensors (resources, arbitrary Python objects).
    """
    if type(value) is np.ndarray:
        return value
    if isinstance(value, (np.ndarray, np.generic)):
        return np.asarray(value)
    get = getattr(value, "get", None)  # cupy arrays copy themselves to the host with .get()
    if get is not None and hasattr(value, "dtype") and hasattr(value, "shape"):
        return np.asarray(get())
    if isinstance(value, Var):  # a variable reached through a reference edge: send its value
        return to_host_array(value.read())
    if isinstance(value, (bool, int, float, complex, str, bytes, list, tuple)):
        return tensor_util.to_numpy(value)
    raise TypeError(f"cannot send a value of type {type(value).__name__} over the wire: only "
                    f"tensors (numpy arrays and scalars) can be")


def _is_string(arr: np.ndarray) -> bool:
    return arr.dtype.kind in "OSU"


def _string_list(arr: np.ndarray) -> list[bytes]:
    out = []
    for v in arr.reshape(-1).tolist():
        if isinstance(v, bytes):
            out.append(v)
        elif isinstance(v, str):
            out.append(v.encode("utf-8"))
        elif isinstance(v, (bytearray, memoryview)):
            out.append(bytes(v))
        else:
            raise TypeError(f"string tensor holds a {type(v).__name__} ({v!r}); expected bytes or str")
    return out


def _wire_dtype(arr: np.ndarray):
    """Returns (kernflow DType, little-endian numpy dtype) of a numeric array."""
    dt = _dtypes.as_dtype(arr.dtype)
    return dt, np.dtype(dt.as_numpy_dtype).newbyteorder("<")


def _shape_proto(shape) -> tensor_shape_pb2.TensorShapeProto:
    return tensor_shape_pb2.TensorShapeProto(
        dim=[tensor_shape_pb2.TensorShapeProto.Dim(size=int(d)) for d in shape])


def _shape_from(proto) -> list[int]:
    shape = [int(d.size) for d in proto.dim]
    if proto.unknown_rank or any(d < 0 for d in shape):
        raise errors.InvalidArgumentError(None, None, f"a tensor on the wire needs a fully defined "
                                          f"shape, got {shape if not proto.unknown_rank else '<unknown>'}")
    return shape


def _byte_view(arr: np.ndarray) -> memoryview:
    """A flat memoryview of a C-contiguous array's bytes (no copy; empty and 0-d arrays too)."""
    return memoryview(arr.reshape(-1).view(np.uint8))


def _num_elements(shape) -> int:
    n = 1
    for d in shape:
        n *= d
    return n


def tensor_to_proto(value) -> tensor_pb2.TensorProto:
    """Returns a TensorProto of `value`: raw little-endian bytes, or `string_val` for strings.

    Args:
        value: a numpy array or scalar (or anything `to_host_array` accepts).

    Raises:
        TypeError: if the value is not a tensor or its dtype has no wire representation.
    """
    arr = to_host_array(value)
    if _is_string(arr):
        p = tensor_pb2.TensorProto(dtype=_dtypes.string.as_datatype_enum,
                                   tensor_shape=_shape_proto(arr.shape))
        p.string_val.extend(_string_list(arr))
        return p
    dt, wire = _wire_dtype(arr)
    arr = np.asarray(arr, dtype=wire, order="C")  # (ascontiguousarray would make 0-d arrays 1-d)
    return tensor_pb2.TensorProto(dtype=dt.as_datatype_enum, tensor_shape=_shape_proto(arr.shape),
                                  tensor_content=arr.tobytes())


def proto_to_tensor(proto: tensor_pb2.TensorProto) -> np.ndarray:
    """Returns the numpy array a TensorProto holds (fresh and writable; strings as object arrays).

    Raises:
        InvalidArgumentError: for an invalid dtype or a shape that is not fully defined.
        DataLossError: if the byte count does not match dtype and shape.
    """
    if proto.dtype == 0:
        raise errors.InvalidArgumentError(None, None, "TensorProto has no dtype (DT_INVALID)")
    shape = _shape_from(proto.tensor_shape)
    if proto.dtype == _dtypes.string.as_datatype_enum:
        if len(proto.string_val) != _num_elements(shape):
            raise errors.DataLossError(None, None, f"string TensorProto of shape {shape} holds "
                                       f"{len(proto.string_val)} elements")
    return tensor_util.make_ndarray(proto)


# ---------------------------------------------------------------------------- RecvTensor streams
def iter_recv_chunks(value, is_dead: bool = False,
                     chunk_bytes: int = CHUNK_BYTES) -> Iterator[worker_pb2.RecvTensorResponse]:
    """Yields the RecvTensor responses that carry `value`.

    The first message has dtype, shape and total_bytes (and the first chunk); the others carry only
    the next chunk. An empty tensor is a single message; a dead tensor a single message with
    `is_dead` set (and the dtype/shape of `value` when one is given).

    Args:
        value: the tensor (numpy array or scalar), or None for a dead tensor.
        is_dead: whether the tensor is dead (an untaken branch of control flow).
        chunk_bytes: the most bytes of content per message.
    """
    if chunk_bytes <= 0:
        raise ValueError(f"chunk_bytes must be positive, got {chunk_bytes}")
    if is_dead or value is None:
        msg = worker_pb2.RecvTensorResponse(is_dead=True)
        if value is not None:
            arr = to_host_array(value)
            msg.dtype = (_dtypes.string if _is_string(arr) else _dtypes.as_dtype(arr.dtype)).as_datatype_enum
            msg.shape.CopyFrom(_shape_proto(arr.shape))
        yield msg
        return
    arr = to_host_array(value)
    if _is_string(arr):
        yield from _iter_string_chunks(arr, chunk_bytes)
        return
    dt, wire = _wire_dtype(arr)
    arr = np.asarray(arr, dtype=wire, order="C")  # (ascontiguousarray would make 0-d arrays 1-d)
    total = arr.nbytes
    view = _byte_view(arr)
    first = worker_pb2.RecvTensorResponse(dtype=dt.as_datatype_enum, shape=_shape_proto(arr.shape),
                                          total_bytes=total, content=bytes(view[:chunk_bytes]))
    yield first
    for start in range(chunk_bytes, total, chunk_bytes):
        yield worker_pb2.RecvTensorResponse(content=bytes(view[start:start + chunk_bytes]))


def _iter_string_chunks(arr: np.ndarray, chunk_bytes: int):
    items = _string_list(arr)
    msg = worker_pb2.RecvTensorResponse(dtype=_dtypes.string.as_datatype_enum, shape=_shape_proto(arr.shape),
                                        total_bytes=sum(len(s) for s in items))
    batch, size = [], 0
    for s in items:
        if batch and size + len(s) > chunk_bytes:
            msg.string_val.extend(batch)
            yield msg
            msg = worker_pb2.RecvTensorResponse()
            batch, size = [], 0
        batch.append(s)
        size += len(s)
    msg.string_val.extend(batch)
    yield msg


def assemble_recv_chunks(
        responses: Iterable[worker_pb2.RecvTensorResponse]) -> tuple[np.ndarray | None, bool]:
    """Rebuilds the tensor of a RecvTensor stream.

    Returns:
        (array, is_dead): the array is fresh and writable; it is None for a dead tensor.

    Raises:
        InvalidArgumentError: the first message's total_bytes does not match dtype and shape, it
            lacks a dtype, or the chunks hold more bytes (or strings) than announced.
        DataLossError: the stream ended before all bytes arrived (or was empty).
    """
    it = iter(responses)
    first = next(it, None)
    if first is None:
        raise errors.DataLossError(None, None, "RecvTensor stream ended before its first message")
    if first.is_dead:
        for _ in it:  # drain, so the call completes cleanly
            pass
        return None, True
    if first.dtype == 0:
        raise errors.InvalidArgumentError(None, None, "RecvTensor: the first message has no dtype")
    shape = _shape_from(first.shape)
    if first.dtype == _dtypes.string.as_datatype_enum:
        return _assemble_strings(first, it, shape), False
    dt = _dtypes.as_dtype(first.dtype)
    wire = np.dtype(dt.as_numpy_dtype).newbyteorder("<")
    expected = _num_elements(shape) * wire.itemsize
    total = int(first.total_bytes)
    if total != expected:
        raise errors.InvalidArgumentError(
            None, None, f"RecvTensor: the first message announces total_bytes={total}, but a {dt.name} "
                        f"tensor of shape {shape} has {expected} bytes")
    out = np.empty(shape, dtype=wire)
    view = _byte_view(out)
    filled = 0
    msg = first
    while msg is not None:
        content = msg.content
        n = len(content)
        if n:
            if filled + n > total:
                raise errors.InvalidArgumentError(
                    None, None, f"RecvTensor: chunks hold more than the announced {total} bytes "
                                f"({filled + n} so far)")
            view[filled:filled + n] = content
            filled += n
        msg = next(it, None)
    if filled < total:
        raise errors.DataLossError(None, None, f"RecvTensor stream ended after {filled} of {total} bytes")
    if not wire.isnative:
        out = out.astype(wire.newbyteorder("="))
    return out, False


def _assemble_strings(first, it, shape) -> np.ndarray:
    n = _num_elements(shape)
    total = int(first.total_bytes)
    items: list[bytes] = []
    msg = first
    while msg is not None:
        items.extend(msg.string_val)
        if len(items) > n:
            raise errors.InvalidArgumentError(
                None, None, f"RecvTensor: chunks hold more than the {n} strings of shape {shape}")
        msg = next(it, None)
    size = sum(len(s) for s in items)
    if len(items) < n:
        raise errors.DataLossError(None, None, f"RecvTensor stream ended after {len(items)} of {n} strings")
    if size != total:
        raise errors.InvalidArgumentError(
            None, None, f"RecvTensor: strings hold {size} bytes, but the first message announced {total}")
    out = np.empty(n, dtype=object)
    out[:] = items
    return out.reshape(shape)
