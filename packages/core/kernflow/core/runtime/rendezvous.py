"""Rendezvous: where a _Send leaves a tensor and the matching _Recv picks it up.

Keys follow TF: ``send_device;incarnation;recv_device;tensor_name;frame_id:iter_id``. A step owns
one rendezvous; `abort` wakes every waiting receiver with the error, so nothing waits forever.
"""

from __future__ import annotations

import threading

from kernflow.core.framework import errors
from kernflow.core.runtime.cancellation import CancellationManager

__all__ = ["call_quietly", "create_key", "LocalRendezvous"]


def create_key(send_device: str, incarnation: int, recv_device: str, tensor_name: str,
               frame_iter: tuple[int, int] = (0, 0)) -> str:
    return f"{send_device};{incarnation:x};{recv_device};{tensor_name};{frame_iter[0]}:{frame_iter[1]}"


class LocalRendezvous:
    """An in-process rendezvous. `recv_async` never blocks a thread: it registers a callback.

    It is also the local half of a worker's rendezvous (`kernflow.worker.rendezvous`), which wraps
    one and adds pulls from other tasks: a value sent on a task always waits here, for a local Recv
    or for another task's RecvTensor (`recv_async` / `cancel_recv`).
    """

    def __init__(self):
        self._lock = threading.Lock()
        self._values: dict[str, tuple] = {}     # key -> (value, is_dead)
        self._waiters: dict[str, list] = {}     # key -> [callback(value, is_dead, error)]
        self._error: Exception | None = None
        # Blocking kernels of the step (queue ops) register here; `abort` cancels them.
        self.cancellation = CancellationManager()

    def send(self, key: str, value, is_dead: bool = False) -> None:
        """Delivers `value` for `key` to the first waiting receiver, or keeps it until one comes.

        Raises:
            The abort error if the step was aborted; InternalError if `key` was already sent.
        """
        with self._lock:
            if self._error is not None:
                raise self._error
            waiters = self._waiters.get(key)
            if not waiters:
                if key in self._values:
                    raise errors.InternalError(None, None, f"Send of an already sent tensor: {key}")
                self._values[key] = (value, is_dead)
                return
            cb = waiters.pop(0)
            if not waiters:
                del self._waiters[key]
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

    def cancel_recv(self, key: str, callback) -> bool:
        """Withdraws a callback registered with `recv_async`.

        Returns:
            True if it was still waiting (it will never be called); False if it was already taken
            by a send or an abort (it has been or is about to be called).
        """
        with self._lock:
            cbs = self._waiters.get(key)
            if not cbs:
                return False
            for i, cb in enumerate(cbs):
                if cb is callback:
                    del cbs[i]
                    if not cbs:
                        del self._waiters[key]
                    return True
        return False

    def is_empty(self) -> bool:
        """True when no value waits to be received and no receiver waits for a value."""
        with self._lock:
            return not self._values and not self._waiters

    def abort(self, error: Exception) -> None:
        """Fails all pending and future receives with `error` (the first abort wins) and cancels
        the step's blocking kernels. A failing callback does not keep the others from being woken."""
        with self._lock:
            if self._error is not None:
                return
            self._error = error
            waiters, self._waiters = self._waiters, {}
            self._values.clear()
        self.cancellation.cancel(error)
        for cbs in waiters.values():
            for cb in cbs:
                call_quietly(cb, None, False, error)

    @property
    def error(self):
        return self._error


def call_quietly(cb, *args) -> None:
    """Calls a receiver's callback while waking many: an exception is logged, not raised."""
    try:
        cb(*args)
    except Exception:  # noqa: BLE001 - one failing waiter must not stop the others being woken
        import logging
        logging.getLogger(__name__).exception("rendezvous callback failed during abort")
