"""The executor: compiles one partition (the nodes placed on one device) into a plan, and runs it.

A partition is compiled once per step signature into an `ExecutorPlan` and run many times.
`compile_partition` goes through four stages, each a function of its own:

1. `validate_nodes` parses and checks the NodeDefs (inputs, attrs, input counts and dtypes) and
   orders them topologically;
2. `resolve_kernels` looks up and instantiates each node's kernel and assigns output slots
   (constants are preloaded, `_Arg`/`_Retval` become feed and fetch slots);
3. `build_plan` links producers to consumers into an `ExecutorPlan` (and, for a partition with
   control flow, its frame structure);
4. `choose_executor` compiles simple loops (`loops.py`) and picks how the plan runs.

Three executors run a plan behind one interface (start / wait / results / abort; see
`execution.py`): the frames executor (`control_flow_executor.py`), which runs every plan and is the
reference; the dataflow executor (`dataflow_executor.py`), for plans without control flow; and the
straight line (`straight_line.py`), for plans of synchronous kernels only. Running a plan on the
caller's thread without a rendezvous is the *inline* path (`ExecutorPlan.run_inline`).
"""

from __future__ import annotations

import collections
import dataclasses
import itertools
import queue
import threading
import traceback

from kernflow.core.framework import attr_value as _attr_value
from kernflow.core.framework import errors
from kernflow.core.framework import node_def_util
from kernflow.core.framework import op_def_registry
from kernflow.core.framework.node_def_util import parse_input
from kernflow.core.runtime import control_flow_executor as _cfe
from kernflow.core.runtime import loops as _loops
from kernflow.core.runtime.control_flow_executor import ControlFlowInfo, FrameDataflowState
from kernflow.core.runtime.dataflow_executor import DataflowState
from kernflow.core.runtime.execution import (DATAFLOW, EXECUTORS, FRAMES, SEGMENTED, STRAIGHT_LINE,
                                             Execution, StepContext)
from kernflow.core.runtime import segmented as _segmented
from kernflow.core.runtime.memory_types import MemoryTypes
from kernflow.core.runtime.straight_line import StraightLineExecution, compile_straight_line

__all__ = ["Execution", "ExecutorPlan", "KernelConstruction", "ResolvedKernels", "StepContext",
           "ThreadPool", "ValidatedNodes", "build_plan", "choose_executor", "compile_partition",
           "node_attrs", "parse_input", "resolve_kernels", "validate_nodes"]

_plan_ids = itertools.count()
# Release each intermediate after its last consumer (the default). Benchmarks turn it off to
# measure what keeping every tensor to the end of the step would cost.
RELEASE_INTERMEDIATES = True
# Buffer forwarding pays off from about this many elements (below, allocation is cheap).
_INPLACE_MIN_ELEMENTS = 2048


def node_attrs(nd, op_def) -> dict:
    """Returns the Python attribute values of a NodeDef, typed by its OpDef.

    Raises:
        InvalidArgumentError: naming the node and the attr, for a value that cannot be decoded
            (a tensor whose content does not match its dtype and shape, an unknown DataType).
    """
    out = {}
    for k, v in nd.attr.items():
        d = op_def.attrs.get(k) if op_def is not None else None
        try:
            out[k] = _attr_value.from_proto(v, d.type if d else None)
        except (errors.OpError, TypeError, ValueError) as e:   # (an unknown DataType enum: TypeError)
            cls = type(e) if isinstance(e, errors.OpError) else errors.InvalidArgumentError
            raise cls(None, None, f"Node '{nd.name}' ({nd.op}), attr '{k}': "
                                  f"{getattr(e, 'message', e)}") from None
    return out


@dataclasses.dataclass
class KernelConstruction:
    """What a kernel factory may read when building a kernel for one node."""
    name: str
    op_type: str
    attrs: dict
    device: object
    input_dtypes: list
    output_dtypes: list
    session_handle: object = None

    def get_attr(self, name: str):
        try:
            return self.attrs[name]
        except KeyError:
            raise errors.InvalidArgumentError(None, None, f"node {self.name} ({self.op_type}) has no "
                                              f"attr {name!r}") from None

    @property
    def resource_mgr(self):
        return self.device.resource_mgr


class ThreadPool:
    """The inter-op pool: daemon threads draining one queue (cheaper than concurrent.futures).

    Threads start on the first `schedule`, so sessions that never need the pool cost nothing.
    """

    def __init__(self, num_threads: int, name: str = "kernflow-interop"):
        self._q: queue.SimpleQueue = queue.SimpleQueue()
        self.num_threads = max(1, num_threads)
        self._name = name
        self._threads: list[threading.Thread] = []
        self._lock = threading.Lock()

    def _loop(self):
        while True:
            fn = self._q.get()
            if fn is None:
                return
            try:
                fn()
            except BaseException:  # noqa: BLE001 - a task must never kill a pool thread
                traceback.print_exc()

    def schedule(self, fn) -> None:
        if not self._threads:
            with self._lock:
                if not self._threads:
                    self._threads = [threading.Thread(target=self._loop, name=f"{self._name}-{i}",
                                                      daemon=True) for i in range(self.num_threads)]
                    for t in self._threads:
                        t.start()
        self._q.put(fn)

    def shutdown(self) -> None:
        with self._lock:
            for _ in self._threads:
                self._q.put(None)
            self._threads = []


@dataclasses.dataclass
class _Node:
    id: int
    name: str
    op_type: str
    compute: object
    inputs: list            # slot index per data input
    deref: list             # True where a ref value feeds a non-ref argument
    ctrl_inputs: list       # node ids
    out_base: int
    num_outputs: int
    is_async: bool = False
    needs_ctx: bool = False
    expensive: object = False
    consumers: list = dataclasses.field(default_factory=list)   # node ids (data and control)
    num_pending: int = 0    # inputs produced by executed nodes (consts and args are ready at start)
    static_elems: list = dataclasses.field(default_factory=list)  # per output: count or None
    fresh: bool = False     # outputs are always new buffers (see KernelDef)
    inplace: object = None  # compute that may reuse input 0's buffer
    forwards: bool = False  # output 0 is input 0 itself
    # (input position, fn) pairs moving an input between host and device memory (see
    # memory_types.MemoryTypes); empty on devices whose memory is the host's.
    convert: list = dataclasses.field(default_factory=list)
    # Input positions a device-memory kernel reads in host memory, and those it reads only for
    # their shape (filled by memory_types.MemoryTypes; step capture checks them, see `replay.py`).
    host_inputs: tuple = ()
    shape_inputs: tuple = ()


class ExecutorPlan:
    """A compiled partition: kernels instantiated, slots assigned, its executors known.

    Attributes:
        arg_slots: slot of each _Arg (feed) by index; the caller passes the feed values.
        retval_slots: slot of each _Retval (fetch) by index.
        arg_indices / retval_indices: step-wide feed/fetch positions of this partition's
            _Arg/_Retval nodes, in slot order.
        control_flow: the `ControlFlowInfo` of a partition with control-flow primitives (only the
            frames executor runs it), else None.
        inline: True when the plan runs inline (`run_inline`): no asynchronous kernel, no control
            flow. Set by `choose_executor`.
        inline_executor: what `run_inline` runs: ``STRAIGHT_LINE``, or ``DATAFLOW`` when
            independent expensive kernels can use the pool; None when the plan does not run inline.
        straight_line: the straight-line function (`straight_line.compile_straight_line`), or None
            until a straight-line run needs it.
    """

    def __init__(self, device, nodes, num_slots, const_values, arg_slots, retval_slots, pool,
                 arg_indices=None, retval_indices=None):
        self.id = next(_plan_ids)
        self.arg_indices = list(arg_indices if arg_indices is not None else range(len(arg_slots)))
        self.retval_indices = list(retval_indices if retval_indices is not None
                                   else range(len(retval_slots)))
        # Fetched values of devices with their own memory go back to the host.
        self.fetch_to_host = device.to_host if getattr(device, "has_device_memory", False) else None
        self.device = device
        self.nodes: list[_Node] = nodes
        self.num_slots = num_slots
        self.arg_slots = arg_slots
        self.retval_slots = retval_slots
        self.pool = pool
        self._init_vals = [None] * num_slots
        for slot, v in const_values.items():
            self._init_vals[slot] = v
        # Consumer counts per slot for release; fetched slots are pinned.
        refs = [0] * num_slots
        for n in nodes:
            for s in n.inputs:
                refs[s] += 1
        for s in (retval_slots if RELEASE_INTERMEDIATES else range(num_slots)):
            refs[s] += 1 << 30
        self._init_refs = refs
        self._init_pending = [n.num_pending for n in nodes]
        self._roots = [n.id for n in nodes if self._init_pending[n.id] == 0]
        uses = collections.Counter(s for n in nodes for s in n.inputs)
        self._inplace = _inplace_nodes(self, uses, set(retval_slots))
        self.control_flow = None
        self._node_attrs = None   # node name -> attrs, for plans with control flow (loops.py)
        self._frames_info = None
        self._async = None        # (any asynchronous kernel: computed on first use)
        self.straight_line = None
        self.segments = None      # the `segmented.SegmentedProgram` a non-inline plan runs on
        self.inline = False
        self.inline_executor = None
        self.dataflow_compute = [n.compute for n in nodes]

    def run_inline(self, args, ctx: StepContext):
        """Runs an inline plan (`inline`) on the calling thread and returns its fetches: the
        straight line, or a dataflow run when independent expensive kernels can use the pool.

        Raises:
            InternalError: the plan does not run inline (it has asynchronous kernels or control flow).
        """
        if self.inline_executor == STRAIGHT_LINE:
            return self.straight_line(args, ctx)
        if self.inline_executor is None:
            raise errors.InternalError(None, None, f"plan {self.id} on {_device_name(self)} does not "
                                       f"run inline (it has asynchronous kernels or control flow)")
        st = DataflowState(self, args, ctx)
        st.start()
        st.wait()
        return st.results()

    def executors(self) -> tuple:
        """The executors (`execution.EXECUTORS`) that can run this plan; the frames executor, the
        reference, runs every plan."""
        if self.control_flow is not None:
            return (FRAMES,)
        if self._async is None:
            self._async = any(n.is_async for n in self.nodes)
        if not self._async:
            return EXECUTORS
        return (SEGMENTED, DATAFLOW, FRAMES) if _segmented.can_segment(self) else (DATAFLOW, FRAMES)

    def new_state(self, args, ctx: StepContext, done=None, executor: str | None = None) -> Execution:
        """A run of this plan for one step, behind the executor interface (begun by `start()`).

        Args:
            args: the feed values, in `arg_slots` order.
            ctx: the step's `StepContext`.
            done: optional ``done(run)``, called once when the run finishes.
            executor: one of `execution.EXECUTORS`; None: the frames executor for a plan with
                control flow, else the dataflow one.

        Raises:
            InvalidArgumentError: `executor` is unknown or cannot run this plan.
        """
        if executor is None:
            if self.control_flow is not None:
                return FrameDataflowState(self, args, ctx, done)
            if self.segments is not None and ctx.collector is None:
                return _segmented.SegmentedExecution(self, args, ctx, done)
            return DataflowState(self, args, ctx, done)
        if executor not in self.executors():
            if executor not in EXECUTORS:
                why = f"there is no such executor (expected one of {', '.join(EXECUTORS)})"
            else:
                has = "control flow" if self.control_flow is not None else "asynchronous kernels"
                why = f"the plan has {has}; executors that can run it: {', '.join(self.executors())}"
            raise errors.InvalidArgumentError(None, None, f"the {executor!r} executor cannot run plan "
                                              f"{self.id} on {_device_name(self)}: {why}")
        if executor == FRAMES:
            return FrameDataflowState(self, args, ctx, done)
        if executor == DATAFLOW:
            return DataflowState(self, args, ctx, done)
        if executor == SEGMENTED:
            if self.segments is None:
                self.segments = _segmented.compile_segments(self, self._inplace, RELEASE_INTERMEDIATES)
            return _segmented.SegmentedExecution(self, args, ctx, done)
        if self.straight_line is None:
            self.straight_line = compile_straight_line(self, self._inplace, RELEASE_INTERMEDIATES)
        return StraightLineExecution(self, args, ctx, done)

    def frames_info(self) -> ControlFlowInfo:
        """The frame structure the frames executor runs: `control_flow`, or for a plan without
        control flow one root frame (built on first use)."""
        if self.control_flow is not None:
            return self.control_flow
        if self._frames_info is None:
            self._frames_info = ControlFlowInfo(self, lambda n: {})
        return self._frames_info


def _device_name(plan) -> str:
    return plan.device.name if plan.device is not None else "?"


def _has_parallel_expensive(nodes, static_only: bool = False) -> bool:
    """True if two nodes with possibly expensive kernels are independent (neither precedes the other)."""
    exp = [n.id for n in nodes if (n.expensive is True if static_only else n.expensive)]
    if len(exp) < 2:
        return False
    anc = [0] * len(nodes)
    preds = [[] for _ in nodes]
    for n in nodes:
        for c in n.consumers:
            preds[c].append(n.id)
    for n in nodes:  # nodes are in topological order
        a = 0
        for p in preds[n.id]:
            a |= anc[p] | (1 << p)
        anc[n.id] = a
    for i, x in enumerate(exp):
        for y in exp[i + 1:]:
            if not (anc[y] >> x) & 1 and not (anc[x] >> y) & 1:
                return True
    return False


def _inplace_nodes(plan, uses, pinned) -> set:
    """Ids of nodes whose in-place kernel may write its result into input 0's buffer.

    Only a single use guarantees no other kernel took a view of the buffer earlier; buffers known to
    be small are not worth it (the in-place call costs ~0.5 us more than a plain one).
    """
    fresh = _fresh_slots(plan, uses, pinned)
    elems = {n.out_base + i: e for n in plan.nodes for i, e in enumerate(n.static_elems)}
    return {n.id for n in plan.nodes
            if n.inplace is not None and n.inputs and fresh.get(n.inputs[0]) and uses[n.inputs[0]] == 1
            and not n.deref[0]
            and (elems.get(n.inputs[0]) is None or elems[n.inputs[0]] >= _INPLACE_MIN_ELEMENTS)}


def _fresh_slots(plan, uses, pinned) -> dict:
    """Slots whose value is a buffer no feed, constant, variable or other live slot can alias.

    Outputs of `fresh` kernels qualify; a forwarding kernel's (Identity's) output qualifies when its
    input did and the forwarder is that input's only reader. Fetched slots never qualify.
    """
    out = {}
    for n in plan.nodes:
        for i in range(n.num_outputs):
            s = n.out_base + i
            if s in pinned:
                continue
            if n.fresh or n.inplace is not None:
                out[s] = True
            elif n.forwards and i == 0 and n.inputs and out.get(n.inputs[0]) and \
                    uses[n.inputs[0]] == 1:
                out[s] = True
    return out


# ---------------------------------------------------------------------------- compilation
def compile_partition(graph_def, device, kernels, pool=None, kernel_cache=None,
                      session_handle=None, force_dataflow: bool = False,
                      compile_loops: bool | None = None) -> ExecutorPlan:
    """Instantiates the kernels of one partition and compiles its plan (the four stages above).

    Args:
        graph_def: the partition's GraphDef (every node placed on `device`); `_Arg`/`_Retval`
            nodes mark feeds and fetches by their `index` attr.
        device: the `Device` the nodes run on.
        kernels: the `KernelRegistry`.
        pool: the inter-op `ThreadPool` for expensive kernels (None runs everything inline).
        kernel_cache: dict shared by the session: stateful kernels are built once per
            (device, node name) and reused by every plan, as TF's OpSegment does.
        session_handle: handed to kernel factories (`KernelConstruction.session_handle`).
        force_dataflow: never run the plan inline.
        compile_loops: run simple while loops as compiled loop nodes (`loops.py`); None: unless
            ``KERNFLOW_COMPILE_LOOPS=0``.

    Raises:
        InvalidArgumentError: for a cycle or a malformed node; NotFoundError for a missing kernel.
    """
    validated = validate_nodes(graph_def)
    resolved = resolve_kernels(validated, device, kernels, kernel_cache, session_handle)
    plan = build_plan(validated, resolved, device, pool)
    return choose_executor(plan, force_dataflow, compile_loops)


@dataclasses.dataclass
class ValidatedNodes:
    """The nodes of a partition, parsed and checked (`validate_nodes`).

    Attributes:
        parsed: per node, ``(NodeDef, OpDef, attrs, inputs)``; inputs are ``(producer position,
            output index, is_control)``.
        out_dtypes: per node, its output dtypes.
        order: node positions in topological order (loop back edges from NextIteration aside).
    """
    parsed: list
    out_dtypes: list
    order: list


def validate_nodes(graph_def) -> ValidatedNodes:
    """Stage 1: parses the partition's NodeDefs, checks them and orders them.

    Raises:
        InvalidArgumentError: duplicate node names, an unknown input node, an attr that does not
            decode, inputs that do not fit their producers or the OpDef, a cycle.
        NotFoundError: an op type that is not registered.
    """
    nds = list(graph_def.node)
    index = {nd.name: i for i, nd in enumerate(nds)}
    if len(index) != len(nds):
        raise errors.InvalidArgumentError(None, None, "partition has duplicate node names")
    parsed = []
    for nd in nds:
        op_def = op_def_registry.get(nd.op)
        attrs = node_attrs(nd, op_def)
        ins = []
        for s in nd.input:
            name, idx, ctrl = parse_input(s)
            if name not in index:
                raise errors.InvalidArgumentError(None, None, f"Node '{nd.name}': unknown input node '{s}'")
            ins.append((index[name], idx, ctrl))
        parsed.append((nd, op_def, attrs, ins))
    out_dtypes = [node_def_util.output_dtypes(nd, op_def, attrs) for nd, op_def, attrs, _ in parsed]
    node_def_util.check_nodes(parsed, index, out_dtypes)
    return ValidatedNodes(parsed, out_dtypes, _toposort(parsed))


@dataclasses.dataclass
class ResolvedKernels:
    """The executed nodes of a partition with their kernels and slots (`resolve_kernels`).

    Attributes:
        nodes: a `_Node` per executed node, in topological order (not linked yet).
        num_slots: the number of value slots.
        consts: slot -> preloaded constant value (on the device).
        arg_slots / retval_slots: _Arg / _Retval `index` attr -> slot.
        exec_of: position in `ValidatedNodes.parsed` -> `_Node` id, for executed nodes.
    """
    nodes: list
    num_slots: int
    consts: dict
    arg_slots: dict
    retval_slots: dict
    exec_of: dict


def resolve_kernels(validated: ValidatedNodes, device, kernels, kernel_cache=None,
                    session_handle=None) -> ResolvedKernels:
    """Stage 2: assigns output slots and instantiates each executed node's kernel.

    `_Arg`/`_Retval` nodes become feed/fetch slots and Consts without control inputs preloaded
    values; they run no kernel. Stateful kernels come from (and go to) `kernel_cache`; on a device
    with its own memory, `MemoryTypes` adds host/device conversions.

    Raises:
        NotFoundError: no kernel for a node on this device; InvalidArgumentError: a kernel factory
            failed (naming the node).
    """
    parsed, out_dtypes = validated.parsed, validated.out_dtypes
    slot_base, total = {}, 0
    for old in validated.order:
        slot_base[old] = total
        total += len(out_dtypes[old])
    nodes, consts, arg_slots, retval_slots, exec_of = [], {}, {}, {}, {}
    kernel_cache = {} if kernel_cache is None else kernel_cache
    mem = MemoryTypes(device) if getattr(device, "has_device_memory", False) else None
    for old in validated.order:
        nd, op_def, attrs, ins = parsed[old]
        data_ins = [(i, idx) for i, idx, c in ins if not c]
        in_slots = [slot_base[i] + idx for i, idx in data_ins]
        in_dtypes = [out_dtypes[i][idx] for i, idx in data_ins]
        arg_is_ref = [a.is_ref for a, _ in op_def.expand_inputs(attrs)]
        deref = [dt.is_ref_dtype and not r for dt, r in zip(in_dtypes, arg_is_ref)]
        base = slot_base[old]
        if nd.op == "_Arg":
            arg_slots[attrs["index"]] = base
            continue
        if nd.op == "_Retval":
            retval_slots[attrs["index"]] = in_slots[0]
            continue
        if nd.op == "Const" and not any(c for _, _, c in ins):
            consts[base] = device.to_device(attrs["value"])
            if mem is not None:
                mem.const(base, attrs["value"])
            continue
        ctx = KernelConstruction(nd.name, nd.op, attrs, device, in_dtypes, out_dtypes[old], session_handle)
        kd = kernels.lookup(nd.op, device.device_type, attrs, nd.name)
        key = (device.name, nd.name, nd.SerializeToString(deterministic=True)) if op_def.stateful else None
        compute = _kernel(kd, ctx, kernel_cache, key)
        exec_of[old] = len(nodes)
        node = _Node(len(nodes), nd.name, nd.op, compute, in_slots, deref, [], base,
                     len(out_dtypes[old]), kd.is_async, kd.needs_ctx or kd.is_async, kd.expensive,
                     fresh=kd.fresh, forwards=kd.forwards)
        if kd.inplace is not None and not key:
            node.inplace = kd.inplace(ctx)
        node.static_elems = _static_elements(nd, len(out_dtypes[old]))
        if mem is not None:
            total = mem.bind(node, kd, op_def, attrs, consts, total, in_dtypes)
        nodes.append(node)
    return ResolvedKernels(nodes, total, consts, arg_slots, retval_slots, exec_of)


def _kernel(kd, ctx: KernelConstruction, kernel_cache: dict, key):
    """The kernel of one node: the cached one of a stateful node, else a new one from `kd`."""
    compute = kernel_cache.get(key) if key else None
    if compute is not None:
        return compute
    try:
        compute = kd.factory(ctx)
    except errors.OpError:
        raise
    except Exception as e:  # noqa: BLE001 - construction errors name the node
        raise errors.InvalidArgumentError(None, None, f"building kernel for {ctx.name} "
                                          f"({ctx.op_type}): {type(e).__name__}: {e}") from e
    if key:
        kernel_cache[key] = compute
    return compute


def build_plan(validated: ValidatedNodes, resolved: ResolvedKernels, device, pool) -> ExecutorPlan:
    """Stage 3: links producers to consumers (pending counts) and builds the `ExecutorPlan`; a
    partition with control-flow primitives also gets its frame structure (`control_flow`).

    Raises:
        InvalidArgumentError: control flow that is not well formed (a node with inputs from two
            frames, a fetch inside a loop).
    """
    nodes = resolved.nodes
    _link(nodes, validated.parsed, validated.order, resolved.exec_of)
    arg_order = sorted(resolved.arg_slots)
    ret_order = sorted(resolved.retval_slots)
    plan = ExecutorPlan(device, nodes, resolved.num_slots, resolved.consts,
                        [resolved.arg_slots[i] for i in arg_order],
                        [resolved.retval_slots[i] for i in ret_order], pool,
                        arg_indices=arg_order, retval_indices=ret_order)
    if any(nd.op in _cfe.CONTROL_FLOW_OPS for nd, _, _, _ in validated.parsed):
        attrs_of = {nodes[resolved.exec_of[old]].name: validated.parsed[old][2]
                    for old in resolved.exec_of}
        plan.control_flow = ControlFlowInfo(plan, lambda n: attrs_of.get(n.name, {}))
        plan._node_attrs = attrs_of   # (the loop compiler reads Enter attrs again)
    return plan


def choose_executor(plan: ExecutorPlan, force_dataflow: bool = False,
                    compile_loops: bool | None = None) -> ExecutorPlan:
    """Stage 4: decides how the plan runs; returns it (a new plan when loops were compiled).

    A plan with control flow first has its simple loop frames compiled into loop nodes
    (`loops.py`; `compile_loops` None: unless ``KERNFLOW_COMPILE_LOOPS=0``), and never runs inline:
    a loop node must see the step's cancellation. A plan with asynchronous kernels, or
    `force_dataflow`, does not run inline either; one whose asynchronous kernels are all Recvs runs
    as straight-line segments (`segmented.py`, `ExecutorPlan.segments`) unless two independent
    always-expensive kernels can use the pool. Any other plan is compiled to a straight line and
    runs inline (`ExecutorPlan.run_inline`): as a straight line, or as a dataflow run when two
    independent kernels registered as always expensive can use a pool of several threads.
    Size-dependent expensive kernels (matmul, conv) stay on the straight line: measured here,
    handing BLAS calls to pool threads made numpy's OpenBLAS slower for the whole process
    afterwards (a 512-batch MLP step: 1.2 ms before, 1.7-2.1 ms after), and BLAS already uses
    every core for one large kernel.
    """
    had_control_flow = plan.control_flow is not None
    if had_control_flow and (_loops.ENABLED if compile_loops is None else compile_loops):
        plan = _compile_loops(plan, plan._node_attrs)
    nodes = plan.nodes
    if force_dataflow or had_control_flow or any(n.is_async for n in nodes):
        # The dataflow executor forwards buffers as the straight line does.
        plan.dataflow_compute = [n.inplace if n.id in plan._inplace else n.compute for n in nodes]
        if not force_dataflow and not had_control_flow and _segmented.ENABLED \
                and _segmented.can_segment(plan) \
                and not (plan.pool is not None and plan.pool.num_threads > 1
                         and _has_parallel_expensive(nodes, static_only=True)):
            plan.segments = _segmented.compile_segments(plan, plan._inplace, RELEASE_INTERMEDIATES)
        return plan
    plan.straight_line = compile_straight_line(plan, plan._inplace, RELEASE_INTERMEDIATES)
    pool = plan.pool
    parallel = pool is not None and pool.num_threads > 1 and _has_parallel_expensive(nodes, static_only=True)
    plan.inline = True
    plan.inline_executor = DATAFLOW if parallel else STRAIGHT_LINE
    return plan


def _compile_loops(plan: ExecutorPlan, attrs_of: dict) -> ExecutorPlan:
    """Replaces simple loop frames by compiled loop nodes (`loops.py`), innermost first."""
    while plan.control_flow is not None:
        got = _loops.compile_loops(plan, plan.control_flow)
        if got is None:
            break
        nodes, num_slots, remap = got
        consts = {s: v for s, v in enumerate(plan._init_vals) if v is not None}
        rets = [remap.get(s, s) for s in plan.retval_slots]
        new = ExecutorPlan(plan.device, nodes, num_slots, consts, plan.arg_slots, rets,
                           plan.pool, arg_indices=plan.arg_indices,
                           retval_indices=plan.retval_indices)
        if any(n.op_type in _cfe.CONTROL_FLOW_OPS for n in nodes):
            new.control_flow = ControlFlowInfo(new, lambda n: attrs_of.get(n.name, {}))
        plan = new
    return plan


def _static_elements(nd, num_outputs) -> list:
    """Element count of each output from the node's `_output_shapes` attr (None if unknown)."""
    out = [None] * num_outputs
    if "_output_shapes" in nd.attr:
        for i, sh in enumerate(nd.attr["_output_shapes"].list.shape[:num_outputs]):
            if not sh.unknown_rank and all(d.size >= 0 for d in sh.dim):
                n = 1
                for d in sh.dim:
                    n *= d.size
                out[i] = n
    return out


def _toposort(parsed) -> list[int]:
    n = len(parsed)
    indeg = [0] * n
    outs = [[] for _ in range(n)]
    for j, (_, _, _, ins) in enumerate(parsed):
        for i, _, _ in ins:
            if parsed[i][0].op in ("NextIteration", "RefNextIteration"):
                continue  # a loop's back edge: Merge runs before the NextIteration feeding it
            indeg[j] += 1
            outs[i].append(j)
    ready = collections.deque(j for j in range(n) if indeg[j] == 0)
    order = []
    while ready:
        i = ready.popleft()
        order.append(i)
        for j in outs[i]:
            indeg[j] -= 1
            if indeg[j] == 0:
                ready.append(j)
    if len(order) != n:
        stuck = [parsed[j][0].name for j in range(n) if indeg[j] > 0][:5]
        raise errors.InvalidArgumentError(None, None, f"Graph has a cycle through nodes {stuck}")
    return order


def _link(nodes, parsed, order, exec_of_old) -> None:
    """Fills consumers and pending counts; consts and args are available at start (no edge)."""
    for old in order:
        me = exec_of_old.get(old)
        if me is None:
            continue
        node = nodes[me]
        pend = 0
        for i, _, ctrl in parsed[old][3]:
            p = exec_of_old.get(i)
            if p is None:
                continue
            nodes[p].consumers.append(me)
            pend += 1
            if ctrl:
                node.ctrl_inputs.append(p)
        node.num_pending = pend
