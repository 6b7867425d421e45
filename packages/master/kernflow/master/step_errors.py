"""How the master reports a step's failures: TF error classes that name the task that failed.

* `as_op_error`: any exception from a worker call as a TF error class.
* `name_task`: TF's "From TASK:" prefix on a task's error.
* `secondary`: ranks a step's failures so the root cause is reported, not its consequences.
* `blame_unreachable`: the node (and task) that only an unreachable task could host.
* `REFRESH_ERRORS`: the errors after which a session's cached registrations may be stale.
"""

from __future__ import annotations

from kernflow.client.protocol import DERIVED
from kernflow.core.framework import device_spec
from kernflow.core.framework import errors

from kernflow.master.devices import task_sort_key

__all__ = ["REFRESH_ERRORS", "as_op_error", "name_task", "secondary", "blame_unreachable"]

# Errors after which cached registrations may be stale (a worker restarted or vanished).
REFRESH_ERRORS = (errors.UnavailableError, errors.AbortedError, errors.NotFoundError,
                  errors.DeadlineExceededError, errors.CancelledError, errors.InternalError,
                  errors.UnknownError, errors.DataLossError)


def as_op_error(err: BaseException, what: str) -> errors.OpError:
    """`err` as a TF error class (a TimeoutError is DeadlineExceeded, anything else Internal)."""
    if isinstance(err, errors.OpError):
        return err
    if isinstance(err, TimeoutError):
        return errors.DeadlineExceededError(None, None, f"{what}: {err}")
    return errors.InternalError(None, None, f"{what}: {type(err).__name__}: {err}")


def name_task(err: errors.OpError, task: str | None) -> errors.OpError:
    """Returns `err` (same class) with a message that names `task` (TF's "From TASK:" prefix)."""
    if task is None or task in err.message:
        return err
    try:
        return type(err)(err.node_def, err.op, f"From {task}:\n{err.message}")
    except TypeError:  # an OpError subclass with another constructor
        return errors.make_error(err.error_code, f"From {task}:\n{err.message}")


def secondary(err: errors.OpError) -> int:
    """Ranks a step's failures so the root cause comes first.

    0: a failure of the task's own work; 1: one that reached the task from another task (through
    a `_Recv`, or told by the failed task: `protocol.DERIVED`); 2: a consequence of the master's
    AbortStep.
    """
    if isinstance(err, (errors.AbortedError, errors.CancelledError)):
        return 2
    return 1 if "(_Recv)]]" in err.message or DERIVED in err.message else 0


def blame_unreachable(graph_def, session):
    """Returns (node, task) for a node that only an unreachable task could host, or None.

    `session` is the master's session: its `devices` (the reachable ones) and `unreachable`
    (task -> error).
    """
    for nd in graph_def.node:
        if not nd.device:
            continue
        spec = device_spec.DeviceSpec.from_string(nd.device)
        if spec.job is None or any(device_spec.is_compatible(spec, d.name) for d in session.devices):
            continue
        where = spec.replace(device_type=None, device_index=None)
        for task in sorted(session.unreachable, key=task_sort_key):
            if device_spec.is_compatible(where, task):
                return nd, task
    return None
