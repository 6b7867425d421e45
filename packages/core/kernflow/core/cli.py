"""The `kernflow` command. Subcommands come from plugins (`kernflow_register_commands`)."""

from __future__ import annotations

import argparse
import sys

__all__ = ["main", "register_builtin_commands"]


def register_builtin_commands(registry) -> None:
    from kernflow.core import demo
    registry.register("demo", "train a model on the embedded runtime", demo.configure, demo.run)


def main(argv=None) -> int:
    from kernflow.core.plugins import registries
    commands = registries().commands.commands
    parser = argparse.ArgumentParser(prog="kernflow", description="kernflow: TensorFlow 1.x-style "
                                     "dataflow graphs, embedded or on a cluster.")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in sorted(commands):
        c = commands[name]
        p = sub.add_parser(name, help=c.help, description=c.help)
        c.configure(p)
    args = parser.parse_args(argv)
    if not args.command:
        parser.print_help()
        return 2
    return int(commands[args.command].run(args) or 0)


if __name__ == "__main__":
    sys.exit(main())
