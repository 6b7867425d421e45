"""`MasterServer`: a gRPC server for a `Master` (and, optionally, other services on the same port).

A TF task serves the master and the worker service on one port, so ``grpc://host:port`` of any task
of a cluster is a valid session target; `kernflow.worker.task_server` (what `kf.train.Server`
builds) does the same by handing this server the worker's servicer through `extra_servicers`.

Transport security is the process's (`kernflow.client.security`, as the server is built): a TLS port
when TLS is configured, and the cluster token checked on every method of every service on the port
when a token is (`channels.bind`, `channels.add_servicer`).
"""

from __future__ import annotations

import concurrent.futures
import threading

import grpc

from kernflow.client import channels
from kernflow.core.framework import errors
from kernflow.master.servicer import MasterServicer, add_to_server

__all__ = ["MasterServer", "SERVER_OPTIONS", "register_in_etcd"]

# Unlimited message sizes (feeds and fetches travel as raw bytes in one message), the clients'
# keepalive pings accepted, no port sharing: the options every kernflow server uses.
SERVER_OPTIONS = tuple(channels.SERVER_OPTIONS)


class MasterServer:
    """Serves `master` over gRPC at ``host:port`` (port 0 picks a free port).

    Args:
        master: a `kernflow.master.master.Master`.
        port: the port to bind; 0 picks one (see `port`).
        host: the interface to bind ("127.0.0.1", "0.0.0.0", "[::]", a host name).
        max_workers: threads serving RPCs (a running step holds one for its duration, and so does
            a RecvTensor waiting for its tensor when the worker service shares the port).
        extra_servicers: callables ``add(grpc_server, budget)`` registering more services on this
            port; `budget` is the server's `channels.CallBudget`, shared by its blocking methods.
        start: start serving now (else call `start`).

    Raises:
        UnavailableError: when the port cannot be bound.
        FailedPreconditionError: TLS is configured without a certificate to serve with.
    """

    def __init__(self, master, port: int = 0, host: str = "127.0.0.1", *, max_workers: int = 128,
                 extra_servicers=(), start: bool = True):
        self.master = master
        self.host = host
        self._server = grpc.server(
            concurrent.futures.ThreadPoolExecutor(max_workers=max_workers,
                                                  thread_name_prefix="kernflow-master-rpc"),
            options=SERVER_OPTIONS)
        # (`servicer.add_to_server`: the generated registration, with metered message bytes and
        # the step methods' responses serialized by the servicer)
        self.budget = channels.CallBudget(max_workers)
        self.servicer = MasterServicer(master, self.budget)
        add_to_server(self.servicer, self._server)
        for add in extra_servicers:
            add(self._server, self.budget)
        try:
            self.port = channels.bind(self._server, host, port)
        except errors.UnavailableError as e:
            raise errors.UnavailableError(None, None, f"the master's gRPC server {e.message}") from None
        self._started = False
        self._stopped = threading.Event()
        if start:
            self.start()

    @property
    def address(self) -> str:
        """``host:port`` a client on this machine can dial."""
        host = self.host
        if host in ("0.0.0.0", "[::]", "::", ""):
            host = "localhost"
        return f"{host}:{self.port}"

    @property
    def target(self) -> str:
        """The session target, ``grpc://host:port`` (a TLS channel where this process has TLS
        configured, as the whole cluster then has)."""
        return f"grpc://{self.address}"

    def start(self) -> None:
        """Starts serving (idempotent)."""
        if not self._started:
            self._started = True
            self._server.start()

    def stop(self, grace: float | None = 0.5) -> None:
        """Stops serving; in-flight RPCs get `grace` seconds to finish."""
        if self._stopped.is_set():
            return
        self._stopped.set()
        self._server.stop(grace).wait()

    def join(self, timeout: float | None = None) -> bool:
        """Blocks until the server stops (or `timeout` passes); True once stopped."""
        return self._stopped.wait(timeout)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.stop()
        return False


def register_in_etcd(server: MasterServer, endpoint: str, cluster: str, ttl_s: int | None = None,
                     advertise: str | None = None, timeout_s: float | None = None):
    """Registers `server` as the master of `cluster` in etcd (``/kernflow/CLUSTER/master``).

    ``kf.Session("etcd://ENDPOINT/CLUSTER")`` then finds it. The registration is kept alive until its
    `stop()`, which removes the key.

    Returns:
        The started `kernflow.client.discovery.Registration`.

    Raises:
        UnavailableError: etcd did not accept the registration in time.
    """
    from kernflow.client import discovery
    kw = {}
    if ttl_s is not None:
        kw["ttl_s"] = ttl_s
    if timeout_s is not None:
        kw["timeout_s"] = timeout_s
    address = discovery.advertised_address(server.host, server.port, advertise)
    return discovery.master_registration(endpoint, cluster, address, **kw).start()
