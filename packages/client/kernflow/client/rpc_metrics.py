"""gRPC metrics on both ends of kernflow's connections (instruments of `kernflow.core.telemetry`).

Bytes are counted where messages are (de)serialized: `MeteredChannel` wraps the serializers a stub
hands its channel, `metered_handler` those of a server's method handlers. So every message of every
RPC is counted, unary or streamed, protobuf or raw bytes, at the cost of one extra call per message,
and nothing more while metrics are off. Durations are recorded for unary calls (a stream's length is
its caller's business, not a latency):

* ``kernflow.rpc.client.sent`` / ``.received`` (By) and ``kernflow.rpc.client.duration`` (s),
* ``kernflow.rpc.server.sent`` / ``.received`` (By) and ``kernflow.rpc.server.duration`` (s),

with attributes ``rpc.service`` (e.g. "kernflow.client.protobuf.WorkerService"), ``rpc.method``
("RunGraph") and, on durations, ``rpc.grpc.status_code`` (0 is OK).
"""

from __future__ import annotations

import time

import grpc

from kernflow.core import telemetry

__all__ = ["MeteredChannel", "metered_handler", "method_attributes"]

_active = telemetry.metrics_active
_instruments = telemetry.instruments
_perf_counter = time.perf_counter
_OK = grpc.StatusCode.OK.value[0]
_UNKNOWN = grpc.StatusCode.UNKNOWN.value[0]


def method_attributes(path: str) -> dict:
    """``{"rpc.service": ..., "rpc.method": ...}`` of a gRPC method path ("/pkg.Service/Method")."""
    service, _, method = path.lstrip("/").rpartition("/")
    return {"rpc.service": service, "rpc.method": method}


def _counted_serializer(serialize, instrument: str, attrs: dict):
    """``serialize`` (None: the message is bytes already) that adds the bytes it returns to the
    counter `instrument` (an `Instruments` attribute name)."""
    def serializer(message):
        data = message if serialize is None else serialize(message)
        if _active():
            getattr(_instruments(), instrument).add(len(data), attrs)
        return data
    return serializer


def _counted_deserializer(deserialize, instrument: str, attrs: dict):
    """``deserialize`` (None: keep the bytes) that adds the bytes it is given to `instrument`."""
    def deserializer(data):
        if _active():
            getattr(_instruments(), instrument).add(len(data), attrs)
        return data if deserialize is None else deserialize(data)
    return deserializer


def _status_of(exc: BaseException) -> int:
    code = getattr(exc, "code", None)
    try:
        status = code() if callable(code) else None
    except Exception:  # noqa: BLE001 - an RpcError without a status
        status = None
    return status.value[0] if isinstance(status, grpc.StatusCode) else _UNKNOWN


def _record_duration(side: str, attrs: dict, start: float, status: int) -> None:
    getattr(_instruments(), f"rpc_{side}_duration").record(
        _perf_counter() - start, {**attrs, "rpc.grpc.status_code": status})


# ---------------------------------------------------------------------------- client side
class _TimedUnary:
    """A unary-unary multicallable that records the duration of its blocking calls."""

    __slots__ = ("_call", "_attrs")

    def __init__(self, call, attrs: dict):
        self._call = call
        self._attrs = attrs

    def __call__(self, request, *args, **kwargs):
        if not _active():
            return self._call(request, *args, **kwargs)
        start = _perf_counter()
        try:
            response = self._call(request, *args, **kwargs)
        except BaseException as e:
            _record_duration("client", self._attrs, start, _status_of(e))
            raise
        _record_duration("client", self._attrs, start, _OK)
        return response

    def __getattr__(self, name):   # future(), with_call()
        return getattr(self._call, name)


class MeteredChannel:
    """A `grpc.Channel` whose stubs count message bytes and time unary calls (see module docstring).

    Everything but the four multicallable factories is the wrapped channel's own.

    Args:
        channel: the `grpc.Channel` to wrap.
    """

    __slots__ = ("_channel",)

    def __init__(self, channel: grpc.Channel):
        self._channel = channel

    def __getattr__(self, name):
        return getattr(self._channel, name)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return self._channel.__exit__(*exc)

    def _codecs(self, method, request_serializer, response_deserializer):
        attrs = method_attributes(method)
        serialize = _counted_serializer(request_serializer, "rpc_client_sent", attrs)
        deserialize = _counted_deserializer(response_deserializer, "rpc_client_received", attrs)
        return attrs, {"request_serializer": serialize, "response_deserializer": deserialize}

    def unary_unary(self, method, request_serializer=None, response_deserializer=None, **kwargs):
        attrs, codecs = self._codecs(method, request_serializer, response_deserializer)
        return _TimedUnary(self._channel.unary_unary(method, **codecs, **kwargs), attrs)

    def unary_stream(self, method, request_serializer=None, response_deserializer=None, **kwargs):
        _, codecs = self._codecs(method, request_serializer, response_deserializer)
        return self._channel.unary_stream(method, **codecs, **kwargs)

    def stream_unary(self, method, request_serializer=None, response_deserializer=None, **kwargs):
        _, codecs = self._codecs(method, request_serializer, response_deserializer)
        return self._channel.stream_unary(method, **codecs, **kwargs)

    def stream_stream(self, method, request_serializer=None, response_deserializer=None, **kwargs):
        _, codecs = self._codecs(method, request_serializer, response_deserializer)
        return self._channel.stream_stream(method, **codecs, **kwargs)


# ---------------------------------------------------------------------------- server side
def _timed_behavior(behavior, attrs: dict):
    """A unary handler ``behavior(request, context)`` that records its duration and status."""
    def timed(request, context):
        if not _active():
            return behavior(request, context)
        start = _perf_counter()
        try:
            response = behavior(request, context)
        except BaseException as e:
            _record_duration("server", attrs, start, _handler_status(context, e))
            raise
        _record_duration("server", attrs, start, _handler_status(context, None))
        return response
    return timed


def _handler_status(context, exc) -> int:
    """The status a handler ended its RPC with (context.abort sets it before raising)."""
    try:
        code = context.code()
    except Exception:  # noqa: BLE001 - a context without code() (test doubles)
        code = None
    if isinstance(code, grpc.StatusCode):
        return code.value[0]
    return _OK if exc is None else _UNKNOWN


def metered_handler(path: str, behavior, request_deserializer, response_serializer, unary: bool):
    """The pieces of a server method handler, counting bytes (and timing unary calls).

    Args:
        path: the method's path, "/package.Service/Method".
        behavior: the servicer's method.
        request_deserializer: parses a request (None: requests stay bytes).
        response_serializer: serializes a response (None: the handler returns bytes).
        unary: True for a unary-unary method (its duration is recorded).

    Returns:
        ``(behavior, request_deserializer, response_serializer)`` to build the handler with.
    """
    attrs = method_attributes(path)
    if unary:
        behavior = _timed_behavior(behavior, attrs)
    return (behavior, _counted_deserializer(request_deserializer, "rpc_server_received", attrs),
            _counted_serializer(response_serializer, "rpc_server_sent", attrs))
