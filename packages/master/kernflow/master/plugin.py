"""Hook implementations of kernflow-master (entry point `master` in group `kernflow`).

Adds the ``kernflow master`` command: a standalone master for a cluster of workers, e.g.::

    kernflow master --port 2222 --cluster-spec '{"worker": ["10.0.0.1:2223", "10.0.0.2:2223"]}'

Sessions then use ``kf.Session("grpc://<this host>:2222")``.

With ``--tls-cert``/``--tls-key`` (and ``--tls-ca`` for mutual TLS) it serves TLS and calls its
workers over TLS; with ``--token-file`` every call must carry the cluster token, and the master sends
it to the workers (`kernflow.client.security`; the KERNFLOW_TLS_* and KERNFLOW_TOKEN[_FILE]
environment variables are the defaults).

With etcd, the master finds the workers there and registers itself::

    kernflow master --etcd 127.0.0.1:2379 --cluster NAME [--min-workers N]

It watches ``/kernflow/NAME/workers/`` and resolves ``/job:x/task:i`` through that table on every
use (a task restarted on another port is found again), waits until N tasks are registered, then
serves and keeps ``/kernflow/NAME/master`` alive under a lease, so
``kf.Session("etcd://127.0.0.1:2379/NAME")`` finds it. It removes its key when it stops.
"""

from __future__ import annotations

import json
import os
import signal
import sys

from kernflow.core.plugins import hookimpl


def _configure(parser) -> None:
    parser.add_argument("--port", type=int, default=0, help="port to serve on (0 picks a free one)")
    parser.add_argument("--host", default="127.0.0.1", help="interface to bind (0.0.0.0 for all)")
    parser.add_argument("--cluster-spec", default=None,
                        help='the workers as JSON, {"job": ["host:port", ...]} or {"job": {"index": '
                             '"host:port"}}, or @FILE to read it from a file (or use --etcd)')
    parser.add_argument("--etcd", default=None, metavar="HOST:PORT",
                        help="find the workers in etcd and register this master there")
    from kernflow.client.discovery import DEFAULT_CLUSTER
    parser.add_argument("--cluster", default=DEFAULT_CLUSTER, metavar="NAME",
                        help=f"cluster name in etcd (default: {DEFAULT_CLUSTER})")
    parser.add_argument("--ttl", type=int, default=10,
                        help="etcd lease TTL in seconds of the master's key (default: 10)")
    parser.add_argument("--advertise", default=None, metavar="HOST",
                        help="host name or IP registered in etcd (default: --host, or this machine's "
                             "name when binding all interfaces)")
    parser.add_argument("--default-task", default=None, metavar="TASK",
                        help="where ops that name no job or task run, and feeds and fetches live, e.g. "
                             "/job:worker/task:1 (default: the chief, else /job:worker/task:0, else "
                             "the first task)")
    parser.add_argument("--min-workers", type=int, default=1, metavar="N",
                        help="with --etcd: wait until N tasks are registered before serving (default: 1)")
    from kernflow.client import security
    security.add_arguments(parser)


def _configure_security(args):
    """This process's TLS and cluster token from the options; None and a one-line message on stderr
    when a file cannot be read or is refused."""
    from kernflow.client import security
    from kernflow.core.framework import errors
    try:
        return security.configure_from_args(args)
    except errors.OpError as e:
        print(f"kernflow master: {e.message}", file=sys.stderr)
        return None


def _announce_security(sec) -> None:
    if sec.tls or sec.token is not None:
        print(f"kernflow master: {sec.describe()} on every call", flush=True)


def load_cluster_spec(text: str):
    """Parses the --cluster-spec argument (JSON, or @path of a JSON file) into a ClusterSpec."""
    from kernflow.core.train.server_lib import ClusterSpec
    if text.startswith("@"):
        with open(os.path.expanduser(text[1:]), encoding="utf-8") as f:
            text = f.read()
    try:
        raw = json.loads(text)
    except json.JSONDecodeError as e:
        raise ValueError(f"--cluster-spec is not valid JSON: {e}") from None
    return ClusterSpec(raw)


def build_master(cluster, config=None, default_task=None):
    """Returns a `Master` whose workers are every task of `cluster`, reached over gRPC."""
    from kernflow.client.worker_client import GrpcWorkerClient
    from kernflow.core.framework import device_spec
    from kernflow.master.master import Master
    clients = {}

    def resolve(task_name: str):
        client = clients.get(task_name)
        if client is None:
            spec = device_spec.DeviceSpec.from_string(task_name)
            client = clients[task_name] = GrpcWorkerClient(cluster.task_address(spec.job, spec.task),
                                                           task_name)
        return client
    return Master(resolve, config=config, tasks=cluster.task_names(), default_task=default_task)


def build_etcd_master(table, config=None, default_task=None):
    """Returns a `Master` whose tasks are the ones registered in `table` (a started `WorkerTable`).

    Workers are resolved through the table on every use, and the master's task list grows as new
    tasks register (a task that went away stays listed: it fails steps that need it with
    `UnavailableError` until it registers again).

    Raises:
        ValueError: the table has no task yet.
    """
    from kernflow.master.master import Master
    master = Master(table.resolver(), config=config, tasks=table.known_tasks(), default_task=default_task)

    def sync_tasks(t):
        known = t.known_tasks()
        if known and known != master.tasks:
            master.tasks = known  # read on every use by the Master; sorted like task_sort_key
    registrations = _registration_health(master.task_health)
    table.add_listener(sync_tasks)
    table.add_listener(registrations)
    sync_tasks(table)
    registrations(table)
    return master


def _registration_health(health):
    """A `WorkerTable` listener telling `health` of each task whose etcd registration came or went."""
    import threading
    registered: dict[str, str] = {}
    lock = threading.Lock()

    def on_change(table):
        with lock:
            now = {task: entry.get("address", "?") for task, entry in table.entries().items()}
            for task in registered.keys() - now.keys():
                health.unreachable_now(task, "its registration in etcd went away (the task stopped, "
                                             "or its lease expired)")
            for task, address in now.items():
                if registered.get(task) != address:
                    health.reachable(task, f"registered in etcd at {address}")
            registered.clear()
            registered.update(now)
    return on_change


def _run_etcd(args, sec) -> int:
    import threading

    from kernflow.client import discovery
    from kernflow.master.server import MasterServer, register_in_etcd
    stop = threading.Event()
    previous = {s: signal.signal(s, lambda signum, frame: stop.set())
                for s in (signal.SIGTERM, signal.SIGINT)}
    table = registration = server = master = None
    try:
        try:
            table = discovery.WorkerTable(args.etcd, args.cluster).start()
        except Exception as e:  # noqa: BLE001 - reported, not a traceback
            print(f"kernflow master: cannot watch the cluster in etcd: {getattr(e, 'message', e)}",
                  file=sys.stderr)
            return 1
        want = max(int(args.min_workers), 1)
        if len(table.known_tasks()) < want:
            print(f"kernflow master waiting for {want} task(s) to register in etcd at {table.endpoint} "
                  f"(cluster {args.cluster})", flush=True)
        while not table.wait_until(lambda e: len(table.known_tasks()) >= want, 0.5):
            if stop.is_set():
                return 0
        master = build_etcd_master(table, default_task=args.default_task)
        try:
            server = MasterServer(master, port=args.port, host=args.host)
            registration = register_in_etcd(server, args.etcd, args.cluster, ttl_s=args.ttl,
                                            advertise=args.advertise)
        except Exception as e:  # noqa: BLE001 - reported, not a traceback
            print(f"kernflow master: cannot serve: {getattr(e, 'message', e)}", file=sys.stderr)
            return 1
        print(f"kernflow master serving {server.target} for {', '.join(master.tasks)}; registered as "
              f"{registration.key} in etcd at {registration.endpoint}", flush=True)
        _announce_security(sec)
        while not stop.wait(0.5):
            pass
        return 0
    finally:
        if registration is not None:
            registration.stop()
        if server is not None:
            server.stop(1.0)
        if master is not None:
            master.close()
        if table is not None:
            table.stop()
        for s, h in previous.items():
            signal.signal(s, h)


def _run(args) -> int:
    from kernflow.master.server import MasterServer
    sec = _configure_security(args)
    if sec is None:
        return 2
    if getattr(args, "etcd", None):
        return _run_etcd(args, sec)
    if not args.cluster_spec:
        print("kernflow master: give --cluster-spec or --etcd", file=sys.stderr)
        return 2
    try:
        cluster = load_cluster_spec(args.cluster_spec)
    except (OSError, TypeError, ValueError) as e:
        print(f"kernflow master: {e}", file=sys.stderr)
        return 2
    if not cluster:
        print("kernflow master: the cluster spec names no tasks", file=sys.stderr)
        return 2
    master = build_master(cluster, default_task=args.default_task)
    try:
        server = MasterServer(master, port=args.port, host=args.host)
    except Exception as e:  # noqa: BLE001 - reported, not a traceback
        print(f"kernflow master: cannot serve: {getattr(e, 'message', e)}", file=sys.stderr)
        master.close()
        return 1
    print(f"kernflow master serving {server.target} for {', '.join(cluster.task_names())}", flush=True)
    _announce_security(sec)

    def stop(signum, frame):
        server.stop(1.0)
    previous = signal.signal(signal.SIGTERM, stop)
    try:
        server.join()
    except KeyboardInterrupt:
        server.stop(1.0)
    finally:
        signal.signal(signal.SIGTERM, previous)
        master.close()
    return 0


def _identity(args):
    from kernflow.core.process_identity import master_identity
    return master_identity(args.cluster if getattr(args, "etcd", None) else None)


@hookimpl
def kernflow_register_commands(registry):
    registry.register("master", "serve a master for a cluster of kernflow workers", _configure, _run,
                      identity=_identity)
