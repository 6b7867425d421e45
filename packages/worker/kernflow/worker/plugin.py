"""Hook implementations of kernflow-worker (entry point `worker` in group `kernflow`)."""

from kernflow.core.plugins import hookimpl  # noqa: F401 - hooks are added as the package grows
