"""Hook implementations of kernflow-master (entry point `master` in group `kernflow`).

Adds the ``kernflow master`` command: a standalone master for a cluster of workers, e.g.::

    kernflow master --port 2222 --cluster-spec '{"worker": ["10.0.0.1:2223", "10.0.0.2:2223"]}'

Sessions then use ``kf.Session("grpc://<this host>:2222")``.
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
    parser.add_argument("--cluster-spec", required=True,
                        help='the workers as JSON, {"job": ["host:port", ...]} or {"job": {"index": '
                             '"host:port"}}, or @FILE to read it from a file')


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


def build_master(cluster, config=None):
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
    return Master(resolve, config=config, tasks=cluster.task_names())


def _run(args) -> int:
    from kernflow.master.server import MasterServer
    try:
        cluster = load_cluster_spec(args.cluster_spec)
    except (OSError, TypeError, ValueError) as e:
        print(f"kernflow master: {e}", file=sys.stderr)
        return 2
    if not cluster:
        print("kernflow master: the cluster spec names no tasks", file=sys.stderr)
        return 2
    master = build_master(cluster)
    server = MasterServer(master, port=args.port, host=args.host)
    print(f"kernflow master serving {server.target} for {', '.join(cluster.task_names())}", flush=True)

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


@hookimpl
def kernflow_register_commands(registry):
    registry.register("master", "serve a master for a cluster of kernflow workers", _configure, _run)
