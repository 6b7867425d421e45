"""gRPC channels shared by the whole process, and the options both ends of a connection use.

One channel per address: gRPC multiplexes every call to a peer over it, so masters talking to many
workers (and workers to each other for RecvTensor) do not open a connection per call. Messages are
bounded by ``$KERNFLOW_MAX_MESSAGE_BYTES`` (`limits`: 2 GiB - 1 by default, gRPC's own bound;
requests that carry feeds are checked before they are sent), retries are off (the runtime decides
what to retry), reconnect backoff is short (a restarted worker is reachable again within seconds),
and keepalive pings detect a dead peer during a long call. Servers should be built with
`SERVER_OPTIONS`, which accepts those pings.

Also here: W3C trace-context propagation in call metadata (`outgoing_metadata` on the client,
`incoming_context` / `attach_incoming_context` on the server), a no-op until an application installs
the OpenTelemetry SDK. Every kernflow client sends it (master and worker clients, RecvTensor pulls
between workers), so one `Session.run` is one trace across the processes of a cluster.

Transport security (`kernflow.client.security`): with TLS configured, `bind` opens a TLS port and
`get_channel` a TLS channel; with a cluster token, `outgoing_metadata` carries it and the handlers
`add_servicer` builds refuse calls without it (UNAUTHENTICATED) before the servicer runs.
"""

from __future__ import annotations

import contextlib
import errno
import socket
import threading

import grpc

from kernflow.client import limits
from kernflow.client import rpc_metrics
from kernflow.client import security
from kernflow.core.framework import errors

__all__ = ["CHANNEL_OPTIONS", "SERVER_OPTIONS", "CallBudget", "add_servicer", "token_checked", "bind",
           "get_channel", "get_stub", "evict", "close_all", "tracing_active", "outgoing_metadata",
           "trace_metadata", "auth_metadata", "incoming_context", "attach_incoming_context"]

# Messages are bounded by $KERNFLOW_MAX_MESSAGE_BYTES (default and most: 2 GiB - 1), read when
# this module is imported (`limits`).
CHANNEL_OPTIONS = (
    *limits.channel_options(),
    ("grpc.enable_retries", 0),
    # Ping an idle connection that has calls in flight every 60 s; 20 s without an answer means the
    # peer is gone and every call on the channel fails with UNAVAILABLE.
    ("grpc.keepalive_time_ms", 60_000),
    ("grpc.keepalive_timeout_ms", 20_000),
    ("grpc.keepalive_permit_without_calls", 0),
    ("grpc.http2.max_pings_without_data", 0),
    # Reconnect quickly after a peer restarts (the default backoff grows to two minutes).
    ("grpc.initial_reconnect_backoff_ms", 500),
    ("grpc.min_reconnect_backoff_ms", 500),
    ("grpc.max_reconnect_backoff_ms", 5_000),
)

SERVER_OPTIONS = (
    *limits.channel_options(),
    # Accept the clients' keepalive pings (the default policy answers pings more frequent than
    # every 5 minutes with GOAWAY "too_many_pings", which would cut long RunStep/RunGraph calls).
    ("grpc.http2.min_recv_ping_interval_without_data_ms", 10_000),
    ("grpc.http2.max_ping_strikes", 0),
    ("grpc.keepalive_permit_without_calls", 1),
    ("grpc.so_reuseport", 0),
)

_lock = threading.Lock()
_channels: dict[str, grpc.Channel] = {}
_stubs: dict[tuple[str, type], object] = {}


_HANDLER_FACTORIES = {
    (False, False): grpc.unary_unary_rpc_method_handler,
    (False, True): grpc.unary_stream_rpc_method_handler,
    (True, False): grpc.stream_unary_rpc_method_handler,
    (True, True): grpc.stream_stream_rpc_method_handler,
}


class CallBudget:
    """How many calls that may block for long (steps, tensor waits) a gRPC server runs at once.

    A synchronous gRPC server runs each call on one of its pool's threads for the call's whole
    life, so steps blocked in a dequeue could take every thread and leave none for the calls that
    must always be answered (GetStatus, ListDevices, CloseSession, AbortStep...). The blocking
    methods take a slot of this budget, which keeps `reserve` threads for the others; a call
    finding no slot fails at once with ResourceExhaustedError rather than queueing behind them.

    Args:
        threads: the server's pool size.
        reserve: threads kept for the other calls (at most half the pool).
    """

    RESERVE = 16

    def __init__(self, threads: int, reserve: int = RESERVE):
        reserve = min(int(reserve), int(threads) // 2)
        self.limit = max(1, int(threads) - reserve)
        self._sem = threading.BoundedSemaphore(self.limit)

    @contextlib.contextmanager
    def slot(self, method: str):
        """Holds one slot while the ``with`` runs.

        Raises:
            ResourceExhaustedError: all `limit` slots are taken.
        """
        if not self._sem.acquire(blocking=False):
            raise errors.ResourceExhaustedError(
                None, None, f"{method}: this server already runs {self.limit} calls that may block "
                f"(steps, tensor waits); retry later, or start the server with more threads")
        try:
            yield
        finally:
            self._sem.release()

    def held(self, method: str, make_responses):
        """A streaming handler's responses, ``make_responses()``, produced while holding a slot."""
        with self.slot(method):
            yield from make_responses()


def add_servicer(server: grpc.Server, service, servicer, raw_responses=(),
                 split_requests: bool = False) -> None:
    """Registers `servicer` for every method of `service` on `server`, like the generated
    ``add_*Servicer_to_server``, except that the methods named in `raw_responses` have no response
    serializer: their handlers return (or yield) serialized messages, built without a protobuf
    message (large tensor chunks whose payload would otherwise be copied twice more). Every
    message's bytes, and every unary call's duration, are metered (`rpc_metrics.metered_handler`).

    With a cluster token configured (`security.current()` now), every method first checks the
    call's ``authorization`` metadata and answers UNAUTHENTICATED without it (`token_checked`).

    Args:
        server: a `grpc.Server`.
        service: the protobuf `ServiceDescriptor` (``*_pb2.DESCRIPTOR.services_by_name[...]``).
        servicer: an object with a method per RPC.
        raw_responses: names of the methods whose responses are bytes already.
        split_requests: parse the requests that carry tensors (`tensor_requests.SPLIT_REQUESTS`)
            with `tensor_requests.split`, which leaves their tensors' bytes unparsed: for servicers
            whose service reads them through `tensor_requests` (`Master`, `Worker`).
    """
    from google.protobuf import message_factory
    from kernflow.client.tensor_requests import request_parser
    expected = security.current().expected_header
    handlers = {}
    for m in service.methods:
        make = _HANDLER_FACTORIES[(m.client_streaming, m.server_streaming)]
        response = message_factory.GetMessageClass(m.output_type)
        behavior = getattr(servicer, m.name)
        if expected is not None:
            behavior = token_checked(behavior, expected)
        behavior, deserialize, serialize = rpc_metrics.metered_handler(
            f"/{service.full_name}/{m.name}", behavior,
            (split_requests and request_parser(service.full_name, m.name))
            or message_factory.GetMessageClass(m.input_type).FromString,
            None if m.name in raw_responses else response.SerializeToString,
            unary=not (m.client_streaming or m.server_streaming))
        handlers[m.name] = make(behavior, request_deserializer=deserialize, response_serializer=serialize)
    server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler(service.full_name, handlers),))
    server.add_registered_method_handlers(service.full_name, handlers)


def token_checked(behavior, expected: bytes):
    """`behavior(request, context)` run only for calls whose ``authorization`` metadata is
    `expected` (`security.token_matches`); other calls end with UNAUTHENTICATED.

    The check runs before the servicer sees the request (for a streaming method, before its first
    response or its first request is read).
    """
    matches = security.token_matches

    def checked(request, context):
        if matches(context.invocation_metadata(), expected):
            return behavior(request, context)
        context.abort(grpc.StatusCode.UNAUTHENTICATED, security.REJECTED)
    return checked


def bind(server: grpc.Server, host: str, port: int) -> int:
    """Binds `server` to ``host:port`` and returns the port bound (`port` 0: a free one).

    The port is a TLS port when this process has TLS configured (`security.current()`), else an
    insecure one.

    Raises:
        UnavailableError: naming the address; "already in use" when another socket holds the port.
        FailedPreconditionError: TLS is configured without a certificate to serve with.
    """
    address = _join(host, port)
    creds = security.current().server_credentials()
    bound = 0
    for each in _each_address(host, int(port)):
        try:
            got = server.add_insecure_port(each) if creds is None else server.add_secure_port(each, creds)
        except RuntimeError as e:  # grpc's own message does not say why ("Failed to bind to address")
            got, cause = 0, str(e)
        else:
            cause = ""
        if not got:
            if port and _in_use(each.rsplit(":", 1)[0], int(port)):
                cause = f"port {int(port)} is already in use"
            raise errors.UnavailableError(None, None, f"cannot bind {address}"
                                          + (f" ({each})" if each != address else "")
                                          + (f": {cause}" if cause else ""))
        bound = bound or got
    return bound


def _join(host: str, port: int) -> str:
    return f"[{host}]:{int(port)}" if ":" in host and not host.startswith("[") else f"{host}:{int(port)}"


def _each_address(host: str, port: int) -> list:
    """What to bind for ``host:port``: ``host:port`` itself, or, for a fixed port on a name that
    resolves to several addresses (``localhost``: 127.0.0.1 and ::1), each of those it can bind.

    gRPC binds a name to every address it resolves to and succeeds if one bind does: a worker on
    "localhost:P" whose 127.0.0.1:P another process holds would serve on [::1]:P only, and callers
    of "localhost:P" reaching 127.0.0.1 would talk to that other process as if it were the task.
    Bound one by one, a taken address fails the start instead ("already in use"); an address this
    machine does not have (no IPv6) is left out, as gRPC leaves it.
    """
    bare = host.strip("[]")
    if not port or bare in ("", "0.0.0.0", "::"):
        return [_join(host, port)]
    # (gRPC resolves "localhost" to both loopback addresses itself, whatever /etc/hosts says)
    ips = ["::1", "127.0.0.1"] if bare.lower() == "localhost" else []
    try:
        ips += [info[4][0] for info in socket.getaddrinfo(bare, port, type=socket.SOCK_STREAM)]
    except OSError:
        if not ips:
            return [_join(host, port)]
    ips = list(dict.fromkeys(ips))
    if len(ips) <= 1:
        return [_join(host, port)]
    usable = [ip for ip in ips if _bindable(ip)]
    return [_join(ip, port) for ip in usable] or [_join(host, port)]


def _bindable(ip: str) -> bool:
    """Whether this machine has address `ip` (a socket can be bound to it on a free port)."""
    try:
        with socket.socket(socket.AF_INET6 if ":" in ip else socket.AF_INET, socket.SOCK_STREAM) as probe:
            probe.bind((ip, 0))
        return True
    except OSError:
        return False


def _in_use(host: str, port: int) -> bool:
    """Whether binding a plain socket to ``host:port`` fails with EADDRINUSE."""
    try:
        family, kind, proto, _, sockaddr = socket.getaddrinfo(host.strip("[]") or None, port,
                                                              type=socket.SOCK_STREAM)[0]
    except OSError:
        return False
    with socket.socket(family, kind, proto) as probe:
        try:
            probe.bind(sockaddr)
        except OSError as e:
            return e.errno == errno.EADDRINUSE
    return False


def get_channel(address: str) -> grpc.Channel:
    """Returns the process-wide channel to `address` ("host:port"), creating it once.

    A TLS channel when this process has TLS configured (`security.current()`), else an insecure
    one. Its stubs count message bytes and time unary calls (`rpc_metrics.MeteredChannel`).
    """
    ch = _channels.get(address)
    if ch is not None:
        return ch
    with _lock:
        return _channel_locked(address)


def _channel_locked(address: str) -> grpc.Channel:
    ch = _channels.get(address)
    if ch is None:
        sec = security.current()
        creds = sec.channel_credentials()
        if creds is None:
            raw = grpc.insecure_channel(address, options=list(CHANNEL_OPTIONS))
        else:
            raw = grpc.secure_channel(address, creds, options=list(CHANNEL_OPTIONS + sec.channel_options()))
        ch = _channels[address] = rpc_metrics.MeteredChannel(raw)
    return ch


def get_stub(address: str, stub_class):
    """Returns the cached `stub_class` (a generated ``*Stub``) on the channel to `address`.

    Clients look their stub up on every call (a dictionary lookup), so that after `evict` or
    `close_all` they transparently use a new channel instead of a closed one.
    """
    key = (address, stub_class)
    stub = _stubs.get(key)
    if stub is not None:
        return stub
    with _lock:
        stub = _stubs.get(key)
        if stub is None:
            stub = _stubs[key] = stub_class(_channel_locked(address))
    return stub


def evict(address: str) -> None:
    """Closes and forgets the channel to `address` (the next `get_channel` opens a new one)."""
    with _lock:
        ch = _channels.pop(address, None)
        for key in [k for k in _stubs if k[0] == address]:
            del _stubs[key]
    if ch is not None:
        ch.close()
    from kernflow.client import graph_stream
    graph_stream.close(address)


def close_all() -> None:
    """Closes every cached channel (calls in flight on them fail with CANCELLED)."""
    from kernflow.client import graph_stream
    graph_stream.close_all()
    with _lock:
        chans = list(_channels.values())
        _channels.clear()
        _stubs.clear()
    for ch in chans:
        with contextlib.suppress(Exception):
            ch.close()


# Core's check (a fraction of a microsecond, no os.environ lookup per call).
from kernflow.core.tracing import tracing_active  # noqa: E402


_tracing_active = tracing_active


_auth_metadata = security.auth_metadata


def outgoing_metadata():
    """Returns the metadata of a kernflow call: the cluster token and the trace context, or None.

    The ``authorization`` header when this process has a cluster token (`security`), and the W3C
    ``traceparent`` (and ``tracestate``, baggage) headers of the current span, through the globally
    configured propagator; None when there is no token and nothing is traced.
    """
    auth = _auth_metadata()
    if not tracing_active():
        return auth or None
    return (trace_metadata() or ()) + auth or None


def auth_metadata():
    """Returns the metadata carrying only the cluster token, or None without one (calls that
    outlive the current span: a pooled stream's opening)."""
    return _auth_metadata() or None


def trace_metadata():
    """Returns call metadata carrying only the current trace context, or None when nothing is traced."""
    if not tracing_active():
        return None
    from opentelemetry import propagate
    carrier: dict[str, str] = {}
    propagate.inject(carrier)
    return tuple(carrier.items()) or None


def incoming_context(context: grpc.ServicerContext):
    """Server side: the caller's trace context (an OpenTelemetry `Context`), or None.

    None when tracing is off or the call carries no trace headers. Pass it as ``context=`` when
    starting a span, or attach it; streaming handlers use this rather than `attach_incoming_context`
    because a generator must not keep a context attached across its yields.
    """
    if not tracing_active():
        return None
    from opentelemetry import propagate
    carrier = {k: v for k, v in (context.invocation_metadata() or ()) if isinstance(v, str)}
    if "traceparent" not in carrier:
        return None
    return propagate.extract(carrier)


_NO_CONTEXT = contextlib.nullcontext()


def attach_incoming_context(context: grpc.ServicerContext):
    """Server side: makes the caller's trace context current inside the `with` block.

    Without tracing it is a shared no-op context manager (no generator per call).
    """
    ctx = incoming_context(context)
    return _NO_CONTEXT if ctx is None else _attached(ctx)


@contextlib.contextmanager
def _attached(ctx):
    from opentelemetry import context as otel_context
    token = otel_context.attach(ctx)
    try:
        yield
    finally:
        otel_context.detach(token)
