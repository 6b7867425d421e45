"""The plugin manager: loads `kernflow` entry points lazily and fills the registries once.

Set ``KERNFLOW_DISABLE_PLUGINS=name1,name2`` to block plugins by entry-point name (or
``KERNFLOW_DISABLE_PLUGINS=all`` to load no entry points at all, leaving only core's built-ins).
"""

from __future__ import annotations

import logging
import os
import threading

import pluggy

from kernflow.core.plugins import hookspecs

__all__ = ["get_plugin_manager", "registries", "Registries", "reset_for_tests"]

_log = logging.getLogger(__name__)
DISABLE_ENV = "KERNFLOW_DISABLE_PLUGINS"
# Core's own plugins, registered like any other (datasette's DEFAULT_PLUGINS).
DEFAULT_PLUGINS = ("kernflow.core.plugins.builtin",)

_lock = threading.RLock()
_pm: pluggy.PluginManager | None = None
_registries = None


class KernflowPluginManager(pluggy.PluginManager):
    """A pluggy manager typed to the kernflow hookspecs."""

    def __init__(self):
        super().__init__("kernflow")
        self.add_hookspecs(hookspecs)


def _blocked() -> set[str]:
    return {x.strip() for x in os.environ.get(DISABLE_ENV, "").split(",") if x.strip()}


def get_plugin_manager() -> KernflowPluginManager:
    """Returns the process-wide plugin manager, loading entry points on first call."""
    global _pm
    if _pm is not None:
        return _pm
    with _lock:
        if _pm is None:
            import importlib
            pm = KernflowPluginManager()
            for mod in DEFAULT_PLUGINS:
                pm.register(importlib.import_module(mod), name=mod)
            blocked = _blocked()
            if "all" not in blocked:
                for name in blocked:
                    pm.set_blocked(name)
                pm.load_setuptools_entrypoints("kernflow")
            pm.check_pending()
            _log.debug("kernflow plugins: %s", [n for n, _ in pm.list_name_plugin()])
            _pm = pm
    return _pm


class Registries:
    """The registries the hooks fill: ops, kernels, devices, optimizers, transports, sessions, servers,
    commands."""

    def __init__(self, pm):
        from kernflow.core.plugins import registry as r
        self.ops = r.OpRegistrar()
        self.kernels = r.KernelRegistry()
        self.devices = r.DeviceRegistry()
        self.optimizers = r.NamedRegistry("optimizer")
        self.transports = r.TransportRegistry()
        self.session_factories = r.NamedRegistry("session factory")
        self.servers = r.ServerRegistry()
        self.commands = r.CommandRegistry()
        pm.hook.kernflow_register_ops(registry=self.ops)
        pm.hook.kernflow_register_devices(registry=self.devices)
        pm.hook.kernflow_register_kernels(registry=self.kernels)
        pm.hook.kernflow_register_optimizers(registry=self.optimizers)
        pm.hook.kernflow_register_transports(registry=self.transports)
        pm.hook.kernflow_register_session_factories(registry=self.session_factories)
        pm.hook.kernflow_register_servers(registry=self.servers)
        pm.hook.kernflow_register_commands(registry=self.commands)


def registries() -> Registries:
    """Returns the filled registries (calling every plugin's hooks the first time)."""
    global _registries
    if _registries is not None:
        return _registries
    with _lock:
        if _registries is None:
            _registries = Registries(get_plugin_manager())
    return _registries


def reset_for_tests() -> None:
    """Forgets the plugin manager and registries (tests that change the environment use it)."""
    global _pm, _registries
    with _lock:
        _pm = None
        _registries = None
