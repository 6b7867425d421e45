"""`kf.train.ClusterSpec` and `kf.train.Server`: TF1's in-process cluster servers.

A `ClusterSpec` names the tasks of a cluster: ``{"ps": ["host0:2222"], "worker": ["host1:2222",
"host2:2222"]}`` (or ``{job: {task index: address}}`` for sparse jobs); its protobuf form is a
`ClusterDef`, and a `ServerDef` adds the task a server is. A `Server` is one task of it:
it serves, on the task's port, the worker service (running the partitions of any master's steps on
this task's devices) and a master service whose workers are every task of the cluster, so
``kf.Session(server.target)`` (or ``"grpc://"`` + any task's address) runs steps on the cluster.

`Server` checks its arguments here; the server itself comes from the factory a plugin registers for
its protocol through the `kernflow_register_servers` hook (kernflow-worker registers "grpc"). Core
imports no service package, so it works without gRPC installed; `Server` then raises an ImportError
naming the packages to install.
"""

from __future__ import annotations

import re

from kernflow.core.protobuf.cluster_pb2 import ClusterDef, JobDef
from kernflow.core.protobuf.config_pb2 import ConfigProto
from kernflow.core.protobuf.tensorflow_server_pb2 import ServerDef

__all__ = ["ClusterSpec", "Server", "ClusterDef", "JobDef", "ServerDef"]

_JOB_NAME = re.compile(r"^[A-Za-z][A-Za-z0-9_]*$")


class ClusterSpec:
    """The jobs of a cluster and the network address of each of their tasks.

    Args:
        cluster: a dict ``{job name: [address, ...]}`` (task i at position i) or ``{job name:
            {task index: address}}``; another `ClusterSpec`; or a `ClusterDef` proto.

    Raises:
        TypeError: for anything else. ValueError: for a malformed job name, task index or address.
    """

    def __init__(self, cluster):
        if isinstance(cluster, ClusterSpec):
            self._cluster = {j: dict(t) for j, t in cluster._cluster.items()}
            return
        if isinstance(cluster, ClusterDef):
            cluster = _cluster_def_to_dict(cluster)
        elif not isinstance(cluster, dict):
            raise TypeError("ClusterSpec needs a dict mapping job names to lists or dicts of "
                            f"addresses, a ClusterSpec, or a ClusterDef; got {type(cluster).__name__}")
        self._cluster = {}
        for job, tasks in cluster.items():
            if not isinstance(job, str) or not _JOB_NAME.match(job):
                raise ValueError(f"Invalid job name {job!r}: use letters, digits and '_', starting "
                                 "with a letter")
            if isinstance(tasks, (list, tuple)):
                tasks = dict(enumerate(tasks))
            elif not isinstance(tasks, dict):
                raise TypeError(f"The tasks of job {job!r} must be a list of addresses or a dict "
                                f"{{task index: address}}; got {type(tasks).__name__}")
            checked = {}
            for index, address in tasks.items():
                if isinstance(index, bool) or not (
                        isinstance(index, int) or (isinstance(index, str) and index.isdigit())):
                    raise ValueError(f"Invalid task index {index!r} in job {job!r}")
                i = int(index)
                if i < 0:
                    raise ValueError(f"Invalid task index {index!r} in job {job!r}")
                if isinstance(address, bytes):
                    address = address.decode()
                if not isinstance(address, str) or not address:
                    raise ValueError(f"Task {i} of job {job!r} needs a 'host:port' address, got "
                                     f"{address!r}")
                checked[i] = address
            self._cluster[job] = checked

    # ------------------------------------------------------------------ queries
    def __bool__(self):
        return bool(self._cluster)

    __nonzero__ = __bool__

    def __eq__(self, other):
        if not isinstance(other, ClusterSpec):
            try:
                other = ClusterSpec(other)
            except (TypeError, ValueError):
                return NotImplemented
        return self._cluster == other._cluster

    def __ne__(self, other):
        eq = self.__eq__(other)
        return eq if eq is NotImplemented else not eq

    __hash__ = None

    def __repr__(self):
        return f"ClusterSpec({self.as_dict()!r})"

    __str__ = __repr__

    @property
    def jobs(self) -> list[str]:
        """The job names, sorted."""
        return sorted(self._cluster)

    def _tasks(self, job_name: str) -> dict:
        try:
            return self._cluster[job_name]
        except KeyError:
            raise ValueError(f"No such job in cluster: {job_name!r} (jobs: {self.jobs})") from None

    def num_tasks(self, job_name: str) -> int:
        """Returns the number of tasks of `job_name`. Raises ValueError for an unknown job."""
        return len(self._tasks(job_name))

    def task_indices(self, job_name: str) -> list[int]:
        """Returns the sorted task indices of `job_name`. Raises ValueError for an unknown job."""
        return sorted(self._tasks(job_name))

    def task_address(self, job_name: str, task_index: int) -> str:
        """Returns the address of task `task_index` of `job_name`.

        Raises:
            ValueError: for an unknown job or task.
        """
        tasks = self._tasks(job_name)
        try:
            return tasks[int(task_index)]
        except (KeyError, TypeError, ValueError):
            raise ValueError(f"No task with index {task_index!r} in job {job_name!r} (indices: "
                             f"{sorted(tasks)})") from None

    def job_tasks(self, job_name: str) -> list:
        """Returns the addresses of `job_name` by index, with None for missing indices."""
        tasks = self._tasks(job_name)
        if not tasks:
            return []
        return [tasks.get(i) for i in range(max(tasks) + 1)]

    def as_dict(self) -> dict:
        """Returns ``{job: [addresses]}``, or ``{job: {index: address}}`` for a sparse job."""
        out = {}
        for job in self.jobs:
            tasks = self._cluster[job]
            if sorted(tasks) == list(range(len(tasks))):
                out[job] = [tasks[i] for i in range(len(tasks))]
            else:
                out[job] = dict(sorted(tasks.items()))
        return out

    def as_cluster_def(self) -> ClusterDef:
        """Returns the cluster as a `ClusterDef` proto, its jobs sorted by name."""
        return ClusterDef(job=[JobDef(name=j, tasks=self._cluster[j]) for j in self.jobs])

    def task_names(self) -> list[str]:
        """Returns every task's name, ``/job:J/replica:0/task:I``, in job then index order."""
        return [f"/job:{j}/replica:0/task:{i}" for j in self.jobs for i in sorted(self._cluster[j])]


def _cluster_def_to_dict(cluster_def: ClusterDef) -> dict:
    out = {}
    for job in cluster_def.job:
        if job.name in out:
            raise ValueError(f"Duplicate job name {job.name!r} in the ClusterDef")
        out[job.name] = dict(job.tasks)
    return out


def _server_def_fields(d, job_name, task_index, protocol, config):
    """(cluster, job_name, task_index, protocol, config, port) of a `ServerDef` or a dict with
    its fields; the arguments that are not None take precedence, as TF's."""
    if isinstance(d, ServerDef):
        if config is None and d.HasField("default_session_config"):
            config = d.default_session_config
        fields = (d.cluster, d.job_name, d.task_index, d.protocol, d.port)
    else:
        config = config if config is not None else d.get("default_session_config")
        fields = (d["cluster"], d.get("job_name"), d.get("task_index"), d.get("protocol"), d.get("port"))
    cluster, def_job, def_task, def_protocol, port = fields
    return (cluster, job_name if job_name is not None else def_job or None,
            task_index if task_index is not None else def_task,
            protocol if protocol is not None else def_protocol or None, config, port or 0)


def _is_server_def_dict(d) -> bool:
    return isinstance(d, dict) and "cluster" in d and (
        isinstance(d["cluster"], (ClusterSpec, ClusterDef)) or
        (isinstance(d["cluster"], dict) and all(isinstance(k, str) for k in d["cluster"])))


def _split_server_def(server_or_cluster_def, job_name, task_index, protocol, config):
    """(ClusterSpec, job_name, task_index, protocol, config, port) of what `Server` was given: a
    `ServerDef`, a dict of its fields (with a "cluster" key), or anything `ClusterSpec` takes."""
    d, port = server_or_cluster_def, 0
    if isinstance(d, ServerDef) or _is_server_def_dict(d):
        d, job_name, task_index, protocol, config, port = _server_def_fields(
            d, job_name, task_index, protocol, config)
    try:
        cluster = ClusterSpec(d)
    except TypeError:
        raise TypeError("Could not convert server_or_cluster_def to a ServerDef or a ClusterSpec: "
                        f"got {type(server_or_cluster_def).__name__}") from None
    if config is not None and not isinstance(config, ConfigProto):
        raise TypeError(f"Server config must be a ConfigProto, got {type(config).__name__}")
    return cluster, job_name, task_index, protocol or "grpc", config, port


def _this_task(cluster: ClusterSpec, job_name, task_index) -> tuple[str, int]:
    """(job_name, task_index), inferred where the cluster leaves one choice (TF's rule)."""
    if job_name is None:
        if len(cluster.jobs) != 1:
            raise ValueError(f"Must specify an explicit job_name: the cluster has jobs {cluster.jobs}")
        job_name = cluster.jobs[0]
    if task_index is None:
        indices = cluster.task_indices(job_name)
        if len(indices) != 1:
            raise ValueError(f"Must specify an explicit task_index: job {job_name!r} has tasks "
                             f"{indices}")
        task_index = indices[0]
    if isinstance(task_index, bool) or not isinstance(task_index, (int, str)) or \
            (isinstance(task_index, str) and not task_index.isdigit()):
        raise TypeError(f"task_index must be an int, got {task_index!r}")
    cluster.task_address(job_name, task_index)   # (ValueError for a job or task it lacks)
    return job_name, int(task_index)


def _with_port(cluster: ClusterSpec, job_name: str, task_index: int, port: int) -> ClusterSpec:
    """`cluster` with the port of one task's address replaced (a ServerDef's `port`)."""
    d = {j: dict(enumerate(t)) if isinstance(t, list) else t for j, t in cluster.as_dict().items()}
    host = d[job_name][task_index].rpartition(":")[0]
    d[job_name][task_index] = f"{host}:{port}"
    return ClusterSpec(d)


class Server:
    """An in-process server for one task of a cluster (TF1's ``tf.train.Server``).

    Serves, on the task's address, the worker service for this task's devices and a master whose
    workers are every task of the cluster (this task's own worker is called in process). The server
    is built by the factory registered for `protocol` (hook `kernflow_register_servers`).

    Args:
        server_or_cluster_def: a `ServerDef`; or a `ClusterSpec`, `ClusterDef` or cluster dict; or
            a dict with the ServerDef's fields ("cluster", "job_name", "task_index", "protocol",
            "default_session_config", "port").
        job_name: this task's job (may be omitted when the cluster has one job); overrides the
            ServerDef's.
        task_index: this task's index (may be omitted when the job has one task); overrides the
            ServerDef's.
        protocol: a protocol an installed plugin serves (default "grpc", with kernflow-worker).
        config: a `ConfigProto`: the default session config (device counts, timeouts).
        start: start serving now (else call `start`).

    Raises:
        TypeError: for a definition that is neither a ServerDef nor a cluster, or a config that is
            not a ConfigProto.
        ValueError: for a job or task the cluster lacks, or a protocol no plugin serves.
        ImportError: when the distributed-runtime packages (the "grpc" server) are not installed.
    """

    def __init__(self, server_or_cluster_def, job_name=None, task_index=None, protocol=None,
                 config=None, start=True):
        cluster, job_name, task_index, protocol, config, port = _split_server_def(
            server_or_cluster_def, job_name, task_index, protocol, config)
        job_name, task_index = _this_task(cluster, job_name, task_index)
        if port:
            cluster = _with_port(cluster, job_name, task_index, port)
        address = cluster.task_address(job_name, task_index)
        host, sep, port_str = address.rpartition(":")
        if not sep or not host or not port_str.isdigit():
            raise ValueError(f"The address of /job:{job_name}/task:{task_index} must be 'host:port', "
                             f"got {address!r}")
        from kernflow.core.plugins import registries
        factory = registries().servers.get(protocol)
        self._job_name, self._task_index, self._protocol, self._config, self._port = (
            job_name, task_index, protocol, config, port)
        self._impl = factory(cluster=cluster, job_name=job_name, task_index=task_index, config=config)
        self._stopped = False
        if start:
            self.start()

    # ------------------------------------------------------------------ API
    @staticmethod
    def create_local_server(config=None, start=True) -> "Server":
        """Creates a single-task server on a free port of localhost (job "localhost", task 0)."""
        return Server({"localhost": ["localhost:0"]}, protocol="grpc", config=config, start=start)

    @property
    def target(self) -> str:
        """The session target of this server's master, ``grpc://host:port``."""
        return self._impl.target

    @property
    def server_def(self) -> ServerDef:
        """The `ServerDef` this server was built from (its cluster with the bound port)."""
        sd = ServerDef(cluster=self._impl.cluster_spec.as_cluster_def(), job_name=self._job_name,
                       task_index=self._task_index, protocol=self._protocol, port=self._port)
        if self._config is not None:
            sd.default_session_config.CopyFrom(self._config)
        return sd

    @property
    def cluster_spec(self) -> ClusterSpec:
        return ClusterSpec(self._impl.cluster_spec)

    def start(self) -> None:
        """Starts serving (idempotent)."""
        if self._stopped:
            raise RuntimeError("Cannot start a stopped Server; create a new one")
        self._impl.start()

    def join(self, timeout=None) -> None:
        """Blocks until the server stops (TF's Server.join blocks forever)."""
        self._impl.join(timeout)

    def stop(self) -> None:
        """Stops serving, aborts running steps and closes the master's sessions (idempotent)."""
        if self._stopped:
            return
        self._stopped = True
        self._impl.stop()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.stop()
        return False
