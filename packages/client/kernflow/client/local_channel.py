"""The same-host channel: a worker's methods over a Unix socket, for callers on the worker's host.

Python gRPC costs about 400 us of wall time and 200 us of CPU on each side for one small unary call
on the 2-core machine of docs/performance.md (a two-message stream about 1 ms), and a step of
asynchronous between-graph training makes six calls or more. The same call over a connected Unix
socket, with one reader thread at each end, costs about 60 us. So a worker also serves its methods
on a Unix socket, and a `GrpcWorkerClient` whose worker runs on its own host calls it there: the same
request and response messages, status codes and messages, deadlines, cancellation and trace context
as over gRPC - only the channel differs. Calls across hosts, and everything else, stay on gRPC.

**Negotiation** (`channel_for`). A worker's GetStatus offers its socket's path and a random token
(`LocalChannelOffer`). A caller uses the offer only when the worker reports the caller's own
`host_id`, the channel is allowed (``KERNFLOW_LOCAL_CHANNEL=0``, or a ``KERNFLOW_TRANSPORT`` list
without "local", turns it off: benchmarks that force gRPC), and connecting and the HELLO exchange
succeed; otherwise, and for `FAILED_TTL_S` after a failure, it calls over gRPC. A channel whose
connection breaks (the worker died or restarted) fails its calls in flight with UnavailableError, as
a broken gRPC connection does, and the next call negotiates again.

**Who may connect.** The socket lives in a directory only this user may enter
(``$XDG_RUNTIME_DIR/kernflow`` or ``/tmp/kernflow-UID``, mode 0700, checked before use), the server
accepts only peers running as its own user (``SO_PEERCRED``), and a connection's first frame must
carry the offer's token. The offer travels only in GetStatus answers, which a cluster started with a
token (`kernflow.client.security`) gives only to callers with that token.

The serving end is `kernflow.client.local_server`; this module holds the protocol (frames,
negotiation, who may connect) and the caller.

**Frames.** Two little-endian uint32 (header length, body length), a `LocalFrame` header, then the
body: the request or response message as gRPC would carry it (RecvTensor's responses are the chunks
the worker serialized itself). Each connection multiplexes calls by `call_id`. The server runs the
short control methods (`local_server.INLINE_METHODS`: GetStatus, AbortStep, CleanupGraph...) on the connection's
reader thread, so they are served even when every pool thread waits in a blocked step, and the
others on a thread pool. A streaming method whose servicer also has a push form (RecvTensor:
``RecvTensorPush``) is answered by it: its responses are sent from the threads that produce them
(the `_Send` delivering a value), so no server thread waits per call, and its deadline runs on one
`Timers` thread. A caller's deadline passes to the handler (`time_remaining`); when it expires, or
the caller cancels, the caller sends CANCEL and the handler's cancellation callbacks run
(`add_callback`, as gRPC runs them when a caller goes away); a closed connection cancels all its
calls. A REQUEST marked `oneway` (PushTensors) gets no answer at all: the caller registers
no call, and the server sends no END. PushTensors is served on the reader thread too, and runs the
step's segment that waited for the value there; so a reader thread never waits to send
(`_send_frame`: what the socket does not take at once goes from a drainer thread), and one that runs
a request for `local_server.HAND_OFF_S` hands the connection to a new reader thread. Both ends count bytes and durations in the ``kernflow.rpc.*`` metrics, as gRPC calls do.
"""

from __future__ import annotations

import errno
import itertools
import logging
import os
import queue
import socket
import stat
import struct
import tempfile
import threading
import time
import _thread

import grpc
from google.protobuf.message import DecodeError

from kernflow.client.protobuf import worker_pb2
from kernflow.client.rpc_metrics import method_attributes
from kernflow.client.rpc_errors import error_for_status, status_for_code
from kernflow.core import telemetry
from kernflow.core.framework import errors
from kernflow.core.runtime import transport as _transport
from kernflow.core.runtime.env import EnvVar

__all__ = ["LocalChannel", "LocalStreamCall", "channel_for", "route", "enabled", "socket_dir", "forget", "note_status",
           "LOCAL_CHANNEL_ENV", "FAILED_TTL_S", "MAX_BODY_BYTES"]

_log = logging.getLogger(__name__)

LOCAL_CHANNEL_ENV = "KERNFLOW_LOCAL_CHANNEL"
NAME = "local"                 # its name in a KERNFLOW_TRANSPORT list
FAILED_TTL_S = 30.0            # a peer that offers no channel (or whose channel failed) is called over gRPC this long
UNREACHED_TTL_S = 1.0          # ... and one that did not answer the negotiation's GetStatus (not up yet)
NEGOTIATION_TIMEOUT_S = 2.0
HELLO_TIMEOUT_S = 5.0
MAX_HEADER_BYTES = 1 << 20
MAX_BODY_BYTES = (1 << 32) - 1  # a frame's body length is a uint32: larger requests go over gRPC

_FRAME = struct.Struct("<II")
_F = worker_pb2.LocalFrame
_REQUEST, _MESSAGE, _END, _CANCEL, _HELLO = _F.REQUEST, _F.MESSAGE, _F.END, _F.CANCEL, _F.HELLO
_OK = grpc.StatusCode.OK.value[0]
_SMALL_BODY = 1 << 16          # bodies up to this size are sent in one buffer with their header
_WORKER_SERVICE = worker_pb2.DESCRIPTOR.services_by_name["WorkerService"].full_name
_metrics_on = telemetry.metrics_active


def _count(side: str, direction: str, nbytes: int, attrs: dict) -> None:
    """Adds to ``kernflow.rpc.<side>.<direction>`` (the instruments gRPC calls count in too)."""
    getattr(telemetry.instruments(), f"rpc_{side}_{direction}").add(nbytes, attrs)


def _timed(side: str, attrs: dict, start: float, code: int) -> None:
    getattr(telemetry.instruments(), f"rpc_{side}_duration").record(
        time.perf_counter() - start, {**attrs, "rpc.grpc.status_code": code})


class _ProtocolError(Exception):
    pass


_LOCAL_CHANNEL_VAR = EnvVar(LOCAL_CHANNEL_ENV)
_HAVE_AF_UNIX = hasattr(socket, "AF_UNIX")


def enabled() -> bool:
    """Whether this process may use (and serve) the same-host channel (see the module docstring).
    (Asked on every call to a worker: the settings are read through `EnvVar`.)"""
    if not _HAVE_AF_UNIX or _LOCAL_CHANNEL_VAR.get().strip() == "0":
        return False
    setting = _transport.env_setting()
    return not setting or NAME in _transport.named_in(setting)


def socket_dir() -> str:
    """The directory of this user's sockets, made (mode 0700) if missing.

    Raises:
        OSError: it cannot be made, or it is not a directory owned by this user that only this user
            may enter (another user could then replace a socket).
    """
    base = os.environ.get("XDG_RUNTIME_DIR") or ""
    path = os.path.join(base, "kernflow") if base and os.path.isdir(base) else \
        os.path.join(tempfile.gettempdir(), f"kernflow-{os.geteuid()}")
    try:
        os.mkdir(path, 0o700)
    except FileExistsError:
        pass
    st = os.lstat(path)
    if not stat.S_ISDIR(st.st_mode) or st.st_uid != os.geteuid() or st.st_mode & 0o077:
        raise OSError(errno.EPERM, f"{path} is not a directory of uid {os.geteuid()} with mode 0700")
    return path


# ---------------------------------------------------------------------------- frames
# Whether this thread is a serving connection's reader (`local_server`), which must never block on a
# send: it runs pushed values' consumers (PushTensors is served inline), and two readers each
# blocked sending to the other's full socket would never read again.
_reader = threading.local()


def mark_reader_thread() -> None:
    """Marks this thread as a server connection's reader (see `_send_frame`)."""
    _reader.on = True


def _send_frame(sock: socket.socket, lock, header: bytes, body=b"") -> None:
    """Sends one frame, whole, under `lock` (the socket's send lock).

    On a reader thread (`mark_reader_thread`) this never waits for the peer: what the socket does
    not take at once is sent by a `_Drainer` thread, which holds `lock` (a plain lock, released by
    that thread) until the frame is out, so frames stay in order and the reader goes back to reading.
    (It may still wait for `lock` while a drainer or another thread sends on this socket; the server
    then hands its connection to a new reader after `local_server.HAND_OFF_S`, so the connection is
    read meanwhile and the send that holds the lock can finish.)
    """
    prefix = _FRAME.pack(len(header), len(body))
    if getattr(_reader, "on", False):
        _send_frame_nowait(sock, lock, prefix, header, body)
        return
    with lock:
        if len(body) <= _SMALL_BODY:
            sock.sendall(b"".join((prefix, header, body)))
        else:
            sock.sendall(prefix + header)
            sock.sendall(body)


def _send_frame_nowait(sock, lock, prefix, header, body) -> None:
    parts = [b"".join((prefix, header, body))] if len(body) <= _SMALL_BODY else [prefix + header, body]
    lock.acquire()
    try:
        for i, part in enumerate(parts):
            view = memoryview(part)
            while view:
                try:
                    n = sock.send(view, socket.MSG_DONTWAIT)
                except (BlockingIOError, InterruptedError):
                    n = 0
                if not n:   # the socket is full: the rest goes from a drainer thread
                    _Drainer.start(sock, lock, [view, *parts[i + 1:]])
                    return
                view = view[n:]
    except BaseException:
        lock.release()
        raise
    lock.release()


class _Drainer:
    """Sends the rest of a frame a reader thread could not send without waiting, then releases the
    socket's send lock. A send that fails shuts the socket down, so both ends see the channel
    broken (as a failed send on the calling thread would)."""

    @staticmethod
    def start(sock, lock, parts) -> None:
        threading.Thread(target=_Drainer._run, args=(sock, lock, parts), daemon=True,
                         name="kernflow-local-drain").start()

    @staticmethod
    def _run(sock, lock, parts) -> None:
        try:
            for part in parts:
                sock.sendall(part)
        except OSError as e:
            _log.warning("same-host channel: a frame could not be sent (%s): closing the connection", e)
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
        finally:
            lock.release()


def _read_frame(rfile):
    """(header, body) of the next frame; raises EOFError at the end of the stream."""
    prefix = rfile.read(_FRAME.size)
    if len(prefix) < _FRAME.size:
        raise EOFError
    hlen, blen = _FRAME.unpack(prefix)
    if hlen > MAX_HEADER_BYTES:
        raise _ProtocolError(f"a frame header of {hlen} bytes (at most {MAX_HEADER_BYTES})")
    if blen <= _SMALL_BODY:   # (one read; a large body is read on its own, not copied again)
        data = rfile.read(hlen + blen)
        if len(data) < hlen + blen:
            raise EOFError
        raw, body = data[:hlen], data[hlen:] if blen else b""
    else:
        raw = rfile.read(hlen)
        body = rfile.read(blen)
        if len(raw) < hlen or len(body) < blen:
            raise EOFError
    try:
        return _F.FromString(raw), body
    except DecodeError as e:
        raise _ProtocolError(f"malformed frame header: {e}") from None


def _hello(sock: socket.socket, token: bytes) -> None:
    _send_frame(sock, _thread.allocate_lock(), _F(kind=_HELLO).SerializeToString(), token)


# ---------------------------------------------------------------------------- caller
class LocalChannel:
    """A connection to one worker's `LocalChannelServer`, shared by every call to it.

    Args:
        offer: the worker's `LocalChannelOffer`.
        address: the worker's gRPC address (the key it is cached under).

    Raises:
        OSError, EOFError, _ProtocolError: connecting or the HELLO exchange failed.
    """

    def __init__(self, offer: worker_pb2.LocalChannelOffer, address: str):
        self.path = offer.path
        self.address = address
        self.alive = True
        self._calls: dict[int, object] = {}
        self._ids = itertools.count(1)
        self._send_lock = _thread.allocate_lock()
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            sock.settimeout(HELLO_TIMEOUT_S)
            sock.connect(self.path)
            _hello(sock, offer.token)
            rfile = sock.makefile("rb")
            header, body = _read_frame(rfile)
            if header.kind != _HELLO or bytes(body) != offer.token:
                raise _ProtocolError("the server did not answer HELLO with the offer's token")
            sock.settimeout(None)
        except BaseException:
            sock.close()
            raise
        self._sock, self._rfile = sock, rfile
        threading.Thread(target=self._read, name="kernflow-local-reader", daemon=True).start()

    def __repr__(self):
        return f"<LocalChannel {self.path} for {self.address}{'' if self.alive else ' (closed)'}>"

    def _read(self) -> None:
        calls = self._calls
        try:
            while True:
                header, body = _read_frame(self._rfile)
                call = calls.pop(header.call_id, None) if header.kind == _END else calls.get(header.call_id)
                if call is not None:
                    call.deliver(header, body)
        except (OSError, EOFError, ValueError, _ProtocolError) as e:
            reason = "the worker closed the connection" if isinstance(e, EOFError) else str(e)
        self._broken(reason)

    def _broken(self, reason: str) -> None:
        self.alive = False
        _dropped(self)
        end = _F(kind=_END, code=grpc.StatusCode.UNAVAILABLE.value[0],
                 details=f"the same-host channel {self.path} broke ({reason})")
        for call_id in list(self._calls):
            call = self._calls.pop(call_id, None)
            if call is not None:
                call.deliver(end, b"")
        try:
            self._sock.close()
        except OSError:
            pass

    def close(self) -> None:
        """Closes the connection; calls in flight fail with UnavailableError."""
        try:
            self._sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass

    def _start(self, call, method: str, request: bytes, timeout, metadata) -> int:
        if not self.alive:
            raise errors.UnavailableError(None, None, f"the same-host channel {self.path} is closed")
        call_id = next(self._ids)
        header = _F(call_id=call_id, kind=_REQUEST, method=method,
                    timeout_s=float(timeout) if timeout else 0.0)
        if metadata:
            header.metadata.update(metadata)
        self._calls[call_id] = call
        try:
            _send_frame(self._sock, self._send_lock, header.SerializeToString(), request)
        except OSError as e:
            self._calls.pop(call_id, None)
            raise errors.UnavailableError(None, None, f"the same-host channel {self.path} broke: {e}") from None
        return call_id

    def cancel(self, call_id: int) -> None:
        if self._calls.pop(call_id, None) is not None:
            try:
                _send_frame(self._sock, self._send_lock, _F(call_id=call_id, kind=_CANCEL).SerializeToString())
            except OSError:
                pass

    def unary(self, method: str, request: bytes, timeout, what, metadata=None) -> bytes:
        """Calls unary `method`; returns its serialized response.

        Args:
            timeout: seconds, or None for no deadline.
            what: names the call in errors (a string, or a function returning one).

        Raises:
            The TF error class of the call's status (as `rpc_errors.error_from_rpc` names it).
        """
        call = _Unary()
        metered = _metrics_on()
        if metered:
            start, attrs = time.perf_counter(), _client_attrs(method)
            _count("client", "sent", len(request), attrs)
        call_id = self._start(call, method, request, timeout, metadata)
        if not call.done.acquire(timeout=max(0.0, timeout) if timeout is not None else -1):
            self.cancel(call_id)
            if metered:
                _timed("client", attrs, start, grpc.StatusCode.DEADLINE_EXCEEDED.value[0])
            raise error_for_status(grpc.StatusCode.DEADLINE_EXCEEDED, "Deadline Exceeded",
                                   what() if callable(what) else what)
        header, body = call.result
        if metered:
            _count("client", "received", len(body), attrs)
            _timed("client", attrs, start, header.code)
        if header.code != _OK:
            raise error_for_status(status_for_code(header.code), header.details,
                                   what() if callable(what) else what, header.handler_error)
        return body

    def unary_async(self, method: str, request: bytes, timeout, what, parse, on_done, metadata=None):
        """Starts unary `method` without a thread waiting for it: ``on_done(parse(response), None)``
        or ``on_done(None, error)`` is called once, on the channel's reader thread (or, if the
        channel breaks, on the thread that notices), so `on_done` must not block.

        `timeout` travels to the server (which ends the call at its deadline); nothing on this side
        times the call: the caller watches the deadline and the peer's health (the master's
        `TaskStep`). Returns a function that cancels the call (`on_done` is then never called).

        Raises:
            UnavailableError: the channel is closed or broke while sending.
        """
        attrs = _client_attrs(method) if _metrics_on() else None
        if attrs is not None:
            _count("client", "sent", len(request), attrs)
        call = _AsyncUnary(parse, on_done, what, attrs)
        call_id = self._start(call, method, request, timeout, metadata)
        return lambda: self.cancel(call_id)

    def oneway(self, method: str, request: bytes, metadata=None) -> None:
        """Sends a request that gets no answer (PushTensors): it is sent when this returns; what the
        server does with it is not reported (its errors are logged there).

        Raises:
            UnavailableError: the channel is closed or broke while sending.
        """
        if not self.alive:
            raise errors.UnavailableError(None, None, f"the same-host channel {self.path} is closed")
        header = _F(kind=_REQUEST, method=method, oneway=True)
        if metadata:
            header.metadata.update(metadata)
        if _metrics_on():
            _count("client", "sent", len(request), _client_attrs(method))
        try:
            _send_frame(self._sock, self._send_lock, header.SerializeToString(), request)
        except OSError as e:
            raise errors.UnavailableError(None, None, f"the same-host channel {self.path} broke: {e}") from None

    def stream(self, method: str, request: bytes, timeout, what: str, metadata=None) -> "LocalStreamCall":
        """Starts response-streaming `method`; returns the iterator of its serialized responses."""
        call = LocalStreamCall(self, timeout, what, _client_attrs(method) if _metrics_on() else None)
        if call.attrs is not None:
            _count("client", "sent", len(request), call.attrs)
        call.call_id = self._start(call, method, request, timeout, metadata)
        return call


_attrs_cache: dict[str, dict] = {}


def _client_attrs(method: str) -> dict:
    attrs = _attrs_cache.get(method)
    if attrs is None:
        attrs = _attrs_cache[method] = method_attributes(f"/{_WORKER_SERVICE}/{method}")
    return attrs


class _Unary:
    __slots__ = ("done", "result")

    def __init__(self):
        self.done = _thread.allocate_lock()
        self.done.acquire()
        self.result = None

    def deliver(self, header, body) -> None:
        if header.kind == _END and self.result is None:
            self.result = (header, body)
            self.done.release()


class _AsyncUnary:
    """A unary call whose answer is handed to a callback (`LocalChannel.unary_async`)."""

    __slots__ = ("parse", "on_done", "what", "attrs", "start")

    def __init__(self, parse, on_done, what, attrs):
        self.parse, self.on_done, self.what, self.attrs = parse, on_done, what, attrs
        self.start = time.perf_counter() if attrs is not None else None

    def deliver(self, header, body) -> None:
        if header.kind != _END:
            return
        if self.attrs is not None:
            _count("client", "received", len(body), self.attrs)
            _timed("client", self.attrs, self.start, header.code)
        if header.code != _OK:
            what = self.what() if callable(self.what) else self.what
            self.on_done(None, error_for_status(status_for_code(header.code), header.details, what,
                                                header.handler_error))
            return
        try:
            response = self.parse(body)
        except Exception as e:  # noqa: BLE001 - a bad answer fails the call, not the reader thread
            self.on_done(None, e)
            return
        self.on_done(response, None)


class LocalStreamCall:
    """Iterates the serialized responses of a streaming call; `cancel` (or `close`) ends it from any
    thread; a call dropped before its end is cancelled."""

    def __init__(self, channel: LocalChannel, timeout, what: str, attrs=None):
        self.attrs = attrs   # counted in the metrics when not None
        self._channel = channel
        self._deadline = time.monotonic() + timeout if timeout is not None else None
        self._what = what
        self._q: queue.SimpleQueue = queue.SimpleQueue()
        self._ended = False
        self.call_id = 0

    def deliver(self, header, body) -> None:
        self._q.put((header, body))

    def __iter__(self):
        return self

    def __next__(self) -> bytes:
        if self._ended:
            raise StopIteration
        try:
            if self._deadline is None:
                header, body = self._q.get()
            else:
                header, body = self._q.get(timeout=max(0.0, self._deadline - time.monotonic()))
        except queue.Empty:
            self.cancel()
            raise error_for_status(grpc.StatusCode.DEADLINE_EXCEEDED, "Deadline Exceeded", self._what) from None
        if header.kind == _MESSAGE:
            if self.attrs is not None:
                _count("client", "received", len(body), self.attrs)
            return body
        self._ended = True
        self._channel._calls.pop(self.call_id, None)
        if header.code != _OK:
            raise error_for_status(status_for_code(header.code), header.details, self._what, header.handler_error)
        raise StopIteration

    def cancel(self) -> None:
        """Cancels the call (nothing happens if it already ended)."""
        if not self._ended:
            self._ended = True
            self._channel.cancel(self.call_id)
            self._q.put((_F(kind=_END, code=grpc.StatusCode.CANCELLED.value[0], details="Cancelled"), b""))

    close = cancel

    def __del__(self):
        if not getattr(self, "_ended", True):
            self.cancel()


# ---------------------------------------------------------------------------- this process's channels
_lock = threading.Lock()
_by_address: dict[str, object] = {}   # address -> LocalChannel | retry time (monotonic) | _NEGOTIATING
_NEGOTIATING = object()


def channel_for(address: str, get_status=None) -> LocalChannel | None:
    """The open channel to the worker at `address`; None: call over gRPC.

    Args:
        get_status: ``get_status(request, timeout)`` over gRPC: when given and nothing is known of
            the worker yet, the channel is negotiated with it now (the hot methods pass it; the
            others use a channel only once one is open, and `note_status` opens one from any
            GetStatus answer, so no extra call is made for them).

    Callers that arrive while another thread negotiates call over gRPC meanwhile.
    """
    if not enabled():
        return None
    entry = _by_address.get(address)
    if entry.__class__ is LocalChannel:
        if entry.alive:
            return entry
    elif entry is _NEGOTIATING or (entry is not None and time.monotonic() < entry):
        return None
    if get_status is None:
        return None
    return _negotiate(address, lambda: get_status(worker_pb2.GetStatusRequest(), NEGOTIATION_TIMEOUT_S))


def route(address: str, request, get_status=None):
    """(the open channel to `address`, `request` serialized) when the call goes over the same-host
    channel, else None: no channel (see `channel_for`, whose `get_status` this passes on), or a
    request over one frame's limit (gRPC then)."""
    local = channel_for(address, get_status)
    if local is None:
        return None
    body = request.SerializeToString()
    return (local, body) if len(body) <= MAX_BODY_BYTES else None


def note_status(address: str, status: worker_pb2.GetStatusResponse) -> None:
    """Opens the channel to the worker at `address` from a GetStatus answer it gave over gRPC, unless
    one is open or being negotiated (or the answer offers none: then gRPC for `FAILED_TTL_S`)."""
    if not enabled():
        return
    entry = _by_address.get(address)
    if (entry.__class__ is LocalChannel and entry.alive) or entry is _NEGOTIATING or \
            (entry.__class__ is float and time.monotonic() < entry and not status.local_channel.path):
        return
    _negotiate(address, lambda: status)


def _negotiate(address: str, status_fn) -> LocalChannel | None:
    with _lock:
        entry = _by_address.get(address)
        if entry.__class__ is LocalChannel and entry.alive:
            return entry
        if entry is _NEGOTIATING:
            return None
        _by_address[address] = _NEGOTIATING
    chan, result = None, time.monotonic() + UNREACHED_TTL_S
    try:
        status = status_fn()
        result = time.monotonic() + FAILED_TTL_S
        offer = status.local_channel
        if offer.path and status.host_id and status.host_id == _transport.host_id():
            chan = result = LocalChannel(offer, address)
    except Exception as e:  # noqa: BLE001 - any failure means gRPC for a while
        _log.debug("no same-host channel to %s: %s", address, e)
    finally:
        with _lock:
            if _by_address.get(address) is _NEGOTIATING:
                _by_address[address] = result
    return chan


def _dropped(chan: LocalChannel) -> None:
    """A broken channel: the next call to its address negotiates again."""
    with _lock:
        if _by_address.get(chan.address) is chan:
            del _by_address[chan.address]


def forget(address: str | None = None) -> None:
    """Closes this process's channel to `address` (all of them when None); the next call negotiates."""
    with _lock:
        if address is None:
            entries = list(_by_address.values())
            _by_address.clear()
        else:
            entries = [_by_address.pop(address, None)]
    for e in entries:
        if e.__class__ is LocalChannel:
            e.close()
