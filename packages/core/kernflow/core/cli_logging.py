"""Python logging for the ``kernflow`` command: one stderr line per record, naming the process.

::

    2026-11-28 10:00:00,123 INFO kernflow-worker[/job:worker/task:1] kernflow.worker.server: ...

The level (``--log-level`` or ``KERNFLOW_LOG_LEVEL``) applies to kernflow's loggers (``kernflow.*``);
other libraries show WARNING and above. Without either, servers (``kernflow master``, ``kernflow
worker``) log INFO, as TensorFlow's servers do, and other commands WARNING
(`ProcessIdentity.default_log_level`).
"""

from __future__ import annotations

import logging
import sys

__all__ = ["LOG_LEVEL_ENV", "LEVELS", "parse_level", "configure_logging"]

LOG_LEVEL_ENV = "KERNFLOW_LOG_LEVEL"
LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL")
_ALIASES = {"WARN": "WARNING", "FATAL": "CRITICAL"}


def parse_level(text: str) -> str:
    """A level name (case-insensitive; WARN and FATAL are aliases) as one of `LEVELS`.

    Raises:
        ValueError: naming the accepted levels.
    """
    name = str(text).strip().upper()
    name = _ALIASES.get(name, name)
    if name not in LEVELS:
        raise ValueError(f"unknown log level {text!r}: expected one of {', '.join(LEVELS)}")
    return name


def configure_logging(level: str, process: str, stream=None) -> logging.Handler:
    """Sends log records to `stream` (stderr) as timestamped lines naming `process`.

    Calling it again replaces the handler an earlier call installed (nothing else is touched).

    Args:
        level: one of `LEVELS`, for the ``kernflow`` loggers.
        process: shown after the level, e.g. ``kernflow-worker[/job:worker/task:1]``.
        stream: where lines go (default: `sys.stderr`).

    Returns:
        The handler installed on the root logger.
    """
    root = logging.getLogger()
    for h in root.handlers[:]:
        if getattr(h, "_kernflow_cli", False):
            root.removeHandler(h)
    handler = logging.StreamHandler(stream if stream is not None else sys.stderr)
    handler._kernflow_cli = True
    handler.setFormatter(logging.Formatter(
        f"%(asctime)s %(levelname)s {process.replace('%', '%%')} %(name)s: %(message)s"))
    root.addHandler(handler)
    value = logging.getLevelName(parse_level(level))
    logging.getLogger("kernflow").setLevel(value)
    root.setLevel(max(value, logging.WARNING))
    return handler
