"""Hook implementations of kernflow-client (entry point `client` in group `kernflow`)."""

from kernflow.core.plugins import hookimpl


@hookimpl
def kernflow_register_session_factories(registry):
    """Registers ``grpc://host:port`` and ``etcd://host:port/cluster`` targets (a remote master)."""
    from kernflow.client.grpc_session import etcd_session_factory, grpc_session_factory
    registry.register("grpc", grpc_session_factory)
    registry.register("etcd", etcd_session_factory)


@hookimpl
def kernflow_register_commands(registry):
    """Adds ``kernflow cluster up`` / ``kernflow cluster down`` (a local cluster found through etcd)
    and ``kernflow top`` (a live view of a cluster's tasks)."""
    from kernflow.client import cluster_cli, top_cli
    registry.register("cluster", "start or stop a local cluster (etcd, a master, tasks) on this machine",
                      cluster_cli.configure, cluster_cli.run)
    registry.register("top", "a live view of a cluster's tasks: state, devices, steps/s, last error",
                      top_cli.configure, top_cli.run)
