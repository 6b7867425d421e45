"""Blocking resources: lines of waiting ops that hold no thread (queues, conditional accumulators).

A blocking resource keeps one or more *lines* of attempts: ops waiting for the resource to change
(an enqueue for room, a dequeue for elements, a take_grad for enough gradients), each line served
in arrival order. An attempt's ``step(resource)`` tries to make progress under the resource's lock
and returns NO_PROGRESS, PROGRESS or COMPLETE. Every change of the resource runs
`BlockingResource._flush_locked`, which lets the head of each line make as much progress as it can
and collects the attempts that finished; their `done` callbacks run after the lock is released
(`_complete`), because `done` may run further kernels on this thread that touch the same resource.
Blocking kernels are asynchronous: a waiting op is an attempt in a line, not a thread.

Invariants:

* An attempt is finished exactly once, under the resource lock (`Attempt.finished`), by whichever
  comes first: `_flush_locked`, the step's cancellation, its ``timeout_ms``, or the destruction of
  the resource. Only the finisher calls `done`.
* An attempt that fails gives back what it holds of the resource (`Attempt.restore`) before the
  lines are flushed again.
"""

from __future__ import annotations

import collections
import heapq
import itertools
import logging
import threading
import time

from kernflow.core.framework import errors

__all__ = ["NO_PROGRESS", "PROGRESS", "COMPLETE", "Attempt", "BlockingResource", "timers"]

_log = logging.getLogger(__name__)

NO_PROGRESS, PROGRESS, COMPLETE = 0, 1, 2


class Attempt:
    """One blocked (or about to block) op: what it waits for and how to tell it it is done.

    Subclasses define ``step(resource) -> NO_PROGRESS | PROGRESS | COMPLETE``; a COMPLETE step
    leaves the op's outputs (or an exception) in `result`.
    """

    __slots__ = ("done", "finished", "result", "token", "cancellation")

    def __init__(self, done):
        self.done = done
        self.finished = False
        self.result = None
        self.token = None
        self.cancellation = None

    def restore(self, resource) -> None:
        """Gives back what the attempt holds of the resource (called when it fails)."""


class _Timers:
    """One daemon thread that runs callbacks at deadlines (for ops with ``timeout_ms`` > 0)."""

    def __init__(self):
        self._cv = threading.Condition()
        self._heap = []
        self._seq = itertools.count()
        self._thread = None

    def schedule(self, delay_s: float, fn) -> None:
        with self._cv:
            heapq.heappush(self._heap, (time.monotonic() + delay_s, next(self._seq), fn))
            if self._thread is None:
                self._thread = threading.Thread(target=self._loop, name="kernflow-blocking-timers",
                                                daemon=True)
                self._thread.start()
            self._cv.notify()

    def _loop(self) -> None:
        while True:
            with self._cv:
                while not self._heap:
                    self._cv.wait()
                when, _, fn = self._heap[0]
                delay = when - time.monotonic()
                if delay > 0:
                    self._cv.wait(delay)
                    continue
                heapq.heappop(self._heap)
            try:
                fn()
            except Exception:  # noqa: BLE001 - one failing callback must not stop the timers
                _log.exception("timeout callback failed")


timers = _Timers()


class BlockingResource:
    """A resource whose ops may wait: its lock, its lines of attempts, cancellation and timeouts.

    Args:
        kind: the resource's kind for messages ("FIFOQueue", "ConditionalAccumulator"...).
        name: the resource name (shown in error messages).
        nlines: how many lines of attempts it keeps (`start` takes the line's index).
    """

    def __init__(self, kind: str, name: str, nlines: int):
        self.kind, self.name = kind, name
        self._lock = threading.Lock()
        self._lines = tuple(collections.deque() for _ in range(nlines))

    def _flush_locked(self) -> list:
        """Lets the head of each line progress until none can; returns the finished attempts."""
        out = []
        progress = True
        while progress:
            progress = False
            for line in self._lines:
                while line:
                    a = line[0]
                    st = a.step(self)
                    if st == NO_PROGRESS:
                        break
                    progress = True
                    if st == COMPLETE:
                        line.popleft()
                        a.finished = True
                        out.append(a)
        return out

    @staticmethod
    def _complete(attempts) -> None:
        """Calls the `done` of finished attempts (never under the lock)."""
        for a in attempts:
            if a.cancellation is not None:
                a.cancellation.deregister(a.token)
            try:
                a.done(a.result)
            except Exception:  # noqa: BLE001 - the other attempts must still complete
                _log.exception("%s op completion failed", a.__class__.__name__)

    def start(self, attempt, line: int, step_ctx, timeout_ms: int = -1) -> None:
        """Puts `attempt` in line `line` (its `done` is called exactly once, maybe on this thread)."""
        cm = step_ctx.cancellation
        token = cm.register(lambda err: self.abort(attempt, err))
        if token is None:
            attempt.done(cm.error or errors.CancelledError(None, None, "Step was cancelled"))
            return
        attempt.token, attempt.cancellation = token, cm
        with self._lock:
            if attempt.finished:  # cancelled while registering: the canceller called done
                return
            self._lines[line].append(attempt)
            finished = self._flush_locked()
        if timeout_ms > 0 and not attempt.finished:
            timers.schedule(timeout_ms / 1000.0, lambda: self.abort(attempt, errors.DeadlineExceededError(
                None, None, f"Timed out after {timeout_ms} ms waiting on {self.kind} '{self.name}'")))
        self._complete(finished)

    def abort(self, attempt, error) -> None:
        """Fails `attempt` with `error` unless it already finished (cancellation, timeouts)."""
        with self._lock:
            if attempt.finished:
                return
            attempt.finished = True
            for line in self._lines:
                try:
                    line.remove(attempt)
                    break
                except ValueError:
                    pass
            attempt.restore(self)
            finished = self._flush_locked()
        attempt.result = error
        self._complete([attempt] + finished)

    def _drop_locked(self, lines, error_fn) -> list:
        """Finishes every attempt waiting in `lines` with ``error_fn()``; returns them."""
        dropped = []
        for line in lines:
            dropped.extend(line)
            line.clear()
        for a in dropped:
            a.finished = True
            a.result = error_fn()
        return dropped

    def _destroy_locked(self) -> None:
        """Called under the lock when the resource is destroyed, before its waiters fail."""

    def close_resource(self) -> None:
        """Called when the resource container is cleaned up: fails everything still waiting."""
        with self._lock:
            self._destroy_locked()
            waiting = self._drop_locked(self._lines, lambda: errors.CancelledError(
                None, None, f"{self.kind} '{self.name}' was destroyed (its resource container was "
                f"reset)"))
        self._complete(waiting)
