"""Rendezvous: where a _Send leaves a tensor and the matching _Recv picks it up.

Keys follow TF: ``send_device;incarnation;recv_device;tensor_name;frame_id:iter_id``. A step owns
one rendezvous; `abort` wakes every waiting receiver with the error, so nothing waits forever.
"""

from __future__ import annotations

import threading

from kernflow.core.framework import errors
from kernflow.core.runtime.cancellation import CancellationManager

__all__ = ["create_key", "LocalRendezvous"]


def create_key(send_device: str, incarnation: int, recv_device: str, tensor_name: str,
               frame_iter: tuple[int, int] = (0, 0)) -> str:
    return f"{send_device};{incarnation:x};{recv_device};{tensor_name};{frame_iter[0]}:{frame_iter[1]}"


class LocalRendezvous:
    """An in-process rendezvous. `recv_async` never blocks a thread: it registers a callback."""

    def __init__(self):
        self._lock = threading.Lock()
        self._values: dict[str, tuple] = {}     # key -> (value, is_dead)
        self._waiters: dict[str, list] = {}     # key -> [callback(value, is_dead, error)]
        self._error: Exception | None = None
        # Blocking kernels of the step (queue ops) register here; `abort` cancels them.
        self.cancellation = CancellationManager()

    def send(self, key: str, value, is_dead: bool = False) -> None:
        """Delivers `value` for `key`. Raises the abort error if the step was aborted."""
        with self._lock:
            if self._error is not None:
                raise self._error
            waiters = self._waiters.pop(key, None)
            if not waiters:
                if key in self._values:
                    raise errors.InternalError(None, None, f"Send of an already sent tensor: {key}")
                self._values[key] = (value, is_dead)
                return
        cb = waiters.pop(0)
        if waiters:
            with self._lock:
                self._waiters[key] = waiters
        cb(value, is_dead, None)

    def recv_async(self, key: str, callback) -> None:
        """Calls ``callback(value, is_dead, error)`` once `key` is sent (or the step aborts)."""
        with self._lock:
            err = self._error
            item = self._values.pop(key, None) if err is None else None
            if err is None and item is None:
                self._waiters.setdefault(key, []).append(callback)
                return
        if err is not None:
            callback(None, False, err)
        else:
            callback(item[0], item[1], None)

    def abort(self, error: Exception) -> None:
        """Fails all pending and future receives with `error` (the first abort wins)."""
        with self._lock:
            if self._error is not None:
                return
            self._error = error
            waiters, self._waiters = self._waiters, {}
            self._values.clear()
        self.cancellation.cancel(error)
        for cbs in waiters.values():
            for cb in cbs:
                cb(None, False, error)

    @property
    def error(self):
        return self._error
