"""Control flow across partitions: the per-device control loops of while-loop frames.

A loop whose nodes sit on several devices runs, on every one of them, as one frame whose
iterations must line up: a `_Recv` inside the loop must run once per iteration (its rendezvous key
ends with ``frame_id:iteration``) and the frame must end on every device when the loop ends. Only
the device holding the loop's LoopCond knows when that is, so (as in TF's graph_partition.cc
AddControlFlow and the dynamic-control-flow paper) each device D taking part in a frame F gets a
small *control loop*::

    Enter(frame F) -> Merge(Enter, NextIteration) -> Switch(Merge, F's LoopCond)
    Switch:1 -> Identity -> NextIteration -> (back into the Merge);   Switch:0 -> Exit

The LoopCond edge becomes a per-iteration Send/Recv like any other, and every `_Recv` whose tensor
lives in F gets a control input from D's control-loop Merge, so it belongs to F and runs in each
iteration D starts. The control loop's Enter takes the parent frame's control-loop Identity on D
(a nested loop starts once per parent iteration) or, for a top-level loop, a constant.

Before that, edges that would need a transfer in a different number of iterations on the two
sides are made local (placement rules of this pass):

* an Enter (or NextIteration) feeding another device is copied onto that device, so the transfer
  carries the Enter's input in the parent frame (once per parent iteration) rather than the
  Enter's output in the loop (the receiver could not tell how many iterations it is sent in);
* an input-less Const feeding a node inside a loop on another device is copied there (the executor
  reads constants in every frame; a `_Recv` would run in the root frame only).

Partitions that may receive dead tensors (anything downstream of a Switch) but hold no
control-flow op get a `ControlTrigger` so the executor runs them with the frame-aware
executor, which knows dead tensors.
"""

from __future__ import annotations

import collections

import numpy as np

from kernflow.core.framework import attr_value
from kernflow.core.framework import dtypes
from kernflow.core.framework import errors
from kernflow.core.framework.node_def_util import parse_input
from kernflow.core.runtime.control_flow_executor import has_control_flow

__all__ = ["ControlFlowPartition", "prepare"]

_ENTER = frozenset({"Enter", "RefEnter"})
_EXIT = frozenset({"Exit", "RefExit"})
_NEXT = frozenset({"NextIteration", "RefNextIteration"})
_SWITCH = frozenset({"Switch", "RefSwitch"})


def _set(nd, key, value, typ=None):
    nd.attr[key].CopyFrom(attr_value.to_proto(value, typ))


def _short(device: str) -> str:
    """A node-name-safe form of a full device name, unique per device (job, task and device)."""
    spec = device.strip("/").split("/")
    return "_".join(p.replace(":", "_") for p in spec if not p.startswith("replica:"))


Frame = tuple  # a frame's path of names from the root: () is the root frame


def _is_static(nd) -> bool:
    """True for nodes the executor does not run but reads in every frame (constants and feeds)."""
    return nd.op == "_Arg" or (nd.op == "Const" and not nd.input)


def _frame_name(nd) -> str:
    s = nd.attr["frame_name"].s
    return s.decode() if isinstance(s, bytes) else s


class _Frames:
    """The frame each node runs in (`inside`) and the frame its outputs live in (`output`).

    A node runs in the frame of its inputs, ignoring constants and feeds (available everywhere)
    and the NextIteration -> Merge back edges; an Enter's outputs live in the child frame it
    names, an Exit's in its frame's parent (as runtime/control_flow_executor.py computes them per partition).
    """

    def __init__(self, graph_def):
        nodes = {nd.name: nd for nd in graph_def.node}
        preds = {n: [] for n in nodes}
        outs = collections.defaultdict(list)
        for nd in graph_def.node:
            for inp in nd.input:
                src = parse_input(inp)[0]
                p = nodes.get(src)
                if p is None or _is_static(p) or p.op in _NEXT:
                    continue
                preds[nd.name].append(src)
                outs[src].append(nd.name)
        indeg = {n: len(p) for n, p in preds.items()}
        ready = collections.deque(nd.name for nd in graph_def.node if not indeg[nd.name])
        self.inside: dict[str, Frame] = {}
        self.output: dict[str, Frame] = {}
        while ready:
            n = ready.popleft()
            frame = next((self.output[p] for p in preds[n]), ())
            self.inside[n] = frame
            op = nodes[n].op
            if op in _ENTER:
                self.output[n] = frame + (_frame_name(nodes[n]),)
            elif op in _EXIT:
                self.output[n] = frame[:-1]
            else:
                self.output[n] = frame
            for m in outs[n]:
                indeg[m] -= 1
                if not indeg[m]:
                    ready.append(m)
        for n in nodes:   # on a cycle (the executor reports it)
            self.inside.setdefault(n, ())
            self.output.setdefault(n, ())


def _consumers(graph_def) -> dict:
    """node name -> [(consumer NodeDef, input position)]."""
    out = collections.defaultdict(list)
    for nd in graph_def.node:
        for k, inp in enumerate(nd.input):
            out[parse_input(inp)[0]].append((nd, k))
    return out


def _rename_input(inp: str, new: str) -> str:
    name, idx, ctrl = parse_input(inp)
    if ctrl:
        return "^" + new
    return new if idx == 0 and ":" not in inp else f"{new}:{idx}"


def _localize(graph_def) -> None:
    """Gives every Enter and NextIteration a copy on each device that consumes it (see module doc)."""
    # Moving an Enter can make the Enter feeding it (a nested loop's invariant) remote: repeat.
    for _ in range(len(graph_def.node) + 1):
        if not _localize_once(graph_def):
            return


def _localize_once(graph_def) -> bool:
    consumers = _consumers(graph_def)
    drop = set()
    changed = False
    for nd in list(graph_def.node):
        if nd.op not in _ENTER and nd.op not in _NEXT:
            continue
        by_dev = collections.defaultdict(list)
        for c, k in consumers.get(nd.name, []):
            by_dev[c.device].append((c, k))
        remote = sorted(d for d in by_dev if d != nd.device)
        if not remote:
            continue
        changed = True
        if len(by_dev) == 1:
            nd.device = remote[0]     # every consumer is elsewhere: move it there
            continue
        for dev in remote:
            copy = graph_def.node.add()
            copy.CopyFrom(nd)
            copy.name = f"{nd.name}/_on_{_short(dev)}"
            copy.device = dev
            for c, k in by_dev[dev]:
                c.input[k] = _rename_input(c.input[k], copy.name)
        if nd.device not in by_dev:
            drop.add(nd.name)
    for i in reversed(range(len(graph_def.node))):
        if graph_def.node[i].name in drop:
            del graph_def.node[i]
    return changed


def _copy_constants(graph_def, frames: _Frames) -> None:
    """Copies input-less Consts read inside a loop on another device onto that device."""
    nodes = {nd.name: nd for nd in graph_def.node}
    copies: dict[tuple[str, str], str] = {}
    for nd in list(graph_def.node):
        if not frames.inside.get(nd.name):
            continue
        for k, inp in enumerate(nd.input):
            name, _, ctrl = parse_input(inp)
            src = nodes.get(name)
            if src is None or src.device == nd.device or not _is_static(src) or src.op != "Const":
                continue
            if ctrl:
                nd.input[k] = ""     # a constant is always available: the edge orders nothing
                continue
            key = (name, nd.device)
            if key not in copies:
                copy = graph_def.node.add()
                copy.CopyFrom(src)
                copy.name = copies[key] = f"{name}/_on_{_short(nd.device)}"
                copy.device = nd.device
            nd.input[k] = _rename_input(inp, copies[key])
        if "" in nd.input:
            kept = [i for i in nd.input if i]
            del nd.input[:]
            nd.input.extend(kept)


def _frame_devices(graph_def, frames: _Frames) -> dict:
    """frame -> devices holding its nodes or its outgoing transfers, the frame's descendants' too."""
    devs = collections.defaultdict(set)

    def add(frame, dev):
        for k in range(1, len(frame) + 1):
            devs[frame[:k]].add(dev)

    nodes = {nd.name: nd for nd in graph_def.node}
    for nd in graph_def.node:
        add(frames.inside[nd.name], nd.device)
        for inp in nd.input:
            src = nodes.get(parse_input(inp)[0])
            if src is not None and src.device != nd.device:
                add(frames.output[src.name], src.device)
    return devs


def _loop_info(graph_def, frames: _Frames, frame: Frame):
    """(predicate tensor, parallel_iterations) of a frame: its LoopCond and its Enters' attr."""
    pred, parallel = None, None
    for nd in graph_def.node:
        if nd.op == "LoopCond" and pred is None and frames.inside[nd.name] == frame:
            pred = nd.name
        elif nd.op in _ENTER and parallel is None and frames.output[nd.name] == frame:
            parallel = nd.attr["parallel_iterations"].i if "parallel_iterations" in nd.attr else 10
    if pred is None:
        raise errors.InvalidArgumentError(
            None, None, f"The while loop frame '{'/'.join(frame)}' has nodes on several devices "
            f"but no LoopCond node: its devices cannot tell when an iteration starts")
    return pred, parallel or 10


def _add_control_loop(graph_def, frame: Frame, dev: str, base: str, source: str, pred: str,
                      parallel: int) -> tuple[str, str]:
    """Adds one control loop on `dev`; returns (its Merge, its body Identity)."""
    def node(op, suffix, inputs):
        nd = graph_def.node.add(name=f"{base}/{suffix}", op=op, device=dev, input=inputs)
        _set(nd, "T", dtypes.float32, "type")
        return nd

    enter = node("Enter", "Enter", [source])
    _set(enter, "frame_name", frame[-1], "string")
    _set(enter, "is_constant", False, "bool")
    _set(enter, "parallel_iterations", parallel, "int")
    merge = node("Merge", "Merge", [enter.name, f"{base}/NextIteration"])
    _set(merge, "N", 2, "int")
    switch = node("Switch", "Switch", [merge.name, pred])
    body = node("Identity", "Identity", [f"{switch.name}:1"])
    node("NextIteration", "NextIteration", [body.name])
    node("Exit", "Exit", [switch.name])
    return merge.name, body.name


def _source_const(graph_def, dev: str, made: dict) -> str:
    name = made.get(dev)
    if name is None:
        c = graph_def.node.add(name=f"_loop_start_{_short(dev)}", op="Const", device=dev)
        _set(c, "dtype", dtypes.float32, "type")
        _set(c, "value", np.zeros((), np.float32), "tensor")
        name = made[dev] = c.name
    return name


class ControlFlowPartition:
    """The graph to partition, with control loops added, and what partitioning must add.

    Attributes:
        graph_def: the placed graph with the control loops (partition this one).
    """

    def __init__(self, graph_def, frames: _Frames, merges: dict):
        self.graph_def = graph_def
        self._frames = frames
        self._merges = merges
        self._maybe_dead = _downstream_of_switches(graph_def)
        self._dead_recv_devices: set[str] = set()

    def recv_control_inputs(self, src: str, dst_device: str) -> list[str]:
        """Control inputs for the `_Recv` on `dst_device` of a tensor (or control edge) of `src`.

        Raises:
            InternalError: when the tensor lives in a loop frame without a control loop there.
        """
        if src in self._maybe_dead:
            self._dead_recv_devices.add(dst_device)
        frame = self._frames.output.get(src, ())
        if not frame:
            return []
        merge = self._merges.get((frame, dst_device))
        if merge is None:
            raise errors.InternalError(None, None, f"no control loop for frame '{'/'.join(frame)}' "
                                       f"on {dst_device} (receiving from {src})")
        return ["^" + merge]

    def finish(self, parts: dict) -> None:
        """Marks partitions that may receive dead tensors but have no control-flow op."""
        for dev in sorted(self._dead_recv_devices):
            p = parts.get(dev)
            if p is not None and not has_control_flow(p):
                p.node.add(name=f"_dead_tensors_{_short(dev)}", op="ControlTrigger", device=dev)


def _downstream_of_switches(graph_def) -> set[str]:
    outs = collections.defaultdict(list)
    for nd in graph_def.node:
        for inp in nd.input:
            outs[parse_input(inp)[0]].append(nd.name)
    seen = {nd.name for nd in graph_def.node if nd.op in _SWITCH}
    stack = list(seen)
    while stack:
        for m in outs[stack.pop()]:
            if m not in seen:
                seen.add(m)
                stack.append(m)
    return seen


def prepare(graph_def) -> ControlFlowPartition | None:
    """Adds the control loops a placed graph needs before it is partitioned.

    Args:
        graph_def: a placed GraphDef (every node has a full device name); not modified.

    Returns:
        None when the graph has no control-flow op or only one device (partition it as it is);
        otherwise a
        `ControlFlowPartition` holding a rewritten copy of the graph.

    Raises:
        InvalidArgumentError: for a loop spanning devices without a LoopCond.
    """
    if not has_control_flow(graph_def) or \
            len({nd.device for nd in graph_def.node}) < 2:
        return None
    g = type(graph_def)()
    g.CopyFrom(graph_def)
    _localize(g)
    _copy_constants(g, _Frames(g))
    frames = _Frames(g)
    devs = _frame_devices(g, frames)
    spanning = sorted((f for f, d in devs.items() if len(d) > 1), key=lambda f: (len(f), f))
    merges: dict[tuple[Frame, str], str] = {}
    bodies: dict[tuple[Frame, str], str] = {}
    consts: dict[str, str] = {}
    for k, frame in enumerate(spanning):
        pred, parallel = _loop_info(g, frames, frame)
        safe = "".join(ch if ch.isalnum() or ch in "_-." else "_" for ch in frame[-1])
        for dev in sorted(devs[frame]):
            parent = frame[:-1]
            source = bodies[(parent, dev)] if parent else _source_const(g, dev, consts)
            merges[(frame, dev)], bodies[(frame, dev)] = _add_control_loop(
                g, frame, dev, f"_loop_{safe}_{k}_{_short(dev)}", source, pred, parallel)
    if not merges:
        return ControlFlowPartition(g, frames, merges)
    return ControlFlowPartition(g, _Frames(g), merges)
