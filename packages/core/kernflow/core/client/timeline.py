"""Step timelines in Chrome trace format (TensorFlow's ``tensorflow.python.client.timeline``).

A step run with ``RunOptions(trace_level=FULL_TRACE)`` fills ``RunMetadata.step_stats``; `Timeline`
turns it into a JSON trace that chrome://tracing and https://ui.perfetto.dev load:

* one process per device of every task, named ``"<full device name> Compute"``, with one slice per
  node execution (name: the op type; args: the node name, op and inputs), on rows ("lanes") that
  keep overlapping executions apart, as TF lays them out;
* with ``show_dataflow``, flow arrows from a tensor's producer to its consumers on other rows, and
  from every ``_Send`` to its ``_Recv`` across devices and tasks (matched by rendezvous key: the
  tensor name and the two devices, which the timeline labels carry);
* with ``show_memory``, a counter per allocator (bytes of live tensors over time) in an
  "Allocators" process, and each device's tensors as objects in a ``"<device> Tensors"`` process.

Example (TF1 style)::

    from kernflow.core.client import timeline

    run_metadata = kf.RunMetadata()
    sess.run(train_op, options=kf.RunOptions(trace_level=kf.RunOptions.FULL_TRACE),
             run_metadata=run_metadata)
    tl = timeline.Timeline(run_metadata.step_stats)
    with open("timeline.json", "w") as f:
        f.write(tl.generate_chrome_trace_format())

The same works for a step on a cluster (``kf.Session("grpc://...")``): the master merges the step
stats of every task, so the trace shows each task's devices side by side.
"""

from __future__ import annotations

import bisect
import collections
import json
import re

__all__ = ["AllocationMaximum", "StepStatsAnalysis", "Timeline"]

AllocationMaximum = collections.namedtuple("AllocationMaximum", ("timestamp", "num_bytes", "tensors"))
AllocationMaximum.__doc__ = """The largest memory use of one allocator in a timeline.

Attributes:
    timestamp: when it was reached (microseconds since the epoch).
    num_bytes: the bytes in use then.
    tensors: the names of the tensors alive then.
"""

StepStatsAnalysis = collections.namedtuple("StepStatsAnalysis", ("chrome_trace", "allocator_maximums"))
StepStatsAnalysis.__doc__ = """What `Timeline.analyze_step_stats` found.

Attributes:
    chrome_trace: the `_ChromeTraceFormatter` holding the trace events.
    allocator_maximums: {allocator name: `AllocationMaximum`} (empty without ``show_memory``).
"""

_OP_TIMES = ("schedule", "gpu", "all")
_SEND_OPS = ("_Send", "_HostSend")
_RECV_OPS = ("_Recv", "_HostRecv")
# "[cpu 1.2MB 1.2MB] name = Op(in0, in1)": memory prefixes, node name, op, inputs.
_LABEL = re.compile(r"(?:\[[^\]]*\] )*(.*) = ([\w.>-]+)\((.*)\)$", re.S)


class _ChromeTraceFormatter:
    """Builds the event list of a Chrome trace (the "Trace Event Format" JSON)."""

    def __init__(self):
        self._metadata = []
        self._events = []

    def _event(self, ph, category, name, pid, tid, timestamp, **extra) -> dict:
        event = {"ph": ph, "cat": category, "name": name, "pid": pid, "tid": tid, "ts": timestamp}
        event.update(extra)
        return event

    def emit_pid(self, name: str, pid: int) -> None:
        """Names process `pid` (and sorts the processes by pid)."""
        self._metadata.append({"ph": "M", "name": "process_name", "pid": pid, "tid": 0, "ts": 0,
                               "args": {"name": name}})
        self._metadata.append({"ph": "M", "name": "process_sort_index", "pid": pid, "tid": 0,
                               "ts": 0, "args": {"sort_index": pid}})

    def emit_region(self, timestamp, duration, pid, tid, category, name, args) -> None:
        """A complete slice ("X") from `timestamp` lasting `duration` microseconds."""
        self._events.append(self._event("X", category, name, pid, tid, timestamp,
                                        dur=max(int(duration), 0), args=args))

    def emit_obj_create(self, category, name, timestamp, pid, tid, object_id) -> None:
        self._events.append(self._event("N", category, name, pid, tid, timestamp, id=object_id))

    def emit_obj_delete(self, category, name, timestamp, pid, tid, object_id) -> None:
        self._events.append(self._event("D", category, name, pid, tid, timestamp, id=object_id))

    def emit_obj_snapshot(self, category, name, timestamp, pid, tid, object_id, snapshot) -> None:
        self._events.append(self._event("O", category, name, pid, tid, timestamp, id=object_id,
                                        args={"snapshot": snapshot}))

    def emit_flow_start(self, name, timestamp, pid, tid, flow_id) -> None:
        """The tail of flow arrow `flow_id`, bound to the slice enclosing `timestamp`."""
        self._events.append(self._event("s", "DataFlow", name, pid, tid, timestamp, id=flow_id))

    def emit_flow_end(self, name, timestamp, pid, tid, flow_id) -> None:
        """The head of flow arrow `flow_id`, bound to the slice enclosing `timestamp`."""
        self._events.append(self._event("f", "DataFlow", name, pid, tid, timestamp, id=flow_id,
                                        bp="e"))

    def emit_counter(self, category, name, pid, timestamp, counter, value) -> None:
        """A sample ("C") of counter `counter` of series `name`."""
        self._events.append(self._event("C", category, name, pid, 0, timestamp,
                                        args={counter: value}))

    def format_to_string(self, pretty: bool = False) -> str:
        """Returns the trace as a JSON string ``{"traceEvents": [...]}``."""
        trace = {"traceEvents": self._metadata + self._events, "displayTimeUnit": "ms"}
        if pretty:
            return json.dumps(trace, indent=4, separators=(",", ": "))
        return json.dumps(trace, separators=(",", ":"))


class _TensorTracker:
    """A tensor's lifetime: created when its producer starts, alive until its last reader ends."""

    def __init__(self, name, object_id, create_time, end_time, pid, allocator, num_bytes, description):
        self.name, self.object_id, self.pid = name, object_id, pid
        self.create_time, self.last_unref = create_time, end_time
        self.allocator, self.num_bytes, self.description = allocator, num_bytes, description

    def add_unref(self, timestamp) -> None:
        self.last_unref = max(self.last_unref, timestamp)


class _Exec:
    """One node execution as the timeline sees it."""

    __slots__ = ("device", "pid", "tid", "name", "op", "inputs", "start", "end", "stats")

    def __init__(self, device, pid, stats, name, op, inputs):
        self.device, self.pid, self.stats = device, pid, stats
        self.name, self.op, self.inputs = name, op, inputs
        self.start = stats.all_start_micros
        self.end = stats.all_start_micros + max(stats.all_end_rel_micros, 0)
        self.tid = 0

    def transfer(self):
        """(tensor name, peer device) of a _Send/_Recv, else None."""
        if self.op not in _SEND_OPS and self.op not in _RECV_OPS or len(self.inputs) != 1:
            return None
        tensor, sep, peer = self.inputs[0].rpartition(" @")
        return (tensor, peer) if sep else None


class Timeline:
    """A Chrome-trace view of the execution of one step.

    Not thread-safe. The `step_stats` given are not modified (TF rewrites their thread ids with
    the lanes; kernflow keeps the lanes in its own records).

    Args:
        step_stats: the `StepStats` proto of the step (``RunMetadata.step_stats``).
        graph: optional `kf.Graph` or `GraphDef` that was run; gives the op and inputs of nodes
            whose timeline label does not carry them.
    """

    def __init__(self, step_stats, graph=None):
        self._step_stats = step_stats
        self._graph_nodes = _graph_nodes(graph)

    def analyze_step_stats(self, show_dataflow=True, show_memory=True, op_time="schedule"):
        """Analyzes the step stats and builds the Chrome trace.

        Args:
            show_dataflow: add flow arrows from tensor producers to consumers, and from each
                _Send to its _Recv.
            show_memory: add tensor objects and a memory counter per allocator.
            op_time: "schedule", "gpu" or "all", as in TF. kernflow records no per-stream kernel
                stats, so all three show each node from its start to its end.

        Returns:
            A `StepStatsAnalysis`.

        Raises:
            ValueError: for an unknown `op_time`.
        """
        if op_time not in _OP_TIMES:
            raise ValueError(f"op_time must be one of {_OP_TIMES}, got {op_time!r}")
        trace = _ChromeTraceFormatter()
        allocators_pid = 0
        if show_memory:
            trace.emit_pid("Allocators", allocators_pid)
        devices = self._allocate_pids(trace, show_memory)
        execs = self._executions(devices)
        for e in execs:
            _emit_op(trace, e)
        tensors = self._analyze_tensors(trace, execs, devices, show_dataflow, show_memory)
        if show_dataflow:
            _show_transfers(trace, execs, tensors["next_flow_id"])
        maximums = {}
        if show_memory:
            maximums = _show_memory(trace, tensors["all"], allocators_pid)
        return StepStatsAnalysis(chrome_trace=trace, allocator_maximums=maximums)

    def generate_chrome_trace_format(self, show_dataflow=True, show_memory=False, op_time="schedule"):
        """Returns the step as a JSON string in Chrome trace format.

        Args:
            show_dataflow: add flow arrows (tensor producers to consumers, _Send to _Recv).
            show_memory: add tensor objects and memory counters per allocator.
            op_time: "schedule", "gpu" or "all" (see `analyze_step_stats`).

        Returns:
            The trace, ``{"traceEvents": [...]}``, as a pretty-printed JSON string.
        """
        analysis = self.analyze_step_stats(show_dataflow=show_dataflow, show_memory=show_memory,
                                           op_time=op_time)
        return analysis.chrome_trace.format_to_string(pretty=True)

    # ------------------------------------------------------------------ analysis steps
    def _allocate_pids(self, trace, show_memory) -> dict:
        """{device: (compute pid, tensors pid)}; device stats of one device share its rows."""
        devices = {}
        next_pid = 1
        for ds in self._step_stats.dev_stats:
            if ds.device in devices:
                continue
            devices[ds.device] = (next_pid, next_pid + 1)
            trace.emit_pid(f"{ds.device} Compute", next_pid)
            if show_memory:
                trace.emit_pid(f"{ds.device} Tensors", next_pid + 1)
            next_pid += 2
        return devices

    def _executions(self, devices) -> list:
        """Every node execution, with its lane (tid) assigned per device."""
        by_dev = collections.defaultdict(list)
        for ds in self._step_stats.dev_stats:
            pid = devices[ds.device][0]
            for ns in ds.node_stats:
                name, op, inputs = self._describe(ns)
                by_dev[ds.device].append(_Exec(ds.device, pid, ns, name, op, inputs))
        execs = []
        for dev_execs in by_dev.values():
            dev_execs.sort(key=lambda e: (e.start, e.end))
            _assign_lanes(dev_execs)
            execs.extend(dev_execs)
        return execs

    def _describe(self, ns):
        """(node name, op, inputs) of a NodeExecStats: from its label, else the graph."""
        m = _LABEL.match(ns.timeline_label) if ns.timeline_label else None
        op = m.group(2) if m else (ns.op_type or "unknown")
        inputs = [i for i in m.group(3).split(", ") if i] if m else []
        known = self._graph_nodes.get(ns.node_name)
        if known is not None:
            if op == "unknown":
                op = known[0]
            if not inputs:
                inputs = list(known[1])
        return ns.node_name, op, inputs

    def _analyze_tensors(self, trace, execs, devices, show_dataflow, show_memory) -> dict:
        """Tracks every recorded output; draws producer -> consumer flows on other rows."""
        produced = {}      # (device, "node:slot") -> ([end], [(exec, tensor)]) in time order
        every = []
        for e in execs:
            for out in e.stats.output:
                tensor = _tensor_of(e, out, len(every), devices[e.device][1])
                every.append(tensor)
                ends, found = produced.setdefault((e.device, tensor.name), ([], []))
                ends.append(e.end)
                found.append((e, tensor))
                if show_memory:
                    trace.emit_obj_create("Tensor", tensor.name, tensor.create_time, tensor.pid,
                                          e.tid, tensor.object_id)
                    trace.emit_obj_snapshot("Tensor", tensor.name, max(e.end - 1, e.start),
                                            tensor.pid, e.tid, tensor.object_id,
                                            {"tensor_description": tensor.description})
        flow_id = 0
        for e in execs:
            for inp in _tensor_inputs(e):
                hit = _producer(produced, e, inp)
                if hit is None:
                    continue
                src, tensor = hit
                tensor.add_unref(e.end)
                if show_dataflow and (src.pid, src.tid) != (e.pid, e.tid):
                    _emit_flow(trace, tensor.name, src, e, flow_id)
                    flow_id += 1
        return {"all": every, "next_flow_id": flow_id}


# ---------------------------------------------------------------------------- helpers
def _graph_nodes(graph) -> dict:
    """{node name: (op, inputs)} of a `kf.Graph` or `GraphDef` (empty for None)."""
    if graph is None:
        return {}
    gd = graph.as_graph_def() if hasattr(graph, "as_graph_def") else graph
    return {nd.name: (nd.op, tuple(nd.input)) for nd in gd.node}


def _assign_lanes(execs) -> None:
    """Gives each execution (sorted by start) the first row free at its start (TF's lanes)."""
    lanes = []      # end time of the last execution on each row
    for e in execs:
        for i, busy_until in enumerate(lanes):
            if e.start > busy_until or (e.start == busy_until == e.end):
                e.tid = i
                lanes[i] = e.end
                break
        else:
            e.tid = len(lanes)
            lanes.append(e.end)


def _emit_op(trace, e: _Exec) -> None:
    args = {"name": e.name, "op": e.op}
    for i, inp in enumerate(e.inputs):
        args[f"input{i}"] = inp
    trace.emit_region(e.start, e.end - e.start, e.pid, e.tid, "Op", e.op, args)


def _tensor_of(e: _Exec, out, object_id, tensors_pid) -> _TensorTracker:
    desc = out.tensor_description
    alloc = desc.allocation_description
    shape = [d.size for d in desc.shape.dim]
    description = f"dtype {desc.dtype} shape {shape} bytes {alloc.requested_bytes}"
    return _TensorTracker(f"{e.name}:{out.slot}", object_id, e.start, e.end, tensors_pid,
                          alloc.allocator_name or "unknown", alloc.requested_bytes, description)


def _tensor_inputs(e: _Exec) -> list:
    """The tensors `e` reads on its own device: a _Send reads the tensor it sends, a _Recv none."""
    t = e.transfer()
    if t is None:
        return e.inputs
    return [t[0]] if e.op in _SEND_OPS else []


def _producer(produced, consumer: _Exec, inp: str):
    """(producer exec, tensor) of input `inp` of `consumer`: the latest production of the tensor on
    the consumer's device that ended by the consumer's start (the first one if none did)."""
    if inp.startswith("^"):
        return None
    name = inp if ":" in inp else inp + ":0"
    hit = produced.get((consumer.device, name))
    if hit is None:
        return None
    ends, found = hit
    return found[max(bisect.bisect_right(ends, consumer.start) - 1, 0)]


def _flow_points(src: _Exec, dst: _Exec):
    """(tail ts, head ts) of an arrow from `src` to `dst`: each inside its own slice, the head
    no earlier than the tail where the slices allow."""
    tail = src.end - 1 if src.end > src.start else src.start
    head = min(max(tail, dst.start), dst.end)
    return tail, head


def _emit_flow(trace, name, src: _Exec, dst: _Exec, flow_id) -> None:
    tail, head = _flow_points(src, dst)
    trace.emit_flow_start(name, tail, src.pid, src.tid, flow_id)
    trace.emit_flow_end(name, head, dst.pid, dst.tid, flow_id)


def _canonical(device: str) -> str:
    from kernflow.core.framework import device_spec
    try:
        return device_spec.canonical_name(device)
    except Exception:  # noqa: BLE001 - a device string of another system: compare it as is
        return device


def _show_transfers(trace, execs, flow_id: int) -> None:
    """One arrow per _Send/_Recv pair: same tensor, same sending and receiving device; the n-th
    send of a key (a loop sends once per iteration) pairs with its n-th receive."""
    sends, recvs = collections.defaultdict(list), collections.defaultdict(list)
    for e in execs:
        t = e.transfer()
        if t is None:
            continue
        tensor, peer = t
        if e.op in _SEND_OPS:
            sends[(tensor, _canonical(e.device), _canonical(peer))].append(e)
        else:
            recvs[(tensor, _canonical(peer), _canonical(e.device))].append(e)
    for key in sorted(set(sends) & set(recvs)):
        for send, recv in zip(sorted(sends[key], key=lambda x: x.start),
                              sorted(recvs[key], key=lambda x: x.start)):
            _emit_flow(trace, key[0], send, recv, flow_id)
            flow_id += 1


def _show_memory(trace, tensors, allocators_pid) -> dict:
    """Deletes the tensor objects at their last use and plots each allocator's live bytes."""
    changes = collections.defaultdict(list)
    for t in tensors:
        trace.emit_obj_delete("Tensor", t.name, t.last_unref, t.pid, 0, t.object_id)
        # At one instant frees come before allocations, except the free of a tensor that lived
        # no longer than an instant (it follows its own allocation).
        changes[t.allocator].append((t.create_time, 1, t.num_bytes, t.name))
        changes[t.allocator].append((t.last_unref, 2 if t.last_unref <= t.create_time else 0,
                                     -t.num_bytes, t.name))
    maximums = {}
    for allocator, events in changes.items():
        events.sort(key=lambda c: (c[0], c[1]))
        total, live = 0, set()
        best = AllocationMaximum(timestamp=0, num_bytes=0, tensors=set())
        for ts, _, delta, name in events:
            total += delta
            (live.add if delta > 0 else live.discard)(name)
            if total > best.num_bytes:
                best = AllocationMaximum(timestamp=ts, num_bytes=total, tensors=set(live))
            trace.emit_counter("Memory", allocator, allocators_pid, ts, allocator, total)
        maximums[allocator] = best
    return maximums
