"""The segmented straight line: a partition whose only asynchronous kernels are Recvs, compiled to
straight-line segments run as the Recvs they need arrive.

A worker's partition (and a DirectSession partition on a second device) receives some of its inputs
with `_Recv`; the dataflow executor ran it one node at a time, paying a pending count, a lock and a
list per node (a fifth of an asynchronous-training worker's CPU for 37 nodes). Most of such a
partition only waits for a few Recvs: a node's *key* is the set of Recvs it depends on (through
data and control edges, transitively), and nodes with the same key can run together, in topological
order, as soon as those Recvs arrived. So the plan is cut into **segments**, one per key, each
compiled to one Python function as the straight line compiles a whole plan (`straight_line.py`):

* the segment of the empty key runs at `start`; it holds everything that needs no Recv, and starts
  the Recvs that need nothing (a Recv starts in the segment of the key of its own inputs, usually
  none: Recvs are roots);
* a segment waits for the Recvs whose values its statements read and for the segments whose values
  (or control outputs) its statements consume. A segment's dependencies have strictly smaller keys,
  so segments form a DAG and the run cannot deadlock where the dataflow executor would not: every
  kernel runs as soon as the dataflow executor could have run it, or later only by the time the
  rest of its segment takes (the segment's kernels are synchronous);
* a segment stops after the kernel during which the step was aborted (an error elsewhere, a
  deadline, a task lost), as the dataflow executor schedules nothing after an abort;
* values crossing segments go through the run's slot list; inside a segment they are locals,
  deleted after their last use; a cross-segment value read by one segment only is dropped from the
  list when that segment loads it.

A segment runs on the thread that made it ready: `start`'s caller, or the thread delivering a Recv's
value (the sender's, in process; the transport's, from another task), as the dataflow executor
continues. The first error aborts the run and the step's rendezvous; Recvs still waiting then wake
with the error and the run finishes when none is left. The frames executor is the reference it must
agree with (`execution`); a traced step (stats per node) runs on the dataflow executor instead.
"""

from __future__ import annotations

import os

from kernflow.core.framework import errors
from kernflow.core.runtime.execution import SEGMENTED, Execution, node_error
from kernflow.core.runtime.straight_line import (
    deref as deref_expr, exec_generated, generated_line_node, node_statement)

__all__ = ["ENABLED", "SegmentedExecution", "SegmentedProgram", "can_segment", "compile_segments"]

RECV = "_Recv"
# ``KERNFLOW_SEGMENTED=0`` runs such plans on the dataflow executor instead (for comparisons).
ENABLED = os.environ.get("KERNFLOW_SEGMENTED", "1") != "0"


def can_segment(plan) -> bool:
    """True for a plan without control flow whose asynchronous kernels (if any) are all Recvs."""
    if plan.control_flow is not None:
        return False
    return all(not n.is_async or (n.op_type == RECV and not n.inputs and n.num_outputs == 1)
               for n in plan.nodes)


class SegmentedProgram:
    """A plan compiled to segments (see the module docstring).

    Attributes:
        functions: per segment, ``fn(vals, ctx, run)``; segment 0 has the empty key.
        init_pending: per segment, how many Recvs and segments it waits for.
        after_segment: per segment, the segments waiting for it.
        after_recv: node id of each Recv -> the segments reading its value.
        recv_slot: node id of each Recv -> its output slot.
        sources: per segment, the generated source (for tests and debugging).
    """

    __slots__ = ("functions", "init_pending", "after_segment", "after_recv", "recv_slot", "sources")


def compile_segments(plan, inplace: set, release: bool = True) -> SegmentedProgram:
    """Compiles `plan` (`can_segment`) into a `SegmentedProgram`.

    Args:
        plan: the `ExecutorPlan`.
        inplace: ids of nodes whose in-place kernel may write into input 0's buffer (each such input
            has this node as its only reader, so no order of segments can reuse it elsewhere).
        release: delete intermediates after their last use (benchmarks turn it off).
    """
    nodes = plan.nodes
    preds = [[] for _ in nodes]
    for n in nodes:
        for c in n.consumers:
            preds[c].append(n.id)
    slot_node = {}
    for n in nodes:
        for i in range(n.num_outputs):
            slot_node[n.out_base + i] = n.id
    is_recv = [n.op_type == RECV for n in nodes]

    # Keys, in topological order (plan.nodes is topologically ordered).
    key = [frozenset()] * len(nodes)
    for n in nodes:
        k = frozenset()
        for p in preds[n.id]:
            k = k | key[p] | ({p} if is_recv[p] else frozenset())
        key[n.id] = k
    order = sorted({key[n.id] for n in nodes} | {frozenset()}, key=len)   # subsets first
    seg_of_key = {k: i for i, k in enumerate(order)}
    seg = [seg_of_key[key[n.id]] for n in nodes]
    members = [[] for _ in order]
    for n in nodes:
        members[seg[n.id]].append(n)

    # Dependencies: the Recvs whose arrival a segment's statements need (their values, or a
    # control edge; a Recv started here after another Recv waits for it too), and the segments whose
    # values or control outputs they consume.
    wait_recvs = [set() for _ in order]
    wait_segs = [set() for _ in order]
    for n in nodes:
        i = seg[n.id]
        for p in preds[n.id]:
            if is_recv[p]:
                wait_recvs[i].add(p)
            elif seg[p] != i:
                wait_segs[i].add(seg[p])

    prog = SegmentedProgram()
    prog.init_pending = [len(wait_recvs[i]) + len(wait_segs[i]) for i in range(len(order))]
    prog.after_segment = [[] for _ in order]
    for i in range(len(order)):
        for j in wait_segs[i]:
            prog.after_segment[j].append(i)
    prog.after_recv = {}
    for i in range(len(order)):
        for r in wait_recvs[i]:
            prog.after_recv.setdefault(r, []).append(i)
    prog.recv_slot = {n.id: n.out_base for n in nodes if is_recv[n.id]}

    # Which segments read each slot (to drop a value from the list when its one reader loaded it).
    readers: dict[int, set] = {}
    for n in nodes:
        if not is_recv[n.id]:
            for s in n.inputs:
                readers.setdefault(s, set()).add(seg[n.id])
    pinned = set(plan.retval_slots)
    # Every segment is one function of a single generated module (one compile per plan).
    g = {"_errors": errors}
    if plan.device is not None and getattr(plan.device, "has_device_memory", False):
        g["_to_host"], g["_to_device"] = plan.device.to_host, plan.device.to_device
    all_lines, line_node = [], {}
    prog.sources = []
    for i, group in enumerate(members):
        lines, nodes_at = _compile_segment(plan, i, group, slot_node, is_recv, readers, pinned,
                                           inplace, release, g)
        line_node.update((len(all_lines) + k, n) for k, n in nodes_at.items())
        all_lines.extend(lines)
        prog.sources.append("\n".join(lines) + "\n")
    filename = f"<kernflow plan {plan.id} segments on {plan.device.name if plan.device else '?'}>"
    namespace = exec_generated("\n".join(all_lines) + "\n", filename, g)
    prog.functions = [_wrap(namespace[f"_seg{i}"], filename, line_node) for i in range(len(members))]
    return prog


def _wrap(inner, filename: str, line_node: dict):
    """A segment's function, re-raising a kernel's exception as a TF error naming its node."""
    def run(vals, ctx, execution):
        try:
            inner(vals, ctx, execution)
        except Exception as e:  # noqa: BLE001 - re-raised as a TF error naming the node
            raise node_error(e, generated_line_node(e, filename, line_node)) from e
    return run


def _compile_segment(plan, index, group, slot_node, is_recv, readers, pinned, inplace, release, g):
    """(the source lines of ``_seg<index>(vals, ctx, run)``, which runs one segment's statements,
    {line number in them, from 1: node}); binds kernels and constants into the namespace `g`."""
    consts = plan._init_vals
    arg_slots = set(plan.arg_slots)
    local = set()          # slots produced by this segment
    loaded = set()         # slots loaded from the list
    last_use: dict[int, int] = {}
    for n in group:
        for s in n.inputs:
            last_use[s] = n.id
    exported = set()       # slots produced here that another segment reads or that are fetched
    for n in group:
        if is_recv[n.id]:
            continue
        for j in range(n.num_outputs):
            s = n.out_base + j
            if s in pinned or readers.get(s, set()) - {index}:
                exported.add(s)
    lines = [f"def _seg{index}(_vals, _ctx, _run):"]
    line_node = {}

    def ref(s, deref):
        if consts[s] is not None:
            name = f"c{s}"
            g[name] = consts[s]
        else:
            name = f"v{s}"
            if s not in local and s not in loaded:
                loaded.add(s)
                lines.append(f"    {name} = _vals[{s}]")
                only_here = readers.get(s, set()) == {index}
                if release and only_here and s not in pinned and (s in arg_slots or s in slot_node):
                    lines.append(f"    _vals[{s}] = None")
        return deref_expr(name) if deref else name

    for n in group:
        if is_recv[n.id]:
            g[f"k{n.id}"] = n.compute
            line_node[len(lines) + 1] = n
            lines.append(f"    _run.start_recv({n.id}, k{n.id})")
            continue
        stmt, calls = node_statement(n, [ref(s, d) for s, d in zip(n.inputs, n.deref)], g, inplace)
        for j in range(n.num_outputs):
            local.add(n.out_base + j)
        if stmt is None:
            continue
        line_node[len(lines) + 1] = n
        lines.append("    " + stmt)
        if calls:   # an aborted step stops between kernels, as under the dataflow executor
            lines.append("    if _run.error is not None: return None")
        for j in range(n.num_outputs):
            s = n.out_base + j
            if s in exported:
                lines.append(f"    _vals[{s}] = v{s}")
        if release:
            dead = [s for s in n.inputs if last_use.get(s) == n.id and consts[s] is None]
            dead += [n.out_base + j for j in range(n.num_outputs) if n.out_base + j not in last_use]
            if dead:
                lines.append(f"    del {', '.join(f'v{s}' for s in dict.fromkeys(dead))}")
    lines.append("    return None")
    return lines, line_node


class SegmentedExecution(Execution):
    """One run of a `SegmentedProgram` (`ExecutorPlan.segments`) for one step.

    ``outstanding`` counts the segments released but not yet run and the Recvs started but not yet
    arrived; the run finishes when it drops to 0. After an error nothing new is released.
    """

    executor = SEGMENTED

    def __init__(self, plan, args, ctx, done=None):
        super().__init__(plan, ctx, done)
        prog = plan.segments
        self.prog = prog
        vals = list(plan._init_vals)
        for s, v in zip(plan.arg_slots, args):
            vals[s] = v
        self.vals = vals
        self.pending = list(prog.init_pending)
        self.outstanding = 1      # segment 0

    def start(self) -> None:
        self._run_segments([0])

    def results(self) -> list:
        if self.error is not None:
            raise self.error
        vals = self.vals
        return [vals[s] for s in self.plan.retval_slots]

    def start_recv(self, nid: int, compute) -> None:
        """Starts Recv `nid` (called from a segment's code)."""
        with self.lock:
            self.outstanding += 1
        compute(self.ctx, (), lambda value, _n=nid: self._arrived(_n, value))

    def _arrived(self, nid: int, value) -> None:
        if isinstance(value, Exception):
            self.abort(node_error(value, self.plan.nodes[nid]))
        else:
            self.vals[self.prog.recv_slot[nid]] = value
        ready = self._complete(self.prog.after_recv.get(nid, ()))
        if ready:
            self._run_segments(ready)

    def _complete(self, waiting) -> list:
        """One counted item (a segment run, a Recv arrived) is done: releases what waited for it;
        returns the segments now ready (each counted), or finishes the run."""
        pending = self.pending
        ready = []
        with self.lock:
            if self.error is None:
                for i in waiting:
                    pending[i] -= 1
                    if pending[i] == 0:
                        ready.append(i)
            self.outstanding += len(ready) - 1
            finished = self.outstanding == 0
        if finished:
            self._finish()
        return ready

    def _run_segments(self, stack: list) -> None:
        functions, after = self.prog.functions, self.prog.after_segment
        # A worker's rendezvous sends what one segment's _Sends push to another task in one message
        # (`begin_pushes` / `end_pushes`), before the segment counts as done.
        rdv = self.ctx.rendezvous
        begin = getattr(rdv, "begin_pushes", None)
        while stack:
            i = stack.pop()
            if self.error is None:
                held = begin() if begin is not None else None   # (a tuple: true while held)
                try:
                    functions[i](self.vals, self.ctx, self)
                    if held:
                        held, prev = None, held
                        rdv.end_pushes(prev)
                except Exception as e:  # noqa: BLE001 - the step fails with a TF error naming the node
                    if held:   # the kernel's error is the step's; the held pushes are dropped
                        rdv.end_pushes(held, send=False)
                    self.abort(e if isinstance(e, errors.OpError) else node_error(e, None))
            stack.extend(self._complete(after[i]))
