"""The executor interface: one run of a compiled partition (`ExecutorPlan`) for one step.

Four executors run a plan, and each run is an `Execution` with the same four methods:

* **frames** (`control_flow_executor.FrameDataflowState`) — the frame-aware dataflow executor:
  pending counts per frame and iteration, dead tensors, Switch/Merge/Enter/Exit/NextIteration. It
  runs *every* plan (a plan without control flow is one root frame with one iteration, as TF's
  executor treats the top-level graph as just another frame), and it is **the reference**: the two
  others must have the same behaviour on the plans they accept and only run faster.
  ``packages/core/tests/runtime/test_executors.py`` runs a set of graphs through every executor
  that accepts them and compares the results bit for bit with this one.
* **dataflow** (`dataflow_executor.DataflowState`) — the whitepaper's executor without frames:
  one pending count per node. It runs any plan without control-flow primitives, asynchronous
  kernels (Recv, queues) included.
* **segmented** (`segmented.SegmentedExecution`) — the plan cut into straight-line segments, one
  per set of Recvs its nodes wait for, each run as soon as those Recvs arrived. It runs a plan
  without control flow whose only asynchronous kernels are Recvs (a worker's partition), and is
  what such a plan runs on unless the step collects per-node stats.
* **straight_line** (`straight_line.StraightLineExecution`) — the plan compiled to one Python
  function calling the kernels in topological order. It runs a plan with neither asynchronous
  kernels nor control flow, on the thread that calls `start`.

A caller asks a plan for a run (`ExecutorPlan.new_state(args, ctx, done, executor=...)`; by default
the frames executor for a plan with control flow, the segmented one for a plan that has it
(`ExecutorPlan.segments`) when no stats are collected, else the dataflow one) and drives it through:

* ``start()`` — begins the step; a straight line runs it to the end here, the dataflow executors
  run ready kernels on this thread and on the inter-op pool and may return before the step ends.
* ``wait(timeout=None) -> bool`` — blocks until the run finished (False on timeout).
* ``results() -> list`` — the fetched values in `ExecutorPlan.retval_slots` order, once finished;
  raises the step's error instead if it failed.
* ``abort(err)`` — fails the run with `err` (the first error wins): nothing new is scheduled and
  the step's rendezvous is aborted so blocked Recvs wake; kernels already running finish. A run
  aborted before `start` finishes at once with `err`.

Each run also exposes ``plan``, ``ctx``, ``error`` (None, or the error the step failed with) and
``finished`` (a `threading.Event`), and calls ``done(run)`` once when it finishes.

**The inline path.** Running a plan on the caller's thread without building an `Execution` or a
rendezvous is called *inline* everywhere (`ExecutorPlan.inline`, `ExecutorPlan.run_inline`,
`DirectSession`'s per-step `run_inline`, the worker's inline graphs and `RunGraphResponse.not_inline`):
it calls the straight-line function directly (or, when independent expensive kernels can use the
pool, a dataflow run), because an object per step costs what a trivial step costs.
"""

from __future__ import annotations

import threading

from kernflow.core.framework import errors
from kernflow.core.runtime import cancellation as _cancellation

__all__ = ["DATAFLOW", "EXECUTORS", "FRAMES", "REFERENCE", "SEGMENTED", "STRAIGHT_LINE", "Execution",
           "StepContext", "node_error"]

STRAIGHT_LINE = "straight_line"
SEGMENTED = "segmented"
DATAFLOW = "dataflow"
FRAMES = "frames"
EXECUTORS = (STRAIGHT_LINE, SEGMENTED, DATAFLOW, FRAMES)
# The executor whose behaviour the others must reproduce.
REFERENCE = FRAMES


class StepContext:
    """Per-step state handed to kernels registered with ``needs_ctx`` or ``is_async``.

    Attributes:
        step_id: the step's id (shared by all its partitions).
        rendezvous: where _Send/_Recv exchange tensors (None on the inline path).
        frame_iter: ``(frame_id, iteration)`` of the invocation: ``("", 0)`` outside loops; inside
            a while loop the frame id names the loop frame and its parents' iterations, the same
            in every partition, so Send/Recv keys of loop bodies match across devices.
        frame_key: ``"frame:iter"``, the last field of rendezvous keys for this invocation.
        is_input_dead: True when a transfer kernel (_Send) runs on a dead input.
        cancellation: the step's `CancellationManager` (blocking kernels register wake-ups).
    """

    __slots__ = ("step_id", "rendezvous", "cancelled", "collector", "frame_iter", "device",
                 "frame_key", "is_input_dead")

    def __init__(self, step_id: int, rendezvous, device=None, collector=None):
        self.step_id = step_id
        self.rendezvous = rendezvous
        self.cancelled = False
        self.collector = collector
        self.frame_iter = ("", 0)
        self.frame_key = "0:0"
        self.is_input_dead = False
        self.device = device

    @property
    def cancellation(self):
        rdv = self.rendezvous
        return rdv.cancellation if rdv is not None else _cancellation.NEVER_CANCELLED

    def in_frame(self, frame_id: str, iteration: int, is_input_dead: bool = False) -> "StepContext":
        """A copy of this context for one invocation inside a loop frame."""
        c = StepContext(self.step_id, self.rendezvous, self.device, self.collector)
        c.cancelled = self.cancelled
        c.frame_iter = (frame_id, iteration)
        c.frame_key = f"{frame_id or 0}:{iteration}"
        c.is_input_dead = is_input_dead
        return c


class Execution:
    """One run of a plan for one step (see the module docstring for the contract).

    Subclasses implement `start` and `results`; they call `_finish` exactly once, when the run has
    nothing left in flight.

    Args:
        plan: the `ExecutorPlan` to run.
        ctx: the step's `StepContext`.
        done: optional ``done(run)``, called once when the run finishes (on whichever thread
            finished it).
    """

    executor = ""   # one of EXECUTORS

    def __init__(self, plan, ctx: StepContext, done=None):
        self.plan = plan
        self.ctx = ctx
        self.lock = threading.Lock()
        self.error: Exception | None = None
        self.finished = threading.Event()
        self._done_cb = done

    def start(self) -> None:
        """Begins the run (see the module docstring)."""
        raise NotImplementedError

    def wait(self, timeout=None) -> bool:
        """Blocks until the run finished; False if `timeout` seconds passed first."""
        return self.finished.wait(timeout)

    def results(self) -> list:
        """The fetched values of a finished run, in `plan.retval_slots` order.

        Raises:
            OpError: the error the step failed with.
        """
        raise NotImplementedError

    def abort(self, err: Exception) -> None:
        """Fails the run with `err` unless it already failed, and aborts the step's rendezvous."""
        with self.lock:
            if self.error is None:
                self.error = err
        rdv = self.ctx.rendezvous
        if rdv is not None:
            rdv.abort(err)

    def _finish(self) -> None:
        self.finished.set()
        if self._done_cb is not None:
            self._done_cb(self)


def node_error(e: Exception, node) -> errors.OpError:
    """Wraps an exception raised by a kernel into a TF error naming the node (a plan `_Node`)."""
    where = f"\n\t [[{{{{node {node.name}}}}} ({node.op_type})]]" if node is not None else ""
    if isinstance(e, errors.OpError):
        if where and where in e.message:
            return e
        return type(e)(e.node_def, e.op, f"{e.message}{where}")
    if isinstance(e, MemoryError) or type(e).__name__ == "OutOfMemoryError":  # host or device (cupy)
        return errors.ResourceExhaustedError(None, None, f"OOM when running {node.name if node else '?'}: "
                                                         f"{e}{where}")
    name = f"{node.op_type} {node.name}: " if node is not None else ""
    return errors.InvalidArgumentError(None, None, f"{name}{type(e).__name__}: {e}{where}")
