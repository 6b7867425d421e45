"""`GrpcTaskServer`: one task of a cluster in this process, what ``kf.train.Server(...)`` builds.

It serves, on the task's address, the worker service for this task's devices and a master whose
workers are every task of the cluster (this task's own worker is called in process, the others over
gRPC), so ``grpc://`` + any task's address is a session target, as in TF. A session of this same
process that targets it calls the master in process (TF's LocalMaster). kernflow-worker registers it
for the protocol "grpc" through `kernflow_register_servers`; `kernflow.core.train.server_lib.Server`
checks the arguments and delegates to it.
"""

from __future__ import annotations

import threading

from kernflow.client import local_master
from kernflow.client.protobuf import master_pb2
from kernflow.client.worker_client import GrpcWorkerClient
from kernflow.core.framework import device_spec
from kernflow.core.train.server_lib import ClusterSpec
from kernflow.master.local import LocalMasterClient
from kernflow.master.master import Master
from kernflow.master.server import MasterServer
from kernflow.master.servicer import RAW_RESPONSES as MASTER_RAW_RESPONSES
from kernflow.worker.servicer import WorkerServicer, add_to_server, serve_locally
from kernflow.worker.worker import Worker

__all__ = ["GrpcTaskServer"]

_LOCAL_HOSTS = ("localhost", "127.0.0.1", "::1", "[::1]")


class GrpcTaskServer:
    """The worker and master services of task `task_index` of `job_name`, on one gRPC port.

    Args:
        cluster: a `ClusterSpec` holding the task, with a ``host:port`` address (port 0 binds a free
            port of a loopback host).
        job_name, task_index: this task.
        config: the default session `ConfigProto` (device counts, timeouts).

    The server is built unstarted; a loopback host binds itself, any other host binds every
    interface.
    """

    def __init__(self, cluster: ClusterSpec, job_name: str, task_index: int, config=None):
        host, _, port = cluster.task_address(job_name, task_index).rpartition(":")
        self._task_name = f"/job:{job_name}/replica:0/task:{task_index}"
        self._lock = threading.Lock()
        self._clients: dict = {}
        self._cluster = cluster
        self._worker = Worker(job_name, task_index, config=config, resolver=self._resolve)
        self._master = Master(self._resolve, config=config, tasks=cluster.task_names(),
                              local_task=self._task_name)
        self._servicer = WorkerServicer(self._worker)
        self._local_channel = None
        self._server = self._bind(host, int(port))
        if int(port) == 0:  # a local server: the real port replaces 0 in the cluster spec
            self._cluster = _with_address(cluster, job_name, task_index, f"{host}:{self._server.port}")
        self._host = host
        self._local = None

    def _bind(self, host: str, port: int) -> MasterServer:
        def add_worker_service(grpc_server, budget):
            self._servicer.budget = budget   # (one budget for the master's and the worker's calls)
            add_to_server(self._servicer, grpc_server)

        failure = None
        for bind_host in ([host] if host in _LOCAL_HOSTS else ["[::]", "0.0.0.0"]):
            try:
                return MasterServer(self._master, port=port, host=bind_host,
                                    extra_servicers=[add_worker_service], start=False)
            except Exception as e:  # noqa: BLE001 - tried in turn; the last failure is raised
                failure = e
        self._worker.close()
        raise failure

    def _resolve(self, task_name: str):
        """Returns the client of a task: this task's in-process worker, else a gRPC client."""
        if task_name == self._task_name:
            return self._worker
        with self._lock:
            client = self._clients.get(task_name)
            if client is None:
                spec = device_spec.DeviceSpec.from_string(task_name)
                address = self._cluster.task_address(spec.job, spec.task)
                client = self._clients[task_name] = GrpcWorkerClient(address, task_name)
            return client

    @property
    def target(self) -> str:
        """The session target of this task's master, ``grpc://host:port``."""
        return f"grpc://{self._host}:{self._server.port}"

    @property
    def cluster_spec(self) -> ClusterSpec:
        """The cluster, with the bound port in place of port 0."""
        return self._cluster

    def start(self) -> None:
        """Starts serving (idempotent). Sessions of this process that target this server then call
        its master in process (`kernflow.client.local_master`)."""
        self._server.start()
        if self._local_channel is None:
            # (its master too: a client process on this host calls RunStep over the socket)
            master_service = (master_pb2.DESCRIPTOR.services_by_name["MasterService"], self._server.servicer,
                              master_pb2, MASTER_RAW_RESPONSES if self._server.servicer.raw_responses else ())
            self._local_channel = serve_locally(self._servicer, self._task_name.replace("/", "_").strip("_"),
                                                also=[master_service])
        if self._local is None:
            self._local = LocalMasterClient(self._master, self._address())
            local_master.register(self._address(), self._local)

    def _address(self) -> str:
        return f"{self._host}:{self._server.port}"

    def join(self, timeout=None) -> None:
        """Blocks until the server stops, or `timeout` seconds."""
        self._server.join(timeout)

    def stop(self) -> None:
        """Stops serving, aborts running steps and closes the master's sessions."""
        if self._local is not None:
            local_master.unregister(self._address(), self._local)
            self._local = None
        if self._local_channel is not None:
            self._local_channel.stop()
            self._local_channel = None
        self._server.stop(0.5)
        try:
            self._master.close()
        finally:
            self._worker.close()


def _with_address(cluster: ClusterSpec, job_name: str, task_index: int, address: str) -> ClusterSpec:
    d = cluster.as_dict()
    tasks = dict(enumerate(d[job_name])) if isinstance(d[job_name], list) else d[job_name]
    tasks[task_index] = address
    d[job_name] = tasks
    return ClusterSpec(d)
