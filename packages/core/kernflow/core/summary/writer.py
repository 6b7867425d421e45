"""Event files: TF1's ``tf.summary.FileWriter``, ``FileWriterCache`` and ``tf.train.summary_iterator``.

An event file is a TFRecord file named ``events.out.tfevents.<seconds>.<hostname><suffix>`` whose
first record is an Event with file_version "brain.Event:2"; each later record is one Event
(a summary, a graph, a session log, run metadata) stamped with wall_time and step.

Invariants of `EventFileWriter`: callers serialize each event (protobuf's C code) and enqueue
the bytes, or, for a summary op's output, enqueue (wall_time, int step, the summary's bytes); they
never write or flush. One background thread owns the file: per batch it encodes those summary
events by hand (`wire.event_bytes`) and frames everything it dequeues as TFRecords (CRC32C, C code),
in order, with one `write`, and it flushes the file at least every `flush_secs`. `flush()` returns
once every event enqueued before it is on disk; `close()` flushes, stops the thread and closes the
file; `reopen()` starts a new file and thread.

Work that needs protobuf messages stays on the caller (a message's serialization on the thread cost
52 us more per step on 2 cores: under the GIL that thread's work delays the training thread and
adds thread switches, with a wake-up per event as it then was). The thread's work is cheap per item
and done in one tight batch, where its code and data stay in cache, rather than once inside each
training step, where each call runs cold (an event's encoding there: ~1 us more per step than in
the batch; framing moved there took `add_summary` inside a step from 16 to 10 us,
tools/bench_summaries.py).

The writer thread is woken once 64 KiB of events are pending (or at a flush, a close, or
`flush_secs`), not for every event: under the GIL each wake-up is a thread switch that the training
thread pays for (8 KiB -> 64 KiB took (b) of tools/bench_summaries.py, summaries every step, from
1.079-1.092x to 1.074-1.076x the plain step). Events reach the file at the next batch, flush or
`flush_secs` (120 s by default), as TF's reach its file at its writer's buffer flushes: the pending
events play the part of the file buffer behind TF's writer thread, which TF writes out at its
`flush_secs` flush. As in TF, `add_*` blocks only when the writer thread is behind (`max_queue`
events after a wake-up it has not served); it never waits for disk I/O otherwise. Summaries made by
this process's summary ops go into events without being parsed (`wire.SummaryBytes`).
"""

from __future__ import annotations

import atexit
import collections
import os
import socket
import threading
import time

from kernflow.core import gfile
from kernflow.core.data.tfrecord import encode_record, tf_record_iterator
from kernflow.core.protobuf.event_pb2 import Event, SessionLog, SourceMetadata, TaggedRunMetadata
from kernflow.core.protobuf.summary_pb2 import Summary
from kernflow.core.summary.wire import SummaryBytes, event_bytes

__all__ = ["EventFileWriter", "FileWriter", "FileWriterCache", "summary_iterator"]

FILE_VERSION = "brain.Event:2"
_SOURCE = "kernflow.core.summary"


class _Flush:
    """A queue marker: the writer thread flushes the file and sets `done`."""

    def __init__(self):
        self.done = threading.Event()


_STOP = object()

# Encoded events pending before the writer thread is woken (see _EventQueue and the module doc).
_WAKE_BYTES = 64 << 10


class _EventQueue:
    """The events waiting for the writer thread: appended without a lock, taken in batches.

    `put` appends to a deque (thread-safe by itself) and wakes the consumer only once `wake_bytes`
    are pending or a marker is put, so a small event costs the producer a few bytecodes and the
    writer thread wakes once per batch instead of once per event (under the GIL every wake-up is
    a thread switch the training thread pays for: ~150 us on 2 cores, tools/bench_summaries.py).
    The pending bytes play the part of the C++ file buffer behind TF's writer thread (events are
    visible in the file at the next batch, flush or `flush_secs`); `maxsize` (the FileWriter's
    `max_queue`) bounds how far the writer thread may fall behind once woken: `put` blocks while
    `maxsize` events arrived after a wake-up the thread has not served yet.

    The byte count is updated without a lock; a lost update only moves the next wake-up.
    """

    def __init__(self, maxsize, wake_bytes):
        self._items = collections.deque()
        self._cond = threading.Condition(threading.Lock())
        self._maxsize, self._wake_bytes = maxsize, wake_bytes
        self._bytes = 0
        self._woken_at = None     # len(items) when the consumer was woken, until it takes them
        self._urgent = False

    def put(self, item, nbytes=None):
        """Appends an encoded event (or a summary to encode, with its size `nbytes`); wakes the
        consumer when a batch is pending (see class doc)."""
        items = self._items
        items.append(item)
        self._bytes += len(item) if nbytes is None else nbytes
        if self._bytes < self._wake_bytes:
            return
        with self._cond:
            if self._woken_at is None:
                self._woken_at = len(items)
                self._cond.notify_all()
            while self._woken_at is not None and 0 < self._maxsize <= len(items) - self._woken_at:
                self._cond.wait()   # the writer thread is behind: TF's blocking add

    def put_marker(self, marker):
        """Appends a marker (a flush or stop) after every event put so far and wakes the consumer."""
        with self._cond:
            self._items.append(marker)
            self._urgent = True
            self._cond.notify_all()

    def qsize(self):
        """How many items are pending."""
        return len(self._items)

    def take_all(self, timeout):
        """Every pending item, in order, after waiting up to `timeout` seconds for a batch or a
        marker."""
        with self._cond:
            if not self._urgent and self._woken_at is None:
                self._cond.wait(timeout)
            items, out = self._items, []
            while items:
                out.append(items.popleft())
            self._bytes = 0
            self._woken_at = None
            self._urgent = False
            self._cond.notify_all()  # producers waiting for the thread to catch up
            return out


class EventFileWriter:
    """Writes Event protos to a new event file in `logdir` from a background thread."""

    def __init__(self, logdir, max_queue=10, flush_secs=120, filename_suffix=None):
        self._logdir = str(logdir)
        gfile.MakeDirs(self._logdir)
        self._max_queue, self._flush_secs = max_queue, flush_secs
        self._suffix = filename_suffix or ""
        self._closed = True
        self._open()

    def _open(self):
        now = int(time.time())
        path = self._path(now)
        while os.path.exists(path):  # a reopen within the same second gets a new name
            now += 1
            path = self._path(now)
        self._file = open(path, "wb")  # noqa: SIM115 - owned by the writer thread until close()
        self._file.write(encode_record(Event(wall_time=now, file_version=FILE_VERSION,
                                             source_metadata=SourceMetadata(writer=_SOURCE))
                                       .SerializeToString()))
        self._file.flush()
        self._filename = path
        self._queue = _EventQueue(self._max_queue, wake_bytes=_WAKE_BYTES)
        self._thread = threading.Thread(target=self._run, name="EventFileWriter", daemon=True)
        self._closed = False
        self._thread.start()

    def _path(self, seconds):
        return os.path.join(self._logdir, f"events.out.tfevents.{seconds:010d}.{socket.gethostname()}"
                                          f"{self._suffix}")

    def _run(self):
        next_flush = time.monotonic() + self._flush_secs
        while True:
            records = []
            for item in self._queue.take_all(timeout=max(0.0, next_flush - time.monotonic())):
                t = type(item)
                if t is tuple:   # (wall_time, step, summary): a summary op's output, encoded here
                    records.append(encode_record(event_bytes(*item)))
                    continue
                if t is bytes or isinstance(item, (bytes, bytearray)):
                    records.append(encode_record(item))
                    continue
                self._file.write(b"".join(records))
                records = []
                self._file.flush()
                if item is _STOP:
                    return
                item.done.set()   # a _Flush
            if records:
                self._file.write(b"".join(records))
            if time.monotonic() >= next_flush:
                self._file.flush()
                next_flush = time.monotonic() + self._flush_secs

    def get_logdir(self):
        """The directory the event files are written to."""
        return self._logdir

    def add_event(self, event):
        """Encodes `event` (an Event proto) and enqueues it for the writer thread (ignored once
        closed)."""
        if not self._closed:
            self._queue.put(event.SerializeToString())

    def add_event_bytes(self, data: bytes):
        """Enqueues a serialized Event for the writer thread (ignored once closed)."""
        if not self._closed:
            self._queue.put(data)

    def add_summary_event(self, wall_time: float, step, summary: bytes):
        """Enqueues ``Event(wall_time, step, summary=<summary bytes>)`` for the writer thread to
        encode (`wire.event_bytes`) with the rest of its batch (ignored once closed)."""
        if not self._closed:
            self._queue.put((wall_time, step, summary), len(summary) + 24)

    def flush(self):
        """Returns once every event added so far is written and the file flushed."""
        if not self._closed:
            marker = _Flush()
            self._queue.put_marker(marker)
            marker.done.wait()

    def close(self):
        """Flushes, stops the writer thread and closes the file."""
        if not self._closed:
            self._queue.put_marker(_STOP)
            self._thread.join()
            self._file.close()
            self._closed = True

    def reopen(self):
        """After `close`, opens a new event file (and thread) for further events."""
        if self._closed:
            self._open()


def _copy(summary):
    out = Summary()
    out.CopyFrom(summary)
    return out


class FileWriter:
    """Writes summaries, graphs and session logs to an event file (TF1 `tf.summary.FileWriter`).

    Args:
        logdir: the directory (created if missing).
        graph: a Graph (its GraphDef is written first), or None.
        max_queue: events queued before `add_*` waits for the writer thread.
        flush_secs: the writer thread flushes at least this often.
        graph_def: deprecated: a GraphDef to write when `graph` is None.
        filename_suffix: appended to the event file's name.
        session: not supported (TF's graph-op writer); must be None.
    """

    def __init__(self, logdir, graph=None, max_queue=10, flush_secs=120, graph_def=None,
                 filename_suffix=None, session=None):
        if session is not None:
            raise NotImplementedError("FileWriter(session=...) (the summary-op writer) is not supported; "
                                      "leave session=None")
        self.event_writer = EventFileWriter(logdir, max_queue, flush_secs, filename_suffix)
        self._seen_summary_tags = set()
        self._session_run_tags = set()
        if graph is not None or graph_def is not None:
            self.add_graph(graph=graph, graph_def=graph_def)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def _add_event(self, event, step):
        event.wall_time = time.time()
        if step is not None:
            event.step = int(step)
        self.event_writer.add_event(event)

    def add_summary(self, summary, global_step=None):
        """Adds a Summary proto (or its serialized bytes, as a summary op outputs).

        Metadata is kept only on the first value seen with each tag, as TF does.

        Raises:
            google.protobuf.message.DecodeError: bytes that are not a serialized Summary.
            TypeError: neither bytes nor a Summary.
        """
        if type(summary) is SummaryBytes and not summary.has_metadata:
            # A summary op's output in this process: valid by construction and with no metadata
            # to strip, so it goes into the event as it is (the bytes protobuf would write),
            # encoded by the writer thread with the rest of its batch.
            # (The step becomes an int here: a bad one fails the caller, not the writer thread.)
            self.event_writer.add_summary_event(
                time.time(), global_step if global_step is None or type(global_step) is int
                else int(global_step), summary)
            return
        if isinstance(summary, bytes):
            summary = Summary.FromString(summary)   # (bad bytes fail here, as in TF)
        elif not isinstance(summary, Summary):
            raise TypeError(f"add_summary() needs a Summary proto or its serialized bytes, got "
                            f"{type(summary).__name__}")
        owned = False
        for i, value in enumerate(summary.value):
            if not value.HasField("metadata"):
                continue
            if value.tag in self._seen_summary_tags:
                if not owned:   # never change the caller's proto
                    summary, owned = _copy(summary), True
                summary.value[i].ClearField("metadata")
            else:
                self._seen_summary_tags.add(value.tag)
        self._add_event(Event(summary=summary), global_step)

    def add_session_log(self, session_log, global_step=None):
        """Adds a SessionLog proto (START, STOP or CHECKPOINT)."""
        self._add_event(Event(session_log=session_log), global_step)

    def add_graph(self, graph, global_step=None, graph_def=None):
        """Adds a Graph (written as its GraphDef with shapes) or, deprecated, a GraphDef.

        Raises:
            TypeError: neither a Graph nor a GraphDef was given.
        """
        if graph is not None and hasattr(graph, "as_graph_def"):
            gdef = graph.as_graph_def(add_shapes=True)
        elif graph is not None and hasattr(graph, "node"):
            gdef = graph
        elif graph_def is not None:
            gdef = graph_def
        else:
            raise TypeError("add_graph() needs a Graph (or a GraphDef as graph_def), got "
                            f"{type(graph).__name__}")
        self._add_event(Event(graph_def=gdef.SerializeToString()), global_step)

    def add_meta_graph(self, meta_graph_def, global_step=None):
        """Adds a MetaGraphDef proto.

        Raises:
            TypeError: `meta_graph_def` is not a MetaGraphDef.
        """
        from kernflow.core.protobuf.meta_graph_pb2 import MetaGraphDef
        if not isinstance(meta_graph_def, MetaGraphDef):
            raise TypeError(f"meta_graph_def must be type MetaGraphDef, saw type: {type(meta_graph_def)}")
        self._add_event(Event(meta_graph_def=meta_graph_def.SerializeToString()), global_step)

    def add_run_metadata(self, run_metadata, tag, global_step=None):
        """Adds a step's RunMetadata under `tag`.

        Raises:
            ValueError: `tag` was already used by this writer.
        """
        if tag in self._session_run_tags:
            raise ValueError("The provided tag was already used for this event type")
        self._session_run_tags.add(tag)
        tagged = TaggedRunMetadata(tag=tag, run_metadata=run_metadata.SerializeToString())
        self._add_event(Event(tagged_run_metadata=tagged), global_step)

    def add_event(self, event):
        """Adds an Event proto as given."""
        self.event_writer.add_event(event)

    def flush(self):
        """Returns once every event added so far is on disk."""
        self.event_writer.flush()

    def close(self):
        """Flushes and closes the event file; `reopen` starts a new one."""
        self.event_writer.close()

    def reopen(self):
        """Opens a new event file after `close` (a no-op while open)."""
        self.event_writer.reopen()

    def get_logdir(self):
        """The directory of the event files."""
        return self.event_writer.get_logdir()


class FileWriterCache:
    """One FileWriter per logdir, shared across callers (TF1 `tf.summary.FileWriterCache`).

    The cached writers are closed (their events written) when the interpreter exits, so a program
    that never calls `clear()` loses no event.
    """

    _cache: dict = {}
    _lock = threading.RLock()
    _atexit_registered = False

    @staticmethod
    def get(logdir):
        """The FileWriter for `logdir`, created (with the default graph) on first use."""
        from kernflow.core.framework import ops as _ops
        with FileWriterCache._lock:
            if logdir not in FileWriterCache._cache:
                FileWriterCache._cache[logdir] = FileWriter(logdir, graph=_ops.get_default_graph())
                if not FileWriterCache._atexit_registered:
                    atexit.register(FileWriterCache.clear)
                    FileWriterCache._atexit_registered = True
            return FileWriterCache._cache[logdir]

    @staticmethod
    def clear():
        """Closes and forgets every cached FileWriter."""
        with FileWriterCache._lock:
            for writer in FileWriterCache._cache.values():
                writer.close()
            FileWriterCache._cache = {}


def summary_iterator(path):
    """Yields the Event protos of the event file at `path` (TF1 `tf.train.summary_iterator`)."""
    for record in tf_record_iterator(path):
        yield Event.FromString(record)


__all__ += ["Event", "SessionLog", "Summary"]
