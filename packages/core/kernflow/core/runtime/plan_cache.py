"""Bounded per-signature plan caches: `plan_cache_size` and `PlanCache`.

A session compiles (DirectSession) or registers with its workers (a master session) one plan per
step signature (fed names, fetches, targets); a session that runs ever new signatures would grow
without end, on the master and on every worker. Each session keeps at most `plan_cache_size()`
plans, the least recently used evicted first. `PlanCache` is the master's: its evicted plans hold
graphs on the workers, which the caller deregisters.

Invariant: a plan is in use from the `get`/`add` that returned it until the matching `release`
(the step's RunGraph calls have ended). An evicted plan in use is deregistered by the `release`
that ends its last use, never under a running step; `clear` hands back every plan, in use or not.
"""

from __future__ import annotations

import collections
import os
import threading

__all__ = ["PlanCache", "DEFAULT_PLAN_CACHE_SIZE", "plan_cache_size"]

DEFAULT_PLAN_CACHE_SIZE = 1024
ENV_PLAN_CACHE_SIZE = "KERNFLOW_PLAN_CACHE_SIZE"


def plan_cache_size(value: int | None = None) -> int:
    """`value`, else ``$KERNFLOW_PLAN_CACHE_SIZE``, else `DEFAULT_PLAN_CACHE_SIZE` (1024).

    Raises:
        ValueError: not an integer of at least 1.
    """
    raw = value if value is not None else os.environ.get(ENV_PLAN_CACHE_SIZE, DEFAULT_PLAN_CACHE_SIZE)
    try:
        n = int(raw)
    except (TypeError, ValueError):
        n = 0
    if n < 1:
        raise ValueError(f"the plan cache size (${ENV_PLAN_CACHE_SIZE}, or plan_cache_size) must be an "
                         f"integer of at least 1, got {raw!r}")
    return n


class PlanCache:
    """Plans (objects with ``users``, ``evicted`` and ``handles`` attributes) by key, LRU-bounded.

    Args:
        capacity: the most plans kept.
    """

    def __init__(self, capacity: int):
        self.capacity = int(capacity)
        self._plans: collections.OrderedDict = collections.OrderedDict()
        self._lock = threading.Lock()
        self._retired: dict[int, object] = {}   # id -> evicted plan still in use

    def __len__(self) -> int:
        return len(self._plans)

    def get(self, key):
        """The plan of `key`, now in use and the most recently used; None if not cached."""
        with self._lock:
            plan = self._plans.get(key)
            if plan is not None:
                self._plans.move_to_end(key)
                plan.users += 1
            return plan

    def add(self, key, plan) -> list:
        """Caches `plan` (now in use) under `key`; returns the evicted plans to deregister now."""
        out = []
        with self._lock:
            plan.users += 1
            self._plans[key] = plan
            self._plans.move_to_end(key)
            while len(self._plans) > self.capacity:
                _, old = self._plans.popitem(last=False)
                old.evicted = True
                if old.users == 0 or not old.handles:
                    out.append(old)
                else:
                    self._retired[id(old)] = old
        return out

    def release(self, plan) -> bool:
        """Ends one use of `plan`; True when it was evicted and this was its last use (the caller
        deregisters it now)."""
        with self._lock:
            plan.users -= 1
            return plan.users == 0 and self._retired.pop(id(plan), None) is not None

    def clear(self) -> list:
        """Empties the cache; returns every plan it held or still owed a deregistration."""
        with self._lock:
            out = list(self._plans.values()) + list(self._retired.values())
            self._plans.clear()
            self._retired.clear()
        for plan in out:
            plan.evicted = True
        return out
