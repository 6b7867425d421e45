"""`WorkerServer`: a `Worker` served over gRPC, and resolvers that find other tasks.

    server = WorkerServer("worker", 0, port=0, resolver=static_resolver({"worker": [...], "ps": [...]}))
    print(server.address)      # "127.0.0.1:PORT"
    server.wait()              # until stop()

With etcd discovery (`kernflow.client.discovery`), the resolver is a `WorkerTable`'s and the server
registers itself with `register_in_etcd`.
"""

from __future__ import annotations

import concurrent.futures
import threading

import grpc

from kernflow.client import channels
from kernflow.core.framework import device_spec
from kernflow.core.framework import errors
from kernflow.worker.servicer import WorkerServicer, add_to_server, serve_locally
from kernflow.worker.worker import Worker

__all__ = ["WorkerServer", "static_resolver", "parse_cluster_spec", "register_in_etcd", "DEFAULT_MAX_WORKERS"]

# Server threads. A RecvTensor that arrives before its tensor was produced holds one while it
# waits (the producer's pulls all start when a step starts), so this is larger than the number of
# RPCs that actually compute at once.
DEFAULT_MAX_WORKERS = 128


def parse_cluster_spec(spec) -> dict[str, dict[int, str]]:
    """Normalizes a cluster spec to {job: {task index: "host:port"}}.

    Args:
        spec: ``{job: [address, ...]}`` (task i is the i-th address) or ``{job: {index: address}}``
            (indices may be strings, as in JSON).

    Raises:
        ValueError: for any other shape.
    """
    if not isinstance(spec, dict):
        raise ValueError(f"a cluster spec is a dict job -> addresses, got {type(spec).__name__}")
    out: dict[str, dict[int, str]] = {}
    for job, tasks in spec.items():
        if isinstance(tasks, (list, tuple)):
            out[str(job)] = {i: str(a) for i, a in enumerate(tasks)}
        elif isinstance(tasks, dict):
            out[str(job)] = {int(i): str(a) for i, a in tasks.items()}
        else:
            raise ValueError(f"job {job!r}: expected a list or dict of addresses, got {tasks!r}")
    return out


def static_resolver(cluster_spec, client_timeout_s: float | None = None):
    """Returns ``resolver(task_name) -> GrpcWorkerClient`` for a fixed cluster spec.

    Clients are created once per task (they share one channel per address).

    Raises (from the resolver):
        UnavailableError: for a task the spec does not list.
    """
    from kernflow.client.worker_client import GrpcWorkerClient
    cluster = parse_cluster_spec(cluster_spec)
    clients: dict[str, GrpcWorkerClient] = {}
    lock = threading.Lock()

    def resolve(task_name: str):
        c = clients.get(task_name)
        if c is not None:
            return c
        try:
            spec = device_spec.DeviceSpec.from_string(task_name)
        except ValueError as e:
            raise errors.InvalidArgumentError(None, None, f"bad task name {task_name!r}: {e}") from None
        addr = cluster.get(spec.job or "", {}).get(spec.task if spec.task is not None else -1)
        if addr is None:
            raise errors.UnavailableError(None, None, f"task {task_name} is not in the cluster spec "
                                          f"(jobs: {', '.join(sorted(cluster)) or 'none'})")
        with lock:
            c = clients.get(task_name)
            if c is None:
                kw = {} if client_timeout_s is None else {"default_timeout_s": client_timeout_s}
                c = clients[task_name] = GrpcWorkerClient(addr, task_name, **kw)
        return c
    return resolve


class WorkerServer:
    """Serves a `Worker` for task `/job:<job>/replica:0/task:<task>` on ``host:port``.

    The port is a TLS port, and every method requires the cluster token, when this process's
    `kernflow.client.security` says so as the server is built.

    Args:
        job, task: the task this server is.
        port: the port to bind (0 picks a free one; see `address`).
        host: the interface to bind.
        resolver: ``resolver(task_name) -> worker client`` for pulling tensors from other tasks, or
            a cluster spec dict (then `static_resolver` of it).
        config: a `ConfigProto` for the worker's devices and threads.
        max_workers: gRPC server threads.
        worker: an existing `Worker` to serve instead of creating one.

    Raises:
        UnavailableError: if the address cannot be bound.
        FailedPreconditionError: TLS is configured without a certificate to serve with.
    """

    def __init__(self, job: str, task: int, port: int = 0, host: str = "127.0.0.1", resolver=None,
                 config=None, max_workers: int = DEFAULT_MAX_WORKERS, worker=None):
        if isinstance(resolver, dict):
            resolver = static_resolver(resolver)
        self.worker = worker if worker is not None else Worker(job, task, config=config, resolver=resolver)
        self._server = grpc.server(
            concurrent.futures.ThreadPoolExecutor(max_workers=max_workers,
                                                  thread_name_prefix=f"kernflow-worker-{job}-{task}"),
            options=list(channels.SERVER_OPTIONS))
        servicer = WorkerServicer(self.worker, channels.CallBudget(max_workers))
        add_to_server(servicer, self._server)
        bind = f"[{host}]:{port}" if ":" in host and not host.startswith("[") else f"{host}:{port}"
        try:
            self.port = channels.bind(self._server, host, port)
        except errors.OpError:   # the port (UnavailableError), or TLS without a certificate
            self.worker.close()
            raise
        self.host = host
        self.address = f"{bind.rsplit(':', 1)[0]}:{self.port}"
        self._server.start()
        self._local = serve_locally(servicer, f"{job}-{task}")
        self._stopped = threading.Event()

    @property
    def task_name(self) -> str:
        return self.worker.task_name

    def stop(self, grace: float | None = None) -> None:
        """Stops serving: running steps are aborted, calls in flight get `grace` seconds to end."""
        if self._stopped.is_set():
            return
        if self._local is not None:
            self._local.stop()
        self.worker.close()
        self._server.stop(grace).wait()
        self._stopped.set()

    def wait(self, timeout: float | None = None) -> bool:
        """Blocks until the server stops (or `timeout` passes); returns True if it stopped."""
        timed_out = self._server.wait_for_termination(timeout)
        return not timed_out

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.stop(0)

    def __repr__(self):
        return f"<WorkerServer {self.task_name} at {self.address}>"


def register_in_etcd(server: WorkerServer, endpoint: str, cluster: str, ttl_s: int | None = None,
                     advertise: str | None = None, timeout_s: float | None = None):
    """Registers `server` as its task in etcd (``/kernflow/CLUSTER/workers/JOB/TASK``).

    The value holds the address other processes dial (see `discovery.advertised_address`) and the
    task's device names. The registration is kept alive until its `stop()`, which removes the key.

    Returns:
        The started `kernflow.client.discovery.Registration`.

    Raises:
        UnavailableError: etcd did not accept the registration in time.
    """
    from kernflow.client import discovery
    w = server.worker
    kw = {}
    if ttl_s is not None:
        kw["ttl_s"] = ttl_s
    if timeout_s is not None:
        kw["timeout_s"] = timeout_s
    reg = discovery.worker_registration(endpoint, cluster, w.job, w.task,
                                        discovery.advertised_address(server.host, server.port, advertise),
                                        devices=[d.name for d in w.devices], **kw)
    return reg.start()
