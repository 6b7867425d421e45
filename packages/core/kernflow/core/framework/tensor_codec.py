"""The tensor codec: numpy arrays as TensorProtos and back, the one implementation kernflow has.

A numeric tensor is its raw little-endian bytes (``tensor_content``), never element by element; a
string tensor is its elements as repeated ``string_val``, or one ``tensor_content`` in TF's
string-list encoding (every length as a varint32, then every element's bytes: `encode_string_list`,
``EncodeStringList`` of tensorflow/core/platform/tensor_coding.cc). Decoding reads either, as TF's
C++ ``Tensor::FromProto`` does; the shape is always present, a scalar's too (what TF's
``Tensor::AsProtoTensorContent`` writes), so serialized protos round-trip with TensorFlow.

Its users: `tensor_util.make_tensor_proto` / `make_ndarray` (constants and attrs, summaries,
SerializeTensor, dataset caches), and every RPC, whose small tensors each go through
`tensor_to_proto` / `proto_to_tensor` (``kernflow.client.codec`` streams the same bytes in
RecvTensor chunks and receives them with `receive_buffer`). The per-dtype lookups of that hot path
are cached: `_ENCODE` (numpy dtype -> DataType enum and wire dtype) and `_DECODE` (DataType enum ->
wire dtype, every numeric type).

A decoder checks a proto's bytes (or strings) against its dtype and shape, and raises
InvalidArgumentError naming dtype, shape and both counts: a malformed proto is its sender's error,
as TF's "Cannot parse tensor from proto" (readers of stored tensors, e.g. checkpoints, check their
own bytes and raise DataLossError).
"""

from __future__ import annotations

import numpy as np
from google.protobuf.message import DecodeError

from kernflow.core.framework import dtypes as _dtypes
from kernflow.core.framework import errors
from kernflow.core.protobuf import tensor_pb2
from kernflow.core.protobuf import tensor_shape_pb2

__all__ = ["tensor_to_proto", "proto_to_tensor", "serialize_tensor", "parse_tensor", "to_host_array",
           "register_host_type", "receive_buffer", "to_native", "wire_encoding", "wire_array", "is_string",
           "string_items", "byte_view", "shape_proto", "shape_of", "num_elements", "encode_string_list",
           "decode_string_list"]

_TensorProto = tensor_pb2.TensorProto
_DT_STRING = _dtypes.DT_STRING
_MAX_STRING_BYTES = (1 << 32) - 1   # a length is a varint32

# DataType enum -> little-endian wire dtype, for every numeric type (strings, resources and
# variants have no raw bytes); numpy dtype -> (DataType enum, wire dtype), filled as dtypes are met.
_DECODE: dict = {e: np.dtype(t).newbyteorder("<") for e, (_, t) in _dtypes._BASE_TYPES.items()
                 if t is not np.object_}
_ENCODE: dict = {}


# ---------------------------------------------------------------------------- dtypes and shapes
def wire_encoding(dtype: np.dtype) -> tuple[int, np.dtype]:
    """(DataType enum, little-endian wire dtype) of a numeric numpy dtype.

    Raises:
        TypeError: if the dtype has no DataType (e.g. datetime64), or no raw bytes (object).
    """
    ent = _ENCODE.get(dtype)
    if ent is None:
        dt = _dtypes.as_dtype(dtype)
        wire = _DECODE.get(dt.as_datatype_enum)
        if wire is None:
            raise TypeError(f"a {dt.name} tensor has no raw bytes (numpy dtype {dtype})")
        ent = _ENCODE[dtype] = (dt.as_datatype_enum, wire)
    return ent


def wire_array(arr: np.ndarray) -> tuple[int, np.ndarray]:
    """(DataType enum, `arr` as a C-contiguous array of the wire dtype): `arr` itself when it is
    one, else a converted copy (0-d arrays stay 0-d)."""
    enum, wire = wire_encoding(arr.dtype)
    if arr.dtype != wire or not arr.flags.c_contiguous:
        arr = np.asarray(arr, dtype=wire, order="C")   # (ascontiguousarray would make 0-d arrays 1-d)
    return enum, arr


def is_string(arr: np.ndarray) -> bool:
    """Whether a host array is a string tensor (object, bytes or unicode elements)."""
    return arr.dtype.kind in "OSU"


def string_items(arr: np.ndarray) -> list:
    """A string tensor's elements as a flat list of bytes (str elements encoded as UTF-8).

    Raises:
        TypeError: an element that is neither bytes-like nor str.
    """
    items = arr.reshape(-1).tolist()
    if arr.dtype.kind == "S" or set(map(type, items)) <= {bytes}:
        return items
    out = []
    for v in items:
        if isinstance(v, bytes):
            out.append(v)
        elif isinstance(v, str):
            out.append(v.encode("utf-8"))
        elif isinstance(v, (bytearray, memoryview)):
            out.append(bytes(v))
        else:
            raise TypeError(f"string tensor holds a {type(v).__name__} ({v!r}); expected bytes or str")
    return out


def byte_view(arr: np.ndarray) -> memoryview:
    """A flat memoryview of a C-contiguous array's bytes (no copy; empty and 0-d arrays too)."""
    return memoryview(arr.reshape(-1).view(np.uint8))


def shape_proto(shape) -> tensor_shape_pb2.TensorShapeProto:
    """The TensorShapeProto of a fully defined shape."""
    return tensor_shape_pb2.TensorShapeProto(
        dim=[tensor_shape_pb2.TensorShapeProto.Dim(size=int(d)) for d in shape])


def shape_of(proto) -> list[int]:
    """The dims of a tensor's TensorShapeProto.

    Raises:
        InvalidArgumentError: an unknown rank or dim (a tensor's shape is fully defined).
    """
    shape = [d.size for d in proto.dim]
    if proto.unknown_rank or (shape and min(shape) < 0):
        raise errors.InvalidArgumentError(None, None, f"a tensor needs a fully defined shape, got "
                                          f"{shape if not proto.unknown_rank else '<unknown>'}")
    return shape


def num_elements(shape) -> int:
    """The element count of a fully defined shape (a list of ints)."""
    n = 1
    for d in shape:
        n *= d
    return n


def _dtype_name(enum: int) -> str:
    try:
        return _dtypes.as_dtype(enum).name
    except TypeError:
        return f"<DataType {enum}>"


def _no_bytes(enum: int, what: str) -> errors.InvalidArgumentError:
    """The error for a tensor whose dtype has no encoding (no dtype, resource, variant, unknown)."""
    if enum == _dtypes.DT_INVALID:
        return errors.InvalidArgumentError(None, None, f"{what} has no dtype (DT_INVALID)")
    return errors.InvalidArgumentError(None, None, f"{what}: a {_dtype_name(enum)} tensor has no "
                                       f"TensorProto encoding")


def _bad_size(enum: int, shape, got: int, want: int) -> errors.InvalidArgumentError:
    return errors.InvalidArgumentError(None, None, f"Cannot parse tensor from proto: TensorProto of "
                                       f"{_dtype_name(enum)}{shape} holds {got} bytes, expected {want}")


# ---------------------------------------------------------------------------- host values
_HOST_TYPES: dict = {}


def register_host_type(cls: type, convert) -> None:
    """Teaches `to_host_array` a type that holds a tensor without being an array.

    Args:
        cls: the type (matched exactly, not its subclasses).
        convert: ``convert(value)`` returns the tensor a value of `cls` holds (anything
            `to_host_array` takes), e.g. the client's ``WireSnapshot.array``.
    """
    _HOST_TYPES[cls] = convert


def to_host_array(value) -> np.ndarray:
    """Returns `value` as a numpy array in host memory (device arrays such as cupy's are copied).

    Takes numpy arrays and scalars, device arrays, a variable reached through a reference edge (its
    value), the types of `register_host_type`, and Python values (TF's default dtypes,
    `tensor_util.to_numpy`).

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
    convert = _HOST_TYPES.get(type(value))
    if convert is not None:
        return to_host_array(convert(value))
    if isinstance(value, (bool, int, float, complex, str, bytes, list, tuple)):
        from kernflow.core.framework.tensor_util import to_numpy
        return to_numpy(value)
    from kernflow.core.runtime.resource_mgr import Var   # (the runtime sits above framework/)
    if isinstance(value, Var):
        return to_host_array(value.read())
    raise TypeError(f"cannot send a value of type {type(value).__name__} over the wire: only "
                    f"tensors (numpy arrays and scalars) can be")


# ---------------------------------------------------------------------------- TensorProtos
def tensor_to_proto(value, out: tensor_pb2.TensorProto | None = None,
                    string_list: bool = False) -> tensor_pb2.TensorProto:
    """Returns a TensorProto of `value`: raw little-endian bytes, or `string_val` for strings.

    Args:
        value: a numpy array or scalar (or anything `to_host_array` accepts).
        out: an empty TensorProto to fill (e.g. a field of a response being built), which saves
            copying a finished proto into it; a new one when None.
        string_list: a string tensor as one ``tensor_content`` in TF's string-list encoding
            (`encode_string_list`), not as ``string_val``.

    Raises:
        TypeError: if the value is not a tensor or its dtype has no wire representation.
    """
    arr = value if type(value) is np.ndarray else to_host_array(value)
    if arr.dtype.kind in "OSU":
        return _strings_to_proto(arr, _TensorProto() if out is None else out, string_list)
    enum, wire = _ENCODE.get(arr.dtype) or wire_encoding(arr.dtype)   # (inline: the RPC hot path)
    if arr.dtype != wire or not arr.flags.c_contiguous:
        arr = np.asarray(arr, dtype=wire, order="C")
    p = _TensorProto() if out is None else out
    p.dtype = enum
    _set_shape(p.tensor_shape, arr.shape)
    p.tensor_content = arr.tobytes()
    return p


def _strings_to_proto(arr: np.ndarray, p, string_list: bool):
    items = string_items(arr)
    p.dtype = _DT_STRING
    _set_shape(p.tensor_shape, arr.shape)
    if string_list:
        lengths, _ = encode_string_list(items)
        p.tensor_content = b"".join((lengths, *items))
    else:
        p.string_val.extend(items)
    return p


def _set_shape(shape_proto, shape) -> None:
    if shape:
        dims = shape_proto.dim
        for d in shape:
            dims.add(size=d)
    else:
        shape_proto.SetInParent()   # (present, empty: a scalar's shape as TF writes it)


def proto_to_tensor(proto: tensor_pb2.TensorProto, content=None) -> np.ndarray:
    """Returns the numpy array a TensorProto holds (fresh and writable; strings as object arrays).

    Args:
        proto: the TensorProto.
        content: its payload kept outside it (e.g. an entry of a split message's contents): the
            ``tensor_content`` bytes (bytes or a memoryview), or the array itself; None when
            `proto` holds its payload.

    Raises:
        InvalidArgumentError: for an invalid dtype or one without an encoding (resource, variant),
            a shape that is not fully defined, or a byte (or string) count that does not match
            dtype and shape.
    """
    enum = proto.dtype
    shape = shape_of(proto.tensor_shape)
    if content is not None:
        return _from_content(enum, shape, content)
    wire = _DECODE.get(enum)
    if wire is not None:
        data = proto.tensor_content   # (each access copies the bytes out of the message)
        want = num_elements(shape) * wire.itemsize
        if len(data) != want:
            raise _bad_size(enum, shape, len(data), want)
        arr = np.frombuffer(data, dtype=wire).reshape(shape)
        return arr.copy() if wire.isnative else arr.astype(wire.newbyteorder("="))
    if enum != _DT_STRING:
        raise _no_bytes(enum, "TensorProto")
    n = num_elements(shape)
    data = proto.tensor_content
    if data:
        items = decode_string_list(data, n, shape)
    else:
        items = list(proto.string_val)
        if len(items) != n:
            raise errors.InvalidArgumentError(None, None, f"Cannot parse tensor from proto: string "
                                              f"tensor of shape {shape} holds {len(items)} elements, "
                                              f"expected {n}")
    return _object_array(items, shape)


def serialize_tensor(value) -> bytes:
    """A serialized TensorProto of `value` (`tensor_to_proto`): the bytes TF's SerializeTensor writes.

    Raises:
        TypeError: if the value is not a tensor or its dtype has no wire representation.
    """
    return tensor_to_proto(value).SerializeToString()


def parse_tensor(data) -> np.ndarray:
    """The array of a serialized TensorProto (`proto_to_tensor`).

    Raises:
        InvalidArgumentError: `data` is not a serialized TensorProto, or its tensor is malformed.
    """
    try:
        proto = _TensorProto.FromString(data)
    except DecodeError as e:
        raise errors.InvalidArgumentError(None, None, f"Could not parse {len(data)} bytes as a "
                                          f"TensorProto: {e}") from None
    return proto_to_tensor(proto)


def _object_array(items: list, shape) -> np.ndarray:
    out = np.empty(len(items), dtype=object)
    out[:] = items
    return out.reshape(shape)


def _from_content(enum: int, shape: list, content) -> np.ndarray:
    """The array of a tensor whose payload is `content` (see `proto_to_tensor`), copied once."""
    if isinstance(content, np.ndarray):   # encoded in this process: a copy, as a decoded one is
        return content.copy() if content.dtype.isnative else to_native(content)
    n = num_elements(shape)
    if enum == _DT_STRING:
        return _object_array(decode_string_list(content, n, shape), shape)
    wire = _DECODE.get(enum)
    if wire is None:
        raise _no_bytes(enum, "TensorProto")
    if len(content) != n * wire.itemsize:
        raise _bad_size(enum, shape, len(content), n * wire.itemsize)
    out = np.empty(shape, dtype=wire)
    byte_view(out)[:] = content
    return to_native(out)


def receive_buffer(dtype_enum: int, shape_proto, total_bytes: int, what: str = "RecvTensor"):
    """A fresh array to receive a numeric tensor's raw little-endian bytes into.

    Args:
        dtype_enum, shape_proto: the tensor's DataType and TensorShapeProto, as announced.
        total_bytes: the byte count announced with them.
        what: the announcement's source, for error messages ("RecvTensor: the first message").

    Returns:
        (array of the little-endian wire dtype, flat writable memoryview of its bytes); a receiver
        that fills the view returns ``array`` through `to_native`.

    Raises:
        InvalidArgumentError: no dtype, a string (or resource, variant) dtype, a shape that is not
            fully defined, or `total_bytes` that does not match dtype and shape.
    """
    wire = _DECODE.get(dtype_enum)
    if wire is None:
        if dtype_enum == _DT_STRING:
            raise errors.InvalidArgumentError(None, None, f"{what} announces a string tensor, which has "
                                              f"no raw bytes")
        raise _no_bytes(dtype_enum, what)
    shape = shape_of(shape_proto)
    expected = num_elements(shape) * wire.itemsize
    if int(total_bytes) != expected:
        raise errors.InvalidArgumentError(
            None, None, f"{what} announces total_bytes={int(total_bytes)}, but a "
                        f"{_dtype_name(dtype_enum)} tensor of shape {shape} has {expected} bytes")
    out = np.empty(shape, dtype=wire)
    return out, byte_view(out)


def to_native(arr: np.ndarray) -> np.ndarray:
    """`arr` (filled by a receiver in little-endian wire order) in this machine's byte order."""
    return arr if arr.dtype.isnative else arr.astype(arr.dtype.newbyteorder("="))


# ---------------------------------------------------------------------------- TF's string lists
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
