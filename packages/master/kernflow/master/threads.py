"""Threads for the master's concurrent worker calls.

The RunGraph calls of one step wait on each other (a task's `_Recv` needs the sending task's
partition to have started), so a bounded pool could deadlock when many steps run at once. The
`ElasticPool` never queues work behind busy threads: it hands a call to an idle thread or starts a
new one, and idle threads exit after a while.
"""

from __future__ import annotations

import logging
import queue
import threading
import time

__all__ = ["ElasticPool", "call_all"]

_log = logging.getLogger(__name__)


class ElasticPool:
    """Runs callables on daemon threads, reusing idle ones; never makes a call wait for a thread."""

    def __init__(self, name: str = "kernflow-master", idle_timeout_s: float = 30.0):
        self._name = name
        self._idle_timeout_s = idle_timeout_s
        self._q: queue.SimpleQueue = queue.SimpleQueue()
        self._lock = threading.Lock()
        self._idle = 0
        self._count = 0

    def submit(self, fn) -> None:
        """Runs ``fn()`` on some thread; exceptions are logged (callers report through queues)."""
        with self._lock:
            if self._idle > 0:
                self._idle -= 1
                self._q.put(fn)
                return
            self._count += 1
            n = self._count
        threading.Thread(target=self._loop, args=(fn,), name=f"{self._name}-{n}", daemon=True).start()

    def _loop(self, fn) -> None:
        while True:
            try:
                fn()
            except BaseException:  # noqa: BLE001 - a task must never kill the thread
                _log.exception("unexpected error in a master thread")
            fn = None
            with self._lock:
                self._idle += 1
            try:
                fn = self._q.get(timeout=self._idle_timeout_s)
            except queue.Empty:
                # A submitter takes an idle slot and enqueues under the lock: look once more there.
                with self._lock:
                    try:
                        fn = self._q.get_nowait()
                    except queue.Empty:
                        self._idle -= 1
                        return


def call_all(pool: ElasticPool, calls: dict, wait_s: float | None) -> dict:
    """Runs ``calls[key]()`` concurrently; returns ``{key: (result, error)}``.

    Calls still running after `wait_s` seconds are reported with a `TimeoutError` (they finish in
    the background).
    """
    q: queue.SimpleQueue = queue.SimpleQueue()

    def wrap(key, fn):
        def run():
            try:
                q.put((key, fn(), None))
            except BaseException as e:  # noqa: BLE001 - reported to the caller
                q.put((key, None, e))
        return run

    for key, fn in calls.items():
        pool.submit(wrap(key, fn))
    out = {}
    end = None if wait_s is None else time.monotonic() + wait_s
    while len(out) < len(calls):
        try:
            key, res, err = q.get(timeout=None if end is None else max(0.0, end - time.monotonic()))
        except queue.Empty:
            break
        out[key] = (res, err)
    for key in calls:
        if key not in out:
            out[key] = (None, TimeoutError(f"no answer within {wait_s:.1f} s"))
    return out
