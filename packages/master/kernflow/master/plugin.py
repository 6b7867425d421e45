"""Hook implementations of kernflow-master (entry point `master` in group `kernflow`)."""

from kernflow.core.plugins import hookimpl  # noqa: F401 - hooks are added as the package grows
