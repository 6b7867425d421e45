"""Hook implementations of kernflow-client (entry point `client` in group `kernflow`)."""

from kernflow.core.plugins import hookimpl


@hookimpl
def kernflow_register_session_factories(registry):
    """Registers ``grpc://host:port`` and ``etcd://host:port/cluster`` targets (a remote master), and
    their TLS forms ``grpcs://host:port`` (refused unless TLS is configured: kernflow.client.security)
    and ``etcds://host:port/cluster`` (an etcd serving TLS, as `kernflow cluster up --secure` starts)."""
    from kernflow.client.grpc_session import etcd_session_factory, grpc_session_factory
    registry.register("grpc", grpc_session_factory)
    registry.register("grpcs", grpc_session_factory)
    registry.register("etcd", etcd_session_factory)
    registry.register("etcds", etcd_session_factory)


@hookimpl
def kernflow_register_commands(registry):
    """Adds ``kernflow cluster up`` / ``kernflow cluster down`` (a local cluster found through etcd)
    and ``kernflow top`` (a live view of a cluster's tasks)."""
    from kernflow.client import cluster_cli, top_cli
    registry.register("cluster", "start or stop a local cluster (etcd, a master, tasks) on this machine",
                      cluster_cli.configure, cluster_cli.run)
    registry.register("top", "a live view of a cluster's tasks: state, devices, steps/s, last error",
                      top_cli.configure, top_cli.run)


def _grpc_transport():
    from kernflow.client.grpc_transport import GrpcTransport
    return GrpcTransport()


def _shm_transport():
    from kernflow.client.shm_transport import ShmTransport
    return ShmTransport()


@hookimpl
def kernflow_register_transports(registry):
    """Registers "grpc" (in-band RecvTensor, every task; priority 0) and "shm" (/dev/shm segments
    between tasks of one host; priority 100). The modules are imported when first used."""
    registry.register("grpc", _grpc_transport, priority=0)
    registry.register("shm", _shm_transport, priority=100)
