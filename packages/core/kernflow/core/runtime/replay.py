"""Replaying a compiled step as one device graph (CUDA graphs on a GPU).

A small training step on a GPU is bound by the host: every kernel launch costs the host 5-25 us
whatever the kernel does, so a step of 30 tiny kernels spends far longer launching than computing.
A device that can record a stream of launches and replay it in one call (`Device.capture_step`,
the GPU plugin's CUDA-graph capture) removes that cost for a step whose launches do not change from
one run to the next. This module decides which steps qualify and runs them:

* `replay_blockers(plan)` checks a compiled straight-line plan, from the plan alone, for anything a
  replay would get wrong: an asynchronous or context-reading kernel, a stateful op other than
  variables and their in-place dense updates (a random op or a queue changes host state every
  run), a host-memory input (a learning rate, a shape) whose value could differ between runs (one
  computed from a feed or a variable rather than from constants and shapes), a feed read on the
  host.
* `ReplayRunner` runs such a plan eagerly for its first `WARMUP_RUNS` runs with a given feed
  signature (shapes and dtypes: kernels compile and libraries initialise then), captures the next
  run and replays it from then on: the feeds are copied into the captured input buffers, the
  device replays every launch in one call, and the fetches are read back. A capture that fails
  (a kernel that synchronises with the host, a host copy recorded in the graph) leaves that
  signature eager, after `MAX_CAPTURE_ATTEMPTS` tries. A step whose warm-up run takes longer than
  `LAUNCH_BOUND_S_PER_KERNEL` per kernel is bound by the device, not by launching, and stays eager
  (a capture would only hold a second copy of its intermediates).

What a replay assumes, and how it is kept true: the buffers the launches read and write are the
ones captured. Feeds are copied into the captured buffers; constants are uploaded once; the
variables a step reads or updates in place must still hold the same buffers, so before every replay
each captured variable is looked up again and compared with what was captured (a `Saver.restore`
or an `Assign` of another shape, or a reset container, makes the step capture again). Replays of
one step are serialised (they share their buffers). Set ``KERNFLOW_STEP_GRAPHS=0`` to run every step
eagerly.
"""

from __future__ import annotations

import logging
import os
import threading
import time

import numpy as np

from kernflow.core.framework import op_def_registry
from kernflow.core.runtime.execution import STRAIGHT_LINE

__all__ = ["ReplayRunner", "replay_blockers", "maybe_runner", "enabled", "WARMUP_RUNS",
           "MAX_CAPTURE_ATTEMPTS"]

_log = logging.getLogger(__name__)

# Eager runs of a feed signature before it is captured (kernels compile, handles are created).
WARMUP_RUNS = 2
# Captures tried per signature before it stays eager.
MAX_CAPTURE_ATTEMPTS = 2
# Feed signatures captured per step (each holds its own buffers); more run eagerly.
MAX_SIGNATURES = 4
# A step is captured only while launching is a large part of it: its eager run (measured to the
# device's completion during warm-up) takes at most this long per kernel. Larger steps are bound by
# the device and would only pay a second copy of their intermediates (the capture's own pool).
LAUNCH_BOUND_S_PER_KERNEL = 200e-6
# Variable ops: the kernel returns the variable; readers take its buffer at run time.
VARIABLE_OPS = frozenset({"VariableV2"})
# Stateful ops whose every effect is device work on buffers they read at run time (dense updates in
# place): replaying their launches repeats their effect exactly.
REPLAYABLE_STATEFUL = VARIABLE_OPS | frozenset({
    "ApplyGradientDescent", "ApplyMomentum", "ApplyAdagrad", "ApplyRMSProp",
    "ApplyCenteredRMSProp", "ApplyAdam", "AssignAdd", "AssignSub",
})


def enabled() -> bool:
    """False when ``KERNFLOW_STEP_GRAPHS=0`` turns step capture off."""
    return os.environ.get("KERNFLOW_STEP_GRAPHS", "1") not in ("0", "false", "off")


def replay_blockers(plan) -> list[str]:
    """Why `plan` cannot be captured and replayed (empty: it can).

    A slot is *static* when its value is the same every run with the same feed shapes: constants,
    and outputs of stateless kernels whose inputs are all static or read only for their shape
    (Shape, Size, Rank). Host-memory inputs must be static: a replay re-uses the value captured.
    """
    if plan.inline_executor != STRAIGHT_LINE:
        return ["the plan is not one straight line of synchronous kernels"]
    out = []
    static = {s for s, v in enumerate(plan._init_vals) if v is not None}
    args = set(plan.arg_slots)
    for n in plan.nodes:
        od = op_def_registry.get(n.op_type)
        stateful = od is not None and od.stateful
        if n.is_async or n.needs_ctx:
            out.append(f"{n.name} ({n.op_type}) needs the step context")
            continue
        if stateful and n.op_type not in REPLAYABLE_STATEFUL:
            out.append(f"{n.name} ({n.op_type}) has state a replay would not update")
        for pos in n.host_inputs:
            s = n.inputs[pos]
            if s in args:
                out.append(f"{n.name} ({n.op_type}) reads a feed in host memory")
            elif s not in static:
                out.append(f"{n.name} ({n.op_type}) reads a host value that may change between runs")
        if not stateful and all(n.inputs[p] in static for p in range(len(n.inputs))
                                if p not in n.shape_inputs):
            static.update(range(n.out_base, n.out_base + n.num_outputs))
    return out


class _Capture:
    """One captured feed signature: the device's replayable step and the variables it captured."""

    __slots__ = ("step", "variables")

    def __init__(self, step, variables):
        self.step = step
        self.variables = variables   # [(lookup kernel, Var, buffer)]

    def valid(self) -> bool:
        for lookup, var, buf in self.variables:
            if lookup() is not var or var.value is not buf:
                return False
        return True


class ReplayRunner:
    """fn(args, ctx) -> host fetches for one plan: eager runs first, then replays of a capture.

    Attributes:
        status: feed signature -> "captured", "eager" or "warming up", for tests and logs.
        reasons: feed signature -> why its capture failed (the last attempt's error).
    """

    def __init__(self, plan):
        self.plan = plan
        self._device = plan.device
        self._to_host = plan.fetch_to_host or (lambda v: v)
        self._variables = [n.compute for n in plan.nodes if n.op_type in VARIABLE_OPS]
        self._kernels = max(1, sum(1 for n in plan.nodes if not n.forwards and n.op_type != "NoOp"
                                   and n.op_type not in VARIABLE_OPS))
        self._runs: dict = {}          # signature -> eager runs so far
        self._attempts: dict = {}      # signature -> failed captures
        self._captures: dict = {}      # signature -> _Capture
        self._lock = threading.Lock()
        self.status: dict = {}
        self.reasons: dict = {}

    def __call__(self, args, ctx):
        sig = _signature(args)
        cap = self._captures.get(sig)
        if cap is not None:
            with self._lock:
                if cap.valid():
                    return self._host(cap.step.replay(args))
                self._drop(sig)
        if sig is None or self._attempts.get(sig, 0) >= MAX_CAPTURE_ATTEMPTS or \
                (sig not in self._captures and len(self._captures) >= MAX_SIGNATURES):
            return self._eager(args, ctx)
        runs = self._runs.get(sig, 0)
        if runs < WARMUP_RUNS:
            t = time.perf_counter()
            out = self._eager(args, ctx)
            self._device.sync()
            t = time.perf_counter() - t
            self._runs[sig] = runs + 1   # counted only after a run that succeeded
            self.status.setdefault(sig, "warming up")
            if runs + 1 == WARMUP_RUNS and t > LAUNCH_BOUND_S_PER_KERNEL * self._kernels:
                self._attempts[sig] = MAX_CAPTURE_ATTEMPTS
                self.status[sig] = "eager"
                self.reasons[sig] = (f"device-bound: {t * 1e3:.2f} ms for {self._kernels} kernels")
            return out
        with self._lock:
            return self._capture(sig, args, ctx)

    def _eager(self, args, ctx):
        return [self._to_host(v) for v in self.plan.run_inline(args, ctx)]

    def _host(self, values):
        out = []
        for v in values:
            v = self._to_host(v)
            # A host value captured once is returned on every replay: hand out copies.
            out.append(v.copy() if type(v) is np.ndarray else v)
        return out

    def _capture(self, sig, args, ctx):
        variables = [(k, var, var.value) for k in self._variables for var in (k(),)]
        plan = self.plan
        try:
            step = self._device.capture_step(lambda a: plan.run_inline(a, ctx), args)
        except Exception as e:  # noqa: BLE001 - the step runs eagerly instead, reason kept
            self._runs[sig] = 0
            out = self._eager(args, ctx)   # a step that fails eagerly too raises here, uncounted
            n = self._attempts[sig] = self._attempts.get(sig, 0) + 1
            self.reasons[sig] = f"{type(e).__name__}: {e}"
            self.status[sig] = "eager" if n >= MAX_CAPTURE_ATTEMPTS else "warming up"
            _log.debug("step capture failed on %s (attempt %d): %s", self._device.name, n,
                       self.reasons[sig])
            return out
        if step is None:
            self._attempts[sig] = MAX_CAPTURE_ATTEMPTS
            self.status[sig] = "eager"
            return self._eager(args, ctx)
        cap = _Capture(step, variables)
        self._captures[sig] = cap
        self.status[sig] = "captured"
        return self._host(step.replay(args))

    def _drop(self, sig) -> None:
        self._captures.pop(sig, None)
        self._runs[sig] = 0
        self.status[sig] = "warming up"


def _signature(args):
    sig = []
    for a in args:
        shape = getattr(a, "shape", None)
        dtype = getattr(a, "dtype", None)
        if shape is None or dtype is None or getattr(dtype, "kind", "O") in "OSUV":
            return None
        sig.append((tuple(shape), dtype.str))
    return tuple(sig)


def maybe_runner(plan):
    """A `ReplayRunner` for `plan` when its device can capture steps and nothing blocks it."""
    device = plan.device
    if not enabled() or not getattr(device, "can_capture_steps", False):
        return None
    blockers = replay_blockers(plan)
    if blockers:
        _log.debug("step on %s runs eagerly: %s", device.name, "; ".join(blockers[:3]))
        return None
    return ReplayRunner(plan)
