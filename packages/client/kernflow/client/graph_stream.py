"""RunGraph of small steps over long-lived RunGraphStream calls (one per step in flight).

A unary gRPC call from Python pays for setting the call up and tearing it down (on this machine a
unary echo takes ~420 us, while a message and its answer on an open bidirectional stream take
~280 us). A cached step whose graph the worker runs inline (self-contained, synchronous: it cannot
block) goes over a stream instead: each stream carries one step at a time, streams are pooled per
worker address and reused, and a pool grows with the number of steps in flight.

Server threads: gRPC's synchronous server runs each call on one of its threads for the call's
whole life, so an open stream holds a worker thread even while idle. A master keeps at most
`_MAX_IDLE` idle streams per worker and closes those idle for `IDLE_CLOSE_S`, so what it holds is
bounded by its steps in flight plus a few recent ones.

Deadlines: a stream call has none of its own (it lives as long as it is useful), so each step's
deadline is watched by one process-wide thread, which cancels the stream of a step that overran
(the step fails with DeadlineExceededError and the stream is dropped). A worker that dies fails
its streams at once (the connection closes), or through the channel's keepalive.

Errors of a step come back in the response (`status_code`, `status_error_message`) and keep the
stream open; a refusal (`not_inline`: the graph cannot run inline there, nothing ran) tells the
caller to use unary RunGraph.
"""

from __future__ import annotations

import queue
import threading
import time

import grpc

from kernflow.core.framework import errors
from kernflow.client import channels
from kernflow.client.protobuf import worker_pb2
from kernflow.client.tensor_requests import response_parser, serialize
from kernflow.client.rpc_errors import STATUS_FOR_CODE, error_class_for_status, error_from_rpc

__all__ = ["NotInline", "IDLE_CLOSE_S", "run_graph", "close", "close_all"]

_MAX_IDLE = 8            # idle streams kept per worker address
# An open stream holds one server thread on the worker (gRPC's sync server runs a handler per call),
# so streams idle for this long are closed: an idle master does not pin its workers' threads.
IDLE_CLOSE_S = 10.0
_WATCH_INTERVAL_S = 0.25
_REAP_INTERVAL_S = 1.0


class NotInline(Exception):
    """The worker answered `not_inline`: the step was not run, use unary RunGraph for it."""


class _Stream:
    """One RunGraphStream call; `call` sends a request and waits for its response."""

    __slots__ = ("_requests", "_responses", "broken", "idle_since")

    def __init__(self, stub):
        self._requests: queue.SimpleQueue = queue.SimpleQueue()
        # (the cluster token only: the stream outlives the span current when it opens)
        self._responses = stub.RunGraphStream(iter(self._requests.get, None),
                                              metadata=channels.auth_metadata())
        self.broken = False
        self.idle_since = 0.0

    def alive(self) -> bool:
        return not self.broken and not self._responses.done()

    def call(self, req):
        self._requests.put(req)
        try:
            return next(self._responses)
        except BaseException:
            self.close()
            raise

    def close(self) -> None:
        self.broken = True
        self._requests.put(None)   # ends the request stream: the worker's handler returns

    def cancel(self) -> None:
        self.broken = True
        self._responses.cancel()


# (a large value's bytes stay where they were received: `tensor_requests.split`)
_RESPONSE = response_parser(worker_pb2.RunGraphResponse, ("recv",))


class _StreamStub:
    """RunGraphStream on a channel, its requests `SplitMessage`s or messages (`tensor_requests`)."""

    def __init__(self, channel):
        self.RunGraphStream = channel.stream_stream(
            "/kernflow.client.protobuf.WorkerService/RunGraphStream",
            request_serializer=serialize, response_deserializer=_RESPONSE)


class _Pool:
    def __init__(self, address: str):
        self.address = address
        self.idle: list[_Stream] = []
        self.lock = threading.Lock()

    def take(self) -> _Stream:
        with self.lock:
            while self.idle:
                st = self.idle.pop()
                if st.alive():
                    return st
                st.close()   # ended (its worker went away): also ends its request-iterator thread
        return _Stream(channels.get_stub(self.address, _StreamStub))

    def give_back(self, st: _Stream) -> None:
        with self.lock:
            if st.alive() and len(self.idle) < _MAX_IDLE:
                st.idle_since = time.monotonic()
                self.idle.append(st)   # (taken last in, first out: the oldest ones go idle)
                return
        st.close()

    def reap(self, cutoff: float) -> None:
        """Closes the streams idle since before `cutoff` (a `time.monotonic()` value)."""
        with self.lock:
            stale = [st for st in self.idle if st.idle_since < cutoff]
            if not stale:
                return
            self.idle = [st for st in self.idle if st.idle_since >= cutoff]
        for st in stale:
            st.close()

    def close(self) -> None:
        with self.lock:
            idle, self.idle = self.idle, []
        for st in idle:
            st.close()


class _Watchdog:
    """Cancels the stream of a step still running at its deadline, and closes streams idle for
    `IDLE_CLOSE_S` (one thread per process)."""

    def __init__(self):
        self.inflight: dict[_Stream, float] = {}
        self.expired: set = set()
        self.lock = threading.Lock()
        self.thread = None

    def watch(self, st: _Stream, deadline: float) -> None:
        self.inflight[st] = deadline
        if self.thread is None:
            with self.lock:
                if self.thread is None:
                    self.thread = threading.Thread(target=self._loop, daemon=True,
                                                   name="kernflow-graph-stream-watchdog")
                    self.thread.start()

    def unwatch(self, st: _Stream) -> bool:
        """Stops watching `st`; True if its deadline passed (and it was cancelled)."""
        self.inflight.pop(st, None)
        if st in self.expired:
            with self.lock:
                self.expired.discard(st)
            return True
        return False

    def _loop(self) -> None:
        next_reap = 0.0
        while True:
            time.sleep(_WATCH_INTERVAL_S)
            now = time.monotonic()
            if now >= next_reap:
                next_reap = now + _REAP_INTERVAL_S
                with _pools_lock:
                    pools = list(_pools.values())
                for p in pools:
                    p.reap(now - IDLE_CLOSE_S)
            for st, deadline in list(self.inflight.items()):
                if deadline <= now and self.inflight.get(st) == deadline:
                    with self.lock:
                        self.expired.add(st)
                    st.cancel()


_pools: dict[str, _Pool] = {}
_pools_lock = threading.Lock()
_watchdog = _Watchdog()


def _pool(address: str) -> _Pool:
    p = _pools.get(address)
    if p is None:
        with _pools_lock:
            p = _pools.setdefault(address, _Pool(address))
    return p


def run_graph(address: str, req: worker_pb2.RunGraphRequest, timeout_s: float,
              what) -> worker_pb2.RunGraphResponse:
    """Runs `req` on the worker at `address` over a pooled stream.

    Args:
        address: the worker's "host:port".
        req: the RunGraphRequest of a graph the worker should run inline.
        timeout_s: the step's deadline, in seconds from now.
        what: a function returning the description of the call for error messages.

    Raises:
        NotInline: the worker did not run the step (the graph does not run inline there): call
            unary RunGraph.
        The step's error as its TF class; UnavailableError when the worker went away;
        DeadlineExceededError after `timeout_s`.
    """
    pool = _pool(address)
    st = pool.take()
    _watchdog.watch(st, time.monotonic() + timeout_s)
    try:
        resp = st.call(req)
    except grpc.RpcError as e:
        expired = _watchdog.unwatch(st)
        if expired:
            raise errors.DeadlineExceededError(None, None, f"{what()}: the step did not finish within "
                                               f"{timeout_s:g} s") from None
        raise error_from_rpc(e, what()) from None
    except StopIteration:
        _watchdog.unwatch(st)
        raise errors.UnavailableError(None, None, f"{what()}: the worker ended the stream") from None
    except BaseException:
        _watchdog.unwatch(st)
        raise
    _watchdog.unwatch(st)
    pool.give_back(st)
    if resp.not_inline:
        raise NotInline(what())
    if resp.status_code:
        cls = error_class_for_status(STATUS_FOR_CODE.get(resp.status_code))
        raise cls(None, None, resp.status_error_message)
    return resp


def close(address: str) -> None:
    """Ends the idle streams to `address` (with `channels.evict`)."""
    with _pools_lock:
        p = _pools.pop(address, None)
    if p is not None:
        p.close()


def close_all() -> None:
    """Ends every idle stream (with `channels.close_all`)."""
    with _pools_lock:
        pools = list(_pools.values())
        _pools.clear()
    for p in pools:
        p.close()
