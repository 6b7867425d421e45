"""Core's own plugin: the embedded session factory, registered like any third-party plugin."""

from kernflow.core.plugins.hookspecs import hookimpl


def _embedded_factory(target, graph, config):
    from kernflow.core.runtime.direct_session import DirectSession
    return DirectSession(target, graph, config)


def _embedded_reset(target, containers=None, config=None):
    from kernflow.core.runtime.direct_session import reset_all
    reset_all(containers)


_embedded_factory.reset = _embedded_reset


@hookimpl
def kernflow_register_session_factories(registry):
    registry.register("", _embedded_factory)


@hookimpl
def kernflow_register_commands(registry):
    from kernflow.core import cli
    cli.register_builtin_commands(registry)


@hookimpl
def kernflow_register_optimizers(registry):
    from kernflow.core.train.optimizers import BUILTIN
    from kernflow.core.train.optimizers_more import MORE
    for name, cls in {**BUILTIN, **MORE}.items():
        registry.register(name, cls)
