"""Statistics of a traced step: per-node timings, outputs and memory, and the step's cost graph.

A step run with ``RunOptions(trace_level > NO_TRACE)`` hands its executors a `StepStatsCollector`
(TF's StepStatsCollector); untraced steps have none and pay nothing. Every node execution calls
`record`; `finalize` then writes TensorFlow's `StepStats` (one `DeviceStepStats` per device, one
`NodeExecStats` per execution) and, when asked, a `CostGraphDef` with one node per node of the
step's partition graphs (measured costs on those that ran). The embedded session and the worker
share it; the master merges the workers' results.

Memory: kernflow's kernels allocate through numpy/cupy, not through an allocator kernflow sees, so
the bytes of a node's outputs stand for its allocations (``AllocatorMemoryUsed.total_bytes`` =
``peak_bytes`` = the sum of the new outputs' ``nbytes``); a variable's buffer is persistent memory
of the op that reads it by reference, and temporary memory inside a kernel is not measured (0).
"""

from __future__ import annotations

import threading
import time

import numpy as np

from kernflow.core.framework import dtypes
from kernflow.core.runtime.resource_mgr import Var

__all__ = ["StepStatsCollector", "timeline_label", "allocator_name"]

_SEND_OPS = ("_Send", "_HostSend")
_RECV_OPS = ("_Recv", "_HostRecv")
# Transfer and boundary ops are not the device's work: they stay out of the placement cost model.
_NOT_COMPUTE = ("_Send", "_Recv", "_HostSend", "_HostRecv", "_Arg", "_Retval")
_MB = 1048576.0


class _Record:
    """One node execution (outputs already reduced to their descriptions)."""

    __slots__ = ("device", "device_type", "allocator", "name", "op", "forwards", "start", "end",
                 "tid", "outputs")

    def __init__(self, device, device_type, allocator, node, start, end, tid, outputs):
        self.device, self.device_type, self.allocator = device, device_type, allocator
        self.name, self.op = node.name, node.op_type
        self.forwards = bool(getattr(node, "forwards", False))
        self.start, self.end, self.tid, self.outputs = start, end, tid, outputs


class StepStatsCollector:
    """Collects the node executions of one traced step.

    Thread-safe: executors record from any thread. Outputs are reduced to (slot, dtype, shape,
    bytes, persistent) at `record` time, so tracing keeps no tensor alive.

    Args:
        cost_model: the session's `CostModel`; `finalize` feeds it the measured compute times.
        graphs: optional {device name: partition GraphDef} of the step; gives the timeline labels
            their inputs (and _Send/_Recv their peer) and the cost graph its edges.
    """

    def __init__(self, cost_model, graphs=None):
        self._lock = threading.Lock()
        self._records: list[_Record] = []
        self._thread_names: dict[int, str] = {}
        self._allocators: dict[str, str] = {}
        self._cost_model = cost_model
        self._graphs = dict(graphs or {})
        self._t0 = time.time() - time.perf_counter()

    def record(self, device, node, start, end, out) -> None:
        """Records one execution of `node` on `device` from `start` to `end` (perf_counter seconds).

        Args:
            device: the `Device` (or None).
            node: the executor's node (``name``, ``op_type``, ``num_outputs``).
            start: `time.perf_counter()` before the node ran; end: after.
            out: the kernel's result: the value of a one-output node, else a sequence of values.
        """
        outputs = _describe_outputs(node, out)
        tid = threading.get_ident() % (1 << 32)
        dev_name = device.name if device is not None else ""
        rec = _Record(dev_name, device.device_type if device is not None else "",
                      self._allocator(device), node, start, end, tid, outputs)
        with self._lock:
            self._records.append(rec)
            if tid not in self._thread_names:
                self._thread_names[tid] = threading.current_thread().name

    def _allocator(self, device) -> str:
        if device is None:
            return "cpu"
        name = self._allocators.get(device.name)
        if name is None:
            name = self._allocators[device.name] = allocator_name(device)
        return name

    def finalize(self, step_stats, cost_graph=None) -> None:
        """Writes the records into `step_stats` (and `cost_graph`) and the cost model.

        Args:
            step_stats: a `StepStats` proto to append to.
            cost_graph: optional `CostGraphDef` to append this step's nodes to.
        """
        with self._lock:
            records = sorted(self._records, key=lambda r: r.start)
            thread_names = dict(self._thread_names)
        nodes = _NodeIndex(self._graphs)
        by_dev = {}
        for rec in records:
            if rec.op not in _NOT_COMPUTE:
                self._cost_model.record(rec.name, rec.device_type, rec.end - rec.start)
            ds = by_dev.get(rec.device)
            if ds is None:
                ds = by_dev[rec.device] = step_stats.dev_stats.add(device=rec.device)
            _fill_node_stats(ds.node_stats.add(), rec, self._t0, nodes.get(rec.device, rec.name))
            if rec.tid in thread_names:
                ds.thread_names[rec.tid] = thread_names[rec.tid]
        if cost_graph is not None:
            from kernflow.core.runtime.cost_graph import build_cost_graph
            build_cost_graph(records, self._graphs, cost_graph)


class _NodeIndex:
    """NodeDefs of the step's partition graphs by (device, node name), built on first use."""

    def __init__(self, graphs):
        self._graphs = graphs
        self._index: dict = {}

    def get(self, device, name):
        idx = self._index.get(device)
        if idx is None:
            g = self._graphs.get(device)
            idx = self._index[device] = {nd.name: nd for nd in g.node} if g is not None else {}
        return idx.get(name)


def allocator_name(device) -> str:
    """The allocator name TF would report for `device`: "cpu" for host memory, else e.g.
    ``"GPU_0_bfc"`` (kernflow's GPU memory is cupy's pool; the name keeps TF's form)."""
    if not getattr(device, "has_device_memory", False):
        return "cpu"
    index = getattr(getattr(device, "spec", None), "device_index", None) or 0
    return f"{device.device_type}_{index}_bfc"


def _describe_outputs(node, out) -> tuple:
    n = node.num_outputs
    if n == 0 or out is None:
        return ()
    if n == 1:
        vals = (out,)
    elif isinstance(out, (list, tuple)):
        vals = out
    else:           # (a compiled loop's Merge records its value only)
        vals = (out,)
    result = []
    for slot, v in enumerate(vals):
        d = _describe(v)
        if d is not None:
            result.append((slot,) + d)
    return tuple(result)


def _describe(v):
    """(numpy dtype, shape, nbytes, persistent) of a value, or None for non-tensors (dead values,
    resource handles, queues)."""
    persistent = isinstance(v, Var)
    if persistent:
        v = v.value
    if isinstance(v, (bool, int, float, np.generic)):
        v = np.asarray(v)
    dtype, shape, nbytes = getattr(v, "dtype", None), getattr(v, "shape", None), getattr(v, "nbytes", None)
    if dtype is None or shape is None or nbytes is None:
        return None
    try:
        return np.dtype(dtype), tuple(int(d) for d in shape), int(nbytes), persistent
    except TypeError:
        return None


def datatype_enum(np_dtype) -> int:
    """The DataType enum of a numpy dtype (DT_INVALID when kernflow has no such dtype)."""
    try:
        return dtypes.as_dtype(np_dtype).as_datatype_enum
    except (TypeError, ValueError, KeyError):
        return 0


def _fill_node_stats(ns, rec: _Record, t0: float, nd) -> None:
    start_ns = int(round((t0 + rec.start) * 1e9))
    dur_ns = max(0, int(round((rec.end - rec.start) * 1e9)))
    start_us, dur_us = start_ns // 1000, dur_ns // 1000
    # The executor times a node from taking its inputs to storing its outputs: the op's compute
    # is that whole span (op_start_rel 0), and it was scheduled when it started.
    ns.node_name = rec.name
    ns.op_type = rec.op
    ns.all_start_micros = ns.scheduled_micros = start_us
    ns.op_start_rel_micros = 0
    ns.op_end_rel_micros = ns.all_end_rel_micros = dur_us
    ns.all_start_nanos = ns.scheduled_nanos = start_ns
    ns.op_end_rel_nanos = ns.all_end_rel_nanos = dur_ns
    ns.thread_id = rec.tid
    allocated = persistent = 0
    for slot, dt, shape, nbytes, is_persistent in rec.outputs:
        out = ns.output.add(slot=slot)
        td = out.tensor_description
        td.dtype = datatype_enum(dt)
        for d in shape:
            td.shape.dim.add(size=d)
        ad = td.allocation_description
        ad.requested_bytes, ad.allocator_name = nbytes, rec.allocator
        if is_persistent:
            persistent += nbytes
        else:
            ad.allocated_bytes = nbytes
            allocated += nbytes
    if rec.outputs:
        ns.memory.add(allocator_name=rec.allocator, total_bytes=allocated, peak_bytes=allocated,
                      live_bytes=allocated)
        ns.memory_stats.persistent_memory_size = persistent
    ns.timeline_label = timeline_label(rec.name, rec.op, nd, ns.memory)


def timeline_label(name: str, op: str, nd=None, memory=()) -> str:
    """TF's label of a node execution: ``"name = Op(in0, in1)"``, ``"name = _Send(t:0 @recv_dev)"``,
    ``"name = _Recv(t:0 @send_dev)"``, prefixed by ``"[allocator total peak] "`` (in MB) for
    allocators the node used at least 0.1 MB of.

    Args:
        name: the node name; op: its op type.
        nd: its NodeDef, if known (gives the inputs, or the transfer's tensor and peer device).
        memory: its `AllocatorMemoryUsed` entries.
    """
    prefix = "".join(_memory_prefix(m) for m in memory)
    if nd is None:
        args = ""
    elif op in _SEND_OPS or op in _RECV_OPS:
        peer = "recv_device" if op in _SEND_OPS else "send_device"
        args = f"{nd.attr['tensor_name'].s.decode()} @{nd.attr[peer].s.decode()}"
    else:
        args = ", ".join(nd.input)
    return f"{prefix}{name} = {op}({args})"


def _memory_prefix(m) -> str:
    if m.total_bytes < 0.1 * _MB:
        return ""
    if m.peak_bytes > 0:
        return f"[{m.allocator_name} {m.total_bytes / _MB:.1f}MB {m.peak_bytes / _MB:.1f}MB] "
    return f"[{m.allocator_name} {m.total_bytes / _MB:.1f}MB] "
