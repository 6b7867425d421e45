"""The serving end of the same-host channel (`kernflow.client.local_channel` describes the protocol).

`LocalChannelServer` serves a handler table (`servicer_handlers`: a servicer's unary and
response-streaming methods) on a Unix socket of this user's `local_channel.socket_dir`. Each
connection has a reader thread; control methods and pushes (`INLINE_METHODS`) run on it (a reader
busy with one for `HAND_OFF_S` hands the connection to a new reader), the others on a pool
(`POOL_THREADS`), and a streaming method with a push form answers from the threads producing its
responses, its deadline on a `Timers` thread. A servicer method sees a `_Context`, the parts of
`grpc.ServicerContext` kernflow's servicers use.
"""

from __future__ import annotations

import concurrent.futures
import heapq
import itertools
import logging
import os
import secrets
import socket
import struct
import threading
import time
import _thread

import grpc
from google.protobuf.message import DecodeError

from kernflow.client.local_channel import (HELLO_TIMEOUT_S, MAX_BODY_BYTES, _CANCEL, _END, _F, _HELLO, _MESSAGE,
                                           _OK, _REQUEST, _ProtocolError, _count, _hello, _metrics_on,
                                           _read_frame, _send_frame, _timed, mark_reader_thread, socket_dir)
from kernflow.client.protobuf import worker_pb2
from kernflow.client.rpc_errors import HANDLER_KEY, status_for_exception
from kernflow.client.rpc_metrics import method_attributes
from kernflow.core.framework import errors

__all__ = ["LocalChannelServer", "servicer_handlers", "Timers", "INLINE_METHODS", "POOL_THREADS"]

_log = logging.getLogger(__name__)

POOL_THREADS = 512             # the server's threads for the methods it does not run inline
# A reader thread that has run one request this long (a pushed value's segment) hands the
# connection to a new reader thread, so control calls (a health check's GetStatus, AbortStep)
# on it wait at most about this long plus one watch period.
HAND_OFF_S = 0.05
# Methods served on the connection's reader thread: the control methods, which never block, and
# PushTensors, which delivers values into a step's rendezvous, whereupon the step's next
# straight-line segment runs here (one thread hand-off less per push: 11-18% more asynchronous
# training steps/s at one worker and two ps, docs/performance.md). What such a segment sends never
# makes the reader wait (`local_channel._send_frame`), and a long one hands the reading on (`HAND_OFF_S`).
INLINE_METHODS = frozenset({"GetStatus", "AbortStep", "CleanupGraph", "DeregisterGraph", "CleanupAll",
                            "PushTensors"})


class _Aborted(Exception):
    """Raised by `_Context.abort` (as grpc's `ServicerContext.abort` raises)."""


class _Context:
    """What a servicer method sees of its call: the parts of `grpc.ServicerContext` kernflow's
    servicers use (deadline, metadata, callbacks, abort)."""

    __slots__ = ("call_id", "_deadline", "_metadata", "_lock", "_callbacks", "_active", "_code",
                 "_details", "_trailing")

    def __init__(self, call_id: int, timeout_s: float, metadata):
        self.call_id = call_id
        self._deadline = time.monotonic() + timeout_s if timeout_s > 0 else None
        self._metadata = metadata
        self._lock = _thread.allocate_lock()
        self._callbacks: list = []
        self._active = True
        self._code = None
        self._details = ""
        self._trailing = ()

    def time_remaining(self):
        return None if self._deadline is None else max(0.0, self._deadline - time.monotonic())

    def invocation_metadata(self):
        return tuple(self._metadata.items())

    def add_callback(self, fn) -> bool:
        with self._lock:
            if self._active:
                self._callbacks.append(fn)
                return True
        return False

    def is_active(self) -> bool:
        return self._active

    def set_trailing_metadata(self, metadata) -> None:
        self._trailing = tuple(metadata)

    def code(self):
        return self._code

    def abort(self, code, details):
        self._code, self._details = code, details
        raise _Aborted(details)

    def end(self) -> None:
        """The call is over (finished, cancelled, or its connection closed): runs the callbacks."""
        with self._lock:
            if not self._active:
                return
            self._active = False
            callbacks, self._callbacks = self._callbacks, []
        for fn in callbacks:
            try:
                fn()
            except Exception:  # noqa: BLE001 - one failing callback must not stop the others
                _log.exception("a call's cancellation callback failed")


class _Handler:
    __slots__ = ("fn", "parse", "streaming", "raw", "inline", "attrs", "push")

    def __init__(self, fn, parse, streaming: bool, raw: bool, inline: bool, attrs: dict, push=None):
        self.fn, self.parse, self.streaming, self.raw, self.inline = fn, parse, streaming, raw, inline
        self.attrs = attrs   # the metrics' rpc.service and rpc.method
        # ``push(request, context, emit, finish, call_at) -> bool``: a streaming method's form that
        # answers from the threads producing its responses (no thread waits); False: use `fn`.
        self.push = push


def servicer_handlers(servicer, service, messages, raw_responses=(), split_requests: bool = False) -> dict:
    """The handler table of `servicer` for a `LocalChannelServer`: its unary and response-streaming
    methods of the service descriptor `service`, whose messages are in module `messages`.

    Methods named in `raw_responses` yield their responses already serialized. A streaming method
    ``M`` with a ``MPush`` method beside it (``(request, context, emit, finish, call_at) -> bool``,
    see `_Handler.push`) is answered through that when it accepts the call. With `split_requests`,
    requests that carry tensors are parsed by `tensor_requests.split` (see `channels.add_servicer`).
    """
    from kernflow.client.tensor_requests import request_parser
    table = {}
    for m in service.methods:
        if m.client_streaming:
            continue
        push = getattr(servicer, f"{m.name}Push", None) if m.server_streaming and m.name in raw_responses else None
        parse = (split_requests and request_parser(service.full_name, m.name)) or \
            getattr(messages, m.input_type.name).FromString
        table[m.name] = _Handler(getattr(servicer, m.name), parse,
                                 m.server_streaming, m.name in raw_responses, m.name in INLINE_METHODS,
                                 method_attributes(f"/{service.full_name}/{m.name}"), push)
    return table


class LocalChannelServer:
    """Serves a handler table (`servicer_handlers`) on a Unix socket of this user's `socket_dir`.

    Args:
        handlers: method name -> handler.
        name: for thread names and logs.

    Attributes:
        offer: the `LocalChannelOffer` GetStatus advertises.

    Raises:
        OSError: no socket can be made (no usable directory...): serve over gRPC only.
    """

    def __init__(self, handlers: dict, name: str = "worker"):
        self._handlers = handlers
        self._name = name
        self._token = secrets.token_bytes(16)
        directory = socket_dir()
        _remove_stale_sockets(directory)
        self.path = os.path.join(directory, f"{secrets.token_hex(12)}.sock")
        self._listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            self._listener.bind(self.path)
            os.chmod(self.path, 0o600)
            self._listener.listen(128)
        except OSError:
            self._listener.close()
            _unlink(self.path)
            raise
        self.offer = worker_pb2.LocalChannelOffer(path=self.path, token=self._token)
        self._pool = concurrent.futures.ThreadPoolExecutor(POOL_THREADS, thread_name_prefix=f"kernflow-local-{name}")
        self.timers = Timers(f"kernflow-local-timers-{name}")
        self._lock = threading.Lock()
        self._conns: set = set()
        self._closed = False
        threading.Thread(target=self._accept, name=f"kernflow-local-accept-{name}", daemon=True).start()
        threading.Thread(target=self._watch, name=f"kernflow-local-watch-{name}", daemon=True).start()

    def _watch(self) -> None:
        """Hands each connection whose reader has been running a request `HAND_OFF_S` or more to a
        new reader thread (see `_ServerConnection.hand_off`)."""
        while not self._closed:
            time.sleep(HAND_OFF_S)
            now = time.monotonic()
            with self._lock:
                conns = list(self._conns)
            for conn in conns:
                since = conn.busy_since
                if since and now - since >= HAND_OFF_S:
                    conn.hand_off(since)

    def _accept(self) -> None:
        while True:
            try:
                sock, _ = self._listener.accept()
            except OSError:
                return   # closed by `stop`
            uid = _peer_uid(sock)
            if uid is not None and uid != os.geteuid():
                _log.warning("same-host channel %s: refused a connection from uid %d", self.path, uid)
                sock.close()
                continue
            conn = _ServerConnection(self, sock)
            with self._lock:
                if self._closed:
                    sock.close()
                    return
                self._conns.add(conn)
            threading.Thread(target=conn.serve, name=f"kernflow-local-conn-{self._name}", daemon=True).start()

    def _forget(self, conn) -> None:
        with self._lock:
            self._conns.discard(conn)

    def stop(self) -> None:
        """Stops serving: the socket is removed and every connection closed (its calls cancelled)."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            conns = list(self._conns)
        try:
            self._listener.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        self._listener.close()
        _unlink(self.path)
        for c in conns:
            c.close()
        self._pool.shutdown(wait=False)
        self.timers.close()


class _ServerConnection:
    """One accepted connection: a reader thread reads its frames and starts each call (the inline
    methods run on it, the others on the server's pool).

    Invariant: one thread reads at a time, the one whose generation is `_gen`. A reader running a
    request (`busy_since` set) for `HAND_OFF_S` is replaced by the server's watch thread
    (`hand_off`): a new reader of the next generation starts, and the old one, once its request
    is done, sees it is no longer the reader and ends without reading again. Both checks are
    made under `_state_lock`, so the two never read at once.
    """

    def __init__(self, server: LocalChannelServer, sock: socket.socket):
        self._server = server
        self._sock = sock
        self._send_lock = _thread.allocate_lock()
        self._calls: dict[int, _Context] = {}
        self._state_lock = _thread.allocate_lock()
        self._gen = 0
        self.busy_since = 0.0   # monotonic time the reader started its current request; 0: reading
        self._rfile = None

    def hand_off(self, since: float) -> None:
        """Starts a new reader if the reader is still running the request it started at `since`."""
        with self._state_lock:
            if self.busy_since != since:
                return
            self.busy_since = 0.0   # (this busy period is handed off once)
            self._gen += 1
            gen = self._gen
        threading.Thread(target=self._read, args=(gen,), daemon=True,
                         name=f"kernflow-local-conn-{self._server._name}").start()

    def close(self) -> None:
        try:
            self._sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass

    def serve(self) -> None:
        """The first reader: the HELLO exchange, then the frames (`_read`)."""
        mark_reader_thread()
        try:
            self._sock.settimeout(HELLO_TIMEOUT_S)
            self._rfile = self._sock.makefile("rb")
            header, body = _read_frame(self._rfile)
            if header.kind != _HELLO or not secrets.compare_digest(bytes(body), self._server._token):
                raise _ProtocolError("the first frame is not a HELLO with the offer's token")
            self._sock.settimeout(None)
            _hello(self._sock, self._server._token)
        except (OSError, EOFError, ValueError, _ProtocolError) as e:
            if isinstance(e, _ProtocolError):
                _log.warning("same-host channel %s: closing a connection: %s", self._server.path, e)
            self._close()
            return
        self._read(0)

    def _read(self, gen: int) -> None:
        """Reads and starts calls while this thread is the reader (generation `gen`); the reader
        that meets the end of the connection closes it."""
        mark_reader_thread()
        rfile, handlers = self._rfile, self._server._handlers
        replaced = False
        try:
            while not replaced:
                header, body = _read_frame(rfile)
                kind = header.kind
                if kind == _REQUEST:
                    self.busy_since = time.monotonic()
                    try:
                        self._start(handlers, header, body)
                    finally:
                        with self._state_lock:
                            self.busy_since = 0.0
                            # (a newer reader took the connection while this one ran: it stops)
                            replaced = self._gen != gen
                elif kind == _CANCEL:
                    ctx = self._calls.pop(header.call_id, None)
                    if ctx is not None:
                        ctx.end()
                else:
                    raise _ProtocolError(f"unexpected frame kind {kind}")
        except (OSError, EOFError, ValueError):
            pass
        except _ProtocolError as e:
            _log.warning("same-host channel %s: closing a connection: %s", self._server.path, e)
        finally:
            if not replaced:
                self._close()

    def _close(self) -> None:
        calls, self._calls = self._calls, {}
        for ctx in calls.values():   # the caller is gone: its calls are cancelled
            ctx.end()
        if self._rfile is not None:
            self._rfile.close()
        self._sock.close()
        self._server._forget(self)

    def _start(self, handlers, header, body) -> None:
        ctx = _Context(header.call_id, header.timeout_s, header.metadata)
        handler = handlers.get(header.method)
        if handler is None:
            self._end(ctx, grpc.StatusCode.UNIMPLEMENTED.value[0], f"Method not found: {header.method}",
                      force=True)
            return
        if header.oneway:   # no answer: never in `_calls`, so `_end` sends nothing
            self._oneway(handler, ctx, body)
            return
        self._calls[ctx.call_id] = ctx
        if handler.push is not None and self._push(handler, ctx, body):
            return
        if handler.inline:
            self._run(handler, ctx, body)
        else:
            try:
                self._server._pool.submit(self._run, handler, ctx, body)
            except RuntimeError:   # the server is stopping
                self._calls.pop(ctx.call_id, None)
                self._end(ctx, grpc.StatusCode.UNAVAILABLE.value[0], "the server is shutting down", force=True)

    def _oneway(self, handler: _Handler, ctx: _Context, body) -> None:
        """Runs a request that wants no answer (on the pool, or here when inline); its failure is
        logged, since nobody waits for it."""
        if handler.inline:
            self._run(handler, ctx, body, True)
            return
        try:
            self._server._pool.submit(self._run, handler, ctx, body, True)
        except RuntimeError:   # the server is stopping
            pass

    def _oneway_failed(self, handler: _Handler, details: str) -> None:
        _log.warning("same-host channel %s: one-way %s failed: %s", self._server.path,
                     handler.attrs.get("rpc.method", "?"), details)

    def _push(self, handler: _Handler, ctx: _Context, body) -> bool:
        """Starts `handler.push` on this (the reader) thread; False when it declined the call."""
        metered = _metrics_on()
        start = time.perf_counter() if metered else 0.0
        call_id = ctx.call_id

        def emit(data) -> None:
            if not ctx._active:
                raise errors.CancelledError(None, None, "the call ended")
            if metered:
                _count("server", "sent", len(data), handler.attrs)
            self._send(call_id, _MESSAGE, data)

        def finish(err) -> None:
            if err is None:
                self._end(ctx, _OK)
            else:
                status, details = status_for_exception(err)
                self._end(ctx, status.value[0], details, handler_error=True)
            self._calls.pop(call_id, None)
            ctx.end()

        try:
            request = handler.parse(body)
            if metered:
                _count("server", "received", len(body), handler.attrs)
            return bool(handler.push(request, ctx, emit, finish, self._server.timers.call_at))
        except DecodeError as e:
            finish(errors.InvalidArgumentError(None, None, f"malformed request: {e}"))
        except Exception as e:  # noqa: BLE001 - refused before anything started: reported to the caller
            finish(e)
        return True

    def _run(self, handler: _Handler, ctx: _Context, body, oneway: bool = False) -> None:
        metered = _metrics_on()
        if metered:
            start = time.perf_counter()
            _count("server", "received", len(body), handler.attrs)
        code = _OK
        try:
            try:
                request = handler.parse(body)
            except DecodeError as e:
                raise errors.InvalidArgumentError(None, None, f"malformed request: {e}") from None
            if handler.streaming:
                out = handler.fn(request, ctx)
                try:
                    for item in out:
                        if not ctx._active:
                            return
                        data = item if handler.raw else item.SerializeToString()
                        if metered:
                            _count("server", "sent", len(data), handler.attrs)
                        self._send(ctx.call_id, _MESSAGE, data)
                finally:
                    out.close()
                self._end(ctx, _OK)
            else:
                resp = handler.fn(request, ctx)
                if not handler.raw:   # (a raw unary method returns its response's bytes)
                    resp = resp.SerializeToString()
                if len(resp) > MAX_BODY_BYTES:
                    raise errors.ResourceExhaustedError(None, None, f"a response of {len(resp)} bytes "
                                                        f"exceeds the same-host channel's {MAX_BODY_BYTES}")
                if metered:
                    _count("server", "sent", len(resp), handler.attrs)
                self._end(ctx, _OK, body=resp)
        except _Aborted:
            code = ctx._code.value[0]
            if oneway:
                self._oneway_failed(handler, ctx._details)
            self._end(ctx, code, ctx._details, handler_error=any(k == HANDLER_KEY for k, _ in ctx._trailing))
        except OSError:
            code = grpc.StatusCode.UNAVAILABLE.value[0]   # the connection broke: the reader cancels the rest
        except BaseException as e:  # noqa: BLE001 - a handler without `rpc_method`: reported as gRPC would
            status, details = status_for_exception(e)
            code = status.value[0]
            if oneway:
                self._oneway_failed(handler, details)
            self._end(ctx, code, details)
            if not isinstance(e, Exception):
                raise
        finally:
            self._calls.pop(ctx.call_id, None)
            ctx.end()
            if metered and not handler.streaming:
                _timed("server", handler.attrs, start, code)

    def _send(self, call_id: int, kind: int, body=b"", **fields) -> None:
        _send_frame(self._sock, self._send_lock, _F(call_id=call_id, kind=kind, **fields).SerializeToString(),
                    body)

    def _end(self, ctx: _Context, code: int, details: str = "", body=b"", handler_error=False,
             force=False) -> None:
        if not force and ctx.call_id not in self._calls:
            return   # cancelled: nobody waits for its end
        try:
            self._send(ctx.call_id, _END, body, code=code, details=details, handler_error=handler_error)
        except OSError:
            pass


def _peer_uid(sock: socket.socket):
    opt = getattr(socket, "SO_PEERCRED", None)
    if opt is None:
        return None
    try:
        _pid, uid, _gid = struct.unpack("3i", sock.getsockopt(socket.SOL_SOCKET, opt, struct.calcsize("3i")))
    except OSError:
        return None
    return uid


def _unlink(path: str) -> None:
    try:
        os.unlink(path)
    except OSError:
        pass


def _remove_stale_sockets(directory: str, limit: int = 1000) -> None:
    """Removes sockets of `directory` nobody listens on (their servers were killed)."""
    try:
        names = [n for n in os.listdir(directory) if n.endswith(".sock")][:limit]
    except OSError:
        return
    for n in names:
        path = os.path.join(directory, n)
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            s.settimeout(0.2)
            s.connect(path)
        except ConnectionRefusedError:
            _unlink(path)
        except OSError:
            pass
        finally:
            s.close()


class Timers:
    """Runs callbacks at given times on one thread (the deadlines of pushed calls).

    `call_at` returns a handle whose `cancel` withdraws the callback; cancelled entries leave the
    queue when due, or all at once when they outnumber the live ones.
    """

    def __init__(self, name: str):
        self._name = name
        self._cond = threading.Condition(threading.Lock())
        self._heap: list = []
        self._seq = itertools.count()
        self._cancelled = 0
        self._thread = None
        self._closed = False

    def call_at(self, when: float, fn) -> "_Timer":
        t = _Timer(self, fn)
        with self._cond:
            if self._closed:
                return t
            heapq.heappush(self._heap, (when, next(self._seq), t))
            if self._thread is None:
                self._thread = threading.Thread(target=self._loop, name=self._name, daemon=True)
                self._thread.start()
            elif self._heap[0][2] is t:
                self._cond.notify()
        return t

    def _cancelled_one(self) -> None:
        with self._cond:
            self._cancelled += 1
            if self._cancelled > 1000 and self._cancelled * 2 > len(self._heap):
                self._heap = [e for e in self._heap if e[2].fn is not None]
                heapq.heapify(self._heap)
                self._cancelled = 0

    def _loop(self) -> None:
        while True:
            with self._cond:
                while not self._closed and (not self._heap or self._heap[0][0] > time.monotonic()):
                    self._cond.wait(self._heap[0][0] - time.monotonic() if self._heap else None)
                if self._closed:
                    return
                _, _, t = heapq.heappop(self._heap)
                fn, t.fn = t.fn, None
                if fn is None:
                    self._cancelled = max(0, self._cancelled - 1)
            if fn is not None:
                try:
                    fn()
                except Exception:  # noqa: BLE001 - one failing callback must not stop the others
                    _log.exception("a timer callback failed")

    def close(self) -> None:
        with self._cond:
            self._closed = True
            self._heap.clear()
            self._cond.notify()


class _Timer:
    __slots__ = ("_timers", "fn")

    def __init__(self, timers: Timers, fn):
        self._timers, self.fn = timers, fn

    def cancel(self) -> None:
        if self.fn is not None:
            self.fn = None
            self._timers._cancelled_one()
