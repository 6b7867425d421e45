"""The executor: runs one partition (the nodes placed on one device) for a step.

A partition is compiled once into an `ExecutorPlan` and run many times. Two strategies share it:

* **Straight-line** (`_compile_straight_line`): a partition whose kernels are all synchronous and
  that offers no useful parallelism is compiled to a Python function that calls the kernels in
  topological order, one statement per node, with every intermediate in a local variable that is
  deleted right after its last consumer (TF's single-threaded executor, compiled).
* **Dataflow** (`DataflowState`): the whitepaper's executor, used when the partition has
  asynchronous kernels (Recv, queues) or independent expensive kernels.

Invariants of the dataflow executor (per step and partition; a frame/iteration index will be
added to each of these when loops arrive, and `Entry.is_dead` flows for Switch/Merge):

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

import collections
import dataclasses
import itertools
import linecache
import queue
import threading
import time
import traceback
import weakref


from kernflow.core.framework import attr_value as _attr_value
from kernflow.core.framework import errors
from kernflow.core.framework import node_def_util
from kernflow.core.framework import op_def_registry
from kernflow.core.framework.node_def_util import parse_input
from kernflow.core.runtime import cancellation as _cancellation
from kernflow.core.runtime.memory_types import MemoryTypes

__all__ = ["ExecutorPlan", "KernelConstruction", "StepContext", "ThreadPool", "compile_partition",
           "parse_input", "node_attrs"]

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


class StepContext:
    """Per-step state handed to kernels registered with ``needs_ctx`` or ``is_async``.

    Attributes:
        step_id: the step's id (shared by all its partitions).
        rendezvous: where _Send/_Recv exchange tensors (None on the single-partition fast path).
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
    """A compiled partition: kernels instantiated, slots assigned, a strategy chosen.

    Attributes:
        arg_slots: slot of each _Arg (feed) by index; the caller passes the feed values.
        retval_slots: slot of each _Retval (fetch) by index.
    """

    def __init__(self, device, nodes, num_slots, const_values, arg_slots, retval_slots, pool,
                 force_dataflow: bool = False, arg_indices=None, retval_indices=None):
        self.id = next(_plan_ids)
        # Step-wide feed/fetch positions of this partition's _Arg/_Retval nodes, in slot order.
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
        self.control_flow = None   # control_flow_executor.ControlFlowInfo if the partition has any
        use_dataflow = force_dataflow or any(n.is_async for n in nodes)
        self.straight_line = None if use_dataflow else _compile_straight_line(self)
        # The dataflow executor (without control flow) forwards buffers as the straight line does.
        uses = collections.Counter(s for n in nodes for s in n.inputs)
        inplace = _inplace_nodes(self, uses, set(retval_slots)) if use_dataflow else set()
        self.dataflow_compute = [n.inplace if n.id in inplace else n.compute for n in nodes]
        # Independent kernels registered as always expensive (expensive=True) run in parallel on
        # the pool. Size-dependent ones (expensive=fn: matmul, conv) run inline on the straight
        # line: measured here, handing BLAS calls to pool threads made numpy's OpenBLAS slower for
        # the whole process afterwards (a 512-batch MLP step: 1.2 ms before, 1.7-2.1 ms after),
        # and BLAS already uses every core for one large kernel.
        parallel = (self.straight_line is not None and pool is not None and pool.num_threads > 1
                    and _has_parallel_expensive(nodes, static_only=True))
        self._choice = "dataflow" if parallel else "straight_line"

    def run_inline(self, args, ctx: StepContext):
        """Runs a partition that has no asynchronous kernels on the calling thread (the inline path:
        the straight line, or the dataflow executor when independent expensive kernels can use the
        pool); returns fetches."""
        if self._choice == "straight_line":
            return self.straight_line(args, ctx)
        return self._run_one(self._choice, args, ctx)

    def new_state(self, args, ctx: StepContext, done=None):
        """A dataflow execution of this plan for one step (started with `start()`)."""
        if self.control_flow is not None:
            from kernflow.core.runtime.control_flow_executor import FrameDataflowState
            return FrameDataflowState(self, args, ctx, done)
        return DataflowState(self, args, ctx, done)

    def _run_one(self, choice, args, ctx):
        if choice == "straight_line":
            return self.straight_line(args, ctx)
        st = self.new_state(args, ctx)
        st.start()
        st.wait()
        return st.results()


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


# ---------------------------------------------------------------------------- straight-line
def _compile_straight_line(plan: ExecutorPlan):
    """Compiles the plan into one Python function; a failing line maps back to its node."""
    nodes = plan.nodes
    last_use: dict[int, int] = {}
    for n in nodes:
        for s in n.inputs:
            last_use[s] = n.id
    pinned = set(plan.retval_slots)
    g = {"_errors": errors}
    if plan.device is not None and getattr(plan.device, "has_device_memory", False):
        g["_to_host"], g["_to_device"] = plan.device.to_host, plan.device.to_device
    lines = ["def _run(_args, _ctx):"]
    line_node = {}
    for i, s in enumerate(plan.arg_slots):
        lines.append(f"    v{s} = _args[{i}]")
    for s, v in enumerate(plan._init_vals):
        if v is not None:
            g[f"c{s}"] = v

    def ref(s, deref):
        name = f"c{s}" if plan._init_vals[s] is not None else f"v{s}"
        return f"{name}.read()" if deref else name

    uses = collections.Counter(s for n in nodes for s in n.inputs)
    inplace = _inplace_nodes(plan, uses, pinned)
    for n in nodes:
        g[f"k{n.id}"] = n.compute
        args = [ref(s, d) for s, d in zip(n.inputs, n.deref)]
        for pos, fn in n.convert:
            args[pos] = f"{'_to_host' if fn == 'host' else '_to_device'}({args[pos]})"
        if n.needs_ctx:
            args.insert(0, "_ctx")
        kname = f"k{n.id}"
        if n.id in inplace:
            kname = f"k{n.id}_ip"   # input 0 is a dead, unaliased buffer: write the result into it
            g[kname] = n.inplace
        call = f"{kname}({', '.join(args)})"
        outs = [f"v{n.out_base + i}" for i in range(n.num_outputs)]
        if n.op_type == "NoOp" and not n.inputs:
            continue  # nothing to run: its control edges are honoured by the statement order
        if n.forwards and n.num_outputs == 1 and len(args) == 1 and not n.needs_ctx and not n.convert:
            stmt = f"{outs[0]} = {args[0]}"   # Identity: a name binding, no call
        elif n.num_outputs == 0:
            stmt = call
        elif n.num_outputs == 1:
            stmt = f"{outs[0]} = {call}"
        else:
            stmt = f"{', '.join(outs)} = {call}"
        line_node[len(lines) + 1] = n
        lines.append("    " + stmt)
        dead = [s for s in n.inputs if last_use.get(s) == n.id and s not in pinned
                and (s in plan.arg_slots or plan._init_vals[s] is None)]
        for i in range(n.num_outputs):
            s = n.out_base + i
            if s not in last_use and s not in pinned:
                dead.append(s)
        if dead and RELEASE_INTERMEDIATES:
            lines.append(f"    del {', '.join(f'v{s}' for s in dict.fromkeys(dead))}")
    rets = [ref(s, False) for s in plan.retval_slots]
    lines.append(f"    return [{', '.join(rets)}]")
    src = "\n".join(lines) + "\n"
    filename = f"<kernflow plan {plan.id} on {plan.device.name if plan.device else '?'}>"
    inner = exec_generated(src, filename, g)["_run"]

    def run(args, ctx):
        try:
            return inner(args, ctx)
        except Exception as e:  # noqa: BLE001 - re-raised as a TF error naming the node
            raise _node_error(e, generated_line_node(e, filename, line_node)) from e

    run.source = src
    run.namespace = g
    run.line_nodes = line_node
    return run


def exec_generated(src: str, filename: str, namespace: dict) -> dict:
    """Runs generated source into `namespace`, registered with linecache so tracebacks show it
    while a function it defined lives (plans evicted from a session's cache take their source)."""
    linecache.cache[filename] = (len(src), None, src.splitlines(True), filename)
    exec(compile(src, filename, "exec"), namespace)  # noqa: S102 - generated from a plan, no user text
    for v in list(namespace.values()):
        if getattr(getattr(v, "__code__", None), "co_filename", None) == filename:
            weakref.finalize(v, linecache.cache.pop, filename, None)
    return namespace


def generated_line_node(e: BaseException, filename: str, line_node: dict):
    """The node of the innermost line of generated code `filename` in e's traceback (or None)."""
    tb = e.__traceback__
    node = None
    while tb is not None:
        if tb.tb_frame.f_code.co_filename == filename:
            node = line_node.get(tb.tb_lineno)
        tb = tb.tb_next
    return node


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


def _node_error(e: Exception, node) -> errors.OpError:
    """Wraps an exception raised by a kernel into a TF error naming the node."""
    where = f"\n\t [[{{{{node {node.name}}}}} ({node.op_type})]]" if node is not None else ""
    if isinstance(e, errors.OpError):
        if where and where in e.message:
            return e
        err = type(e)(e.node_def, e.op, f"{e.message}{where}")
        return err
    if isinstance(e, MemoryError) or type(e).__name__ == "OutOfMemoryError":  # host or device (cupy)
        return errors.ResourceExhaustedError(None, None, f"OOM when running {node.name if node else '?'}: "
                                                         f"{e}{where}")
    name = f"{node.op_type} {node.name}: " if node is not None else ""
    return errors.InvalidArgumentError(None, None, f"{name}{type(e).__name__}: {e}{where}")


# ---------------------------------------------------------------------------- dataflow
class DataflowState:
    """One step of one partition under the dataflow strategy. See the module docstring."""

    def __init__(self, plan: ExecutorPlan, args, ctx: StepContext, done=None):
        self.plan = plan
        self.ctx = ctx
        self.vals = list(plan._init_vals)
        for s, v in zip(plan.arg_slots, args):
            self.vals[s] = v
        self.refs = list(plan._init_refs)
        self.pending = list(plan._init_pending)
        self.lock = threading.Lock()
        self.outstanding = 0
        self.error: Exception | None = None
        self.finished = threading.Event()
        self._done_cb = done

    def start(self) -> None:
        roots = self.plan._roots
        if not roots:
            self._finish()
            return
        with self.lock:
            self.outstanding = len(roots)
        self._process(list(roots))

    def wait(self, timeout=None) -> bool:
        return self.finished.wait(timeout)

    def results(self):
        if self.error is not None:
            raise self.error
        return [self.vals[s] for s in self.plan.retval_slots]

    def abort(self, err: Exception) -> None:
        with self.lock:
            if self.error is None:
                self.error = err
        rdv = self.ctx.rendezvous
        if rdv is not None:
            rdv.abort(err)

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
            self.abort(_node_error(e, node))
            return self._complete(node.id, None, skip=True)
        if collector is not None:
            collector.record(self.plan.device, node, t0, time.perf_counter(), out)
        return self._complete(node.id, out)

    def _async_done(self, node, outs, t0: float = 0.0) -> None:
        if isinstance(outs, Exception):
            self.abort(_node_error(outs, node))
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

    def _finish(self) -> None:
        self.finished.set()
        if self._done_cb is not None:
            self._done_cb(self)


# ---------------------------------------------------------------------------- compilation
def compile_partition(graph_def, device, kernels, pool=None, kernel_cache=None,
                      session_handle=None, force_dataflow: bool = False,
                      compile_loops: bool | None = None) -> ExecutorPlan:
    """Instantiates the kernels of one partition and compiles its plan.

    Args:
        graph_def: the partition's GraphDef (every node placed on `device`); `_Arg`/`_Retval`
            nodes mark feeds and fetches by their `index` attr.
        device: the `Device` the nodes run on.
        kernels: the `KernelRegistry`.
        pool: the inter-op `ThreadPool` for expensive kernels (None runs everything inline).
        kernel_cache: dict shared by the session: stateful kernels are built once per
            (device, node name) and reused by every plan, as TF's OpSegment does.
        compile_loops: run simple while loops as compiled loop nodes (`loops.py`); None: unless
            ``KERNFLOW_COMPILE_LOOPS=0``.

    Raises:
        InvalidArgumentError: for a cycle or a malformed node; NotFoundError for a missing kernel.
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
    from kernflow.core.runtime import control_flow_executor as _cfe
    control_flow = _cfe.has_control_flow(graph_def)
    if compile_loops is None:
        from kernflow.core.runtime.loops import ENABLED as compile_loops
    order = _toposort(parsed)
    slot_base, total = {}, 0
    for old in order:
        slot_base[old] = total
        total += len(out_dtypes[old])
    nodes, consts = [], {}
    arg_slots, retval_slots = {}, {}
    kernel_cache = {} if kernel_cache is None else kernel_cache
    exec_of_old: dict[int, int] = {}
    mem = MemoryTypes(device) if getattr(device, "has_device_memory", False) else None
    for old in order:
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
            retval_slots[attrs["index"]] = (in_slots[0], deref[0])
            continue
        if nd.op == "Const" and not any(c for _, _, c in ins):
            consts[base] = device.to_device(attrs["value"])
            if mem is not None:
                mem.const(base, attrs["value"])
            continue
        ctx = KernelConstruction(nd.name, nd.op, attrs, device, in_dtypes, out_dtypes[old], session_handle)
        kd = kernels.lookup(nd.op, device.device_type, attrs, nd.name)
        key = (device.name, nd.name, nd.SerializeToString(deterministic=True)) if op_def.stateful else None
        compute = kernel_cache.get(key) if key else None
        if compute is None:
            try:
                compute = kd.factory(ctx)
            except errors.OpError:
                raise
            except Exception as e:  # noqa: BLE001 - construction errors name the node
                raise errors.InvalidArgumentError(None, None, f"building kernel for {nd.name} "
                                                  f"({nd.op}): {type(e).__name__}: {e}") from e
            if key:
                kernel_cache[key] = compute
        exec_of_old[old] = len(nodes)
        node = _Node(len(nodes), nd.name, nd.op, compute, in_slots, deref, [], base,
                     len(out_dtypes[old]), kd.is_async, kd.needs_ctx or kd.is_async, kd.expensive,
                     fresh=kd.fresh, forwards=kd.forwards)
        if kd.inplace is not None and not key:
            node.inplace = kd.inplace(ctx)
        node.static_elems = _static_elements(nd, len(out_dtypes[old]))
        if mem is not None:
            total = mem.bind(node, kd, op_def, attrs, consts, total, in_dtypes)
        nodes.append(node)
    _link(nodes, parsed, order, exec_of_old)
    arg_order = sorted(arg_slots)
    ret_order = sorted(retval_slots)
    args = [arg_slots[i] for i in arg_order]
    rets = [retval_slots[i][0] for i in ret_order]
    plan = ExecutorPlan(device, nodes, total, consts, args, rets, pool,
                        force_dataflow or control_flow, arg_indices=arg_order, retval_indices=ret_order)
    if control_flow:
        attrs_of = {nodes[exec_of_old[old]].name: parsed[old][2] for old in exec_of_old}
        plan.control_flow = _cfe.ControlFlowInfo(plan, lambda n: attrs_of.get(n.name, {}))
        if compile_loops:
            plan = _compile_loops(plan, attrs_of)
    return plan


def _compile_loops(plan: ExecutorPlan, attrs_of: dict) -> ExecutorPlan:
    """Replaces simple loop frames by compiled loop nodes (`loops.py`), innermost first."""
    from kernflow.core.runtime import control_flow_executor as _cfe
    from kernflow.core.runtime import loops as _loops
    while plan.control_flow is not None:
        got = _loops.compile_loops(plan, plan.control_flow)
        if got is None:
            break
        nodes, num_slots, remap = got
        consts = {s: v for s, v in enumerate(plan._init_vals) if v is not None}
        rets = [remap.get(s, s) for s in plan.retval_slots]
        # Dataflow even without control flow left: a loop node must see the step's cancellation.
        new = ExecutorPlan(plan.device, nodes, num_slots, consts, plan.arg_slots, rets,
                           plan.pool, True, arg_indices=plan.arg_indices,
                           retval_indices=plan.retval_indices)
        if any(n.op_type in _cfe.CONTROL_FLOW_OPS for n in nodes):
            new.control_flow = _cfe.ControlFlowInfo(new, lambda n: attrs_of.get(n.name, {}))
        plan = new
    return plan


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
