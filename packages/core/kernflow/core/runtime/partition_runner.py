"""The partition runner: runs the partitions of one step on this process, for DirectSession and Worker.

A step compiled for this process is one `ExecutorPlan` per device (its *partitions*), each knowing
where its feeds and fetches sit in the step's lists. A `PartitionRunner` is built once per compiled
step (a DirectSession signature, a worker's registered graph) and runs it any number of times:

* **Feeds go where the partition's device needs them**, by one rule decided by the device
  (`feed_mover`). A device without memory of its own (a CPU) gets its feeds in host memory: device
  arrays (cupy) an in-process caller fed are copied over. A device with its own memory (a GPU) gets
  the feeds every reader of which reads in device memory uploaded once, before the step; any other
  feed (read in host memory, as shapes and int32 tensors are, or by a forwarding op) is handed over
  as it came, and the plan's memory types (`memory_types.MemoryTypes`) convert it where a kernel
  reads it in the other memory. A step replayed as a recorded device graph (`replay.py`) hands its
  feeds to the replay as they came: it copies them straight into the recorded inputs.
* **Every partition starts**: the inline ones (`ExecutorPlan.inline`: synchronous kernels, no
  Recv) run on the caller's thread after the others were started, unless the step collects stats;
  the others run as an `Execution` of the executor their plan asks for.
* **The first error wins.** A failing partition aborts the step's rendezvous; the runner has every
  other partition of the run aborted with that error (it listens on the rendezvous' cancellation), and
  raises it, naming the node that failed. Aborting the rendezvous from outside (the worker's
  AbortStep, closing a session) stops the runs the same way. The runner listens from the start when
  the step has a deadline, else once the runs were started and some are still going: a step that
  ends inside `Execution.start` (most queue-op steps) registers nothing (a microsecond of the ~50 a
  queue-op step costs).
* **The deadline** (a monotonic time, optional) is watched by one timer thread shared by every runner
  of the process: at the deadline the step is aborted, also while a partition still runs on the
  caller's thread, with a `DeadlineExceededError` naming the devices whose partitions still run.
* **Fetches come back in retval order**, copied to the host where the plan says so
  (`ExecutorPlan.fetch_to_host`: devices with their own memory), and variables read when the runner
  was built with ``read_variables`` (the worker encodes values; a session hands a fetched variable
  to its client, which copies it).

What differs between the callers stays with them: the rendezvous they create (a `LocalRendezvous` per
DirectSession step, the worker's `WorkerRendezvous` of the step id, shared by its RunGraph and
RecvTensor calls), the session's in-flight set and close, the worker's step table, its prefetch of
root Recvs and its tracing spans.

The two copies this replaces disagreed on device memory. DirectSession copied device arrays to the
host for devices without their own memory, and passed feeds as they came to devices with it (each
reading kernel converted: a feed read by three GPU kernels was uploaded three times per step). The
worker decided by the device *type*: any non-CPU partition had every feed uploaded (an int32 or
shape feed of a GPU partition went up and came straight back down for its host-memory reader), and
fetched values were copied to the host with `to_host` on any non-CPU device. The device's
`has_device_memory` now decides both, as it does in the executor's memory types.
"""

from __future__ import annotations

import heapq
import itertools
import threading
import time

import numpy as np

from kernflow.core.framework import errors
from kernflow.core.runtime import replay as _replay
from kernflow.core.runtime.execution import StepContext
from kernflow.core.runtime.resource_mgr import Var

__all__ = ["Partition", "PartitionRunner", "device_read_feeds", "feed_mover", "host_feeds"]


class Partition:
    """One compiled partition of a step, and where its feeds and fetches sit in the step's lists.

    Args:
        plan: the partition's `ExecutorPlan`.
        arg_positions: for each of the plan's args (in `arg_slots` order), its position in the
            step's feed list.
        retval_positions: for each of the plan's retvals (in `retval_slots` order), its position in
            the step's fetch list.
    """

    __slots__ = ("plan", "arg_positions", "retval_positions")

    def __init__(self, plan, arg_positions, retval_positions):
        if len(arg_positions) != len(plan.arg_slots) or len(retval_positions) != len(plan.retval_slots):
            raise errors.InvalidArgumentError(
                None, None, f"the partition on {plan.device.name} takes {len(plan.arg_slots)} feeds "
                f"and returns {len(plan.retval_slots)} values, got {len(arg_positions)} feed and "
                f"{len(retval_positions)} fetch positions")
        self.plan = plan
        self.arg_positions = list(arg_positions)
        self.retval_positions = list(retval_positions)

    @classmethod
    def of(cls, plan) -> "Partition":
        """The partition of `plan` at the step-wide positions of its `_Arg`/`_Retval` indices
        (`ExecutorPlan.arg_indices` / `retval_indices`)."""
        return cls(plan, plan.arg_indices, plan.retval_indices)


def host_feeds(values):
    """Feeds for a partition in host memory: device arrays (cupy) fed by the caller come over."""
    for v in values:
        if type(v) is not np.ndarray and hasattr(v, "__cuda_array_interface__"):
            return [v.get() if hasattr(v, "__cuda_array_interface__") else v for v in values]
    return values


def device_read_feeds(plan) -> list:
    """Positions (in `arg_slots` order) of the feeds of `plan` that every reader reads in device
    memory: the feeds worth uploading once before a step. Empty on a device without its own memory.

    A feed also fetched, read in host memory, read by a forwarding op (which passes it on where it
    is), or read by no kernel is not among them.
    """
    if not getattr(plan.device, "has_device_memory", False):
        return []
    pos_of = {s: i for i, s in enumerate(plan.arg_slots)}
    reads: dict[int, set] = {}
    for n in plan.nodes:
        conv = dict(n.convert) if n.convert else {}
        for p, s in enumerate(n.inputs):
            i = pos_of.get(s)
            if i is not None:
                reads.setdefault(i, set()).add(conv.get(p))
    fetched = set(plan.retval_slots)
    return [i for i, how in sorted(reads.items())
            if how == {"device"} and plan.arg_slots[i] not in fetched]


def feed_mover(plan):
    """How a step's feeds reach `plan`'s device (see the module docstring): ``fn(values) -> values``
    (values in `arg_slots` order), or None where they are handed over as they come."""
    if not getattr(plan.device, "has_device_memory", False):
        return host_feeds
    upload = device_read_feeds(plan)
    if not upload:
        return None
    to_device = plan.device.to_device

    def move(values):
        values = list(values)
        for i in upload:
            values[i] = to_device(values[i])
        return values
    return move


def _fetch_converter(plan, read_variables: bool):
    """fn(value) -> the value handed to the caller, or None where fetches are returned as they are."""
    to_host = plan.fetch_to_host
    if not read_variables:
        return to_host
    if to_host is None:
        return lambda v: v.read() if type(v) is Var else v
    return lambda v: to_host(v.read() if type(v) is Var else v)


class _Part:
    """A `Partition` with its feed and fetch rules resolved (built once per runner)."""

    __slots__ = ("plan", "device", "arg_positions", "retval_positions", "move", "fetch")

    def __init__(self, p: Partition, read_variables: bool):
        self.plan = p.plan
        self.device = p.plan.device
        self.arg_positions = p.arg_positions
        self.retval_positions = p.retval_positions
        self.move = feed_mover(p.plan)
        self.fetch = _fetch_converter(p.plan, read_variables)

    def args(self, feeds) -> list:
        args = [feeds[i] for i in self.arg_positions]
        return self.move(args) if self.move is not None else args

    def collect(self, outs, results) -> None:
        fetch = self.fetch
        for i, v in zip(self.retval_positions, outs):
            results[i] = fetch(v) if fetch is not None else v


class PartitionRunner:
    """Runs one compiled step's partitions on this process (see the module docstring).

    Args:
        partitions: the step's `Partition`s on this process.
        num_feeds: the length of the step's feed list.
        num_fetches: the length of the step's fetch list.
        read_variables: hand back a fetched variable's value rather than the variable.

    Attributes:
        inline: ``fn(feeds, ctx) -> fetches`` running the step on the caller's thread without a
            rendezvous, when it is one inline partition whose feeds and fetches are the step's in
            order (a cached small step); else None. `ctx` is a `StepContext` without rendezvous.
        replay: the `replay.ReplayRunner` behind `inline` when its device records and replays steps.
    """

    def __init__(self, partitions, num_feeds: int, num_fetches: int, read_variables: bool = False):
        self.parts = [_Part(p, read_variables) for p in partitions]
        self.num_fetches = num_fetches
        self.inline = None
        self.replay = None
        if len(self.parts) == 1:
            part = self.parts[0]
            if part.plan.inline and part.arg_positions == list(range(num_feeds)) and \
                    part.retval_positions == list(range(num_fetches)):
                self.inline, self.replay = _inline_run(part)
        # Without stats, inline partitions run on the caller's thread (`run`), the others as
        # Executions.
        self._inline_parts = [p for p in self.parts if p.plan.inline]
        self._async_parts = [p for p in self.parts if not p.plan.inline]
        self._one_inline = len(self.parts) == 1 and bool(self._inline_parts)

    def run(self, feeds, rendezvous, step_id: int, collector=None, deadline: float | None = None,
            timeout_message: str = "") -> list:
        """Runs every partition for one step and returns the step's fetches in order.

        Args:
            feeds: the step's feed values, by position.
            rendezvous: the step's rendezvous (``send``/``recv_async``/``abort``/``error`` and a
                ``cancellation`` manager), shared with whatever else takes part in the step.
            step_id: the step's id.
            collector: a `StepStatsCollector`, or None; with one, every partition runs on an
                executor that records per-node stats (none runs inline).
            deadline: a `time.monotonic()` time at which the step is aborted, or None.
            timeout_message: the start of the `DeadlineExceededError`'s message.

        Raises:
            The rendezvous' error if the step was aborted before or while it ran here, the first
            error a partition raised, or DeadlineExceededError.
        """
        err = rendezvous.error
        if err is not None:
            raise err
        if collector is not None:
            run_parts, inline = self.parts, ()
        elif self._one_inline:
            return self._run_one_inline(feeds, rendezvous, step_id)
        else:
            run_parts, inline = self._async_parts, self._inline_parts
        if deadline is None and not inline and len(run_parts) == 1:
            return self._run_one(run_parts[0], feeds, rendezvous, step_id, collector)
        runs = [p.plan.new_state(p.args(feeds), StepContext(step_id, rendezvous, p.device, collector))
                for p in run_parts]
        cancel = rendezvous.cancellation
        timer = token = None
        if deadline is not None:
            # From the start: the deadline must stop a run going on this thread in `start`.
            token = self._watch(cancel, runs)
            timer = _TIMER.schedule(deadline, lambda: rendezvous.abort(
                _deadline_error(timeout_message, runs)))
        results = [None] * self.num_fetches
        failed = None
        try:
            for st in runs:
                st.start()
            if inline:
                failed = _run_inline_parts(inline, feeds, rendezvous, step_id, results)
            if token is None:
                for st in runs:
                    if not st.finished.is_set():   # (often none: a queue op's step ends in `start`)
                        token = self._watch(cancel, runs)
                        break
            for st in runs:
                if not st.wait(None if deadline is None else max(0.0, deadline - time.monotonic())):
                    _time_out(runs, rendezvous, timeout_message)
        finally:
            if timer is not None:
                _TIMER.cancel(timer)
            if token is not None:
                cancel.deregister(token)
        for st in runs:
            if failed is None:
                failed = st.error
        if failed is not None:
            raise rendezvous.error or failed
        for part, st in zip(run_parts, runs):
            part.collect(st.results(), results)
        return results

    @staticmethod
    def _watch(cancel, runs):
        """Has `runs` aborted with the step (the first error, an abort from outside); returns the
        registration's token. A step aborted already aborts them now."""
        token = cancel.register(lambda e: _abort_running(runs, e))
        if token is None:
            _abort_running(runs, cancel.error)
        return token

    def _run_one(self, part, feeds, rendezvous, step_id, collector) -> list:
        """A step of one partition run as an Execution, without a deadline: `run` without the
        bookkeeping that joins several partitions (most of a queue op's step is this)."""
        st = part.plan.new_state(part.args(feeds), StepContext(step_id, rendezvous, part.device, collector))
        st.start()
        if not st.finished.is_set():
            cancel = rendezvous.cancellation
            token = self._watch(cancel, (st,))
            try:
                st.finished.wait()
            finally:
                cancel.deregister(token)
        if st.error is not None:
            raise rendezvous.error or st.error
        results = [None] * self.num_fetches
        part.collect(st.results(), results)
        return results

    def _run_one_inline(self, feeds, rendezvous, step_id) -> list:
        part = self.parts[0]
        try:
            outs = part.plan.run_inline(part.args(feeds), StepContext(step_id, rendezvous, part.device))
        except Exception as e:  # noqa: BLE001 - fails the whole step
            err = _as_op_error(e)
            rendezvous.abort(err)
            raise rendezvous.error or err from None
        results = [None] * self.num_fetches
        part.collect(outs, results)
        return results


def _run_inline_parts(inline, feeds, rendezvous, step_id, results):
    """Runs the inline partitions of a step on this thread; returns the error that stopped them, or
    None."""
    for part in inline:
        err = rendezvous.error
        if err is not None:
            return err
        try:
            outs = part.plan.run_inline(part.args(feeds), StepContext(step_id, rendezvous, part.device))
        except Exception as e:  # noqa: BLE001 - fails the whole step
            err = _as_op_error(e)
            rendezvous.abort(err)
            return err
        part.collect(outs, results)
    return None


def _time_out(runs, rendezvous, timeout_message):
    """Aborts a step that ran past its deadline and raises its DeadlineExceededError."""
    err = _deadline_error(timeout_message, runs)
    rendezvous.abort(err)
    # Aborting wakes every Recv at once; give other in-flight kernels a moment, then return
    # (a kernel that ignores cancellation finishes in the background).
    end = time.monotonic() + 0.5
    for st in runs:
        st.wait(max(0.0, end - time.monotonic()))
    first = rendezvous.error
    raise first if isinstance(first, errors.DeadlineExceededError) else err


def _inline_run(part: _Part):
    """(fn(feeds, ctx) -> fetches, ReplayRunner or None) of a step that is one inline partition."""
    run, move, fetch = part.plan.run_inline, part.move, part.fetch
    replay = _replay.maybe_runner(part.plan) if part.plan.fetch_to_host is not None else None
    if replay is not None:
        # The replay copies host feeds straight into its recorded inputs and returns host values.
        if fetch is part.plan.fetch_to_host:
            return replay, replay
        return (lambda args, ctx, _r=replay, _f=fetch: [_f(v) for v in _r(args, ctx)]), replay
    if fetch is None:
        if move is None:
            return run, None
        return (lambda args, ctx, _run=run, _move=move: _run(_move(args), ctx)), None
    if move is None:
        return (lambda args, ctx, _run=run, _f=fetch: [_f(v) for v in _run(args, ctx)]), None
    return (lambda args, ctx, _run=run, _move=move, _f=fetch:
            [_f(v) for v in _run(_move(args), ctx)]), None


def _abort_running(runs, err) -> None:
    """Aborts the runs still in progress (the step's cancellation callback)."""
    for st in runs:
        if not st.finished.is_set():
            st.abort(err)


def _deadline_error(message: str, runs) -> errors.DeadlineExceededError:
    """The step's DeadlineExceededError, naming the devices whose partitions still run."""
    names = [st.plan.device.name for st in runs if not st.finished.is_set()]
    still = f" (partitions still running on {', '.join(names)})" if names else ""
    return errors.DeadlineExceededError(None, None, f"{message or 'the step timed out'}{still}")


def _as_op_error(e: Exception) -> errors.OpError:
    if isinstance(e, errors.OpError):
        return e
    return errors.InternalError(None, None, f"{type(e).__name__}: {e}")


class _DeadlineTimer:
    """One daemon thread calling callbacks at their deadlines, for every step of the process.

    Entries are ``[when, seq, fn]`` in a heap; `cancel` clears ``fn`` and the heap is compacted when
    cancelled entries outnumber live ones (a step that finished in time cancels its entry, so
    long deadlines do not pile up). Callbacks run on the timer thread, one at a time.
    """

    def __init__(self):
        self._cv = threading.Condition()
        self._heap: list = []
        self._seq = itertools.count()
        self._cancelled = 0
        self._thread = None

    def schedule(self, when: float, fn) -> list:
        entry = [when, next(self._seq), fn]
        with self._cv:
            heapq.heappush(self._heap, entry)
            if self._thread is None:
                self._thread = threading.Thread(target=self._loop, name="kernflow-step-deadlines",
                                                daemon=True)
                self._thread.start()
            if self._heap[0] is entry:
                self._cv.notify()
        return entry

    def cancel(self, entry: list) -> None:
        with self._cv:
            if entry[2] is None:
                return
            entry[2] = None
            self._cancelled += 1
            if self._cancelled > 64 and 2 * self._cancelled > len(self._heap):
                self._heap = [e for e in self._heap if e[2] is not None]
                heapq.heapify(self._heap)
                self._cancelled = 0

    def _loop(self) -> None:
        with self._cv:
            while True:
                heap = self._heap
                while heap and heap[0][2] is None:
                    heapq.heappop(heap)
                    self._cancelled -= 1
                if not heap:
                    self._cv.wait()
                    continue
                delay = heap[0][0] - time.monotonic()
                if delay > 0:
                    self._cv.wait(delay)
                    continue
                entry = heapq.heappop(heap)
                fn, entry[2] = entry[2], None
                self._cv.release()
                try:
                    fn()
                except Exception:  # noqa: BLE001 - one bad callback must not stop the timer
                    import traceback
                    traceback.print_exc()
                finally:
                    self._cv.acquire()


_TIMER = _DeadlineTimer()
