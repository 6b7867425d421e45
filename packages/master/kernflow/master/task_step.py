"""One step's RunGraph calls on several tasks, run concurrently and watched until they all end.

`TaskStep` is the master's event loop for a step that spans tasks. Invariants:

* Every task's RunGraph reports ``("run", task, response, error)`` on the step's queue, once: from
  the same-host channel's reader thread when the task's worker is reached that way (no thread
  waits for the call; untraced steps), else from the master's pool thread that made the call. A
  background health check reports ``("probe", task|None, None, error|None)``.
* ``pending`` holds the tasks whose RunGraph has not reported (a task declared dead by a health
  check leaves it without reporting).
* The first failure (a task's error, a dead task, or the step's deadline) aborts the step on every
  other task and starts a grace period (`Master.abort_grace_s`) after which the step stops waiting.
* The error raised is the most primary one (`step_errors.secondary` ranks the aborts the first
  failure caused last), naming its task.
"""

from __future__ import annotations

import contextvars
import queue
import time

from kernflow.client.protobuf import worker_pb2
from kernflow.core.framework import errors

from kernflow.master.devices import RemoteDevice, task_of, task_sort_key
from kernflow.master.step_errors import as_op_error, name_task, secondary

__all__ = ["TaskStep", "deadline_error"]


def deadline_error(err, timeout_ms: int):
    """A task's DeadlineExceeded as the step's: "Timed out after N ms waiting for the step..."."""
    return errors.DeadlineExceededError(None, None, f"Timed out after {timeout_ms} ms waiting for "
                                        f"the step to finish: {err.message}")


class TaskStep:
    """Runs ``reqs`` ({task: RunGraphRequest}) of step `step_id` through `master` and waits for them.

    Args:
        master: the `Master` (its `_run_graph`, `_abort`, `_call_tasks`, pool and timing settings).
        plan: the step's plan.
        step_id: the step id.
        reqs: {task: RunGraphRequest}, two or more tasks.
        timeout_ms: the step's deadline (0: none).
        rpc_deadline_s: each RunGraph call's deadline.
        traced: run each call in a copy of this thread's context (its span is their parent).
    """

    def __init__(self, master, plan, step_id: int, reqs: dict, timeout_ms: int, rpc_deadline_s: float,
                 traced: bool):
        self.master, self.plan, self.step_id, self.reqs = master, plan, step_id, reqs
        self.timeout_ms = timeout_ms
        self.q: queue.SimpleQueue = queue.SimpleQueue()
        start = time.monotonic()
        self.deadline = start + timeout_ms / 1000.0 if timeout_ms else None
        self.pending = set(reqs)
        self.results: dict = {}
        self.failures: list = []       # (task or None, OpError), in arrival order
        self.give_up_at = None         # set once the step failed: wait this long for the others
        self.next_probe = start + master.health_check_interval_s
        self.probing = False
        self.cancels: dict = {}        # task -> cancels its unanswered RunGraph started without a thread
        for task, req in reqs.items():
            self._submit(task, req, rpc_deadline_s, contextvars.copy_context() if traced else None)

    def _submit(self, task, req, rpc_deadline_s, ctx) -> None:
        if ctx is None:   # (a traced call runs on a pool thread, in its span's context)
            # A same-host worker answers on the channel's reader thread, straight into the queue:
            # no pool thread waits for it, and no hand-off from the reader to that thread.
            q = self.q
            try:
                cancel = self.master._run_graph_async(task, req, rpc_deadline_s,
                                                      lambda resp, err: q.put(("run", task, resp, err)))
            except Exception as e:  # noqa: BLE001 - reported to the step
                q.put(("run", task, None, e))
                return
            if cancel is not None:
                self.cancels[task] = cancel
                return

        def call():
            return self.master._run_graph(task, req, self.step_id, rpc_deadline_s, self.plan)

        def run():
            try:
                self.q.put(("run", task, ctx.run(call) if ctx is not None else call(), None))
            except BaseException as e:  # noqa: BLE001 - reported to the step
                self.q.put(("run", task, None, e))
        self.master._pool.submit(run)

    def _fail(self, task, err) -> None:
        self.failures.append((task, err))
        if self.give_up_at is None:
            self.give_up_at = time.monotonic() + self.master.abort_grace_s
            what = f"task {task} failed" if task else "the step timed out"
            self.master._abort([t for t in self.reqs if t != task], self.step_id, errors.ABORTED,
                               f"Step {self.step_id} aborted because {what}: {err.message}")

    def wait(self) -> dict:
        """{task: RunGraphResponse} once every task succeeded; raises the step's error otherwise."""
        while self.pending:
            now = time.monotonic()
            if self.give_up_at is not None and now >= self.give_up_at:
                break
            if self.deadline is not None and now >= self.deadline and self.give_up_at is None:
                self._fail(None, errors.DeadlineExceededError(
                    None, None, f"Timed out after {self.timeout_ms} ms waiting for the step to finish "
                    f"(tasks still running: {', '.join(sorted(self.pending, key=task_sort_key))})"))
                continue
            self._handle(self._next_event(now))
        for cancel in self.cancels.values():   # given up on (or declared dead): nobody would read
            cancel()                           # their answers
        if not self.failures:
            return self.results
        task, err = min(self.failures, key=lambda f: (secondary(f[1]), self.failures.index(f)))
        err = name_task(err, task)
        if self.deadline is not None and task is not None and isinstance(err, errors.DeadlineExceededError):
            err = deadline_error(err, self.timeout_ms)
        raise err

    def _next_event(self, now: float):
        """The next queued report, or None when the wait ended first (starting a due health check)."""
        probe_at = self.next_probe if self.give_up_at is None and not self.probing else float("inf")
        until = min(self.give_up_at or float("inf"), self.deadline or float("inf"), probe_at)
        try:
            return self.q.get(timeout=max(0.0, until - now) if until < float("inf") else None)
        except queue.Empty:
            if self.give_up_at is None and not self.probing and time.monotonic() >= self.next_probe:
                self.probing = True
                self._probe(sorted(self.pending))
            return None

    def _handle(self, event) -> None:
        if event is None:
            return
        kind, task, res, err = event
        if kind == "probe":
            self.probing = False
            self.next_probe = time.monotonic() + self.master.health_check_interval_s
            if err is not None and task in self.pending and self.give_up_at is None:
                self.pending.discard(task)  # declared dead: the step does not wait for it
                self._fail(task, err)
            return
        self.cancels.pop(task, None)
        self.pending.discard(task)
        if err is None:
            self.results[task] = res
        else:
            self._fail(task, as_op_error(err, f"RunGraph on task {task}"))

    def _probe(self, tasks) -> None:
        """Health-checks `tasks` in the background; reports ("probe", task, None, error|None)."""
        master, q = self.master, self.q
        expected = {}
        for name, inc in self.plan.incarnations.items():
            expected.setdefault(task_of(name), {})[name] = inc

        def run():
            got = master._call_tasks(tasks, "get_status", lambda t: worker_pb2.GetStatusRequest(),
                                     master.rpc_timeout_s)
            bad = None
            for task in tasks:
                resp, err = got[task]
                if err is not None:
                    bad = (task, errors.UnavailableError(
                        None, None, f"Task {task} did not answer a health check while running step: "
                        f"{err.message}"))
                    break
                now = {RemoteDevice(a).name: int(a.incarnation) for a in resp.device_attributes}
                if any(now.get(n) != inc for n, inc in expected.get(task, {}).items()):
                    bad = (task, errors.AbortedError(
                        None, None, f"Task {task} restarted while running the step (its devices have "
                        "a new incarnation); the step's state there is lost"))
                    break
            q.put(("probe", bad[0] if bad else None, None, bad[1] if bad else None))
        master._pool.submit(run)
