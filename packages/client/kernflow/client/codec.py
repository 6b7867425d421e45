"""Tensors on the wire: chunked RecvTensor streams, and the TensorProto codec they share.

A tensor is encoded as core's codec (`kernflow.core.framework.tensor_codec`, re-exported here:
`tensor_to_proto`, `proto_to_tensor`, `to_host_array`, `receive_buffer`, `to_native`) lays it out:
numeric tensors always travel as raw little-endian bytes (`TensorProto.tensor_content`, or the
`content` of RecvTensor chunks), never element by element and never pickled; string tensors use
repeated `string_val` bytes, except in requests that carry feeds (`kernflow.client.tensor_requests`),
whose string tensors are one `tensor_content` in TF's string-list encoding (every length as a
varint32, then every element's bytes: `tensor_codec.encode_string_list`, which TF's C++
``Tensor::FromProto`` reads too); `proto_to_tensor` reads either.

This module streams those bytes. A RecvTensor stream's first message carries dtype, shape and
`total_bytes`; every message carries the next slice of the bytes, cut from a memoryview of the
C-contiguous array (one copy per chunk, into the message) and written straight into a preallocated
array on the receiving side. Servers send the messages serialized by hand (`encode_recv_chunks`: a
message is the concatenation of its fields, so the payload is copied once, with no protobuf
message in between).

String tensors stream in one of two encodings, which receivers tell apart by the first message
(`assemble_recv_chunks` reads both). Their elements are spread over the messages' `string_val`
fields in order, `total_bytes` being the sum of their lengths: the receiver makes each element
straight from its message, no buffer in between. But a message holds whole elements, so a tensor
with an element of a chunk or more travels, when the sender allows it (``string_list``: what a
worker does for a single key), in TF's string-list encoding (`encode_string_list`)
cut into chunks like a numeric tensor's bytes, `total_bytes` being its length; its first message
carries content (the lengths come first, a byte at least per element). Several-key streams keep
`string_val`: their receivers count each value's elements (`grpc_transport.split_values`).

Receivers that take a stream's messages as raw bytes (no protobuf parse of the payload) split each
with `split_content`: the small header fields are parsed, the `content` stays a memoryview of the
received buffer, and `assemble_recv_chunks` copies it once, into the result.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator

import numpy as np

from kernflow.core.framework import dtypes as _dtypes
from kernflow.core.framework import errors
from kernflow.core.framework import tensor_codec
from kernflow.core.framework.tensor_codec import (byte_view, decode_string_list, encode_string_list,
                                                   is_string, num_elements, proto_to_tensor,
                                                   receive_buffer, shape_of, shape_proto, string_items,
                                                   tensor_to_proto, to_host_array, to_native,
                                                   wire_array)
from kernflow.client.protobuf import worker_pb2

__all__ = ["CHUNK_BYTES", "tensor_to_proto", "proto_to_tensor", "iter_recv_chunks", "encode_recv_chunks",
           "assemble_recv_chunks", "split_content", "to_host_array", "WireSnapshot", "snapshot",
           "raw_views", "receive_buffer", "to_native"]

# RecvTensor chunk size. 1 MiB measured fastest for a 64 MiB fetch over loopback (tools/
# bench_distributed.py: 2.5-2.9x a unary grpcio call, against 2.0x with 4 MiB, 2.3x with 512 KiB or
# 2 MiB): chunks below glibc's mmap threshold come from reused heap memory instead of fresh pages
# (a 4 MiB buffer costs ~2.5 ms of page faults in an untuned process), and the sender's, the
# transport's and the receiver's copies overlap more finely.
CHUNK_BYTES = 1 << 20


# ---------------------------------------------------------------------------- RecvTensor streams
_R = worker_pb2.RecvTensorResponse
_CONTENT_KEY = b"\x1a"    # field 3 (content), wire type 2 (length-delimited)


def _varint_bytes(n: int) -> bytes:
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        if n:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def _frame(head: bytes, payload) -> bytes:
    """A serialized RecvTensorResponse: `head` (its other fields, serialized) and `payload` as its
    content, copied once (a serialized message is the concatenation of its fields)."""
    return b"".join((head, _CONTENT_KEY, _varint_bytes(len(payload)), payload))


def _numeric_frames(enum: int, shape, view: memoryview, total: int, chunk_bytes: int) -> Iterator[bytes]:
    head = _R(dtype=enum, shape=shape_proto(shape), total_bytes=total).SerializeToString()
    yield _frame(head, view[:chunk_bytes]) if total else head
    for start in range(chunk_bytes, total, chunk_bytes):
        yield _frame(b"", view[start:start + chunk_bytes])


class WireSnapshot:
    """A copy of a numeric host tensor, taken as the serialized RecvTensor messages that carry it.

    What a `_Send` keeps of a variable's live buffer that another task will pull: the snapshot copy
    it needs (a later step may update the variable) is made straight into the messages RecvTensor
    sends, so the tensor is copied once, and serving the pull copies nothing more.
    """

    __slots__ = ("dtype_enum", "wire", "shape", "frames", "nbytes")

    def __init__(self, dtype_enum: int, wire: np.dtype, shape: tuple, frames: list, nbytes: int):
        self.dtype_enum, self.wire, self.shape = dtype_enum, wire, shape
        self.frames, self.nbytes = frames, nbytes

    def array(self) -> np.ndarray:
        """The tensor as a fresh numpy array."""
        value, _ = assemble_recv_chunks(split_content(f, _R) for f in self.frames)
        return value


tensor_codec.register_host_type(WireSnapshot, WireSnapshot.array)   # (`to_host_array` of a snapshot)


def snapshot(arr, chunk_bytes: int = CHUNK_BYTES):
    """A copy of `arr` that later updates of `arr` do not change: a `WireSnapshot` for numeric
    numpy arrays, ``arr.copy()`` for anything else (strings, device arrays)."""
    if not isinstance(arr, np.ndarray) or is_string(arr):
        return arr.copy()
    enum, arr = wire_array(arr)
    frames = list(_numeric_frames(enum, arr.shape, byte_view(arr), arr.nbytes, chunk_bytes))
    return WireSnapshot(enum, arr.dtype, arr.shape, frames, arr.nbytes)


def raw_views(value):
    """The raw little-endian bytes of a numeric tensor, as views of the memory that holds them.

    Nothing is copied for a C-contiguous little-endian host array or a `WireSnapshot` (whose views
    are its messages' content); other arrays are converted first.

    Returns:
        (DataType enum, shape, list of memoryviews in order, total bytes), or None for a string
        tensor.

    Raises:
        TypeError: if the value is not a tensor (see `to_host_array`).
    """
    if isinstance(value, WireSnapshot):
        return (value.dtype_enum, tuple(value.shape), [split_content(f, _R)[1] for f in value.frames],
                value.nbytes)
    arr = value if type(value) is np.ndarray else to_host_array(value)
    if is_string(arr):
        return None
    enum, arr = wire_array(arr)
    return enum, arr.shape, [byte_view(arr)], arr.nbytes


def encode_recv_chunks(value, is_dead: bool = False, chunk_bytes: int = CHUNK_BYTES,
                       string_list: bool = False) -> Iterator[bytes]:
    """Yields the serialized RecvTensorResponse messages that carry `value` (see `iter_recv_chunks`).

    What a RecvTensor server sends: a numeric tensor's bytes are copied once per chunk, straight
    into the message (no protobuf message is built), as are a string tensor's with `string_list`;
    a `WireSnapshot`'s messages are yielded as they are. `string_list`: see `iter_recv_chunks`.
    """
    if chunk_bytes <= 0:
        raise ValueError(f"chunk_bytes must be positive, got {chunk_bytes}")
    if isinstance(value, WireSnapshot) and not is_dead:
        yield from value.frames
        return
    if not is_dead and value is not None:
        arr = value if type(value) is np.ndarray else to_host_array(value)
        if not is_string(arr):
            enum, arr = wire_array(arr)
            yield from _numeric_frames(enum, arr.shape, byte_view(arr), arr.nbytes, chunk_bytes)
            return
        if string_list and _has_long_string(arr, chunk_bytes):
            yield from _string_list_frames(arr, chunk_bytes)
            return
    for msg in iter_recv_chunks(value, is_dead, chunk_bytes):
        yield msg.SerializeToString()


def _has_long_string(arr: np.ndarray, chunk_bytes: int) -> bool:
    """Whether a string tensor has an element of `chunk_bytes` or more (see the module docstring)."""
    flat = arr.reshape(-1).tolist()
    return bool(flat) and max(map(len, flat)) >= chunk_bytes


def _string_list_frames(arr: np.ndarray, chunk_bytes: int) -> Iterator[bytes]:
    """The serialized messages of a string tensor in the string-list encoding (module docstring):
    each chunk joined from views of the strings, so every byte is copied once."""
    items = string_items(arr)
    lengths, total = encode_string_list(items)
    head = _R(dtype=_dtypes.string.as_datatype_enum, shape=shape_proto(arr.shape),
              total_bytes=len(lengths) + total).SerializeToString()
    parts, n = [], 0
    for piece in (lengths, *items):
        view, size = memoryview(piece), len(piece)
        pos = 0
        while pos < size:
            take = min(chunk_bytes - n, size - pos)
            parts.append(view[pos:pos + take] if take < size else piece)
            n += take
            pos += take
            if n == chunk_bytes:
                yield b"".join((head, _CONTENT_KEY, _varint_bytes(n), *parts))
                head, parts, n = b"", [], 0
    if n or head:   # (the last chunk; an empty tensor is its first message alone)
        yield b"".join((head, _CONTENT_KEY, _varint_bytes(n), *parts)) if n else head


def iter_recv_chunks(value, is_dead: bool = False, chunk_bytes: int = CHUNK_BYTES,
                     string_list: bool = False) -> Iterator[worker_pb2.RecvTensorResponse]:
    """Yields the RecvTensor responses that carry `value`.

    The first message has dtype, shape and total_bytes (and the first chunk); the others carry only
    the next chunk. An empty tensor is a single message; a dead tensor a single message with
    `is_dead` set (and the dtype/shape of `value` when one is given).

    Args:
        value: the tensor (numpy array or scalar, or a `WireSnapshot`), or None for a dead tensor.
        is_dead: whether the tensor is dead (an untaken branch of control flow).
        chunk_bytes: the most bytes of content per message.
        string_list: a string tensor with an element of `chunk_bytes` or more goes in the
            string-list encoding, chunked like numeric bytes; else (and by default) every string
            tensor's elements are spread over `string_val` (see the module docstring).
    """
    if chunk_bytes <= 0:
        raise ValueError(f"chunk_bytes must be positive, got {chunk_bytes}")
    if string_list and not is_dead and value is not None:
        arr = to_host_array(value)
        if is_string(arr) and _has_long_string(arr, chunk_bytes):
            yield from (_R.FromString(f) for f in _string_list_frames(arr, chunk_bytes))
            return
    if isinstance(value, WireSnapshot):
        value = value.array()
    if is_dead or value is None:
        msg = worker_pb2.RecvTensorResponse(is_dead=True)
        if value is not None:
            arr = to_host_array(value)
            msg.dtype = (_dtypes.string if is_string(arr) else _dtypes.as_dtype(arr.dtype)).as_datatype_enum
            msg.shape.CopyFrom(shape_proto(arr.shape))
        yield msg
        return
    arr = to_host_array(value)
    if is_string(arr):
        yield from _iter_string_chunks(arr, chunk_bytes)
        return
    enum, arr = wire_array(arr)
    total = arr.nbytes
    view = byte_view(arr)
    first = worker_pb2.RecvTensorResponse(dtype=enum, shape=shape_proto(arr.shape),
                                          total_bytes=total, content=bytes(view[:chunk_bytes]))
    yield first
    for start in range(chunk_bytes, total, chunk_bytes):
        yield worker_pb2.RecvTensorResponse(content=bytes(view[start:start + chunk_bytes]))


def _iter_string_chunks(arr: np.ndarray, chunk_bytes: int):
    items = string_items(arr)
    msg = worker_pb2.RecvTensorResponse(dtype=_dtypes.string.as_datatype_enum, shape=shape_proto(arr.shape),
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


def _varint(buf, pos: int) -> tuple[int, int]:
    result = shift = 0
    while True:
        b = buf[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if b < 0x80:
            return result, pos
        shift += 7
        if shift > 63:
            raise ValueError("malformed varint")


_CONTENT_FIELD = 3   # `content` in RecvTensorResponse and RunStepStreamResponse


def wire_fields(buf, start: int, end: int):
    """Yields (number, wire type, field start, value start, field end) of the protobuf fields
    serialized in buf[start:end] (a length-delimited value spans value start to field end).

    (`split_content`, on every RecvTensor chunk, walks its few fields inline instead: the generator
    costs it ~1.5 of ~8 us per message.)

    Raises:
        ValueError: an unknown wire type, or a field running past `end`.
    """
    pos = start
    while pos < end:
        first = pos
        tag, pos = _varint(buf, pos)
        wire = tag & 7
        value = pos
        if wire == 0:
            _, pos = _varint(buf, pos)
        elif wire == 2:
            length, value = _varint(buf, pos)
            pos = value + length
        elif wire == 1:
            pos += 8
        elif wire == 5:
            pos += 4
        else:
            raise ValueError(f"unsupported wire type {wire}")
        if pos > end:
            raise ValueError("truncated field")
        yield tag >> 3, wire, first, value, pos


def split_content(buf: bytes, message_class):
    """Parses a serialized chunk message except its `content` field (number 3), which it does not copy.

    Args:
        buf: the serialized message (e.g. a RecvTensorResponse or RunStepStreamResponse as received).
        message_class: the message type to parse the other fields into.

    Returns:
        (message without content, memoryview of the content bytes in `buf`).

    Raises:
        DataLossError: if `buf` is not a well-formed message.
    """
    mv = memoryview(buf)
    n = len(buf)
    pos, span = 0, None
    try:
        while pos < n:
            start = pos
            tag, pos = _varint(buf, pos)
            wire = tag & 7
            if wire == 0:
                _, pos = _varint(buf, pos)
            elif wire == 2:
                length, pos = _varint(buf, pos)
                if tag >> 3 == _CONTENT_FIELD:
                    if span is not None:   # repeated (never written so): let protobuf merge it
                        msg = message_class.FromString(buf)
                        return msg, memoryview(msg.content)
                    span = (start, pos, pos + length)
                pos += length
            elif wire == 1:
                pos += 8
            elif wire == 5:
                pos += 4
            else:
                raise ValueError(f"unsupported wire type {wire}")
        if pos != n:
            raise ValueError("truncated field")
        if span is None:
            return message_class.FromString(buf), mv[0:0]
        head, body, end = span
        rest = bytes(mv[:head]) + bytes(mv[end:]) if head or end < n else b""
        return message_class.FromString(rest), mv[body:end]
    except Exception as e:  # noqa: BLE001 - ValueError, IndexError, protobuf's DecodeError
        raise errors.DataLossError(None, None,
                                   f"malformed {message_class.__name__} on the wire: {e}") from None


def _parts(item):
    """(message, content) of a stream item: a message, or a (header, content) pair of `split_content`."""
    return item if type(item) is tuple else (item, item.content)


def assemble_recv_chunks(responses: Iterable) -> tuple[np.ndarray | None, bool]:
    """Rebuilds the tensor of a RecvTensor stream.

    Args:
        responses: RecvTensorResponse messages (or messages with the same fields, such as
            RunStepStreamResponse), or ``(message, content)`` pairs from `split_content`.

    Returns:
        (array, is_dead): the array is fresh and writable; it is None for a dead tensor.

    Raises:
        InvalidArgumentError: the first message's total_bytes does not match dtype and shape, it
            lacks a dtype, or the chunks hold more bytes (or strings) than announced.
        DataLossError: the stream ended before all bytes arrived (or was empty).
    """
    it = iter(responses)
    item = next(it, None)
    if item is None:
        raise errors.DataLossError(None, None, "RecvTensor stream ended before its first message")
    first, content = _parts(item)
    if first.is_dead:
        for _ in it:  # drain, so the call completes cleanly
            pass
        return None, True
    if first.dtype == 0:
        raise errors.InvalidArgumentError(None, None, "RecvTensor: the first message has no dtype")
    total = int(first.total_bytes)
    strings = first.dtype == _dtypes.string.as_datatype_enum
    if strings and not len(content):   # (elements in string_val; else the string-list encoding)
        return _assemble_strings(first, (_parts(x)[0] for x in it), shape_of(first.shape)), False
    if strings:
        shape = shape_of(first.shape)
        if total < num_elements(shape):
            raise errors.InvalidArgumentError(
                None, None, f"RecvTensor announces {total} bytes for a string tensor of shape {shape}, "
                            f"which needs one at least per element")
        out = np.empty(total, np.uint8)
        view = memoryview(out)
    else:
        out, view = receive_buffer(first.dtype, first.shape, total, "RecvTensor: the first message")
    filled = 0
    while True:
        n = len(content)
        if n:
            if filled + n > total:
                raise errors.InvalidArgumentError(
                    None, None, f"RecvTensor: chunks hold more than the announced {total} bytes "
                                f"({filled + n} so far)")
            view[filled:filled + n] = content
            filled += n
        item = next(it, None)
        if item is None:
            break
        content = _parts(item)[1]
    if filled < total:
        raise errors.DataLossError(None, None, f"RecvTensor stream ended after {filled} of {total} bytes")
    if strings:
        n = num_elements(shape)
        strs = np.empty(n, dtype=object)
        strs[:] = decode_string_list(view, n, shape)
        return strs.reshape(shape), False
    return to_native(out), False


def _assemble_strings(first, it, shape) -> np.ndarray:
    n = num_elements(shape)
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
