"""The dataflow executor without frames: the whitepaper's executor for plans without control flow.

It runs any plan whose partition has no control-flow primitives, asynchronous kernels (Recv,
queues) and independent expensive kernels included. The frames executor
(`control_flow_executor.FrameDataflowState`) is the reference it must agree with (see `execution`).

Invariants (per step and partition):

* ``pending[n]`` counts the inputs (data and control) of node n not yet produced; n becomes ready
  when it reaches 0. Nodes with no inputs are ready at start.
* ``vals[s]`` holds the value of output slot s; ``refs[s]`` counts the consumers of s that have not
  yet run, and the slot is released (set to None) when it reaches 0, so a backward pass does not
  keep every forward tensor alive. Fetched slots are never released.
* Ready nodes run inline on the thread that made them ready; kernels flagged expensive (at
  registration, possibly as a function of their inputs) go to the inter-op pool; asynchronous
  kernels (Recv) register a callback and hold no thread while they wait.
* The first error aborts the step: nothing new is scheduled, the step's rendezvous is aborted so
  every waiting Recv wakes with the error, and the step completes when in-flight kernels return.
  ``outstanding`` counts nodes scheduled but not finished; the step is done when it is 0.
"""

from __future__ import annotations

import time

from kernflow.core.framework import errors
from kernflow.core.runtime.execution import DATAFLOW, Execution, node_error

__all__ = ["DataflowState"]


class DataflowState(Execution):
    """One step of one partition under the dataflow executor. See the module docstring."""

    executor = DATAFLOW

    def __init__(self, plan, args, ctx, done=None):
        super().__init__(plan, ctx, done)
        self.vals = list(plan._init_vals)
        for s, v in zip(plan.arg_slots, args):
            self.vals[s] = v
        self.refs = list(plan._init_refs)
        self.pending = list(plan._init_pending)
        self.outstanding = 0

    def start(self) -> None:
        roots = self.plan._roots
        if not roots or self.error is not None:
            self._finish()
            return
        with self.lock:
            self.outstanding = len(roots)
        self._process(list(roots))

    def results(self) -> list:
        if self.error is not None:
            raise self.error
        return [self.vals[s] for s in self.plan.retval_slots]

    # Runs `ready` nodes (each already counted in `outstanding`), inline or on the pool.
    def _process(self, ready: list) -> None:
        nodes = self.plan.nodes
        stack = ready
        while stack:
            nid = stack.pop()
            if self.error is not None:
                stack.extend(self._complete(nid, None, skip=True))
                continue
            node = nodes[nid]
            exp = node.expensive
            if exp and self.plan.pool is not None and (exp is True or exp(self._inputs(node))):
                self.plan.pool.schedule(lambda n=node: self._run_and_continue(n))
                continue
            stack.extend(self._run_node(node))

    def _run_and_continue(self, node) -> None:
        self._process(self._run_node(node))

    def _inputs(self, node):
        vals = self.vals
        out = []
        for s, d in zip(node.inputs, node.deref):
            v = vals[s]
            out.append(v.read() if d else v)
        if node.convert:
            dev = self.plan.device
            for pos, fn in node.convert:
                out[pos] = dev.to_host(out[pos]) if fn == "host" else dev.to_device(out[pos])
        return out

    def _run_node(self, node) -> list:
        collector = self.ctx.collector
        t0 = time.perf_counter() if collector is not None else 0.0
        try:
            args = self._inputs(node)
            if node.is_async:
                node.compute(self.ctx, args, lambda outs, n=node: self._async_done(n, outs, t0))
                return []
            compute = self.plan.dataflow_compute[node.id]
            if node.needs_ctx:
                out = compute(self.ctx, *args)
            else:
                out = compute(*args)
        except Exception as e:  # noqa: BLE001 - the step fails with a TF error naming the node
            self.abort(node_error(e, node))
            return self._complete(node.id, None, skip=True)
        if collector is not None:
            collector.record(self.plan.device, node, t0, time.perf_counter(), out)
        return self._complete(node.id, out)

    def _async_done(self, node, outs, t0: float = 0.0) -> None:
        if isinstance(outs, Exception):
            self.abort(node_error(outs, node))
            self._process(self._complete(node.id, None, skip=True))
        else:
            collector = self.ctx.collector
            if collector is not None:   # (a Recv's span ends when its tensor arrived)
                collector.record(self.plan.device, node, t0, time.perf_counter(), outs)
            self._process(self._complete(node.id, outs))

    def _complete(self, nid: int, out, skip: bool = False) -> list:
        """Stores outputs, releases inputs, and returns the consumers that became ready."""
        node = self.plan.nodes[nid]
        vals, refs = self.vals, self.refs
        if not skip:
            n = node.num_outputs
            if n == 1:
                vals[node.out_base] = out
            elif n > 1:
                if len(out) != n:
                    self.abort(errors.InternalError(None, None, f"kernel of {node.name} returned "
                                                    f"{len(out)} outputs, expected {n}"))
                else:
                    vals[node.out_base:node.out_base + n] = out
        ready = []
        with self.lock:
            for s in node.inputs:
                refs[s] -= 1
                if refs[s] == 0:
                    vals[s] = None
            for i in range(node.num_outputs):
                if refs[node.out_base + i] == 0:
                    vals[node.out_base + i] = None
            pending = self.pending
            for c in node.consumers:
                pending[c] -= 1
                if pending[c] == 0:
                    ready.append(c)
            self.outstanding += len(ready) - 1
            finished = self.outstanding == 0
        if finished:
            self._finish()
        return ready
