"""Cancellation of a step: callbacks that wake whatever a kernel is blocked on.

Each step owns one `CancellationManager` (held by its rendezvous, which every partition of the
step shares). A blocking asynchronous kernel (a queue dequeue waiting for an element) registers a
callback; aborting the step (an error in another kernel, a deadline, `AbortStep`, closing the
session) calls every registered callback once with the abort error, so no op waits on a step that
has already failed. A kernel deregisters when it completes normally.
"""

from __future__ import annotations

import itertools
import threading

__all__ = ["CancellationManager"]


class CancellationManager:
    """Registered callbacks run once, with the error, when the step is cancelled."""

    def __init__(self):
        self._lock = threading.Lock()
        self._callbacks: dict[int, object] = {}
        self._tokens = itertools.count()
        self._error: Exception | None = None

    @property
    def error(self) -> Exception | None:
        """The cancellation error, or None while the step is live."""
        return self._error

    @property
    def is_cancelled(self) -> bool:
        return self._error is not None

    def register(self, callback) -> int | None:
        """Registers ``callback(error)``; returns a token, or None if already cancelled (then the
        callback is not called: the caller fails at once with `error`)."""
        with self._lock:
            if self._error is not None:
                return None
            token = next(self._tokens)
            self._callbacks[token] = callback
            return token

    def deregister(self, token) -> bool:
        """Removes a callback; False if it already ran (or is running) because of a cancel."""
        if token is None:
            return False
        with self._lock:
            return self._callbacks.pop(token, None) is not None

    def cancel(self, error: Exception) -> None:
        """Cancels the step (the first error wins) and runs every registered callback."""
        with self._lock:
            if self._error is not None:
                return
            self._error = error
            callbacks, self._callbacks = self._callbacks, {}
        for cb in callbacks.values():
            try:
                cb(error)
            except Exception:  # noqa: BLE001 - one bad callback must not stop the others
                import traceback
                traceback.print_exc()


class _NeverCancelled:
    """Stands in when a step has no rendezvous (the inline path)."""

    error = None
    is_cancelled = False

    @staticmethod
    def register(callback):
        return -1

    @staticmethod
    def deregister(token):
        return True

    @staticmethod
    def cancel(error):
        pass


NEVER_CANCELLED = _NeverCancelled()
