"""Hook implementations of kernflow-client (entry point `client` in group `kernflow`)."""

from kernflow.core.plugins import hookimpl  # noqa: F401 - hooks are added as the package grows
