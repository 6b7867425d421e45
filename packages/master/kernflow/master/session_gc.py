"""Closing master sessions that nobody uses (TF's master `session_gc_seconds`).

A client that goes away without CloseSession (a crashed trainer, a notebook left open) would keep
its session, and the graphs it registered on every worker, for the master's lifetime. The master
closes a session that has had no call and no running step for `session_gc_seconds` (default 24 h;
``$KERNFLOW_SESSION_GC_SECONDS``; 0 disables), deregistering its graphs; the client's next call
fails with AbortedError saying so, and its CloseSession succeeds.

`SessionGC` holds the timeout, the background thread that asks the master to collect (a few
times per timeout, at least once a minute) and the handles collected so far (the most recent
`_COLLECTED_MEMORY`, for the error message).
"""

from __future__ import annotations

import collections
import logging
import os
import threading
import time

from kernflow.core.framework import errors

__all__ = ["SessionGC", "DEFAULT_SESSION_GC_SECONDS", "session_gc_seconds"]

DEFAULT_SESSION_GC_SECONDS = 24 * 3600.0
ENV_SESSION_GC_SECONDS = "KERNFLOW_SESSION_GC_SECONDS"
_MAX_INTERVAL_S = 60.0
_COLLECTED_MEMORY = 10_000
_log = logging.getLogger(__name__)


def session_gc_seconds(value: float | None = None) -> float:
    """`value`, else ``$KERNFLOW_SESSION_GC_SECONDS``, else `DEFAULT_SESSION_GC_SECONDS`; 0 (or a
    negative value) means sessions are never collected.

    Raises:
        ValueError: not a number.
    """
    raw = value if value is not None else os.environ.get(ENV_SESSION_GC_SECONDS, DEFAULT_SESSION_GC_SECONDS)
    try:
        s = float(raw)
    except (TypeError, ValueError):
        raise ValueError(f"the session GC timeout (${ENV_SESSION_GC_SECONDS}, or session_gc_seconds) "
                         f"must be a number of seconds, got {raw!r}") from None
    return max(s, 0.0)


class SessionGC:
    """The master's idle-session collection.

    Args:
        collect: fn() closing the idle sessions (`Master.collect_idle_sessions`), run by the thread
            until `stop` (`Master.close`).
        timeout_s: as `session_gc_seconds`.
    """

    def __init__(self, collect, timeout_s: float | None = None):
        self.timeout_s = session_gc_seconds(timeout_s)
        self.interval_s = min(max(self.timeout_s / 4.0, 0.01), _MAX_INTERVAL_S)
        self._collect = collect
        self._lock = threading.Lock()
        self._stop: threading.Event | None = None
        self.thread: threading.Thread | None = None   # the last collecting thread started
        self._collected: collections.OrderedDict[str, float] = collections.OrderedDict()

    def start(self) -> None:
        """Starts the collecting thread unless it runs or collection is off (idempotent)."""
        if self.timeout_s <= 0:
            return
        with self._lock:
            if self._stop is not None:
                return
            self._stop = stop = threading.Event()
            self.thread = thread = threading.Thread(target=self._run, args=(stop,),
                                                    name="kernflow-session-gc", daemon=True)
        thread.start()

    def stop(self) -> None:
        """Stops the thread (it ends within one interval); `start` may start a new one."""
        with self._lock:
            stop, self._stop = self._stop, None
        if stop is not None:
            stop.set()

    def _run(self, stop: threading.Event) -> None:
        while not stop.wait(self.interval_s):
            try:
                self._collect()
            except Exception:  # noqa: BLE001 - the next round tries again
                _log.exception("closing idle sessions failed")

    def is_idle(self, session, now: float | None = None) -> bool:
        """True when collection is on and `session` (its ``last_used``, monotonic) has had no use
        for longer than the timeout."""
        now = time.monotonic() if now is None else now
        return self.timeout_s > 0 and now - session.last_used > self.timeout_s

    def collected(self, handle: str) -> None:
        """Records that the session `handle` was closed for idleness."""
        _log.info("Closed session %s: no call for more than %g s (session_gc_seconds)", handle,
                  self.timeout_s)
        with self._lock:
            self._collected[handle] = self.timeout_s
            while len(self._collected) > _COLLECTED_MEMORY:
                self._collected.popitem(last=False)

    def was_collected(self, handle: str) -> bool:
        return handle in self._collected

    def not_found(self, handle: str) -> errors.AbortedError:
        """The error of a call naming a session this master does not have."""
        idle = self._collected.get(handle)
        if idle is not None:
            return errors.AbortedError(
                None, None, f"Session {handle} is not found: the master closed it after {idle:g} s "
                f"without a call (session_gc_seconds, ${ENV_SESSION_GC_SECONDS}). Create a new session.")
        return errors.AbortedError(None, None, f"Session {handle} is not found. Possibly, this "
                                   "master has restarted, or the session was closed.")
