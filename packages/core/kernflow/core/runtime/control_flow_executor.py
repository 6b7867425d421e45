"""The frames executor: the dataflow executor with dynamic control flow (dead tensors, frames and
iterations), and the reference executor.

A partition that holds any of the whitepaper's control-flow primitives (Switch, Merge, Enter,
Exit, NextIteration, LoopCond, ControlTrigger) runs here. So can any other partition: without
control flow it is one root frame with one iteration (TF's executor treats the top-level graph as
just another frame). This executor is **the reference** of the executor interface (`execution`):
the dataflow executor (`dataflow_executor.DataflowState`) and the straight line
(`straight_line.StraightLineExecution`) must behave exactly as it does on the plans they accept,
and only run faster; ``packages/core/tests/runtime/test_executors.py`` compares them bit for bit.

Invariants (per step and partition):

* Every executed node belongs statically to one *frame*: the frame of its inputs; an Enter's
  outputs live in the child frame it names, an Exit's outputs in its frame's parent (TF's
  BuildControlFlowInfo). At run time a frame has one instance per (parent instance, parent
  iteration, name) and one `_Iteration` per live iteration, holding that iteration's pending
  counts, dead-input counts and input values. Frame instances are named the same way in every
  partition, so Send/Recv keys inside loops (``frame_id:iteration``) match across devices.
* A value that is *dead* (`DEAD`) was not produced: the untaken output of a Switch. A node with a
  dead input does not run and makes dead outputs; Merge fires on its first live data input (or is
  dead when all are); Send/Recv run anyway and carry the deadness to the other side; a dead
  NextIteration stops (the loop is over); a dead Exit is forwarded to the parent only if it is dead
  in the frame's last iteration (a whole loop in an untaken branch).
* Merge's pending count is ``2 * control inputs + 1``: the low bit means "no live input yet".
* Up to `parallel_iterations` iterations of a frame are in flight; a NextIteration that would start
  one more waits in `next_iter_roots` until the oldest iteration finishes. Loop invariants (Enter
  with is_constant) are delivered to every iteration, current and future.
* An iteration is done when it has no outstanding ops or child frames and the one before it is
  done (iteration 0: when every Enter of the frame has delivered); a frame is done when all its
  iterations are; its dead exits then go to the parent. The step is done when nothing is
  outstanding. The first error stops scheduling; in-flight kernels drain.
* Values consumed by a node are dropped from its iteration's input buffer when it runs, and an
  iteration's state is dropped when it is done, so memory stays bounded by the iterations in flight.
"""

from __future__ import annotations

import collections
import threading
import time

from kernflow.core.framework import errors
from kernflow.core.runtime.execution import FRAMES, Execution, node_error

__all__ = ["CONTROL_FLOW_OPS", "DEAD", "ControlFlowInfo", "FrameDataflowState", "has_control_flow"]

CONTROL_FLOW_OPS = frozenset({"Switch", "RefSwitch", "Merge", "RefMerge", "Enter", "RefEnter", "Exit",
                              "RefExit", "NextIteration", "RefNextIteration", "LoopCond",
                              "ControlTrigger"})
_TRANSFER_OPS = frozenset({"_Send", "_Recv", "_HostSend", "_HostRecv"})

# Node kinds.
_NORMAL, _MERGE, _SWITCH, _ENTER, _EXIT, _NEXT, _TRIGGER, _TRANSFER, _FORWARD = range(9)
_KIND = {"Merge": _MERGE, "RefMerge": _MERGE, "Switch": _SWITCH, "RefSwitch": _SWITCH,
         "Enter": _ENTER, "RefEnter": _ENTER, "Exit": _EXIT, "RefExit": _EXIT,
         "NextIteration": _NEXT, "RefNextIteration": _NEXT, "ControlTrigger": _TRIGGER,
         "LoopCond": _FORWARD}


class _Dead:
    __slots__ = ()

    def __repr__(self):
        return "DEAD"


DEAD = _Dead()
_DEAD1 = (DEAD,)
_DEAD2 = (DEAD, DEAD)


def has_control_flow(graph_def) -> bool:
    return any(nd.op in CONTROL_FLOW_OPS for nd in graph_def.node)


class _FrameInfo:
    """Static description of one frame (by name path) of a partition."""

    __slots__ = ("index", "name", "parent", "nodes", "num_inputs", "init_pending", "enter_count",
                 "parallel_iterations")

    def __init__(self, index, name, parent):
        self.index = index
        self.name = name
        self.parent = parent
        self.nodes: list[int] = []
        self.num_inputs = 0
        self.init_pending: list[int] = []
        self.enter_count = 0
        self.parallel_iterations = 10


class ControlFlowInfo:
    """Per-node frame membership, local indices and out edges of a plan with control flow."""

    def __init__(self, plan, node_attrs_of):
        nodes = plan.nodes
        n = len(nodes)
        self.kind = [_KIND.get(nd.op_type, _TRANSFER if nd.op_type in _TRANSFER_OPS else _NORMAL)
                     for nd in nodes]
        # Data inputs produced by executed nodes: (producer id, output index) per input position;
        # None for inputs read from constants or feeds (available in every frame).
        producer_of_slot = {}
        for nd in nodes:
            for i in range(nd.num_outputs):
                producer_of_slot[nd.out_base + i] = (nd.id, i)
        self.static_inputs = [[(pos, s) for pos, s in enumerate(nd.inputs) if s not in producer_of_slot]
                              for nd in nodes]
        self.out_edges = [[[] for _ in range(nd.num_outputs)] for nd in nodes]
        self.ctrl_out = [[] for _ in range(n)]
        data_preds = [[] for _ in range(n)]
        for nd in nodes:
            for pos, s in enumerate(nd.inputs):
                p = producer_of_slot.get(s)
                if p is not None:
                    self.out_edges[p[0]][p[1]].append((nd.id, pos))
                    data_preds[nd.id].append(p[0])
            for c in nd.ctrl_inputs:
                self.ctrl_out[c].append(nd.id)
        self.num_inputs = [len(nd.inputs) for nd in nodes]
        self.enter_frame = [None] * n          # Enter: its child _FrameInfo index
        self.is_constant = [False] * n
        attrs = [node_attrs_of(nd) for nd in nodes]
        # Frame membership, in topological order (back edges from NextIteration excluded).
        frames = [_FrameInfo(0, "", None)]
        by_path = {("",): 0}
        path_of = {0: ("",)}
        frame_of = [None] * n
        for nd in nodes:                        # plan nodes are in topological order
            preds = [(p, False) for p in data_preds[nd.id]] + [(c, True) for c in nd.ctrl_inputs]
            fr = None
            for p, _ in preds:
                if self.kind[p] == _NEXT:
                    continue
                f = self._output_frame(p, frame_of, frames, by_path, path_of, attrs)
                if f is None:
                    continue
                if fr is None:
                    fr = f
                elif f != fr:
                    raise errors.InvalidArgumentError(
                        None, None, f"Node '{nd.name}' ({nd.op_type}) has inputs from different "
                        f"frames: '{nodes[p].name}' is in frame '{frames[f].name or '(root)'}', "
                        f"another input in '{frames[fr].name or '(root)'}'")
            frame_of[nd.id] = 0 if fr is None else fr
        # NextIteration outputs must stay in the frame (the back edge into Merge).
        for nd in nodes:
            if self.kind[nd.id] == _NEXT:
                for dst, _ in self.out_edges[nd.id][0]:
                    if frame_of[dst] != frame_of[nd.id]:
                        raise errors.InvalidArgumentError(
                            None, None, f"NextIteration '{nd.name}' feeds '{nodes[dst].name}' in "
                            f"another frame")
        self.frame_of = frame_of
        self.frames = frames
        self.local = [0] * n
        self.in_base = [0] * n
        for nd in nodes:
            fi = frames[frame_of[nd.id]]
            self.local[nd.id] = len(fi.nodes)
            self.in_base[nd.id] = fi.num_inputs
            fi.num_inputs += len(nd.inputs)
            fi.nodes.append(nd.id)
            if self.kind[nd.id] == _MERGE:
                static = len(self.static_inputs[nd.id])
                pend = 2 * len(nd.ctrl_inputs) + (0 if static else 1)
            else:
                pend = sum(1 for p in data_preds[nd.id]) + len(nd.ctrl_inputs)
            fi.init_pending.append(pend)
        for nd in nodes:
            if self.kind[nd.id] == _ENTER:
                child = frames[self.enter_frame[nd.id]]
                child.enter_count += 1
        # Root nodes: no executed inputs, in the root frame.
        self.roots = [nd.id for nd in nodes if frame_of[nd.id] == 0 and
                      frames[0].init_pending[self.local[nd.id]] == 0]
        # Fetches of values inside a loop are refused (TF: not fetchable).
        fetched = set(plan.retval_slots)
        for nd in nodes:
            if any(nd.out_base + i in fetched for i in range(nd.num_outputs)) and \
                    self._output_frame(nd.id, frame_of, frames, by_path, path_of, attrs) != 0:
                raise errors.InvalidArgumentError(
                    None, None, f"Cannot fetch '{nd.name}': it is inside the while loop frame "
                    f"'{frames[frame_of[nd.id]].name}'; fetch the loop's outputs instead")
        self.fetch_slots = {}
        for k, s in enumerate(plan.retval_slots):
            self.fetch_slots.setdefault(s, []).append(k)
        self.fetch_of_node = [[(i, self.fetch_slots[nd.out_base + i]) for i in range(nd.num_outputs)
                               if nd.out_base + i in self.fetch_slots] for nd in nodes]
        # Edges with everything activation needs, per output: (dst, local index, input buffer
        # index, dst is Merge, dst's data input count, dst is ControlTrigger).
        self.edges = [[[(d, self.local[d], self.in_base[d] + pos, self.kind[d] == _MERGE,
                         self.num_inputs[d], self.kind[d] == _TRIGGER) for d, pos in out]
                       for out in self.out_edges[nd.id]] for nd in nodes]
        self.ctrl_edges = [[(d, self.local[d], self.kind[d] == _MERGE, self.num_inputs[d],
                             self.kind[d] == _TRIGGER) for d in self.ctrl_out[nd.id]] for nd in nodes]

    def _output_frame(self, p, frame_of, frames, by_path, path_of, attrs):
        """Frame index where node p's outputs live (None if p is not yet placed in a frame)."""
        f = frame_of[p]
        if f is None:
            return None
        k = self.kind[p]
        if k == _ENTER:
            if self.enter_frame[p] is None:
                a = attrs[p]
                name = a.get("frame_name", "")
                if isinstance(name, bytes):
                    name = name.decode()
                path = path_of[f] + (name,)
                idx = by_path.get(path)
                if idx is None:
                    idx = len(frames)
                    frames.append(_FrameInfo(idx, name, f))
                    frames[idx].parallel_iterations = max(1, int(a.get("parallel_iterations", 10)))
                    by_path[path] = idx
                    path_of[idx] = path
                self.enter_frame[p] = idx
                self.is_constant[p] = bool(a.get("is_constant", False))
            return self.enter_frame[p]
        if k == _EXIT:
            parent = frames[f].parent
            if parent is None:
                raise errors.InvalidArgumentError(None, None, "an Exit node sits in the root frame "
                                                  "(it has no matching Enter)")
            return parent
        return f


class _Iteration:
    __slots__ = ("inputs", "pending", "dead", "outstanding_ops", "outstanding_frames")

    def __init__(self, info: _FrameInfo):
        self.inputs = [None] * info.num_inputs
        self.pending = list(info.init_pending)
        self.dead = [0] * len(info.init_pending)
        self.outstanding_ops = 0
        self.outstanding_frames = 0


class _Frame:
    __slots__ = ("id", "info", "parent", "parent_iter", "iterations", "iteration_count",
                 "num_outstanding_iters", "max_parallel", "num_pending_inputs", "inv_values",
                 "next_iter_roots", "dead_exits")

    def __init__(self, fid, info, parent, parent_iter):
        self.id = fid
        self.info = info
        self.parent = parent
        self.parent_iter = parent_iter
        self.iterations = {0: _Iteration(info)}
        self.iteration_count = 0
        self.num_outstanding_iters = 1
        self.max_parallel = info.parallel_iterations
        self.num_pending_inputs = info.enter_count
        self.inv_values: list = []
        self.next_iter_roots: list = []
        self.dead_exits: list = []


class FrameDataflowState(Execution):
    """One step of one partition under the frames executor, the reference (module docstring)."""

    executor = FRAMES

    def __init__(self, plan, args, ctx, done=None):
        super().__init__(plan, ctx, done)
        self.cf: ControlFlowInfo = plan.frames_info()
        self.vals = list(plan._init_vals)
        for s, v in zip(plan.arg_slots, args):
            self.vals[s] = v
        self.outstanding = 0
        self.root = _Frame("", self.cf.frames[0], None, 0)
        self.root.num_pending_inputs = 0
        self._children: dict = {}
        self._fetched: dict = {}
        self._local = threading.local()
        self._abort_later = None
        tr = plan.__dict__.get("_trivial_cache")
        if tr is None or self.ctx.collector is not None:
            tr = self._make_trivial()
            if self.ctx.collector is None:
                plan._trivial_cache = tr
        self._trivial = tr

    # ------------------------------------------------------------------ interface
    def start(self) -> None:
        cf = self.cf
        # A loop may run on the caller's thread for a long time: aborting the step (an error
        # elsewhere, a deadline, closing the session) stops scheduling here at once.
        self.ctx.cancellation.register(self._cancelled)
        ready = [(nid, self.root, 0, False) for nid in cf.roots]
        if not ready or self.error is not None:
            self._finish()
            return
        with self.lock:
            self.outstanding = len(ready)
            self.root.iterations[0].outstanding_ops = len(ready)
        self._process(ready)

    def results(self) -> list:
        if self.error is not None:
            raise self.error
        out = []
        vals = self.vals
        for k, s in enumerate(self.plan.retval_slots):
            v = self._fetched.get(k, vals[s])
            if v is DEAD or v is None:
                raise errors.InvalidArgumentError(None, None, f"Retval[{k}] does not have value: the "
                                                  f"fetched tensor was not computed (it is on an "
                                                  f"untaken branch of a conditional)")
            out.append(v)
        return out

    def _cancelled(self, err: Exception) -> None:
        if self.error is None:
            self.error = err

    # ------------------------------------------------------------------ scheduling
    def _process(self, ready: list) -> None:
        nodes = self.plan.nodes
        pool = self.plan.pool
        # FIFO, as TF's inline ready queue: a dead Exit of iteration k runs before iteration k+1's
        # body goes deep, so finished iterations are retired (and their memory freed) promptly.
        stack = collections.deque(ready)
        local = self._local
        while stack:
            item = stack.popleft()
            if self.error is not None:
                stack.extend(self._finish_item(item, None))
                continue
            node = nodes[item[0]]
            exp = node.expensive
            if exp and pool is not None and not item[3] and \
                    (exp is True or exp(self._peek_inputs(item))):
                pool.schedule(lambda it=item: self._process(self._run(it)))
                continue
            if node.is_async and (not item[3] or self.cf.kind[item[0]] == _TRANSFER):
                local.inline = None
                self._start_async(item)
                got = local.inline
                local.inline = None
                if got is not None:
                    stack.extend(got)
                continue
            stack.extend(self._run(item))

    def _peek_inputs(self, item):
        nid, fr, it, _ = item
        cf = self.cf
        ist = fr.iterations[it]
        base = cf.in_base[nid]
        ins = ist.inputs[base:base + cf.num_inputs[nid]]
        for pos, s in cf.static_inputs[nid]:
            ins[pos] = self.vals[s]
        return ins

    def _take_inputs(self, node, item):
        nid, fr, it, _ = item
        cf = self.cf
        ist = fr.iterations[it]
        base = cf.in_base[nid]
        n = cf.num_inputs[nid]
        inputs = ist.inputs
        ins = inputs[base:base + n]
        inputs[base:base + n] = [None] * n
        vals = self.vals
        for pos, s in cf.static_inputs[nid]:
            ins[pos] = vals[s]
        return ins

    def _prepare(self, node, ins):
        for pos, d in enumerate(node.deref):
            if d and ins[pos] is not None:
                ins[pos] = ins[pos].read()
        if node.convert:
            dev = self.plan.device
            for pos, fn in node.convert:
                if ins[pos] is not None:
                    ins[pos] = dev.to_host(ins[pos]) if fn == "host" else dev.to_device(ins[pos])
        return ins

    def _ctx_for(self, item):
        fr, it, dead = item[1], item[2], item[3]
        if fr is self.root and not dead:
            return self.ctx
        return self.ctx.in_frame(fr.id, it, dead)

    def _run(self, item) -> list:
        nid, fr, it, dead = item
        node = self.plan.nodes[nid]
        kind = self.cf.kind[nid]
        collector = self.ctx.collector
        t0 = time.perf_counter() if collector is not None else 0.0
        try:
            ins = self._take_inputs(node, item)
            if dead and kind != _TRANSFER and kind != _TRIGGER:
                outs = [DEAD] * node.num_outputs
            elif kind == _MERGE:
                outs = [DEAD, DEAD]
                for k, v in enumerate(ins):
                    if v is not None and v is not DEAD:
                        outs = [v, k]
                        break
            elif kind == _SWITCH:
                v, pred = ins
                outs = [DEAD, v] if _truth(pred) else [v, DEAD]
            elif kind in (_ENTER, _EXIT, _NEXT, _FORWARD):
                outs = [ins[0]]
            elif kind == _TRIGGER:
                outs = []
            else:
                ins = self._prepare(node, ins)
                if node.needs_ctx:
                    out = node.compute(self._ctx_for(item), *ins)
                else:
                    out = node.compute(*ins)
                n = node.num_outputs
                if n == 1:
                    outs = [out]
                elif n == 0:
                    outs = []
                else:
                    outs = list(out)
                    if len(outs) != n:
                        raise errors.InternalError(None, None, f"kernel of {node.name} returned "
                                                   f"{len(outs)} outputs, expected {n}")
        except Exception as e:  # noqa: BLE001 - the step fails with a TF error naming the node
            self.abort(node_error(e, node))
            return self._finish_item(item, None)
        if collector is not None:
            collector.record(self.plan.device, node, t0, time.perf_counter(),
                             outs[0] if len(outs) == 1 else outs)
        return self._finish_item(item, outs)

    def _start_async(self, item) -> None:
        node = self.plan.nodes[item[0]]
        local = self._local
        me = threading.get_ident()
        state = {"inline": True}
        collector = self.ctx.collector
        t0 = time.perf_counter() if collector is not None else 0.0

        def done(outs, _item=item):
            if isinstance(outs, Exception):
                self.abort(node_error(outs, node))
                res = None
            elif node.num_outputs == 1:
                res = [outs]
            elif node.num_outputs == 0:
                res = []
            else:
                res = list(outs)
            if collector is not None and res is not None:
                collector.record(self.plan.device, node, t0, time.perf_counter(), outs)
            ready = self._finish_item(_item, res)
            if state["inline"] and threading.get_ident() == me:
                local.inline = ready    # completed during compute: continue on the caller's stack
            else:
                self._process(ready)

        try:
            ins = self._prepare(node, self._take_inputs(node, item))
            node.compute(self._ctx_for(item), ins, done)
        except Exception as e:  # noqa: BLE001
            done(e)
        finally:
            state["inline"] = False

    # ------------------------------------------------------------------ propagation
    def _finish_item(self, item, outs) -> list:
        """Propagates `outs` (None: skipped after an error) and retires the item; returns ready items."""
        nid, fr, it, dead = item
        cf = self.cf
        ready: list = []
        with self.lock:
            if outs is not None and self.error is None:
                kind = cf.kind[nid]
                if cf.fetch_of_node[nid] and (fr is self.root or kind == _EXIT and fr.parent is self.root
                                              and outs[0] is not DEAD):
                    for i, ks in cf.fetch_of_node[nid]:
                        for k in ks:
                            self._fetched[k] = outs[i]
                if kind == _ENTER:
                    child = self._child_frame(fr, it, nid)
                    v = outs[0]
                    if cf.is_constant[nid]:
                        child.inv_values.append((nid, v))
                        first = child.iteration_count - child.num_outstanding_iters + 1
                        for i in range(first, child.iteration_count + 1):
                            self._activate(nid, outs, False, child, i, ready)
                    else:
                        self._activate(nid, outs, v is DEAD, child, 0, ready)
                    child.num_pending_inputs -= 1
                    if child.num_pending_inputs == 0:
                        self._maybe_cleanup(child, 0, ready)
                elif kind == _EXIT:
                    if outs[0] is DEAD:
                        if it == fr.iteration_count:
                            fr.dead_exits.append(nid)
                    else:
                        self._activate(nid, outs, False, fr.parent, fr.parent_iter, ready)
                elif kind == _NEXT:
                    v = outs[0]
                    if v is not DEAD:
                        if it == fr.iteration_count and fr.num_outstanding_iters == fr.max_parallel:
                            fr.next_iter_roots.append((nid, v))
                        else:
                            if it == fr.iteration_count:
                                self._increment_iteration(fr, ready)
                            self._activate(nid, outs, False, fr, it + 1, ready)
                else:
                    # A Recv of a dead tensor is dead itself: its control edges carry the deadness.
                    self._activate(nid, outs, dead or (kind == _TRANSFER and outs and outs[0] is DEAD),
                                   fr, it, ready)
            ist = fr.iterations.get(it)
            if ist is not None:
                ist.outstanding_ops -= 1
                if ist.outstanding_ops == 0 and ist.outstanding_frames == 0:
                    self._maybe_cleanup(fr, it, ready)
            self.outstanding += len(ready) - 1
            finished = self.outstanding == 0
        if self._abort_later is not None:
            err, self._abort_later = self._abort_later, None
            rdv = self.ctx.rendezvous
            if rdv is not None:
                rdv.abort(err)
        if finished:
            self._finish()
        return ready

    def _activate(self, nid, outs, node_dead, fr, it, ready) -> None:
        """Delivers node nid's outputs to its consumers in iteration `it` of frame `fr`.

        Consumers that become ready and are trivial (Merge, Switch, Identity, LoopCond, a Const
        behind a control edge) are evaluated right here instead of being queued: in a loop they
        are most of the nodes of an iteration.
        """
        cf = self.cf
        ist = fr.iterations[it]
        pending, deadc, inputs = ist.pending, ist.dead, ist.inputs
        edges_of, ctrl_of, trivial = cf.edges, cf.ctrl_edges, self._trivial
        work = [(nid, outs, node_dead)]
        queued = 0
        while work:
            nid, outs, node_dead = work.pop()
            src_enter = cf.kind[nid] == _ENTER
            for i, edges in enumerate(edges_of[nid]):
                v = outs[i]
                live = v is not DEAD
                for dst, li, ii, merge, n_in, trig in edges:
                    if merge:
                        cnt = pending[li]
                        if live:
                            pending[li] = cnt & ~1
                            if cnt & 1:
                                inputs[ii] = v
                            if cnt != 1:
                                continue
                            dst_dead = False
                        else:
                            deadc[li] += 1
                            dst_dead = deadc[li] == n_in or src_enter
                            if cnt != 1 or not dst_dead:
                                continue
                    else:
                        if live:
                            inputs[ii] = v
                        else:
                            deadc[li] += 1
                        cnt = pending[li] - 1
                        pending[li] = cnt
                        if cnt:
                            continue
                        dst_dead = deadc[li] > 0 and not trig
                    t = trivial[dst]
                    if t is not None:
                        work.append((dst, t(dst, dst_dead, inputs), dst_dead))
                    else:
                        ready.append((dst, fr, it, dst_dead))
                        queued += 1
            # The dispatch tail below repeats the one above on purpose: gathering ready consumers
            # in a list first costs ~2.5 us per iteration of a one-op loop (10%).
            for dst, li, merge, n_in, trig in ctrl_of[nid]:
                if merge:
                    cnt = pending[li] - 2
                    pending[li] = cnt
                    if not (cnt == 0 or (cnt == 1 and deadc[li] == n_in)):
                        continue
                    dst_dead = cnt == 1
                else:
                    if node_dead:
                        deadc[li] += 1
                    cnt = pending[li] - 1
                    pending[li] = cnt
                    if cnt:
                        continue
                    dst_dead = deadc[li] > 0 and not trig
                t = trivial[dst]
                if t is not None:
                    work.append((dst, t(dst, dst_dead, inputs), dst_dead))
                else:
                    ready.append((dst, fr, it, dst_dead))
                    queued += 1
        ist.outstanding_ops += queued

    def _make_trivial(self):
        """Per node: None, or fn(nid, dead, inputs) -> outputs for nodes evaluated inline."""
        cf = self.cf
        plan = self.plan
        out = [None] * len(plan.nodes)
        if self.ctx.collector is not None:
            return out      # traced steps record every node
        in_base = cf.in_base

        def merge(nid, dead, inputs):
            if dead:
                return _DEAD2
            b = in_base[nid]
            for k in range(cf.num_inputs[nid]):
                v = inputs[b + k]
                if v is not None:
                    inputs[b:b + cf.num_inputs[nid]] = [None] * cf.num_inputs[nid]
                    return [v, k]
            return _DEAD2

        def switch(nid, dead, inputs):
            b = in_base[nid]
            v, pred = inputs[b], inputs[b + 1]
            inputs[b] = inputs[b + 1] = None
            if dead:
                return _DEAD2
            try:
                taken = _truth(pred)
            except errors.OpError as e:
                if self.error is None:
                    e = node_error(e, plan.nodes[nid])
                    self.error = e
                    self._abort_later = e
                return _DEAD2
            return [DEAD, v] if taken else [v, DEAD]

        def forward(nid, dead, inputs):
            b = in_base[nid]
            v = inputs[b]
            inputs[b] = None
            return _DEAD1 if dead else [v]

        def const(nid, dead, inputs):
            return _DEAD1 if dead else [plan.nodes[nid].compute()]

        for nd in plan.nodes:
            k = cf.kind[nd.id]
            if cf.static_inputs[nd.id] or cf.fetch_of_node[nd.id] or nd.convert or any(nd.deref):
                continue
            if k == _MERGE:
                out[nd.id] = merge
            elif k == _SWITCH:
                out[nd.id] = switch
            elif k == _FORWARD or (k == _NORMAL and nd.forwards and nd.num_outputs == 1 and
                                   len(nd.inputs) == 1 and not nd.needs_ctx):
                out[nd.id] = forward
            elif k == _NORMAL and nd.op_type == "Const" and not nd.inputs:
                out[nd.id] = const
        return out

    # ------------------------------------------------------------------ frames
    def _child_frame(self, fr, it, enter_nid) -> _Frame:
        info = self.cf.frames[self.cf.enter_frame[enter_nid]]
        key = (id(fr), it, info.index)
        child = self._children.get(key)
        if child is None:
            fid = f"{fr.id}|{it}|{info.name}" if fr.id else info.name
            child = _Frame(fid, info, fr, it)
            self._children[key] = child
            fr.iterations[it].outstanding_frames += 1
        return child

    def _increment_iteration(self, fr, ready) -> None:
        fr.iteration_count += 1
        nxt = fr.iteration_count
        fr.iterations[nxt] = _Iteration(fr.info)
        fr.num_outstanding_iters += 1
        fr.dead_exits = []
        roots, fr.next_iter_roots = fr.next_iter_roots, []
        for nid, v in roots:
            self._activate(nid, [v], False, fr, nxt, ready)
        for nid, v in fr.inv_values:
            self._activate(nid, [v], False, fr, nxt, ready)

    def _iteration_done(self, fr, it) -> bool:
        ist = fr.iterations.get(it)
        if ist is None or ist.outstanding_ops or ist.outstanding_frames:
            return False
        if it == 0:
            return fr.num_pending_inputs == 0
        return (it - 1) not in fr.iterations

    def _maybe_cleanup(self, fr, it, ready) -> None:
        while fr is not self.root:
            curr = it
            while curr <= fr.iteration_count and self._iteration_done(fr, curr):
                del fr.iterations[curr]
                fr.num_outstanding_iters -= 1
                curr += 1
                if fr.next_iter_roots and self.error is None:
                    self._increment_iteration(fr, ready)
            if fr.num_pending_inputs or fr.num_outstanding_iters:
                return
            # The frame is done: forward its dead exits, then the parent iteration may be done.
            parent, pit = fr.parent, fr.parent_iter
            for nid in fr.dead_exits:
                self._activate(nid, [DEAD] * len(self.cf.out_edges[nid]), True, parent, pit, ready)
            self._children.pop((id(parent), pit, fr.info.index), None)
            pst = parent.iterations[pit]
            pst.outstanding_frames -= 1
            if pst.outstanding_ops or pst.outstanding_frames:
                return
            fr, it = parent, pit


def _truth(pred) -> bool:
    try:
        return bool(pred)
    except Exception as e:  # noqa: BLE001 - a non-scalar predicate
        raise errors.InvalidArgumentError(None, None, f"The second input must be a scalar, but it "
                                          f"has shape {getattr(pred, 'shape', '?')}") from e
