"""Masters served by this process, for sessions that target them (TF's LocalMaster).

A ``kf.train.Server`` registers its master here while it serves; a ``kf.Session(server.target)``
made in the same process then calls that master directly instead of through its own gRPC port (the
usual between-graph replica: each worker process runs its training loop against its own task).
That saves the client's and the server's side of a loopback RPC on every step, a large share of a
small remote step's cost in Python. Everything else is unchanged: the master still reaches the
other tasks over gRPC.

A registered object has `GrpcMasterClient`'s methods (create_session, extend_session, run_step,
close_session, list_devices, reset, close) and ``in_process = True``.
"""

from __future__ import annotations

import threading

__all__ = ["register", "unregister", "lookup"]

_LOOPBACK = frozenset({"localhost", "127.0.0.1", "::1", "[::1]", "0.0.0.0", "[::]"})
_lock = threading.Lock()
_masters: dict[tuple, object] = {}


def _key(address: str) -> tuple:
    host, _, port = address.rpartition(":")
    host = host.lower()
    return ("loopback" if host in _LOOPBACK else host, port)


def register(address: str, client) -> None:
    """Makes `client` the master of sessions targeting ``grpc://address`` in this process (every
    loopback spelling of a loopback address)."""
    with _lock:
        _masters[_key(address)] = client


def unregister(address: str, client) -> None:
    """Removes `client` (if it is still the one registered for `address`)."""
    with _lock:
        if _masters.get(_key(address)) is client:
            del _masters[_key(address)]


def lookup(address: str):
    """The in-process master client serving `address` ("host:port"), or None."""
    with _lock:
        return _masters.get(_key(address))
