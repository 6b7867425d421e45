"""`kf.logging`: TF1's `tf.logging` on Python's `logging` (logger ``"kernflow"``).

`set_verbosity(kf.logging.INFO)` sets the logger's level and, as TF1 does for its own logger, makes
sure it has a handler writing to stderr, so a script's ``kf.logging.info(...)`` lines show without
configuring `logging` itself. The levels are `logging`'s (DEBUG 10 ... FATAL 50; WARN = WARNING).

Example::

    kf.logging.set_verbosity(kf.logging.INFO)
    kf.logging.info("step %d: loss %.3f", step, loss)
    kf.logging.log_every_n(kf.logging.INFO, "still training (%d)", 100, step)
"""

from __future__ import annotations

import logging as _logging
import sys as _sys
import threading as _threading

__all__ = ["DEBUG", "ERROR", "FATAL", "INFO", "WARN", "TaskLevelStatusMessage", "debug", "error",
           "fatal", "flush", "get_verbosity", "info", "log", "log_every_n", "log_first_n", "log_if",
           "set_verbosity", "vlog", "warn", "warning"]

DEBUG = _logging.DEBUG
INFO = _logging.INFO
WARN = _logging.WARNING
ERROR = _logging.ERROR
FATAL = _logging.FATAL

_logger = _logging.getLogger("kernflow")
_counts: dict = {}
_counts_lock = _threading.Lock()


def _ensure_handler() -> None:
    # Not when logging is configured already (the `kernflow` command's handler on the root logger):
    # every line would show twice.
    if not _logger.hasHandlers():
        handler = _logging.StreamHandler(_sys.stderr)
        handler.setFormatter(_logging.Formatter("%(levelname)s:kernflow:%(message)s"))
        _logger.addHandler(handler)


def set_verbosity(v) -> None:
    """Sets the threshold of the messages shown (DEBUG, INFO, WARN, ERROR, FATAL or a number)."""
    _ensure_handler()
    _logger.setLevel(v)


def get_verbosity() -> int:
    """The threshold `set_verbosity` set (the effective level of the logger)."""
    return _logger.getEffectiveLevel()


def log(level, msg, *args, **kwargs) -> None:
    """Logs `msg % args` at `level`."""
    _logger.log(level, msg, *args, **kwargs)


def debug(msg, *args, **kwargs) -> None:
    _logger.debug(msg, *args, **kwargs)


def info(msg, *args, **kwargs) -> None:
    _logger.info(msg, *args, **kwargs)


def warning(msg, *args, **kwargs) -> None:
    _logger.warning(msg, *args, **kwargs)


warn = warning


def error(msg, *args, **kwargs) -> None:
    _logger.error(msg, *args, **kwargs)


def fatal(msg, *args, **kwargs) -> None:
    """Logs at FATAL (TF1 does not exit here either)."""
    _logger.fatal(msg, *args, **kwargs)


def vlog(level, msg, *args, **kwargs) -> None:
    """Logs at `level` (TF1's verbose log: a plain level here)."""
    _logger.log(level, msg, *args, **kwargs)


def log_if(level, msg, condition, *args) -> None:
    """Logs `msg % args` at `level` when `condition` is true."""
    if condition:
        _logger.log(level, msg, *args)


def _caller_count(key) -> int:
    with _counts_lock:
        n = _counts.get(key, 0)
        _counts[key] = n + 1
        return n


def _site() -> tuple:
    f = _sys._getframe(2)
    return (f.f_code.co_filename, f.f_lineno)


def log_every_n(level, msg, n, *args) -> None:
    """Logs `msg % args` the 1st, (n+1)th, (2n+1)th... time this line runs."""
    if _caller_count(_site()) % max(int(n), 1) == 0:
        _logger.log(level, msg, *args)


def log_first_n(level, msg, n, *args) -> None:
    """Logs `msg % args` the first `n` times this line runs."""
    if _caller_count(_site()) < int(n):
        _logger.log(level, msg, *args)


def flush() -> None:
    """Flushes the logger's handlers."""
    for h in _logger.handlers:
        h.flush()


def TaskLevelStatusMessage(msg) -> None:  # noqa: N802 - TF1's name
    """Logs a status message at ERROR (as TF1)."""
    _logger.error(msg)
