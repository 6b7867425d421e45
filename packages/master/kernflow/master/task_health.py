"""Whether each task answers the master, as a state per task whose changes are logged once each.

The master learns about a task's health from its GetStatus calls (CreateSession's wait, the device
refresh before a step, the health checks while a step runs) and, with etcd, from the watch of the
registrations. `TaskHealth` folds all of them into one state per task and logs only transitions:

* up -> down: WARNING ``task /job:worker/replica:0/task:1 is unreachable: <why>``
* down -> up: INFO ``task ... is reachable again`` (``is reachable`` when it never answered before)

A task that keeps failing health checks logs nothing more; a task never reached yet is not
"unreachable" (CreateSession logs the tasks it waits for).
"""

from __future__ import annotations

import logging
import threading

from kernflow.core.framework import errors

__all__ = ["TaskHealth", "UP", "DOWN", "is_unreachable"]

_log = logging.getLogger("kernflow.master")

UP = "up"
DOWN = "down"


def is_unreachable(err: BaseException | None) -> bool:
    """Whether a failed call means the task could not be reached (not: it answered with an error)."""
    return isinstance(err, (errors.UnavailableError, errors.DeadlineExceededError))


class TaskHealth:
    """Reachability per task (thread-safe), logging each change of state once.

    Args:
        logger: where transitions are logged (default: ``kernflow.master``).
    """

    def __init__(self, logger: logging.Logger | None = None):
        self._log = logger or _log
        self._state: dict[str, str] = {}
        self._was_up: set[str] = set()
        self._lock = threading.Lock()

    def state(self, task: str) -> str | None:
        """`UP`, `DOWN`, or None before anything was heard of `task`."""
        with self._lock:
            return self._state.get(task)

    def unreachable(self) -> list[str]:
        """The tasks in state `DOWN`, sorted."""
        with self._lock:
            return sorted(t for t, s in self._state.items() if s == DOWN)

    def reachable(self, task: str, how: str = "") -> None:
        """Records that `task` answered (or registered again); logs INFO if it was down.

        Args:
            task: the task name.
            how: appended to the message in parentheses, e.g. "registered in etcd at HOST:PORT".
        """
        with self._lock:
            old = self._state.get(task)
            self._state[task] = UP
            again = task in self._was_up
            self._was_up.add(task)
        if old == DOWN:
            self._log.info("task %s is reachable%s%s", task, " again" if again else "",
                           f" ({how})" if how else "")

    def unreachable_now(self, task: str, why: str) -> None:
        """Records that `task` could not be reached; logs WARNING if it was up.

        Args:
            task: the task name.
            why: what failed (the error message of the health check, or the etcd event).
        """
        with self._lock:
            old = self._state.get(task)
            self._state[task] = DOWN
        if old == UP:
            self._log.warning("task %s is unreachable: %s", task, why)

    def observe(self, task: str, err: BaseException | None, what: str = "GetStatus") -> None:
        """Records the outcome of a call to `task`: no error is up, an unreachable error is down.

        Other errors (the task answered, with an error) change nothing.
        """
        if err is None:
            self.reachable(task)
        elif is_unreachable(err):
            self.unreachable_now(task, f"{what} failed: {getattr(err, 'message', None) or err}")
