"""Extension points: pluggy hookspecs, the plugin manager and the registries hooks fill."""

from kernflow.core.plugins.hookspecs import hookimpl, hookspec
from kernflow.core.plugins.manager import get_plugin_manager, registries

__all__ = ["hookimpl", "hookspec", "get_plugin_manager", "registries"]
