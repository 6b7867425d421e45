"""CPU kernels of TF1's queue-based readers (kernflow.core.ops.reader_ops).

A `Reader` resource holds the current work unit (a file name dequeued from a string queue) and an
iterator over its records. Reads are asynchronous kernels and never hold a thread while the queue
is empty: a read is a *request* in the reader's line, and only the head request runs (TF serializes
the reads of one reader with a mutex). Invariants:

* At most one request is being served (`_busy`); it finishes (its `done` is called) exactly once,
  outside the reader's lock.
* A request needs a new work unit only when it has produced nothing yet: a call never returns
  records of two work units (TF's ReaderBase::ReadUpTo), so a failed dequeue (the queue closed and
  empty: OutOfRange) never loses records.
* Work units start and finish in pairs: `work_started - work_finished` is 1 while a unit is in
  progress (then `current_work` names it; afterwards it keeps the last unit's name, as TF does).

A work unit names a file, confined to the process's file root (kernflow.core.runtime.file_root)
when one is set: a unit outside it fails the read with InvalidArgumentError, as a missing file does.
"""

from __future__ import annotations

import collections
import itertools
import struct
import threading

import numpy as np

from kernflow.core.data.tfrecord import open_compressed, read_records
from kernflow.core.framework import errors
from kernflow.core.runtime import file_root
# The queue's own dequeue attempt (reader kernels dequeue work units as QueueDequeueV2 does).
from kernflow.kernels.cpu.queues import _DEQUEUERS, Queue, _Dequeue

DEVICE = "CPU"
_ids = itertools.count()


def _bytes(v) -> bytes:
    if isinstance(v, np.ndarray):
        v = v[()] if v.ndim == 0 else v
    return v.encode() if isinstance(v, str) else bytes(v)


# ---------------------------------------------------------------------------- record sources
# A source maps a work unit to an iterator of (key, value) byte strings; `where` names the reader
# in the file root's refusals.
def _tfrecords(attrs, where):
    compression = attrs["compression_type"]

    def records(work: bytes):
        path = file_root.check(where, work, write=False)
        offset = 0
        with open_compressed(path, compression or None, "rb") as f:
            for data in read_records(f, path):
                yield work + b":" + str(offset).encode(), data
                offset += 16 + len(data)
    return records


def _text_lines(attrs, where):
    skip = attrs["skip_header_lines"]

    def records(work: bytes):
        path = file_root.check(where, work, write=False)
        with open_compressed(path, None, "rb") as f:
            for number, line in enumerate(f, 1):
                if number <= skip:
                    continue
                line = line[:-1] if line.endswith(b"\n") else line
                line = line[:-1] if line.endswith(b"\r") else line
                yield work + b":" + str(number).encode(), line
    return records


def _whole_files(attrs, where):
    def records(work: bytes):
        with open_compressed(file_root.check(where, work, write=False), None, "rb") as f:
            yield work, f.read()
    return records


def _fixed_length(attrs, where):
    header, size, footer = attrs["header_bytes"], attrs["record_bytes"], attrs["footer_bytes"]
    hop = attrs["hop_bytes"] or size
    encoding = attrs["encoding"]

    def records(work: bytes):
        with open_compressed(file_root.check(where, work, write=False), encoding or None, "rb") as f:
            data = f.read()
        end = len(data) - footer
        for index, start in enumerate(range(header, max(end - size + 1, header), hop)):
            yield work + b":" + str(index).encode(), data[start:start + size]
    return records


def _identity(attrs, where):
    def records(work: bytes):
        yield work, work
    return records


# op type -> (kind shown in messages, source factory, one record per work unit)
_KINDS = {"TFRecordReaderV2": ("TFRecordReader", _tfrecords, False),
          "TextLineReaderV2": ("TextLineReader", _text_lines, False),
          "WholeFileReaderV2": ("WholeFileReader", _whole_files, True),
          "FixedLengthRecordReaderV2": ("FixedLengthRecordReader", _fixed_length, False),
          "IdentityReaderV2": ("IdentityReader", _identity, True)}


class _Request:
    __slots__ = ("n", "batch", "queue", "step", "done", "keys", "values")

    def __init__(self, n, batch, queue, step, done):
        self.n, self.batch, self.queue, self.step, self.done = n, batch, queue, step, done
        self.keys, self.values = [], []

    def result(self):
        if not self.batch:
            return np.array(self.keys[0], dtype=object), np.array(self.values[0], dtype=object)
        keys, values = np.empty(len(self.keys), object), np.empty(len(self.values), object)
        keys[:], values[:] = self.keys, self.values
        return keys, values


_NEED_WORK, _PENDING = object(), object()


class Reader:
    """A reader resource. See the module docstring for its request line and invariants.

    Args:
        kind: "TextLineReader"... (for messages); name: the resource name.
        source: fn(work unit bytes) -> iterator of (key, value).
        single: True if each work unit ends with its (only) record (WholeFile, Identity).
        serializable: whether serialize_state / restore_state are supported.
    """

    def __init__(self, kind, name, source, single, serializable):
        self.kind, self.name = kind, name
        self._source, self._single, self.serializable = source, single, serializable
        self._lock = threading.Lock()
        self._pending = collections.deque()
        self._busy = False
        self._reset_locked()

    def _reset_locked(self):
        self.work_started = self.work_finished = self.records_produced = 0
        self.current_work = b""
        self._close_iter()

    def _close_iter(self):
        it, self._iter = getattr(self, "_iter", None), None
        if it is not None:
            it.close()

    def reset(self):
        with self._lock:
            self._reset_locked()

    def counts(self):
        with self._lock:
            return self.records_produced, self.work_finished

    # ------------------------------------------------------------------ reading
    def submit(self, req: _Request) -> None:
        """Queues a read request; its `done` is called once it has records or failed."""
        with self._lock:
            self._pending.append(req)
            if self._busy:
                return
            self._busy = True
        self._serve()

    def _serve(self) -> None:
        while True:
            with self._lock:
                if not self._pending:
                    self._busy = False
                    return
                req = self._pending[0]
                try:
                    out = self._advance_locked(req)
                except errors.OpError as e:
                    out = e
            if out is _NEED_WORK:
                value = self._dequeue(req)
                if value is _PENDING:   # the dequeue completes later and serves again
                    return
                out = self._start_work(value)
                if out is None:
                    continue
            self._finish_head(req, out)

    def _finish_head(self, req: _Request, out) -> None:
        with self._lock:
            self._pending.popleft()
        req.done(out)

    def _advance_locked(self, req: _Request):
        """Reads records into `req`: its outputs when done, or _NEED_WORK."""
        while len(req.keys) < req.n:
            if self._iter is None:
                return _NEED_WORK
            try:
                key, value = next(self._iter)
            except StopIteration:
                self._finish_work_locked()
                if req.keys:
                    break
                continue
            except errors.OpError:
                self._finish_work_locked()
                raise
            req.keys.append(key)
            req.values.append(value)
            self.records_produced += 1
            if self._single:
                self._finish_work_locked()
                break
        return req.result()

    def _finish_work_locked(self) -> None:
        self._close_iter()
        self.work_finished += 1   # current_work keeps the last unit's name, as TF's state shows

    def _dequeue(self, req: _Request):
        """Starts a dequeue of a work unit: returns it (or its error) if it completed at once,
        else _PENDING (the completion then resumes `_serve` on the thread that delivers it)."""
        lock = threading.Lock()
        box = ["sync", None]

        def done(value):
            with lock:
                if box[0] == "sync":
                    box[:] = ["got", value]
                    return
            err = self._start_work(value)
            if err is not None:
                self._finish_head(req, err)
            self._serve()

        req.queue.start(_Dequeue(done, 1, False, True), _DEQUEUERS, req.step)
        with lock:
            if box[0] == "got":
                return box[1]
            box[0] = "async"
        return _PENDING

    def _start_work(self, value):
        """Starts the dequeued work unit; returns the error to fail the request with, or None."""
        if isinstance(value, BaseException):
            return value
        work = _bytes(value)
        with self._lock:
            self._close_iter()
            self._iter = self._source(work)
            self.current_work = work
            self.work_started += 1
        return None

    # ------------------------------------------------------------------ state
    def serialize(self) -> bytes:
        if not self.serializable:
            raise errors.UnimplementedError(None, None, f"{self.kind} '{self.name}' does not support "
                                            f"SerializeState")
        with self._lock:
            return _encode_state(self.work_started, self.work_finished, self.records_produced,
                                 self.current_work)

    def restore(self, state: bytes) -> None:
        if not self.serializable:
            raise errors.UnimplementedError(None, None, f"{self.kind} '{self.name}' does not support "
                                            f"RestoreState")
        started, finished, produced, work = _decode_state(state, self)
        if min(started, finished, produced) < 0 or not 0 <= started - finished <= 1:
            raise errors.InvalidArgumentError(
                None, None, f"Inconsistent work started vs. finished when restoring in {self.kind} "
                f"'{self.name}': work_started {started}, work_finished {finished}, current_work "
                f"{work!r}")
        with self._lock:
            self._close_iter()
            self.work_started, self.work_finished, self.records_produced = started, finished, produced
            self.current_work = work
            self._iter = self._source(work) if started > finished else None


# ---------------------------------------------------------------------------- state encoding
# TF's ReaderBaseState proto: work_started = 1, work_finished = 2, num_records_produced = 3 (int64),
# current_work = 4 (bytes). Written with the protobuf wire format so the bytes match TF's.
def _varint(n: int) -> bytes:
    n &= (1 << 64) - 1
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        out.append(b | (0x80 if n else 0))
        if not n:
            return bytes(out)


def _encode_state(started, finished, produced, work: bytes) -> bytes:
    out = b""
    for field, v in ((1, started), (2, finished), (3, produced)):
        if v:
            out += _varint(field << 3) + _varint(v)
    if work:
        out += _varint(4 << 3 | 2) + _varint(len(work)) + work
    return out


def _decode_state(data: bytes, reader):
    fields = {1: 0, 2: 0, 3: 0, 4: b""}
    pos = 0

    def varint():
        nonlocal pos
        shift = value = 0
        while True:
            if pos >= len(data) or shift > 63:
                raise struct.error("truncated varint")
            b = data[pos]
            pos += 1
            value |= (b & 0x7F) << shift
            shift += 7
            if not b & 0x80:
                return value
    try:
        while pos < len(data):
            tag = varint()
            field, wire = tag >> 3, tag & 7
            if wire == 0:
                fields[field] = varint()
            elif wire == 2:
                n = varint()
                if pos + n > len(data):
                    raise struct.error("truncated bytes")
                fields[field] = data[pos:pos + n]
                pos += n
            else:
                raise struct.error(f"unexpected wire type {wire}")
    except struct.error as e:
        raise errors.InvalidArgumentError(None, None, f"Could not parse state for {reader.kind} "
                                          f"'{reader.name}': {e}") from None
    signed = [v - (1 << 64) if v >= 1 << 63 else v for v in (fields[1], fields[2], fields[3])]
    return (*signed, bytes(fields[4]))


# ---------------------------------------------------------------------------- kernels
def _reader_op(ctx):
    kind, make_source, single = _KINDS[ctx.op_type]
    container = ctx.get_attr("container")
    name = ctx.get_attr("shared_name") or f"_{next(_ids)}_{ctx.name}"
    attrs = {k: (v.decode() if isinstance(v, bytes) else v) for k, v in ctx.attrs.items()}
    make = lambda: Reader(kind, name, make_source(attrs, f"{kind} '{name}'"), single,  # noqa: E731
                          ctx.op_type == "IdentityReaderV2")

    def check(r):
        if not isinstance(r, Reader) or r.kind != kind:
            raise errors.InvalidArgumentError(None, None, f"Shared resource '{name}' is a "
                                              f"{getattr(r, 'kind', type(r).__name__)}, not a {kind}")
    return ctx.resource_mgr.cached_getter(container, name, make, check)


def _reader_of(handle, node: str) -> Reader:
    if not isinstance(handle, Reader):
        raise errors.InvalidArgumentError(None, None, f"{node}: input 0 is not a reader handle "
                                          f"(got {type(handle).__name__})")
    return handle


def _queue_of(handle, node: str) -> Queue:
    if not isinstance(handle, Queue):
        raise errors.InvalidArgumentError(None, None, f"{node}: input 1 is not a queue handle "
                                          f"(got {type(handle).__name__})")
    if [d.name for d in handle.dtypes] != ["string"]:
        raise errors.InvalidArgumentError(
            None, None, f"{node}: a reader's work queue must hold scalar strings, but "
            f"{handle.kind} '{handle.name}' holds [{', '.join(d.name for d in handle.dtypes)}]")
    return handle


def _read(batch: bool):
    def factory(ctx):
        node = ctx.name

        def compute(step, inputs, done):
            reader = _reader_of(inputs[0], node)
            queue = _queue_of(inputs[1], node)
            n = 1
            if batch:
                n = int(inputs[2])
                if n <= 0:
                    raise errors.InvalidArgumentError(None, None, f"{node}: num_records must be "
                                                      f"positive, got {n}")
            reader.submit(_Request(n, batch, queue, step, done))
        return compute
    return factory


def _state_kernel(fn):
    def factory(ctx):
        node = ctx.name
        return lambda handle, *args: fn(_reader_of(handle, node), *args)
    return factory


def _restore(reader, state):
    arr = np.asarray(state, dtype=object)
    reader.restore(_bytes(arr[()] if arr.ndim == 0 else arr.reshape(-1)[0]))


def register(registry) -> None:
    """Registers the CPU reader kernels."""
    for op in _KINDS:
        registry.register(op, DEVICE, _reader_op)
    registry.register("ReaderReadV2", DEVICE, _read(False), is_async=True)
    registry.register("ReaderReadUpToV2", DEVICE, _read(True), is_async=True)
    registry.register("ReaderNumRecordsProducedV2", DEVICE,
                      _state_kernel(lambda r: np.int64(r.counts()[0])))
    registry.register("ReaderNumWorkUnitsCompletedV2", DEVICE,
                      _state_kernel(lambda r: np.int64(r.counts()[1])))
    registry.register("ReaderSerializeStateV2", DEVICE,
                      _state_kernel(lambda r: np.array(r.serialize(), dtype=object)))
    registry.register("ReaderRestoreStateV2", DEVICE, _state_kernel(_restore))
    registry.register("ReaderResetV2", DEVICE, _state_kernel(lambda r: r.reset()))
