"""The `kernflow` command. Subcommands come from plugins (`kernflow_register_commands`).

``--trace {console,otlp,none}`` (or the ``KERNFLOW_TRACE`` environment variable, which also accepts
``file:PATH``) installs the OpenTelemetry SDK in this process before the command runs; see
`kernflow.core.tracing_sdk`.
"""

from __future__ import annotations

import argparse
import sys

__all__ = ["main", "register_builtin_commands"]


def register_builtin_commands(registry) -> None:
    from kernflow.core import demo
    registry.register("demo", "train a model on the digits (embedded, or on a cluster with --target)",
                      demo.configure, demo.run)


def main(argv=None) -> int:
    from kernflow.core.plugins import registries
    commands = registries().commands.commands
    parser = argparse.ArgumentParser(prog="kernflow", description="kernflow: TensorFlow 1.x-style "
                                     "dataflow graphs, embedded or on a cluster.")
    parser.add_argument("--trace", choices=("console", "otlp", "none"), default=None,
                        help="export OpenTelemetry spans of this process: console (stderr), otlp "
                             "(OTEL_EXPORTER_OTLP_ENDPOINT) or none (default: $KERNFLOW_TRACE, which "
                             "also accepts file:PATH for JSON lines)")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in sorted(commands):
        c = commands[name]
        p = sub.add_parser(name, help=c.help, description=c.help)
        c.configure(p)
    args = parser.parse_args(argv)
    if not args.command:
        parser.print_help()
        return 2
    from kernflow.core import tracing_sdk
    try:
        tracing_sdk.configure_from_env(service_name=f"kernflow-{args.command}", mode=args.trace)
    except tracing_sdk.TracingConfigError as e:
        print(f"kernflow: {e}", file=sys.stderr)
        return 2
    return int(commands[args.command].run(args) or 0)


if __name__ == "__main__":
    sys.exit(main())
