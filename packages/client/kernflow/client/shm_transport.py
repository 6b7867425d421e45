"""The "shm" transport: tensors between processes of one host through POSIX shared memory.

**A transfer.** The consumer names a fresh segment (``kernflow-shm-`` and 32 random hex digits) and
calls RecvTensor with it (`ShmRecvRequest`). The producer's worker, once the value is there, creates
that file in /dev/shm (exclusively, mode 0600) and reserves its size (``posix_fallocate``: a full
/dev/shm is a clean ENOSPC, never a SIGBUS later), answers with metadata only (`ShmTensor`: dtype,
shape, segment, size), and writes the tensor's raw little-endian bytes into it (one copy; none
before it for a variable's snapshot), saying every `PROGRESS_BYTES` how far it got (`ShmProgress`).
The consumer opens the segment on the answer and unlinks it at once (its acknowledgement: from then
on the bytes live only as long as its descriptor), and reads each written part once into a fresh
numpy array (``preadv``: faster here than mapping and copying, and a short file is a clean error
rather than a SIGBUS) while the producer writes the next. Values the transport does not carry -
strings, dead tensors, fewer than `MIN_BYTES` bytes, or no room in /dev/shm - are answered in-band
on the same call, as "grpc" would.

**Segments never outlive their use.** The consumer removes its segment whatever happens (it chose
the name, so also when the producer died before answering). The producer forgets a segment once it
wrote it all and the consumer took it; it removes it when the call ends early (the consumer went
away, a write failed), when the step ends (CleanupGraph, AbortStep, an abort, the worker shutting
down: the step's `CancellationManager`), after `ACK_TIMEOUT_S` if nobody took it, and at exit. No
``multiprocessing.shared_memory``: its resource tracker would unlink (and warn about) segments
another process owns.

**Same host only.** Chosen only between tasks with the same `host_id`, and only when the producer
read back the probe file the consumer wrote in /dev/shm (so both see one /dev/shm) and runs as the
same user (so the consumer may open the producer's 0600 segments).
"""

from __future__ import annotations

import atexit
import errno
import heapq
import itertools
import logging
import os
import re
import secrets
import sys
import threading
import time

from google.protobuf.message import DecodeError

from kernflow.client import codec
from kernflow.client.protobuf import worker_pb2
from kernflow.client.transports import recv_call
from kernflow.core.framework import errors
from kernflow.core.protobuf import tensor_shape_pb2
from kernflow.core.runtime.transport import Probe, Transport

__all__ = ["ShmTransport", "SHM_DIR", "MIN_BYTES", "ACK_TIMEOUT_S", "SEGMENT_PREFIX", "PROBE_PREFIX",
           "held_segments"]

_log = logging.getLogger(__name__)

SHM_DIR = "/dev/shm"
MIN_BYTES = 1 << 20           # smaller tensors go in-band: a segment costs more than it saves
PROGRESS_BYTES = 8 << 20      # the producer reports what it wrote every this many bytes (the consumer reads
                              # each part while the next is written; 8 messages for 64 MiB)
ACK_TIMEOUT_S = 30.0          # a segment no consumer took by then is removed by its producer
SEGMENT_PREFIX = "kernflow-shm-"
PROBE_PREFIX = "kernflow-probe-"
_SEGMENT_NAME = re.compile(re.escape(SEGMENT_PREFIX) + "[0-9a-f]{32}")
_PROBE_NAME = re.compile(re.escape(PROBE_PREFIX) + "[0-9a-f]{32}")
_CREATE = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
_OPEN = os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC


def _path(name: str) -> str:
    return os.path.join(SHM_DIR, name)


def _unlink(name: str) -> bool:
    """Removes /dev/shm/`name`; True if it was there."""
    try:
        os.unlink(_path(name))
        return True
    except FileNotFoundError:
        return False
    except OSError as e:
        _log.warning("cannot remove shared-memory segment %s: %s", _path(name), e)
        return False


def _available() -> bool:
    return (sys.platform.startswith("linux") and os.path.isdir(SHM_DIR)
            and os.access(SHM_DIR, os.W_OK | os.X_OK))


# ---------------------------------------------------------------------------- the producer's segments
class _Segments:
    """The segments this process made that no consumer has taken yet, and the thread that expires them.

    A segment is forgotten once it is written and its consumer took it (`settle`), and released (its
    file removed) when its call ends early, when its step is cancelled, when its deadline passes, or
    at exit, whichever comes first; releasing one the consumer already unlinked removes nothing.
    """

    def __init__(self):
        self._lock = threading.Lock()
        self._wake = threading.Condition(self._lock)
        self._held: dict[str, tuple] = {}   # name -> (deadline, cancellation, token, ack timeout)
        # (deadline, name) of every segment made, held or not (released ones are skipped when due).
        self._deadlines: list[tuple[float, str]] = []
        self._janitor: threading.Thread | None = None

    def create(self, name: str, nbytes: int, cancellation, ack_timeout_s: float) -> "_Writer":
        """Makes segment `name` of `nbytes` (space reserved, not yet written), held until released.

        Returns:
            Its descriptor, open for writing (the consumer may unlink the name before it is written).

        Raises:
            OSError: the segment could not be made (nothing is left behind).
            The step's error, if its `cancellation` was already cancelled.
        """
        token = None
        if cancellation is not None:
            token = cancellation.register(lambda err: self.release(name))
            if token is None:
                raise cancellation.error
        deadline = time.monotonic() + ack_timeout_s
        with self._lock:
            self._held[name] = (deadline, cancellation, token, ack_timeout_s)
            first = not self._deadlines or deadline < self._deadlines[0][0]
            heapq.heappush(self._deadlines, (deadline, name))
            self._start_janitor()
            if first:
                self._wake.notify()
        try:
            fd = os.open(_path(name), _CREATE, 0o600)
        except BaseException:
            self._forget(name)   # nothing was created (EEXIST: not ours to remove)
            raise
        writer = _Writer(fd)
        try:
            _reserve(fd, nbytes)
        except BaseException:
            writer.close()
            self.release(name)
            raise
        return writer

    def fill(self, name: str, writer: "_Writer", views, nbytes: int, progress_bytes: int, cancellation):
        """Writes `views` through `writer`; yields the bytes written so far every `progress_bytes`
        and at the end.

        Raises:
            The step's error (`cancellation`'s, else AbortedError) once the segment was released
            meanwhile.
            OSError: a failed write.
        """
        off = mark = 0
        for v in views:
            pos = 0
            while pos < len(v):
                n = os.pwrite(writer.fd, v[pos:pos + progress_bytes], off)
                pos += n
                off += n
                if off - mark >= progress_bytes:
                    self._check_held(name, cancellation)
                    mark = off
                    yield off
        if off != nbytes:
            raise OSError(errno.EIO, f"wrote {off} of {nbytes} bytes into {_path(name)}")
        if off != mark:
            self._check_held(name, cancellation)
            yield off

    def _check_held(self, name: str, cancellation) -> None:
        with self._lock:
            held = name in self._held
        if not held:   # released: the step ended (or the process is exiting)
            if cancellation is not None and cancellation.error is not None:
                raise cancellation.error
            raise errors.AbortedError(None, None, f"shared-memory segment {_path(name)} was released "
                                      f"while it was written")

    def settle(self, name: str) -> None:
        """After the last byte was written: forgets `name` now if its consumer took it already."""
        if not os.path.exists(_path(name)):
            self._forget(name)

    def release(self, name: str) -> bool:
        """Forgets `name` and removes its file; True if the file was still there (never taken)."""
        self._forget(name)
        return _unlink(name)

    def _forget(self, name: str):
        with self._lock:
            rec = self._held.pop(name, None)
        if rec is not None and rec[1] is not None:
            rec[1].deregister(rec[2])
        return rec

    def release_all(self) -> None:
        """Removes every held segment (at exit)."""
        with self._lock:
            names = list(self._held)
        for name in names:
            self.release(name)

    def names(self) -> list[str]:
        with self._lock:
            return sorted(self._held)

    def _start_janitor(self) -> None:
        if self._janitor is None:
            self._janitor = threading.Thread(target=self._expire, name="kernflow-shm-janitor", daemon=True)
            self._janitor.start()

    def _expire(self) -> None:
        while True:
            with self._lock:
                now = time.monotonic()
                due = []
                while self._deadlines and self._deadlines[0][0] <= now:
                    due.append(heapq.heappop(self._deadlines)[1])
                if not due:
                    self._wake.wait(self._deadlines[0][0] - now if self._deadlines else None)
                    continue
            for name in due:
                rec = self._forget(name)
                if rec is not None and _unlink(name):
                    _log.warning("shared-memory segment %s was not taken by its consumer within %g s "
                                 "and was removed", _path(name), rec[3])


_segments = _Segments()
atexit.register(_segments.release_all)


def held_segments() -> list[str]:
    """Names of the segments this process made that are not released yet (tests, diagnostics)."""
    return _segments.names()


class _Writer:
    """The producer's descriptor of a segment being written; closed by `close`, or when dropped (a
    served answer that was never iterated)."""

    __slots__ = ("fd",)

    def __init__(self, fd: int):
        self.fd = fd

    def close(self) -> None:
        fd, self.fd = self.fd, -1
        if fd >= 0:
            os.close(fd)

    __del__ = close


def _reserve(fd: int, nbytes: int) -> None:
    """Gives the segment its size with real pages: no room is ENOSPC now, not a SIGBUS later."""
    try:
        os.posix_fallocate(fd, 0, nbytes)
    except OSError as e:
        if e.errno not in (errno.EOPNOTSUPP, errno.EINVAL):
            raise
        os.ftruncate(fd, nbytes)


# ---------------------------------------------------------------------------- negotiation
class _ShmProbe(Probe):
    """A file the consumer writes in its /dev/shm; the producer must read its token back."""

    def __init__(self):
        self._token = secrets.token_hex(16)
        self._name = None
        if not _available():
            super().__init__(b"")
            return
        name = PROBE_PREFIX + secrets.token_hex(16)
        try:
            fd = os.open(_path(name), _CREATE, 0o600)
        except OSError as e:
            _log.debug("no shm probe: %s", e)
            super().__init__(b"")
            return
        self._name = name
        try:
            os.write(fd, self._token.encode("ascii"))
        finally:
            os.close(fd)
        super().__init__(name.encode("ascii"))

    def accepts(self, params: bytes) -> bool:
        if self._name is None:
            return False
        try:
            offer = worker_pb2.ShmOffer.FromString(params)
        except DecodeError:
            return False
        return offer.probe_answer == self._token and offer.uid == os.geteuid()

    def close(self) -> None:
        name, self._name = self._name, None
        if name is not None:
            _unlink(name)

    __del__ = close   # (a probe its caller forgot to close)


def _read_probe(challenge: bytes) -> str:
    """The token in the consumer's probe file named by `challenge`, or "" when there is none to read."""
    try:
        name = challenge.decode("ascii")
    except UnicodeDecodeError:
        return ""
    if not _PROBE_NAME.fullmatch(name):
        return ""
    try:
        fd = os.open(_path(name), _OPEN)
    except OSError:
        return ""
    try:
        return os.read(fd, 64).decode("ascii", "replace")
    except OSError:
        return ""
    finally:
        os.close(fd)


# ---------------------------------------------------------------------------- the transport
class ShmTransport(Transport):
    """Dense numeric tensors of at least `min_bytes` through /dev/shm segments (see the module).

    Args:
        min_bytes: smaller tensors are answered in-band.
        ack_timeout_s: how long the producer keeps a segment nobody took.
        progress_bytes: how often the producer reports what it wrote.
    """

    same_host_only = True

    def __init__(self, min_bytes: int = MIN_BYTES, ack_timeout_s: float = ACK_TIMEOUT_S,
                 progress_bytes: int = PROGRESS_BYTES):
        self.min_bytes = int(min_bytes)
        self.ack_timeout_s = float(ack_timeout_s)
        self.progress_bytes = int(progress_bytes)
        self.available = _available()

    # ------------------------------------------------------------------ negotiation
    def probe(self) -> Probe:
        """A probe file in this process's /dev/shm that the producer must read back."""
        return _ShmProbe()

    def offer(self, challenge: bytes) -> bytes | None:
        """Offered wherever /dev/shm is writable, with what this task read of the caller's probe."""
        if not self.available:
            return None
        return worker_pb2.ShmOffer(probe_answer=_read_probe(challenge), uid=os.geteuid()).SerializeToString()

    # ------------------------------------------------------------------ consumer
    def recv(self, peer, step_id: int, key: str, timeout: float | None, cancellation=None):
        """See `Transport.recv`. A tensor the producer answered in-band is assembled as by "grpc"."""
        name = SEGMENT_PREFIX + secrets.token_hex(16)
        req = worker_pb2.RecvTensorRequest(
            step_id=step_id, rendezvous_key=key, transport=self.name,
            transport_request=worker_pb2.ShmRecvRequest(segment=name).SerializeToString())
        try:
            with recv_call(peer, req, timeout, cancellation) as responses:
                first = next(responses, None)
                if first is None:
                    raise errors.DataLossError(None, None, f"{_what(peer, step_id, key)}: the RecvTensor "
                                               f"stream ended before its first message")
                if not first[0].transport_payload:   # in-band: too small, a string, dead, no room
                    return codec.assemble_recv_chunks(itertools.chain((first,), responses))
                meta = _answer(first[0].transport_payload, name, peer, step_id, key)
                value = _take(meta, responses, _what(peer, step_id, key))
                if next(responses, None) is not None:
                    raise errors.DataLossError(None, None, f"{_what(peer, step_id, key)}: a message after "
                                               f"the segment was complete")
                return value, False
        finally:
            _unlink(name)   # (already gone after a transfer: the consumer took it)

    # ------------------------------------------------------------------ producer
    def serve(self, step_id: int, key: str, value, is_dead: bool, request: bytes, cancellation):
        """See `Transport.serve`: writes the segment the consumer named; None to answer in-band."""
        if is_dead or value is None or not self.available:
            return None
        name = _requested_segment(request, step_id, key)
        try:
            raw = codec.raw_views(value)
        except TypeError:
            return None
        if raw is None or raw[3] < self.min_bytes:
            return None
        enum, shape, views, nbytes = raw
        try:
            writer = _segments.create(name, nbytes, cancellation, self.ack_timeout_s)
        except OSError as e:
            _warn_in_band(e, nbytes)
            return None
        meta = worker_pb2.ShmTensor(
            dtype=enum, segment=name, size=nbytes,
            shape=tensor_shape_pb2.TensorShapeProto(dim=[tensor_shape_pb2.TensorShapeProto.Dim(size=int(d))
                                                         for d in shape]))
        return self._answers(meta, writer, views, cancellation)

    def _answers(self, meta: worker_pb2.ShmTensor, writer: _Writer, views, cancellation):
        """The answer, then a `ShmProgress` every `progress_bytes` written (the consumer reads what
        is written while the rest is being written)."""
        name, finished = meta.segment, False
        try:
            yield meta.SerializeToString()
            for written in _segments.fill(name, writer, views, meta.size, self.progress_bytes,
                                          cancellation):
                yield worker_pb2.ShmProgress(written=written).SerializeToString()
            finished = True
        finally:
            writer.close()
            if finished:
                _segments.settle(name)
            else:   # failed, or the consumer went away: nobody will take it
                _segments.release(name)


def _what(peer, step_id: int, key: str) -> str:
    who = getattr(peer, "task_name", "") or getattr(peer, "address", "") or "its producer"
    return f"shm transfer of {key!r} (step {step_id}) from {who}"


def _requested_segment(request: bytes, step_id: int, key: str) -> str:
    try:
        name = worker_pb2.ShmRecvRequest.FromString(request).segment
    except DecodeError:
        name = None
    if name is None or not _SEGMENT_NAME.fullmatch(name):
        raise errors.InvalidArgumentError(
            None, None, f"RecvTensor({key!r}, step {step_id}) over shm: the request names segment "
                        f"{name!r}; expected {SEGMENT_PREFIX!r} and 32 hex digits")
    return name


def _answer(payload: bytes, name: str, peer, step_id: int, key: str) -> worker_pb2.ShmTensor:
    try:
        meta = worker_pb2.ShmTensor.FromString(payload)
    except DecodeError as e:
        raise errors.DataLossError(None, None,
                                   f"{_what(peer, step_id, key)}: malformed ShmTensor: {e}") from None
    if meta.segment != name:
        raise errors.DataLossError(None, None, f"{_what(peer, step_id, key)}: the answer names segment "
                                   f"{meta.segment!r}, not the requested {name!r}")
    return meta


def _take(meta: worker_pb2.ShmTensor, progress, what: str):
    """Opens and unlinks the segment of `meta`, and reads it into a fresh array as `progress` (the
    producer's `ShmProgress` messages) says its bytes are written."""
    out, view = codec.receive_buffer(meta.dtype, meta.shape, meta.size, f"{what}: the answer")
    path = _path(meta.segment)
    try:
        fd = os.open(path, _OPEN)
    except FileNotFoundError:
        raise errors.UnavailableError(None, None, f"{what}: shared-memory segment {path} is gone (the "
                                      f"producer released it, or is not on this host)") from None
    except OSError as e:
        raise errors.UnavailableError(None, None, f"{what}: cannot open {path}: {e.strerror}") from None
    try:
        try:
            os.unlink(path)   # taken: the bytes now live as long as `fd`, whatever happens next
        except FileNotFoundError:
            pass
        size = os.fstat(fd).st_size
        if size != meta.size:
            raise errors.DataLossError(None, None, f"{what}: segment {path} holds {size} bytes, the "
                                       f"answer announced {meta.size}")
        done = 0
        while done < size:
            written = _written(next(progress, None), done, size, what)
            while done < written:
                n = os.preadv(fd, [view[done:written]], done)
                if n <= 0:
                    raise errors.DataLossError(None, None, f"{what}: segment {path} ended after "
                                               f"{done} of {size} bytes")
                done += n
    except OSError as e:
        raise errors.UnavailableError(None, None, f"{what}: cannot read {path}: {e.strerror}") from None
    finally:
        os.close(fd)
    return codec.to_native(out)


def _written(item, done: int, size: int, what: str) -> int:
    """The byte count a `ShmProgress` item announces, checked against what was read."""
    if item is None:
        raise errors.DataLossError(None, None, f"{what}: the producer's stream ended after {done} of "
                                   f"{size} bytes were written")
    try:
        written = worker_pb2.ShmProgress.FromString(item[0].transport_payload).written
    except DecodeError as e:
        raise errors.DataLossError(None, None, f"{what}: malformed ShmProgress: {e}") from None
    if not done < written <= size:
        raise errors.DataLossError(None, None, f"{what}: the producer announced {written} bytes written "
                                   f"after {done}, of {size}")
    return written


_warned: set[int] = set()


def _warn_in_band(e: OSError, nbytes: int) -> None:
    level = logging.DEBUG if e.errno in _warned else logging.WARNING
    _warned.add(e.errno)
    _log.log(level, "cannot place %d bytes in %s (%s): sending them in-band", nbytes, SHM_DIR, e)
