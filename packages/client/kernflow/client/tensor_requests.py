"""Messages that carry tensors (RunStep's feeds, RunGraph's sends, their responses' fetched values),
built and parsed without copies.

A protobuf message copies a tensor's bytes on every step of its way: into the message when it is
built, into the serialized bytes, into the receiver's parsed message, and out again when the
receiver reads the field (a 256 MiB feed took the client to 3x its size in memory, the master to
4.4-5.8x and the worker to 3-4.3x). A `SplitMessage` is the request without its tensors' payloads,
plus the buffers that hold them:

* a client encodes each large feed straight from the array's memory (`SplitMessage.add`; small
  ones, under `INLINE_BYTES`, stay protobuf's); serializing the request joins the pieces, the one
  copy it makes;
* a server parses such a request with `split` (`request_parser`, for the methods of
  `SPLIT_REQUESTS`): the headers are parsed, every payload stays a memoryview of the received bytes
  (a request under `SPLIT_MIN_BYTES` is parsed as usual);
* the master hands a step's feeds to its tasks as they came (`forward_tensors`): the RunGraph
  request shares the client's buffers, and serializing it is the one copy;
* a worker copies each payload once, into the fed array (`codec.proto_to_tensor` with the entry
  of `split_contents`), then lets go of the received bytes (`SplitMessage.release`).

Fetched values take the same way back (`with_tensors`, `gather`, `response_parser`): a worker's
RunGraph response leaves a large value in its array (a variable's live buffer copied first) until
it is serialized; the master's RunStep response shares the buffers the tasks' responses arrived in;
the client decodes each value from the bytes it received (`decode`). A response whose values are
all small is the protobuf message it always was.

In one process (an in-process master and worker) nothing is serialized: the worker copies the
client's array once. The wire format is the protobuf message's own, so either end may be a plain
protobuf sender or receiver. Measured peaks over each process's baseline for a 256 MiB feed: the
client 2.0x, the master 3.0x, the worker 2.0x over the same-host channel and 3.0x over gRPC, whose
Python receive alone takes 3x (slices, a bytearray, then bytes); below that, feeds would have to
travel in chunks. For a 256 MiB value fetched in one response: 3.0x on the client, the master and
the worker (a unary call also holds its request until its response arrives, so a step that feeds
and fetches that much streams its fetches: `grpc_session`).
"""

from __future__ import annotations

import numpy as np

from kernflow.core.framework import dtypes as _dtypes
from kernflow.core.framework import errors
from kernflow.core.framework import tensor_codec
from kernflow.core.protobuf import tensor_shape_pb2
from kernflow.client import codec
from kernflow.client.protobuf import master_pb2
from kernflow.client.protobuf import worker_pb2

__all__ = ["SplitMessage", "split", "forward_tensors", "gather", "nest", "split_contents", "decode",
           "with_tensors", "whole", "serialize", "request_parser", "response_parser", "SPLIT_REQUESTS"]

_NamedTensor = worker_pb2.NamedTensor
_Dim = tensor_shape_pb2.TensorShapeProto.Dim
_TENSOR_KEY = b"\x12"           # NamedTensor.tensor: field 2, length-delimited
_CONTENT_KEY = b"\x22"          # TensorProto.tensor_content: field 4, length-delimited
_varint_bytes = codec._varint_bytes

# Tensors smaller than this travel inside the protobuf message, and requests smaller than
# `SPLIT_MIN_BYTES` are parsed as usual: for small ones protobuf's C code beats building and
# splitting by hand (feeding 16 floats and two strings: the client's request took 12 us with
# protobuf and 118 us by hand, the master's parse and forward 5 us and 40 us).
INLINE_BYTES = 64 << 10
SPLIT_MIN_BYTES = 64 << 10


class SplitMessage:
    """A request whose large tensors' bytes stay in the buffers that hold them.

    Invariants: `message` is the protobuf message with every NamedTensor of its repeated field
    `path[-1]` (reached through the singular message fields `path[:-1]`) present: a small tensor
    whole, a large one without its payload (names, dtypes and shapes are there, so code reading
    them sees the message as usual). Any other attribute is read from `message` (field `path[0]`
    of a longer path gives the SplitMessage of that submessage). For the i-th NamedTensor,
    `entries[i]` are the buffers whose concatenation is its serialization, payload included (None
    when the header is whole), `sizes[i]` that serialization's length (for a whole header, its
    tensor's bytes: a small tensor is not measured), and `contents[i]` its payload for
    `codec.proto_to_tensor`: a memoryview of received ``tensor_content``, the array itself
    (encoded here by `add`), or None (the header holds it).

    Args:
        message: the protobuf message (its NamedTensors as described).
        path: field names to the repeated NamedTensor field, e.g. ``("feed",)``.
    """

    __slots__ = ("message", "path", "entries", "sizes", "contents")

    def __init__(self, message, path, entries=None, sizes=None, contents=None):
        self.message, self.path = message, tuple(path)
        self.entries = [] if entries is None else entries
        self.sizes = [] if sizes is None else sizes
        self.contents = [] if contents is None else contents

    def __getattr__(self, name):
        value = getattr(self.message, name)
        if name == self.path[0] and len(self.path) > 1:
            return SplitMessage(value, self.path[1:], self.entries, self.sizes, self.contents)
        return value

    def __repr__(self):
        if self.entries is None:
            return f"SplitMessage({type(self.message).__name__}, {'.'.join(self.path)}: released)"
        return (f"SplitMessage({type(self.message).__name__}, {'.'.join(self.path)}: "
                f"{len(self.entries)} tensors, {sum(self.sizes)} bytes)")

    def release(self) -> None:
        """Drops the buffers that hold the large tensors' payloads (received bytes, or arrays), once
        they were decoded, so that their memory is freed while the message itself stays alive (a
        gRPC server keeps a request until its response is sent). Serializing or decoding the
        message afterwards raises ValueError; its headers stay readable."""
        self.entries = self.contents = None

    def add(self, name: str, value, snapshot=None) -> None:
        """Appends the NamedTensor `name` holding `value`: inside the message when it is smaller
        than `INLINE_BYTES` (protobuf is faster for small ones), else encoded straight from the
        array's memory (strings in TF's string-list encoding).

        Args:
            name: the NamedTensor's name.
            value: the tensor (a numpy array, or anything `codec.to_host_array` accepts).
            snapshot: ``snapshot(array) -> bool``, asked of a large numeric array only: True copies
                it now (a variable's live buffer, which a later step may update before the message
                is serialized). Default: never.

        Raises:
            TypeError: if the value is not a tensor or its dtype has no wire representation.
        """
        if len(self.path) != 1:
            raise ValueError(f"add() needs the message holding {self.path[-1]!r}, not its {self.path[0]!r}")
        arr = value if type(value) is np.ndarray else codec.to_host_array(value)
        header = getattr(self.message, self.path[0]).add(name=name)
        t = header.tensor
        if tensor_codec.is_string(arr):
            items = tensor_codec.string_items(arr)
            total = sum(map(len, items))
            if total < INLINE_BYTES:
                t.dtype = _dtypes.string.as_datatype_enum
                t.tensor_shape.dim.extend(_Dim(size=d) for d in arr.shape)
                t.string_val.extend(items)
                return self._inline(total)
            lengths, total = tensor_codec.encode_string_list(items)
            payload, size = [lengths, *items], len(lengths) + total
            t.dtype = _dtypes.string.as_datatype_enum
            local = np.empty(len(items), dtype=object)
            local[:] = items
            local = local.reshape(arr.shape)
        else:
            if arr.nbytes < INLINE_BYTES:
                codec.tensor_to_proto(arr, out=t)
                return self._inline(arr.nbytes)
            enum, wired = tensor_codec.wire_array(arr)
            if wired is not arr:
                arr = wired
            elif snapshot is not None and snapshot(arr):
                arr = arr.copy()
            payload, size, local = [tensor_codec.byte_view(arr)], arr.nbytes, arr
            t.dtype = enum
        for d in arr.shape:
            t.tensor_shape.dim.add(size=d)
        head = t.SerializeToString() + _CONTENT_KEY + _varint_bytes(size)
        first = b"".join((_NamedTensor(name=name).SerializeToString(), _TENSOR_KEY,
                          _varint_bytes(len(head) + size), head))
        self.entries.append((first, *payload))
        self.sizes.append(len(first) + size)
        self.contents.append(local)

    def _inline(self, nbytes: int) -> None:
        self.entries.append(None)
        self.sizes.append(nbytes)
        self.contents.append(None)

    def ByteSize(self) -> int:
        """The serialized size, computed without serializing large tensors (protobuf's ByteSize
        serializes the message)."""
        return sum(len(p) for p in self._pieces(sizes_only=True))

    def pieces(self) -> list:
        """The buffers whose concatenation is the serialized message."""
        return self._pieces(sizes_only=False)

    def _pieces(self, sizes_only: bool) -> list:
        if self.entries is None:
            raise ValueError(f"{self!r}: its payloads were released; it cannot be serialized")
        if all(e is None for e in self.entries):   # every header whole: protobuf's own, faster
            data = self.message.SerializeToString()
            return [_Size(len(data))] if sizes_only else [data]
        head = type(self.message)()
        head.CopyFrom(self.message)
        head.ClearField(self.path[0])
        out = [head.SerializeToString()]
        key = _varint_bytes(self.message.DESCRIPTOR.fields_by_name[self.path[0]].number << 3 | 2)
        if len(self.path) > 1:
            inner = SplitMessage(getattr(self.message, self.path[0]), self.path[1:], self.entries, self.sizes)
            size = inner.ByteSize()
            out += [key, _varint_bytes(size)]
            out += [_Size(size)] if sizes_only else inner.pieces()
            return out
        headers = getattr(self.message, self.path[0])
        for i, (parts, n) in enumerate(zip(self.entries, self.sizes)):
            if parts is None:
                whole = headers[i].SerializeToString()
                parts, n = [whole], len(whole)
            out += [key, _varint_bytes(n)]
            out += [_Size(n)] if sizes_only else parts
        return out

    def SerializeToString(self) -> bytes:
        """The serialized message: the large tensors' bytes are copied once, into it."""
        pieces = self.pieces()
        return pieces[0] if len(pieces) == 1 else b"".join(pieces)


class _Size:
    """Stands for `n` bytes in a size computation."""

    __slots__ = ("n",)

    def __init__(self, n: int):
        self.n = n

    def __len__(self):
        return self.n


def serialize(message) -> bytes:
    """The request serializer of stubs that may be given a `SplitMessage` or a protobuf message."""
    return message.SerializeToString()


def split_contents(message, field: str = "send") -> list:
    """The payloads kept outside a request's NamedTensors (`SplitMessage.contents`); for a protobuf
    message, None for each NamedTensor of its `field` (its headers hold every payload).

    Raises:
        ValueError: the SplitMessage's payloads were released (`SplitMessage.release`).
    """
    if isinstance(message, SplitMessage):
        if message.contents is None:
            raise ValueError(f"{message!r}: its payloads were released; they cannot be decoded")
        return message.contents
    return [None] * len(getattr(message, field))


def decode(message, field: str) -> list:
    """The numpy arrays of the NamedTensors in `message`'s repeated field `field` (a protobuf
    message or a `SplitMessage`, such as a RunGraphResponse or RunStepResponse): how in-process
    callers read what `Worker.run_graph` or `Master.run_step` returned.

    Raises:
        InvalidArgumentError: a tensor whose payload does not match its dtype and shape.
    """
    return [codec.proto_to_tensor(nt.tensor, c)
            for nt, c in zip(getattr(message, field), split_contents(message, field))]


def with_tensors(message, field: str, names, values, snapshot=None):
    """`message` with a NamedTensor per (name, value) appended to its repeated field `field`: how a
    worker answers RunGraph.

    Small numeric arrays go into the message as `codec.tensor_to_proto` puts them (the path of a
    small step, as fast as before); as soon as one tensor is large, the rest go through a
    `SplitMessage` (`SplitMessage.add`: payloads left in the arrays' memory until serialized).

    Args:
        snapshot: as for `SplitMessage.add` (the worker passes `is_state_buffer`).

    Returns:
        `message` when every tensor fit inside it, else a SplitMessage of it.
    """
    tensors = getattr(message, field)
    out = None
    for name, v in zip(names, values):
        if out is None:
            if type(v) is np.ndarray and v.dtype.kind not in "OSU" and v.nbytes < INLINE_BYTES:
                codec.tensor_to_proto(v, out=tensors.add(name=name).tensor)
                continue
            out = SplitMessage(message, (field,))
            for _ in range(len(tensors)):
                out._inline(0)
        out.add(name, v, snapshot)
    if out is None or all(e is None for e in out.entries):
        return message
    return out


def whole(message):
    """`message` as a protobuf message holding every payload (a SplitMessage is serialized and parsed:
    for a peer that takes only protobuf messages, such as a servicer registered with the generated
    ``add_*Servicer_to_server``)."""
    if not isinstance(message, SplitMessage):
        return message
    return type(message.message).FromString(message.SerializeToString())


def forward_tensors(source, source_field: str, indices, out, out_field: str):
    """`out` (a new request) with the NamedTensors ``source.<source_field>[i]``, i in `indices`,
    appended to its repeated field `out_field`: how the master hands a step's feeds to a task.

    Returns:
        For a `SplitMessage` source, a SplitMessage of `out` sharing the source's buffers (nothing
        is copied until it is serialized); for a protobuf message, `out` holding copies. `out`
        itself when `indices` is empty.
    """
    indices = list(indices)
    if not indices:
        return out
    tensors = getattr(source, source_field)
    getattr(out, out_field).extend(tensors[i] for i in indices)
    if not isinstance(source, SplitMessage):
        return out
    if source.path != (source_field,):
        raise ValueError(f"forward_tensors: the source's tensors are its {'.'.join(source.path)}, "
                         f"not its {source_field}")
    return SplitMessage(out, (out_field,), [source.entries[i] for i in indices],
                        [source.sizes[i] for i in indices], [source.contents[i] for i in indices])


def gather(out, out_field: str, picks):
    """`out` with the picked NamedTensors appended to its repeated field `out_field`: how the master
    answers RunStep with the tensors its tasks' RunGraph responses returned.

    Args:
        out: the new message (e.g. a RunStepResponse).
        out_field: its repeated NamedTensor field ("tensor").
        picks: ``(source, source_field, index, name)`` per tensor, in order: the NamedTensor
            ``source.<source_field>[index]``, renamed `name` (None: its name is kept).

    Returns:
        `out` holding copies when no source is a `SplitMessage`; else a SplitMessage of `out`
        sharing the sources' buffers (a renamed tensor's serialization is its source's, followed by
        the new name: protobuf keeps the last value of a field).
    """
    tensors = getattr(out, out_field)
    if not any(isinstance(p[0], SplitMessage) for p in picks):   # (a small step's response)
        for source, field, i, name in picks:
            nt = getattr(source, field)[i]
            if name is None or nt.name == name:
                tensors.append(nt)
            else:
                tensors.add(name=name).tensor.CopyFrom(nt.tensor)
        return out
    entries, sizes, contents = [], [], []
    for source, field, i, name in picks:
        nt = getattr(source, field)[i]
        rename = name is not None and nt.name != name
        if rename:
            tensors.add(name=name).tensor.CopyFrom(nt.tensor)
        else:
            tensors.append(nt)
        if isinstance(source, SplitMessage):
            content = split_contents(source)[i]   # (raises for released payloads)
            entry, size = source.entries[i], source.sizes[i]
            if rename and entry is not None:
                tag = _NamedTensor(name=name).SerializeToString()
                entry, size = (*entry, tag), size + len(tag)
        else:
            entry, size, content = None, nt.tensor.ByteSize(), None
        entries.append(entry)
        sizes.append(size)
        contents.append(content)
    if all(e is None for e in entries):
        return out
    return SplitMessage(out, (out_field,), entries, sizes, contents)


def nest(outer, field: str, inner):
    """`outer` with `inner` as its submessage `field` (RunStepPull's first message holds the step).

    Returns:
        `outer`, or a SplitMessage of it sharing `inner`'s buffers when `inner` is a SplitMessage.
    """
    split_inner = isinstance(inner, SplitMessage)
    getattr(outer, field).CopyFrom(inner.message if split_inner else inner)
    if not split_inner:
        return outer
    return SplitMessage(outer, (field, *inner.path), inner.entries, inner.sizes, inner.contents)


# ---------------------------------------------------------------------------- parsing
_fields = codec.wire_fields


def _split_entry(buf, mv, start: int, end: int):
    """(NamedTensor without its tensor's ``tensor_content``, that content as a memoryview or None)
    of the NamedTensor serialized in buf[start:end]."""
    rest, tensor, contents, tensors = [], [], [], 0
    for number, wire, first, value, stop in _fields(buf, start, end):
        if number == 2 and wire == 2:
            tensors += 1
            for n2, w2, f2, v2, s2 in _fields(buf, value, stop):
                if n2 == 4 and w2 == 2:
                    contents.append(mv[v2:s2])
                else:
                    tensor.append(mv[f2:s2])
        else:
            rest.append(mv[first:stop])
    if tensors > 1 or len(contents) > 1:   # merged parts (never written so): as protobuf reads it
        return _NamedTensor.FromString(mv[start:end]), None
    header = _NamedTensor.FromString(b"".join(rest))
    header.tensor.MergeFromString(b"".join(tensor))
    return header, (contents[0] if contents else None)


def split(buf, message_class, path, error=errors.InvalidArgumentError):
    """Parses a serialized message except its tensors' payloads, which stay in `buf` (see `SplitMessage`).

    Args:
        buf: the serialized message (bytes, as received).
        message_class: its protobuf class.
        path: field names to its repeated NamedTensor field, e.g. ``("feed",)`` for a
            RunStepRequest, ``("step", "feed")`` for a RunStepPullRequest.

        error: the error class a malformed message raises (a response: DataLossError).

    Returns:
        A `SplitMessage`; a protobuf message for one under `SPLIT_MIN_BYTES`.

    Raises:
        InvalidArgumentError (or `error`): if `buf` is not a well-formed message.
    """
    if len(buf) >= TRIM_BYTES:
        _return_freed_memory()
    try:
        if len(buf) < SPLIT_MIN_BYTES:
            return message_class.FromString(buf)
        return _split(buf, memoryview(buf), 0, len(buf), message_class, tuple(path))
    except Exception as e:  # noqa: BLE001 - ValueError, IndexError, protobuf's DecodeError
        raise error(None, None, f"malformed {message_class.__name__} on the wire: {e}") from None


# Python gRPC receives a message as many small slices, copied into a growing bytearray and then into
# the bytes handed to the deserializer: three times the message at its peak. Freed, those slices
# stay in glibc's heap (1-1.7x the message, measured), which the tensors decoded next do not reuse,
# being large: a large request gives it back to the system first, so the receiver's peak stays the
# 3x of gRPC's receive (instead of 4-5x).
TRIM_BYTES = 16 << 20
_trim = []


def _return_freed_memory() -> None:
    """Returns the free memory of glibc's heap to the system (``malloc_trim``; a no-op elsewhere)."""
    if not _trim:
        try:
            import ctypes
            _trim.append(ctypes.CDLL(None).malloc_trim)
        except (OSError, AttributeError):
            _trim.append(None)
    if _trim[0] is not None:
        _trim[0](0)


def _split(buf, mv, start: int, end: int, message_class, path: tuple) -> SplitMessage:
    field = message_class.DESCRIPTOR.fields_by_name[path[0]]
    rest, spans = [], []
    for number, wire, first, value, stop in _fields(buf, start, end):
        if number == field.number and wire == 2:
            spans.append((value, stop))
        else:
            rest.append(mv[first:stop])
    if len(path) > 1 and len(spans) > 1:   # a submessage written in parts (protobuf merges them)
        return _whole(message_class.FromString(mv[start:end]), path)
    out = SplitMessage(message_class.FromString(b"".join(rest)), path)
    if len(path) > 1:
        if spans:
            from google.protobuf import message_factory
            inner = _split(buf, mv, *spans[0], message_factory.GetMessageClass(field.message_type), path[1:])
            getattr(out.message, path[0]).SetInParent()
            getattr(out.message, path[0]).CopyFrom(inner.message)
            out.entries, out.sizes, out.contents = inner.entries, inner.sizes, inner.contents
        return out
    headers = getattr(out.message, path[0])
    for value, stop in spans:
        header, content = _split_entry(buf, mv, value, stop)
        headers.append(header)
        out.entries.append((mv[value:stop],))
        out.sizes.append(stop - value)
        out.contents.append(content)
    return out


def _whole(message, path: tuple) -> SplitMessage:
    """The SplitMessage of a fully parsed message (each header holds its payload)."""
    inner = message
    for name in path[:-1]:
        inner = getattr(inner, name)
    out = SplitMessage(message, path)
    for nt in getattr(inner, path[-1]):
        out._inline(nt.ByteSize())
    return out


# The requests that carry tensors, by (service, method): servers parse them with `split`.
SPLIT_REQUESTS = {
    ("kernflow.client.protobuf.MasterService", "RunStep"): (master_pb2.RunStepRequest, ("feed",)),
    ("kernflow.client.protobuf.MasterService", "RunStepStream"): (master_pb2.RunStepRequest, ("feed",)),
    ("kernflow.client.protobuf.MasterService", "RunStepPull"): (master_pb2.RunStepPullRequest,
                                                                ("step", "feed")),
    ("kernflow.client.protobuf.WorkerService", "RunGraph"): (worker_pb2.RunGraphRequest, ("send",)),
    ("kernflow.client.protobuf.WorkerService", "RunGraphStream"): (worker_pb2.RunGraphRequest, ("send",)),
}


def request_parser(service: str, method: str):
    """The request deserializer of a server's method: `split` for the methods in `SPLIT_REQUESTS`
    (their tensors' bytes are not copied), None for the others (the message's ``FromString``).

    Args:
        service: the service's full name, e.g. "kernflow.client.protobuf.WorkerService".
        method: the method's name, e.g. "RunGraph".
    """
    entry = SPLIT_REQUESTS.get((service, method))
    if entry is None:
        return None
    message_class, path = entry
    return lambda data: split(data, message_class, path)


def response_parser(message_class, path):
    """The response deserializer of a client's call whose responses carry tensors (RunGraph's,
    RunStep's): `split`, a malformed response being a DataLossError.

    Args:
        message_class: the response's protobuf class, e.g. `worker_pb2.RunGraphResponse`.
        path: field names to its repeated NamedTensor field, e.g. ``("recv",)``.
    """
    return lambda data: split(data, message_class, path, errors.DataLossError)
