"""Hook implementations of kernflow-worker (entry point `worker` in group `kernflow`).

Adds the ``kernflow worker`` command::

    kernflow worker --job worker --task 0 --port 0 \\
        --cluster-spec '{"worker": ["127.0.0.1:5000", "127.0.0.1:5001"], "ps": ["127.0.0.1:5002"]}'

It prints ``kernflow worker /job:worker/replica:0/task:0 listening on HOST:PORT`` once serving, and
shuts down cleanly on SIGTERM or SIGINT.

With etcd, the task registers itself and finds the other tasks there instead of in a spec::

    kernflow worker --etcd 127.0.0.1:2379 --cluster NAME --job worker --task 0

It keeps ``/kernflow/NAME/workers/worker/0`` alive under a lease of ``--ttl`` seconds (re-registering
after an etcd restart), resolves other tasks through a watch of ``/kernflow/NAME/workers/``, and
removes its key when it stops (a killed worker's key expires after the TTL).

``--tls-cert``/``--tls-key`` (``--tls-ca`` for mutual TLS) and ``--token-file`` secure every call to
and from the task (`kernflow.client.security`; the KERNFLOW_TLS_* and KERNFLOW_TOKEN[_FILE]
environment variables are the defaults). ``--file-root DIR`` confines the paths the graphs' ops
touch here to DIR (`kernflow.core.runtime.file_root`; default: $KERNFLOW_FILE_ROOT).

It also registers the "grpc" server of ``kf.train.Server`` (`kernflow.worker.task_server`: this
task's worker and a master on one port) when kernflow-master is installed too.
"""

from __future__ import annotations

import json
import os
import sys

from kernflow.core.plugins import hookimpl

__all__ = ["kernflow_register_commands", "kernflow_register_servers", "configure", "run", "identity",
           "grpc_server"]


def configure(parser) -> None:
    """Adds the `kernflow worker` options to an argparse parser."""
    parser.add_argument("--job", default="worker", help="job name of this task (default: worker)")
    parser.add_argument("--task", type=int, default=0, help="task index within the job (default: 0)")
    parser.add_argument("--port", type=int, default=None,
                        help="port to bind; 0 picks a free one (default: this task's port in the "
                             "cluster spec, else 0)")
    parser.add_argument("--host", default=None,
                        help="interface to bind (default: this task's host in the cluster spec, else "
                             "127.0.0.1)")
    parser.add_argument("--cluster-spec", default="{}",
                        help='JSON dict job -> [addresses] (or {index: address}), or @FILE holding it; '
                             "used to reach the other tasks")
    parser.add_argument("--grace", type=float, default=2.0,
                        help="seconds calls in flight get to finish at shutdown (default: 2)")
    parser.add_argument("--etcd", default=None, metavar="HOST:PORT",
                        help="register in etcd and find the other tasks there (instead of --cluster-spec)")
    from kernflow.client.discovery import DEFAULT_CLUSTER
    parser.add_argument("--cluster", default=DEFAULT_CLUSTER, metavar="NAME",
                        help=f"cluster name in etcd (default: {DEFAULT_CLUSTER})")
    parser.add_argument("--ttl", type=int, default=10,
                        help="etcd lease TTL in seconds: a dead task's key expires after it (default: 10)")
    parser.add_argument("--advertise", default=None, metavar="HOST",
                        help="host name or IP registered in etcd (default: --host, or this machine's "
                             "name when binding all interfaces)")
    from kernflow.client import security
    security.add_arguments(parser)
    from kernflow.core.runtime import file_root
    file_root.add_argument(parser)


def _load_spec(text: str) -> dict:
    if text.startswith("@"):
        with open(text[1:], encoding="utf-8") as f:
            text = f.read()
    spec = json.loads(text)
    if not isinstance(spec, dict):
        raise ValueError("--cluster-spec must be a JSON object (job -> addresses)")
    return spec


def _spec_tasks(cluster: dict, job: str) -> str:
    """What a cluster spec holds of `job`, for the error of a task it does not list."""
    tasks = sorted(cluster.get(job, {}))
    if tasks:
        return f"job {job} has tasks {', '.join(map(str, tasks))}"
    return f"it has no job {job}; jobs: {', '.join(sorted(cluster))}"


def run(args) -> int:
    """Runs `kernflow worker`: serves until SIGTERM/SIGINT; returns the exit status."""
    import signal
    import threading

    from kernflow.client import security
    from kernflow.core.framework import errors
    from kernflow.worker.server import WorkerServer, parse_cluster_spec, static_resolver
    from kernflow.core.runtime import file_root
    try:
        sec = security.configure_from_args(args)
        file_root.configure_from_args(args)
    except errors.OpError as e:
        print(f"kernflow worker: {e.message}", file=sys.stderr)
        return 2
    try:
        spec = _load_spec(args.cluster_spec)
        cluster = parse_cluster_spec(spec)
    except (OSError, ValueError) as e:
        print(f"kernflow worker: bad --cluster-spec: {e}", file=sys.stderr)
        return 2
    mine = cluster.get(args.job, {}).get(args.task)
    if cluster and mine is None:
        print(f"kernflow worker: /job:{args.job}/task:{args.task} is not in --cluster-spec "
              f"({_spec_tasks(cluster, args.job)})", file=sys.stderr)
        return 2
    host, port = args.host, args.port
    if mine is not None and ":" in mine:
        spec_host, spec_port = mine.rsplit(":", 1)
        host = host if host is not None else spec_host.strip("[]")
        port = port if port is not None else int(spec_port)
    host = host if host is not None else "127.0.0.1"
    port = port if port is not None else 0
    table = registration = None
    resolver = static_resolver(spec)
    if getattr(args, "etcd", None):
        from kernflow.client import discovery
        try:
            table = discovery.WorkerTable(args.etcd, args.cluster).start()
        except Exception as e:  # noqa: BLE001 - reported, not a traceback
            print(f"kernflow worker: cannot watch the cluster in etcd: {getattr(e, 'message', e)}",
                  file=sys.stderr)
            return 1
        resolver = table.resolver()
    try:
        server = WorkerServer(args.job, args.task, port=port, host=host, resolver=resolver)
    except Exception as e:  # noqa: BLE001 - reported, not a traceback
        print(f"kernflow worker: cannot start: {e}", file=sys.stderr)
        if table is not None:
            table.stop()
        return 1
    if table is not None:
        from kernflow.worker.server import register_in_etcd
        try:
            registration = register_in_etcd(server, args.etcd, args.cluster, ttl_s=args.ttl,
                                            advertise=args.advertise)
        except Exception as e:  # noqa: BLE001 - reported, not a traceback
            print(f"kernflow worker: cannot register in etcd: {getattr(e, 'message', e)}", file=sys.stderr)
            server.stop(0)
            table.stop()
            return 1
    stop = threading.Event()

    def on_signal(signum, frame):
        stop.set()
    old = {s: signal.signal(s, on_signal) for s in (signal.SIGTERM, signal.SIGINT)}
    try:
        print(f"kernflow worker {server.task_name} listening on {server.address}", flush=True)
        if sec.tls or sec.token is not None:
            print(f"kernflow worker {server.task_name}: {sec.describe()} on every call", flush=True)
        if registration is not None:
            print(f"kernflow worker {server.task_name} registered as {registration.key} in etcd at "
                  f"{registration.endpoint} (lease TTL {registration.ttl_s} s)", flush=True)
        while not stop.wait(0.5):
            pass
    finally:
        if registration is not None:
            registration.stop()  # first: nobody should route to this task any more
        server.stop(args.grace)
        if table is not None:
            table.stop()
        for s, h in old.items():
            signal.signal(s, h)
    print(f"kernflow worker {server.task_name} stopped (pid {os.getpid()})", flush=True)
    return 0


def identity(args):
    """The `ProcessIdentity` of this task: service kernflow-worker (kernflow-ps for job ps)."""
    from kernflow.core.process_identity import task_identity
    return task_identity(args.job, args.task, args.cluster if getattr(args, "etcd", None) else None)


@hookimpl
def kernflow_register_commands(registry):
    registry.register("worker", "serve one task of a kernflow cluster (the worker service)",
                      configure, run, identity=identity)


def grpc_server(**kwargs):
    """The "grpc" server factory; grpc, the master and the worker are imported on first use."""
    from kernflow.worker.task_server import GrpcTaskServer
    return GrpcTaskServer(**kwargs)


@hookimpl
def kernflow_register_servers(registry):
    # The task server hosts a master too: without kernflow-master (not a dependency of this
    # package) nothing is registered, and kf.train.Server says what to install.
    import importlib.util
    if importlib.util.find_spec("kernflow.master") is not None:
        registry.register("grpc", grpc_server)
