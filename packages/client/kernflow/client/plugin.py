"""Hook implementations of kernflow-client (entry point `client` in group `kernflow`)."""

from kernflow.core.plugins import hookimpl


@hookimpl
def kernflow_register_session_factories(registry):
    """Registers ``grpc://host:port`` targets: sessions run by a remote master."""
    from kernflow.client.grpc_session import grpc_session_factory
    registry.register("grpc", grpc_session_factory)
