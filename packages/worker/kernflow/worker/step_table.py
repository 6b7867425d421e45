"""`StepTable`: a worker's per-step state, bounded whatever step ids its callers send.

RunGraph, RecvTensor, AbortStep and CleanupGraph all name a step by an id the master drew at
random, and any caller can send any id. What the table keeps:

* ``steps``: one `WorkerRendezvous` per step id. A rendezvous is *claimed* once a RunGraph of the
  step got it here (`rdv.claimed`); only then can it hold values, pulls or a deadline. Claimed
  rendezvous end with the step (CleanupGraph, `Worker._retire_if_done`, a self-contained graph's
  RunGraph) or, left behind by a master that never cleaned up, after `ttl_s` of idleness.
* ``unclaimed``: the rendezvous RecvTensor calls or pushes (PushTensors) created for steps whose
  RunGraph has not arrived yet (oldest first; each also in ``steps``). Such a rendezvous holds the
  waiters of those calls (each has a deadline) and the values pushed to it: it is dropped as soon
  as the last waiter leaves and no value is left (`recv_left`), at the TTL sweep, or, at most
  `max_unclaimed` existing, when it is the oldest (AbortedError to its waiters).
* ``aborted``: tombstones ``step id -> (code, message)`` of steps aborted before any state of
  theirs existed here (AbortStep of an unknown id creates no rendezvous), at most
  `max_tombstones`, oldest forgotten first; RunGraph and RecvTensor of such a step fail at once
  with its error.
* ``cleaned``: the ids of recently ended steps (at most `max_tombstones`), so that a late
  RecvTensor fails at once instead of waiting for a value that was already taken.

Lock order: the table's lock, then a rendezvous's own lock (never the reverse).
"""

from __future__ import annotations

import collections
import threading
import time

from kernflow.core.framework import errors
from kernflow.worker.rendezvous import WorkerRendezvous

__all__ = ["StepTable", "MAX_UNCLAIMED_STEPS", "MAX_TOMBSTONES"]

MAX_UNCLAIMED_STEPS = 10_000
MAX_TOMBSTONES = 10_000
_SWEEP_INTERVAL_S = 30.0
_MESSAGE_CHARS = 1_000   # an abort message is remembered cut to this length


class StepTable:
    """The rendezvous of a worker's steps, and what it remembers of ended ones.

    Args:
        owner: the `Worker` (the rendezvous' owner; its ``task_name`` names it in errors).
        ttl_s: idle time after which a claimed rendezvous nobody cleaned up is dropped.
        max_unclaimed: most rendezvous kept for steps whose RunGraph has not arrived yet.
        max_tombstones: most aborted and cleaned step ids remembered (each).
    """

    def __init__(self, owner, ttl_s: float, max_unclaimed: int = MAX_UNCLAIMED_STEPS,
                 max_tombstones: int = MAX_TOMBSTONES):
        self._owner = owner
        self.ttl_s = float(ttl_s)
        self.max_unclaimed = int(max_unclaimed)
        self.max_tombstones = int(max_tombstones)
        self.lock = threading.Lock()
        self.steps: dict[int, WorkerRendezvous] = {}
        self.unclaimed: collections.OrderedDict[int, WorkerRendezvous] = collections.OrderedDict()
        self.aborted: collections.OrderedDict[int, tuple] = collections.OrderedDict()
        self.cleaned: collections.OrderedDict[int, None] = collections.OrderedDict()
        self.closed = False
        self._last_sweep = time.monotonic()

    def get(self, step_id: int, for_recv: bool = False, for_push: bool = False) -> WorkerRendezvous | None:
        """Returns the step's rendezvous, creating it if needed.

        A RunGraph (neither flag) claims it. A RecvTensor (`for_recv`) must call `recv_left` once
        its wait ends. A push (`for_push`: values another task sent) gets None when the step already
        ended here (aborted or cleaned up: the values are dropped).

        A RecvTensor or a push may come before the step's RunGraph: the rendezvous is then made
        *unclaimed* (counted against `max_unclaimed`, swept after `ttl_s` if no RunGraph ever
        claims it); a pushed value waits in it for the RunGraph's _Recv.

        Raises:
            UnavailableError: the worker is shut down. The step's abort error: the step was aborted
            here before it had a rendezvous (not `for_push`). AbortedError (`for_recv`): the step
            was cleaned up.
        """
        now = time.monotonic()
        dropped = []
        with self.lock:
            if self.closed:
                raise errors.UnavailableError(None, None, f"worker {self._owner.task_name} is shut down")
            rdv = self.steps.get(step_id)
            if rdv is None:
                if for_push:
                    if step_id in self.aborted or step_id in self.cleaned:
                        return None
                else:
                    self._refuse_ended(step_id, for_recv)
                rdv = self.steps[step_id] = WorkerRendezvous(step_id, self._owner)
                if for_recv or for_push:
                    self.unclaimed[step_id] = rdv
                    if len(self.unclaimed) > self.max_unclaimed:
                        dropped.append(self._evict_oldest_unclaimed())
                dropped.extend(self._sweep(now))
            if for_recv:
                rdv.recv_calls += 1
            elif not for_push and not rdv.claimed:
                rdv.claimed = True
                self.unclaimed.pop(step_id, None)
            rdv.last_used = now
        for r, err in dropped:
            r.abort(err)
        return rdv

    def _refuse_ended(self, step_id: int, for_recv: bool) -> None:
        tomb = self.aborted.get(step_id)
        if tomb is not None:
            code, message = tomb
            raise errors.make_error(code, message or f"step {step_id} was aborted")
        if for_recv and step_id in self.cleaned:
            raise errors.AbortedError(None, None, f"step {step_id} was already cleaned up on "
                                      f"{self._owner.task_name}")

    def _evict_oldest_unclaimed(self) -> tuple:
        sid, r = self.unclaimed.popitem(last=False)
        if self.steps.get(sid) is r:
            del self.steps[sid]
        return r, errors.AbortedError(
            None, None, f"step {sid} on {self._owner.task_name}: more than {self.max_unclaimed} steps "
            f"were waiting for their first RunGraph here; the oldest ({sid}) was dropped")

    def _sweep(self, now: float) -> list:
        """Drops rendezvous idle longer than `ttl_s` (every `_SWEEP_INTERVAL_S` at most)."""
        if now - self._last_sweep <= _SWEEP_INTERVAL_S:
            return []
        self._last_sweep = now
        stale = []
        for sid, r in list(self.steps.items()):
            if r.active_runs == 0 and now - r.last_used > self.ttl_s:
                del self.steps[sid]
                self.unclaimed.pop(sid, None)
                stale.append((r, errors.AbortedError(
                    None, None, f"step {sid} was idle for more than {self.ttl_s:g} s and was dropped "
                    f"by {self._owner.task_name}")))
        return stale

    def recv_left(self, step_id: int, rdv: WorkerRendezvous) -> None:
        """Ends a RecvTensor call's use of `rdv` (from `get(for_recv=True)`): an unclaimed rendezvous
        that no call waits in any more holds nothing and is dropped (an aborted one leaves a
        tombstone, so the step's later calls still fail at once)."""
        with self.lock:
            rdv.recv_calls -= 1
            if rdv.claimed or rdv.recv_calls > 0 or self.steps.get(step_id) is not rdv \
                    or not rdv.is_empty():
                return
            del self.steps[step_id]
            self.unclaimed.pop(step_id, None)
            err = rdv.error
            if err is not None:
                self._remember(self.aborted, step_id, (err.error_code, err.message[:_MESSAGE_CHARS]))

    def abort(self, step_id: int, code: int, message: str) -> None:
        """Aborts the step with the error of `code`: its rendezvous if it has one, else a tombstone."""
        with self.lock:
            rdv = self.steps.get(step_id)
            if rdv is None:
                self._remember(self.aborted, step_id, (code, message[:_MESSAGE_CHARS]))
                return
        rdv.abort(errors.make_error(code, message or f"step {step_id} was aborted"))

    def retire(self, step_id: int, rdv: WorkerRendezvous) -> None:
        """Drops a claimed step whose RunGraph calls here finished and whose values were all taken."""
        with self.lock:
            if rdv.active_runs == 0 and self.steps.get(step_id) is rdv and rdv.holds_nothing():
                del self.steps[step_id]
                self._remember(self.cleaned, step_id, None)

    def cleanup(self, step_id: int) -> WorkerRendezvous | None:
        """Forgets the step (CleanupGraph); returns its rendezvous, for the caller to abort."""
        with self.lock:
            rdv = self.steps.pop(step_id, None)
            self.unclaimed.pop(step_id, None)
            self._remember(self.cleaned, step_id, None)
        return rdv

    def close(self) -> list:
        """Refuses new steps; returns every rendezvous (for the caller to abort)."""
        with self.lock:
            self.closed = True
            steps = list(self.steps.values())
            self.steps.clear()
            self.unclaimed.clear()
        return steps

    def _remember(self, table: collections.OrderedDict, step_id: int, value) -> None:
        table[step_id] = value
        while len(table) > self.max_tombstones:
            table.popitem(last=False)
