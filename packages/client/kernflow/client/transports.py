"""Transports on the wire: negotiation through GetStatus, and the RecvTensor call they share.

`kernflow.core.runtime.transport` says what a transport is and how one is chosen; this module does
the choosing between real tasks:

- **Consumer.** `status_request` builds a GetStatusRequest with a probe of every transport this
  process may use (and closes the probes afterwards), `choose` applies core's `select` to the answer.
  `PeerTransports` keeps the choice per peer task for a worker's pulls: negotiated on first use (one
  GetStatus, `NEGOTIATION_TIMEOUT_S`), kept until a transfer fails (`forget`), or for
  `FAILED_TTL_S` when the peer did not answer. A peer in this process (an in-process `Worker` rather
  than a client of one) is always reached in-band. The client's direct fetches negotiate inside the
  GetStatus with which they verify a worker (`fetch_stream`).
- **Producer.** `fill_status` advertises this task's host id and its transports, with each one's
  answer to the caller's probe; `serve` hands a RecvTensor value to the transport the caller named.
- `recv_call` is the RecvTensor call of every transport: raw chunks split without a copy
  (`codec.split_content`) from a gRPC peer, and a cancellation that ends the call at once.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time

from kernflow.client import codec
from kernflow.client.protobuf import worker_pb2
from kernflow.core.framework import errors
from kernflow.core.runtime import transport as _transport

__all__ = ["NEGOTIATION_TIMEOUT_S", "FAILED_TTL_S", "status_request", "choose", "negotiate",
           "PeerTransports", "fill_status", "serve", "recv_call"]

_log = logging.getLogger(__name__)

NEGOTIATION_TIMEOUT_S = 2.0
FAILED_TTL_S = 30.0
_R = worker_pb2.RecvTensorResponse


# ---------------------------------------------------------------------------- consumer: negotiation
@contextlib.contextmanager
def status_request():
    """Yields (GetStatusRequest carrying every allowed transport's probe, the probes by name).

    The probes are closed on the way out (shm's probe file is removed), so call GetStatus and
    `choose` inside the ``with``.
    """
    probes = _transport.open_probes()
    try:
        req = worker_pb2.GetStatusRequest()
        for name, p in probes.items():
            req.transport_probes[name] = p.challenge
        yield req, probes
    finally:
        for p in probes.values():
            p.close()


def choose(status: worker_pb2.GetStatusResponse, probes) -> _transport.Transport:
    """The transport to pull from the task that answered `status` (core's `select` of its offers)."""
    return _transport.select(status.host_id, {o.name: o.params for o in status.transports}, probes)


def negotiate(peer, timeout: float = NEGOTIATION_TIMEOUT_S) -> _transport.Transport:
    """Asks `peer` (a worker client) for GetStatus with this process's probes; returns the choice.

    Raises:
        The GetStatus call's error (UnavailableError, DeadlineExceededError...).
    """
    if not _transport.needs_negotiation():
        return _transport.default()
    with status_request() as (req, probes):
        return choose(peer.get_status(req, timeout=timeout), probes)


class PeerTransports:
    """The transport a worker pulls through from each peer task: negotiated once, then cached.

    Thread-safe; concurrent first pulls from one peer wait for one negotiation.
    """

    def __init__(self):
        self._lock = threading.Lock()
        # key -> (transport, valid until (monotonic) or None) once chosen; an Event while negotiating
        self._chosen: dict[tuple, object] = {}

    @staticmethod
    def _key(task: str, peer) -> tuple | None:
        address = getattr(peer, "address", None)
        return None if address is None else (task, address, _transport.env_setting())

    def get(self, task: str, peer, timeout: float | None = None) -> _transport.Transport:
        """The transport for pulls from `task` through `peer` (its worker client).

        Args:
            timeout: the most the negotiation may take (at most `NEGOTIATION_TIMEOUT_S`).

        When the peer does not answer GetStatus, "grpc" is used (and remembered for `FAILED_TTL_S`):
        the pull itself then reports what is wrong with the peer.
        """
        key = self._key(task, peer)
        if key is None:
            return _transport.default()
        hit = self._chosen.get(key)
        if type(hit) is tuple and hit[1] is None:   # (the common case, without the lock)
            return hit[0]
        if not _transport.needs_negotiation():
            return _transport.default()
        limit = NEGOTIATION_TIMEOUT_S if timeout is None else max(0.001, min(timeout, NEGOTIATION_TIMEOUT_S))
        while True:
            with self._lock:
                hit = self._chosen.get(key)
                if hit is None or (type(hit) is tuple and hit[1] is not None and time.monotonic() >= hit[1]):
                    pending = self._chosen[key] = threading.Event()
                    break
            if type(hit) is tuple:
                return hit[0]
            if not hit.wait(limit):   # another thread is negotiating: not longer than we would
                return _transport.default()
        chosen, until = _transport.default(), time.monotonic() + FAILED_TTL_S
        try:
            chosen, until = negotiate(peer, limit), None
        except errors.OpError:
            pass
        finally:
            with self._lock:
                if self._chosen.get(key) is pending:
                    self._chosen[key] = (chosen, until)
            pending.set()
        return chosen

    def forget(self, task: str, peer) -> None:
        """Drops the choice for `task` (after a failed transfer): the next pull negotiates again."""
        key = self._key(task, peer)
        if key is None:
            return
        with self._lock:
            if type(self._chosen.get(key)) is tuple:
                del self._chosen[key]


# ---------------------------------------------------------------------------- producer
def fill_status(resp: worker_pb2.GetStatusResponse, request: worker_pb2.GetStatusRequest | None) -> None:
    """Writes this task's host id and the transports it serves (with their answers) into `resp`."""
    resp.host_id = _transport.host_id()
    probes = request.transport_probes if request is not None else {}
    for t in _transport.allowed():
        try:
            params = t.offer(probes.get(t.name, b""))
        except Exception:  # noqa: BLE001 - one broken transport must not break GetStatus
            _log.exception("transport %r failed to answer a probe; not offered", t.name)
            continue
        if params is not None:
            resp.transports.add(name=t.name, params=params)


def serve(request: worker_pb2.RecvTensorRequest, value, is_dead: bool, cancellation):
    """The RecvTensor responses, serialized, that carry `value` through the transport `request` names;
    None to send it in-band.

    None too when the request names no transport, or one this process does not have or may not use
    (the consumer handles an in-band answer whatever it asked for). The first response has the
    tensor's size in `total_bytes`; each carries one payload of the transport's `serve`.
    """
    name = request.transport
    if not name or name == _transport.DEFAULT_TRANSPORT:
        return None
    for t in _transport.allowed():
        if t.name == name:
            answer = t.serve(request.step_id, request.rendezvous_key, value, is_dead,
                             request.transport_request, cancellation)
            return None if answer is None else _responses(answer, int(getattr(value, "nbytes", 0)))
    return None


def _responses(answer, nbytes: int):
    payloads = iter((answer,) if isinstance(answer, bytes) else answer)
    try:
        first = next(payloads, None)
        if first is not None:
            yield _R(transport_payload=first, total_bytes=nbytes).SerializeToString()
        for payload in payloads:
            yield _R(transport_payload=payload).SerializeToString()
    finally:
        close = getattr(payloads, "close", None)
        if close is not None:
            close()   # (the caller stopped early: the transport's generator releases what it holds)


# ---------------------------------------------------------------------------- the RecvTensor call
@contextlib.contextmanager
def recv_call(peer, request: worker_pb2.RecvTensorRequest, timeout: float | None, cancellation=None):
    """Starts RecvTensor on `peer`; yields its responses as ``(message, content)`` pairs.

    From a gRPC peer (``recv_tensor_raw``) each response is split without copying its content; from
    an in-process worker the messages' own content is used. `cancellation`'s cancel (or leaving the
    ``with`` early) cancels the call.

    Raises:
        The call's errors as TF error classes; the cancellation's error if it was cancelled before
        the call started.
    """
    raw = getattr(peer, "recv_tensor_raw", None)
    if raw is not None:
        call = raw(request, timeout=timeout)
        responses = (codec.split_content(b, _R) for b in call)
    else:
        call = peer.recv_tensor(request, timeout=timeout)
        responses = ((m, m.content) for m in call)
    cancel = getattr(call, "cancel", None)
    token = None
    if cancellation is not None and cancel is not None:
        token = cancellation.register(lambda err: cancel())
        if token is None:
            cancel()
            raise cancellation.error
    done = False
    try:
        yield responses
        done = True
    finally:
        if cancellation is not None and token is not None:
            cancellation.deregister(token)
        if not done and cancel is not None:
            cancel()
