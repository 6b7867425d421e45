"""Compiled while loops: a loop frame run as one node, its iterations as generated Python code.

The frames executor (`control_flow_executor.FrameDataflowState`) runs a while loop the
whitepaper's way: every node of every iteration is scheduled on its own, with pending counts,
dead-input counts and per-iteration input buffers. In Python that bookkeeping costs ~10 us per
node, several times what the small kernels of an RNN cell cost (the PTB LSTM's step was 30 ms of
forward loop and 50 ms of gradient loop, for ~8,000 node executions). This pass replaces each
*simple* loop frame of a compiled partition by one
`_CompiledLoop` node whose kernel runs the loop's iterations one after another as straight-line code
(one statement per node, as `straight_line.compile_straight_line` does for a whole partition).

A frame is simple when it is innermost (no Enter into a child frame remains) and has exactly the shape
`while_loop` builds:

* every Merge has two data inputs, one from a non-constant Enter of the frame and one from a
  NextIteration, and no control inputs; there is one LoopCond; every Switch switches a value of the
  condition side on the LoopCond; a Switch's false output feeds only Exits, and every Exit reads a
  Switch's false output; a NextIteration reads a body value and feeds only Merges;
* no member is asynchronous (queues, Recv), a transfer (Send/Recv of a loop split across devices), a
  ControlTrigger, or another Switch/Merge (a `cond` inside the body): deadness never arises inside.

Members split into the *condition side* (computed from the Merges and loop invariants only: run in
every iteration, the last one included) and the *body* (everything reached from a Switch's true
output: run only while the predicate holds). Iteration i runs the condition side, stops when the
LoopCond is false (the Exits then take the Switches' inputs), otherwise runs the body and hands the
NextIteration inputs to the Merges of iteration i + 1. This is one legal schedule of the dataflow
semantics (`parallel_iterations` = 1); innermost frames are compiled first, so a loop nested in a
loop becomes a node of its parent's body and the parent can then be compiled too.

The loop node is registered expensive (independent loops, the two directions of a bidirectional RNN,
run on two inter-op threads) and reads its step context: it checks the step's cancellation between
iterations (a deadline, `Session.close`, an error elsewhere in the step stop an endless loop), gives
kernels that read it a context naming the frame and iteration as the frames executor does, and
records every member's timing in a traced step. A dead input (the loop sits in an untaken branch of
a `cond`) makes the frames executor skip the node and mark every output dead, as for any kernel.

``KERNFLOW_COMPILE_LOOPS=0`` (every process) or a session's
`ConfigProto.graph_options.optimizer_options.global_jit_level = OFF` keeps every loop on the frames
executor.
"""

from __future__ import annotations

import heapq
import os
import threading
import time

from kernflow.core.framework import errors
from kernflow.core.runtime import control_flow_executor as _K
from kernflow.core.runtime.execution import node_error
from kernflow.core.runtime.straight_line import (
    call_statement, deref as deref_expr, exec_generated, generated_line_node)

__all__ = ["ENABLED", "CompiledLoop", "compile_loops"]

ENABLED = os.environ.get("KERNFLOW_COMPILE_LOOPS", "1") != "0"

_CTRL_KINDS = frozenset({_K._MERGE, _K._SWITCH, _K._ENTER, _K._EXIT, _K._NEXT, _K._FORWARD})


class _Unsupported(Exception):
    """The frame does not have the simple shape (reason in the message); it stays on the frames
    executor."""


class CompiledLoop:
    """The kernel of a `_CompiledLoop` node: fn(ctx, *inputs) -> the Exit values."""

    def __init__(self, name: str, frame_name: str, run_fn, traced_fn, device, source: str):
        self.name = name
        self.frame_name = frame_name
        self._run = run_fn
        self._traced = traced_fn
        self._device = device
        self.source = source

    def __call__(self, ctx, *ins):
        pid, pit = ctx.frame_iter
        fid = f"{pid}|{pit}|{self.frame_name}" if pid else self.frame_name
        cm = ctx.cancellation
        if ctx.collector is not None:
            rec = ctx.collector.record
            dev = self._device
            return self._traced(ins, ctx, cm, fid,
                                lambda n, t0, out: rec(dev, n, t0, time.perf_counter(), out))
        return self._run(ins, ctx, cm, fid)


def _cancelled(cm):
    err = getattr(cm, "error", None)
    if err is None:
        err = errors.CancelledError(None, None, "the step was cancelled")
    return err


def compile_loops(plan, cf):
    """(nodes, num_slots, remap) for `plan` with every simple innermost loop frame replaced by one node.

    Returns None when no frame qualifies. The returned nodes are in topological order, renumbered,
    with `consumers`/`num_pending`/`ctrl_inputs` relinked; the loop nodes' outputs take new slots
    from `plan.num_slots` on, and `remap` maps each replaced Exit's slot to its new one (fetches).
    """
    from kernflow.core.runtime.executor import _Node
    nodes = plan.nodes
    replaced: dict[int, int] = {}      # member or Enter id -> index into `loops`
    loops = []
    next_slot = plan.num_slots
    for info in cf.frames[1:]:
        try:
            spec = _analyse(plan, cf, info)
        except _Unsupported:
            continue
        out_base = next_slot
        next_slot += len(spec["exits"])
        # An Enter that reads a ref variable as a value dereferences it: so does the loop node.
        deref = [nodes[e].deref[0] for e in spec["enters"]] + [False] * len(spec["feeds"])
        loop_node = _Node(-1, spec["name"], "_CompiledLoop", None, spec["inputs"], deref,
                          [], out_base, len(spec["exits"]), needs_ctx=True, expensive=True)
        loop_node.convert = spec["convert"]
        loop_node.static_elems = [nodes[x].static_elems[0] if nodes[x].static_elems else None
                                  for x in spec["exits"]]
        loop_node.compute = _generate(plan, cf, spec, loop_node)
        k = len(loops)
        loops.append((spec, loop_node))
        for m in spec["members"]:
            replaced[m] = k
        for e in spec["enters"]:
            replaced[e] = k
    if not loops:
        return None
    # Exit slots -> loop output slots.
    remap = {}
    for spec, ln in loops:
        for j, x in enumerate(spec["exits"]):
            remap[nodes[x].out_base] = ln.out_base + j
    kept = [n for n in nodes if n.id not in replaced]
    for n in kept + [ln for _, ln in loops]:      # one loop may read another's Exit
        n.inputs = [remap.get(s, s) for s in n.inputs]
    # Control inputs by node object (ids are renumbered below); an edge from a replaced Exit or Enter
    # becomes an edge from its loop node.
    owner = {}
    for k, (spec, ln) in enumerate(loops):
        for m in list(spec["members"]) + list(spec["enters"]):
            owner[m] = ln
    ctrl_of = {}
    for n in kept:
        ctrl_of[id(n)] = _unique(owner.get(c, nodes[c]) for c in n.ctrl_inputs)
    for spec, ln in loops:
        ctrl_of[id(ln)] = [c for c in _unique(owner.get(c, nodes[c]) for e in spec["enters"]
                                              for c in nodes[e].ctrl_inputs) if c is not ln]
    new_nodes = _toposort(kept + [ln for _, ln in loops], ctrl_of)
    producer = {}
    for i, n in enumerate(new_nodes):
        n.id = i
        n.consumers = []
        for j in range(n.num_outputs):
            producer[n.out_base + j] = n
    for n in new_nodes:
        preds = [producer[s] for s in n.inputs if s in producer]
        n.ctrl_inputs = [c.id for c in ctrl_of[id(n)]]
        for p in preds:
            p.consumers.append(n.id)
        for c in ctrl_of[id(n)]:
            c.consumers.append(n.id)
        n.num_pending = len(preds) + len(n.ctrl_inputs)
    return new_nodes, next_slot, remap


def _unique(objs) -> list:
    seen, out = set(), []
    for o in objs:
        if id(o) not in seen:
            seen.add(id(o))
            out.append(o)
    return out


def _toposort(nodes, ctrl_of) -> list:
    """Kahn's order over data edges (by slot) and control edges (NextIteration back edges aside)."""
    producer = {}
    for n in nodes:
        for j in range(n.num_outputs):
            producer[n.out_base + j] = n
    succ = {id(n): [] for n in nodes}
    indeg = {id(n): 0 for n in nodes}
    for n in nodes:
        preds = [producer[s] for s in n.inputs if s in producer] + ctrl_of[id(n)]
        for p in preds:
            if p.op_type in ("NextIteration", "RefNextIteration"):
                continue
            succ[id(p)].append(n)
            indeg[id(n)] += 1
    order_key = {id(n): i for i, n in enumerate(nodes)}
    ready = [(order_key[id(n)], id(n), n) for n in nodes if indeg[id(n)] == 0]
    heapq.heapify(ready)
    out = []
    while ready:
        _, _, n = heapq.heappop(ready)
        out.append(n)
        for s in succ[id(n)]:
            indeg[id(s)] -= 1
            if indeg[id(s)] == 0:
                heapq.heappush(ready, (order_key[id(s)], id(s), s))
    if len(out) != len(nodes):
        raise errors.InternalError(None, None, "compiling loops left a cycle in the partition")
    return out


# ---------------------------------------------------------------------------- analysis
def _analyse(plan, cf, info) -> dict:
    nodes = plan.nodes
    kind = cf.kind
    members = list(info.nodes)
    mset = set(members)
    enters = [n.id for n in nodes if kind[n.id] == _K._ENTER and cf.enter_frame[n.id] == info.index]
    eset = set(enters)
    if not enters:
        raise _Unsupported("no Enter")
    producer = {}
    for n in nodes:
        for j in range(n.num_outputs):
            producer[n.out_base + j] = (n.id, j)
    merges, switches, exits, nexts, loopconds = [], [], [], [], []
    for m in members:
        nd = nodes[m]
        k = kind[m]
        if nd.is_async or k == _K._TRANSFER:
            raise _Unsupported(f"{nd.name} is asynchronous or a transfer")
        if k == _K._ENTER:
            raise _Unsupported("a nested frame")
        if k == _K._MERGE:
            merges.append(m)
        elif k == _K._SWITCH:
            switches.append(m)
        elif k == _K._EXIT:
            exits.append(m)
        elif k == _K._NEXT:
            nexts.append(m)
        elif nd.op_type == "LoopCond":
            loopconds.append(m)
    if len(loopconds) != 1 or not merges:
        raise _Unsupported("not one LoopCond")
    lc = loopconds[0]
    for e in enters:
        if nodes[e].num_outputs != 1 or len(nodes[e].inputs) != 1:
            raise _Unsupported("an Enter without one input")

    src = producer.get

    # Merges: (enter id, next id, enter position).
    merge_init = {}
    for m in merges:
        nd = nodes[m]
        if nd.ctrl_inputs or len(nd.inputs) != 2:
            raise _Unsupported("a Merge that is not a loop's")
        ps = [src(s) for s in nd.inputs]
        if any(p is None for p in ps):
            raise _Unsupported("a Merge reading a constant")
        ek = [i for i, p in enumerate(ps) if kind[p[0]] == _K._ENTER and p[0] in eset]
        nk = [i for i, p in enumerate(ps) if kind[p[0]] == _K._NEXT and p[0] in mset]
        if len(ek) != 1 or len(nk) != 1 or cf.is_constant[ps[ek[0]][0]]:
            raise _Unsupported("a Merge not fed by an Enter and a NextIteration")
        merge_init[m] = (ps[ek[0]][0], ps[nk[0]][0], ek[0])
    # Classify members: condition side (C) or body (B), in topological order.
    level = {}
    true_slots = set()
    for sw in switches:
        true_slots.add(nodes[sw].out_base + 1)
    for m in members:
        nd = nodes[m]
        k = kind[m]
        if k == _K._MERGE:
            level[m] = "C"
            continue
        if k == _K._EXIT:
            level[m] = "X"
            continue
        lv = "C"
        for s in nd.inputs:
            p = src(s)
            if p is None or p[0] in eset:
                continue
            if p[0] not in mset:
                raise _Unsupported(f"{nd.name} reads a value from outside the frame")
            if s in true_slots or level.get(p[0]) == "B":
                lv = "B"
            elif kind[p[0]] == _K._SWITCH:
                raise _Unsupported(f"{nd.name} reads a Switch's false output")
            elif kind[p[0]] in (_K._EXIT, _K._NEXT):
                raise _Unsupported(f"{nd.name} reads an Exit or NextIteration")
        for c in nd.ctrl_inputs:
            if c in eset:
                continue
            if c not in mset:
                raise _Unsupported(f"{nd.name} has a control input from outside the frame")
            if kind[c] == _K._SWITCH or level.get(c) == "B":
                lv = "B"
            elif kind[c] in (_K._EXIT, _K._NEXT):
                raise _Unsupported(f"{nd.name} has a control input from an Exit or NextIteration")
        level[m] = lv
    # A ControlTrigger (the gradient code's `f_sync`) fires even when its inputs are dead: a node it
    # alone makes runnable would run in the last iteration too. Its other consumers are ordered by it.
    for m in members:
        if kind[m] == _K._TRIGGER and level[m] == "B":
            for dst in cf.ctrl_out[m]:
                d = nodes[dst]
                others = [src(s) for s in d.inputs] + [(c, 0) for c in d.ctrl_inputs if c != m]
                if not any(p is not None and (level.get(p[0]) == "B" or d.inputs and
                                              kind[p[0]] == _K._SWITCH) for p in others):
                    raise _Unsupported(f"{d.name} is made runnable by a ControlTrigger alone")
    if level[lc] != "C":
        raise _Unsupported("the LoopCond depends on the body")
    for sw in switches:
        nd = nodes[sw]
        if len(nd.inputs) != 2 or src(nd.inputs[1]) != (lc, 0) or level[sw] != "C":
            raise _Unsupported("a Switch that is not on the LoopCond")
    for x in exits:
        nd = nodes[x]
        p = src(nd.inputs[0])
        if p is None or kind[p[0]] != _K._SWITCH or p[1] != 0 or p[0] not in mset:
            raise _Unsupported("an Exit not reading a Switch's false output")
    for nx in nexts:
        p = src(nodes[nx].inputs[0])
        if p is None or level.get(p[0]) != "B" and nodes[nx].inputs[0] not in true_slots:
            raise _Unsupported("a NextIteration not reading the body")
    # Consumers of members outside the frame: only Exits' (in the parent).
    for m in members:
        for j, edges in enumerate(cf.out_edges[m]):
            for dst, _ in edges:
                if dst not in mset and kind[m] != _K._EXIT:
                    raise _Unsupported("a member feeds a node outside the frame")
        for dst in cf.ctrl_out[m]:
            if dst not in mset and kind[m] != _K._EXIT:
                raise _Unsupported("a member has a control edge out of the frame")
    for nx in nexts:
        for dst, _ in cf.out_edges[nx][0]:
            if kind[dst] != _K._MERGE:
                raise _Unsupported("a NextIteration feeding something else than a Merge")
    for e in enters:
        if any(dst not in mset for dst in cf.ctrl_out[e]):
            raise _Unsupported("an Enter with a control edge into another frame")
        for dst, _ in cf.out_edges[e][0]:
            if dst not in mset:
                raise _Unsupported("an Enter feeding another frame")
            if not cf.is_constant[e] and kind[dst] != _K._MERGE:
                raise _Unsupported("a loop variable's Enter feeding something else than a Merge")
    # Loop-node inputs: the Enters' inputs, then the feeds the members read.
    args = set(plan.arg_slots)
    inputs = [nodes[e].inputs[0] for e in enters]
    convert = []
    for i, e in enumerate(enters):
        for pos, fn in nodes[e].convert:
            convert.append((i, fn))
    feeds = []
    for m in members:
        for s in nodes[m].inputs:
            if s in args and s not in feeds:
                feeds.append(s)
    name = nodes[lc].name.rsplit("/", 1)[0] if "/" in nodes[lc].name else info.name
    return {"name": name, "frame": info.name, "members": members, "enters": enters, "merges": merges,
            "merge_init": merge_init, "switches": switches, "exits": exits, "nexts": nexts, "lc": lc,
            "level": level, "inputs": inputs + feeds, "feeds": feeds, "convert": convert}


# ---------------------------------------------------------------------------- code generation
def _generate(plan, cf, spec, loop_node):
    nodes = plan.nodes
    kind = cf.kind
    members = spec["members"]
    level = spec["level"]
    g = {"_errors": errors, "_truth": _K._truth, "_cancelled": _cancelled,
         "_pc": time.perf_counter, "_launch": _Launched, "_pool": plan.pool}
    if plan.device is not None and getattr(plan.device, "has_device_memory", False):
        g["_to_host"], g["_to_device"] = plan.device.to_host, plan.device.to_device
    init_vals = plan._init_vals
    n_enters = len(spec["enters"])
    any_ctx = any(nodes[m].needs_ctx for m in members)

    def ref(s, deref):
        name = f"c{s}" if init_vals[s] is not None else f"v{s}"
        if init_vals[s] is not None:
            g[name] = init_vals[s]
        return deref_expr(name) if deref else name

    def variant(traced: bool):
        lines = ["def _loop(_ins, _ctx, _cm, _fid" + (", _rec" if traced else "") + "):"]
        line_node = {}
        body = [m for m in members if level[m] == "B"]
        launched = set() if traced or plan.pool is None else _overlapping(body, nodes, kind)

        def record(m, value, indent="        "):
            # A traced step records the control-flow nodes too, as the frames executor does.
            if traced:
                g[f"n{m}"] = nodes[m]
                lines.append(f"{indent}_rec(n{m}, _pc(), {value})")

        for i, e in enumerate(spec["enters"]):
            lines.append(f"    v{nodes[e].out_base} = _ins[{i}]")
        for j, s in enumerate(spec["feeds"]):
            lines.append(f"    v{s} = _ins[{n_enters + j}]")
        for m in spec["merges"]:
            e, _, k = spec["merge_init"][m]
            lines.append(f"    v{nodes[m].out_base} = v{nodes[e].out_base}")
            lines.append(f"    v{nodes[m].out_base + 1} = {k}")
        for e in spec["enters"]:
            record(e, f"v{nodes[e].out_base}", "    ")
        lines.append("    _it = 0")
        if any_ctx:
            lines.append("    _c = _ctx.in_frame(_fid, 0)")
        lines.append("    while True:")

        def emit(m):
            nd = nodes[m]
            k = kind[m]
            outs = [f"v{nd.out_base + i}" for i in range(nd.num_outputs)]
            if k == _K._MERGE:
                return record(m, outs[0])
            if k == _K._NEXT:
                return record(m, ref(nd.inputs[0], False))
            if k in (_K._EXIT, _K._TRIGGER):
                return record(m, "None") if k == _K._TRIGGER else None
            if k == _K._SWITCH:
                lines.append(f"        {outs[1]} = {ref(nd.inputs[0], False)}")
                return record(m, outs[1])
            if k == _K._FORWARD:
                lines.append(f"        {outs[0]} = {ref(nd.inputs[0], nd.deref[0])}")
                return record(m, outs[0])
            args = [ref(s, d) for s, d in zip(nd.inputs, nd.deref)]
            for pos, fn in nd.convert:
                args[pos] = f"{'_to_host' if fn == 'host' else '_to_device'}({args[pos]})"
            if nd.forwards and nd.num_outputs == 1 and len(args) == 1 and not nd.needs_ctx \
                    and not nd.convert and not traced:
                lines.append(f"        {outs[0]} = {args[0]}")
                return
            if nd.op_type == "NoOp" and not nd.inputs and not traced:
                return
            if nd.needs_ctx:
                args.insert(0, "_c")
            g[f"k{m}"] = nd.compute
            if m in launched:       # runs on an inter-op thread; its value is taken before first use
                line_node[len(lines) + 1] = nd
                lines.append(f"        _a{m} = _launch(_pool, k{m}, ({', '.join(args)},))")
                return
            stmt = call_statement(outs, f"k{m}({', '.join(args)})")
            if traced:
                g[f"n{m}"] = nd
                lines.append("        _t = _pc()")
            line_node[len(lines) + 1] = nd
            lines.append("        " + stmt)
            if traced:
                res = outs[0] if nd.num_outputs == 1 else f"({', '.join(outs)},)" if outs else "None"
                lines.append(f"        _rec(n{m}, _t, {res})")

        for m in members:           # topological order: the LoopCond among them
            if level[m] == "C":
                emit(m)
        lc_out = nodes[spec["lc"]].out_base
        # A non-scalar predicate fails in the Switches, as in TF (the frames executor names one).
        line_node[len(lines) + 1] = nodes[spec["switches"][0] if spec["switches"] else spec["lc"]]
        lines.append(f"        if not _truth(v{lc_out}):")
        lines.append("            break")
        # Body values are released after their last reader in the body (as the frames executor drops
        # an iteration's inputs), except those handed to the next iteration.
        carried = {nodes[spec["merge_init"][m][1]].inputs[0] for m in spec["merges"]}
        produced = {nodes[m].out_base + i for m in body if kind[m] != _K._NEXT
                    for i in range(nodes[m].num_outputs)} - carried
        last = {s: None for s in produced}
        for i, m in enumerate(body):
            for s in nodes[m].inputs:
                if s in last:
                    last[s] = i
        waits = _wait_points(body, nodes, launched)

        def take(x):
            line_node[len(lines) + 1] = nodes[x]
            lines.append(f"        v{nodes[x].out_base} = _a{x}.get()")

        for i, m in enumerate(body):
            for x in waits.get(i, ()):
                take(x)
            emit(m)
            dead = [s for s in nodes[m].inputs if last.get(s) == i]
            dead += [nodes[m].out_base + j for j in range(nodes[m].num_outputs)
                     if nodes[m].out_base + j in last and last[nodes[m].out_base + j] is None]
            if dead:
                lines.append(f"        del {', '.join(f'v{s}' for s in dict.fromkeys(dead))}")
        for x in waits.get(len(body), ()):
            take(x)
        for m in spec["merges"]:
            _, nx, k = spec["merge_init"][m]
            lines.append(f"        v{nodes[m].out_base} = {ref(nodes[nx].inputs[0], False)}")
            lines.append(f"        v{nodes[m].out_base + 1} = {1 - k}")
        lines.append("        _it += 1")
        lines.append("        if _cm.is_cancelled:")
        lines.append("            raise _cancelled(_cm)")
        if any_ctx:
            lines.append("        _c = _ctx.in_frame(_fid, _it)")
        # An Exit reads a Switch's false output, which is the Switch's data input.
        rets = []
        for x in spec["exits"]:
            sw = _switch_of(plan, nodes[x].inputs[0])
            rets.append(ref(nodes[sw].inputs[0], False))
            record(x, rets[-1], "    ")
        lines.append(f"    return [{', '.join(rets)}]")
        return lines, line_node

    fns = []
    for traced in (False, True):
        lines, line_node = variant(traced)
        src = "\n".join(lines) + "\n"
        filename = f"<kernflow loop {spec['name']} of plan {plan.id}{' traced' if traced else ''}>"
        ns = exec_generated(src, filename, dict(g))
        fns.append(_with_node_errors(ns["_loop"], filename, line_node, len(spec["exits"])))
        if not traced:
            source = src
    return CompiledLoop(spec["name"], spec["frame"], fns[0], fns[1], plan.device, source)


# Kernels worth running beside another one of the same iteration: pure, GIL-free numeric work.
_OVERLAPPABLE = frozenset({"MatMul", "BatchMatMul", "BatchMatMulV2", "Conv2D", "Conv2DBackpropInput",
                           "Conv2DBackpropFilter", "Conv3D", "DepthwiseConv2dNative"})


def _overlapping(body, nodes, kind) -> set:
    """Body members to launch on an inter-op thread: an overlappable kernel that a later one of the
    same iteration does not depend on (an RNN's weight gradient beside its input gradient)."""
    index = {m: i for i, m in enumerate(body)}
    producer = {}
    for m in body:
        for j in range(nodes[m].num_outputs):
            producer[nodes[m].out_base + j] = m
    anc = {}
    for m in body:
        a = 0
        preds = [producer[s] for s in nodes[m].inputs if s in producer]
        preds += [c for c in nodes[m].ctrl_inputs if c in index]
        for p in preds:
            a |= anc[p] | (1 << index[p])
        anc[m] = a
    cands = [m for m in body if kind[m] == _K._NORMAL and nodes[m].op_type in _OVERLAPPABLE
             and not nodes[m].needs_ctx and not nodes[m].is_async and nodes[m].num_outputs == 1]
    # x is launched when a kernel that runs inline on the loop's thread before x's value is needed
    # does not depend on x: the two then run at once.
    out = set()
    for x in cands:
        w = _first_reader(body, nodes, x)
        if any(y not in out and index[x] < index[y] < w and not (anc[y] >> index[x]) & 1
               for y in cands):
            out.add(x)
    return out


def _first_reader(body, nodes, x) -> int:
    """Position in `body` of the first data or control reader of member x (len(body): none)."""
    slot = nodes[x].out_base
    for i in range(body.index(x) + 1, len(body)):
        m = body[i]
        if slot in nodes[m].inputs or x in nodes[m].ctrl_inputs:
            return i
    return len(body)


def _wait_points(body, nodes, launched) -> dict:
    """Body position -> launched members whose value must be taken before that statement (its first
    data or control reader); len(body) for those read only by the next iteration."""
    waits: dict = {}
    for x in launched:
        waits.setdefault(_first_reader(body, nodes, x), []).append(x)
    return waits


class _Launched:
    """A kernel call handed to the inter-op pool. Whoever comes first runs it: a pool thread, or the
    loop itself when it needs the value before any pool thread got to it (a busy pool never stalls
    the loop)."""

    __slots__ = ("_fn", "_args", "_lock", "_claimed", "_done", "_value", "_error")

    def __init__(self, pool, fn, args):
        self._fn, self._args = fn, args
        self._lock = threading.Lock()
        self._claimed = False
        self._done = threading.Event()
        self._value = self._error = None
        pool.schedule(self._from_pool)

    def _claim(self) -> bool:
        with self._lock:
            if self._claimed:
                return False
            self._claimed = True
            return True

    def _run(self):
        try:
            self._value = self._fn(*self._args)
        except BaseException as e:  # noqa: BLE001 - raised where the loop takes the value
            self._error = e
        self._args = None
        self._done.set()

    def _from_pool(self):
        if self._claim():
            self._run()

    def get(self):
        if self._claim():
            self._run()
        else:
            self._done.wait()
        if self._error is not None:
            raise self._error
        return self._value


def _switch_of(plan, slot) -> int:
    for n in plan.nodes:
        if n.out_base <= slot < n.out_base + n.num_outputs:
            return n.id
    raise errors.InternalError(None, None, f"no producer of slot {slot}")


def _with_node_errors(inner, filename, line_node, n_out):
    def run(*args):
        try:
            out = inner(*args)
        except errors.CancelledError:
            raise
        except Exception as e:  # noqa: BLE001 - re-raised as a TF error naming the member node
            if isinstance(e, errors.OpError) and "[[{{node " in e.message:
                raise
            raise node_error(e, generated_line_node(e, filename, line_node)) from e
        return out[0] if n_out == 1 else out
    return run
