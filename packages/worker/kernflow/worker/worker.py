"""The worker: runs the partitions a master registers, on one task's devices.

`Worker` is a plain class that takes and returns `worker_pb2` messages; `servicer.WorkerServicer`
puts it behind gRPC, and tests (or a master in the same process) call it directly.

**Feeds and fetches of a registered graph.** The `_Arg` and `_Retval` nodes of a registered GraphDef
(which may lie on any of the task's devices) are ordered by their ``index`` attr; indices need not
start at 0 or be contiguous (the other feeds of a step may live on other tasks). `_Retval` indices
are distinct; an `_Arg` index may repeat, one `_Arg` per device that reads the feed (all of one
dtype). `RunGraphRequest.send[i]` is the value of the feed with the i-th smallest distinct `_Arg`
index, given to every `_Arg` of that index (its ``name`` is informational; its dtype must equal the
`_Arg`'s ``T``), so ``len(send)`` must equal the number of distinct `_Arg` indices. `RunGraphResponse.recv[j]` is the value of the `_Retval` with the j-th
smallest index; its ``name`` is ``recv_key[j]`` when the request lists keys (then ``len(recv_key)``
must equal the number of `_Retval` nodes) and the `_Retval` node's name otherwise.

**State.** Variables and other resources live in the resource managers of the worker's devices, so
they outlive sessions and are shared by every session (and every worker's steps) that uses them, as
on a TF parameter server. Kernels of stateful ops are cached per session handle (TF's OpSegment).

**Steps.** Every step has one `WorkerRendezvous` on this worker (keyed by step id, shared by all
graphs of the step here), created by whichever of RunGraph, RecvTensor or a push (PushTensors: a
value another task's `_Send` sent here, `kernflow.worker.rendezvous`) arrives first and dropped by
CleanupGraph or at the step's end. Every wait has a deadline or ends when the step is aborted.
What a step id can leave behind is bounded (`step_table`): a rendezvous made by RecvTensor before
the step's RunGraph goes when its last waiter leaves, an AbortStep of an unknown step leaves a
tombstone in a capped table, and rendezvous left behind by a master that never cleaned up are
swept after `step_ttl_s` of idleness.

**Kernels.** GetStatus with `list_kernels` lists the kernels of each of the task's device types
(`advertised_kernels`), which the master places ops by: a task without a plugin's kernels is never
given its ops, and the master names the missing kernel before any graph is registered.

**Tracing.** With an OpenTelemetry SDK installed, each RunGraph is a "Worker.RunGraph" span (a child
of the caller's span: the master's "RunGraph", whose context arrives in the call metadata), each pull
from another task a "RecvTensor" child of it, and each RecvTensor served here a "Worker.RecvTensor"
span under the puller's "RecvTensor".
"""

from __future__ import annotations

import concurrent.futures
import dataclasses
import hashlib
import itertools
import logging
import os
import secrets
import threading
import time

from opentelemetry import context as _otel_context
from opentelemetry import trace as _otel

from kernflow.client import channels
from kernflow.client import codec
from kernflow.client import transports as _transports
from kernflow.client.protocol import DERIVED, PROTOCOL_VERSION
from kernflow.client.tensor_requests import SplitMessage, split_contents, with_tensors
from kernflow.client.protobuf import worker_pb2
from kernflow.core.framework import device_spec
from kernflow.core.framework import errors
from kernflow.core.framework import op_def_registry
from kernflow.core.framework.node_def_util import parse_input
from kernflow.core.plugins import manager
from kernflow.core.protobuf import graph_pb2
from kernflow.core.runtime import cost_model as _cost
from kernflow.core.runtime import executor as _executor
from kernflow.core.runtime.partition_runner import Partition, PartitionRunner
from kernflow.core.runtime.step_stats_collector import StepStatsCollector
from kernflow.core.runtime.resource_mgr import is_state_buffer
from kernflow.worker.recv_tensor import RecvTensorService
from kernflow.worker.rendezvous import WorkerRendezvous, device_type_of, parse_key
from kernflow.worker.step_table import StepTable

__all__ = ["Worker", "DEFAULT_RECV_TIMEOUT_S", "advertised_kernels"]

DEFAULT_RECV_TIMEOUT_S = 60.0
# Device names `is_local_device` remembers (they come from callers' rendezvous keys).
_LOCAL_CACHE_SIZE = 4096
_MISSING = object()
_log = logging.getLogger(__name__)
_RECV_RESPONSE = worker_pb2.RecvTensorResponse
_tracer = _otel.get_tracer("kernflow.worker")


_tracing = channels.tracing_active   # True once an application installed an OpenTelemetry SDK


@dataclasses.dataclass
class _DevicePlan:
    device: object
    plan: object
    arg_positions: list      # position in RunGraphRequest.send of each of the plan's args
    retval_positions: list   # position in RunGraphResponse.recv of each of the plan's retvals
    graph_def: object = None  # the partition (labels and costs of traced steps)


@dataclasses.dataclass
class _Graph:
    handle: str
    session_handle: str
    plans: list
    arg_dtypes: list         # DataType enum of each _Arg, by position
    retval_names: list       # _Retval node names, by position
    self_contained: bool = False   # no _Send/_Recv: nothing outside RunGraph touches its steps
    # The other tasks its _Sends push to: told when a step of the graph fails here.
    receivers: list = dataclasses.field(default_factory=list)
    # The graph's one plan when it is self-contained, on a CPU, and runs inline: a step of
    # it needs no rendezvous (nothing can push to, pull from, or block in it).
    inline: _DevicePlan | None = None
    # Runs a step's plans here (the partition runner DirectSession uses too); built from `plans`.
    runner: PartitionRunner | None = None

    def __post_init__(self):
        self.runner = PartitionRunner(
            [Partition(dp.plan, dp.arg_positions, dp.retval_positions) for dp in self.plans],
            len(self.arg_dtypes), len(self.retval_names), read_variables=True)
        if self.self_contained and self.runner.inline is not None:
            dp = self.plans[0]
            if dp.device.device_type == "CPU":
                self.inline = dp



def _ignore(err) -> None:
    _log.debug("a push failed: %s", err)


def _unknown_graph(handle: str, task: str, session_handle) -> errors.AbortedError:
    """The error for a graph handle this worker does not hold: AbortedError, as TF's GraphMgr (a
    master's cached handle outlives a worker that restarted; the master registers its graphs again
    on its next step, and a MonitoredSession re-runs the step)."""
    return errors.AbortedError(None, None, f"graph handle {handle!r} is not registered on {task}"
                               + (f" for session {session_handle!r}" if session_handle else "")
                               + "; possibly this task just restarted")

class Worker(RecvTensorService):
    """One task of a cluster: its devices, registered graphs and running steps.

    Args:
        job: the task's job name, e.g. "worker" or "ps".
        task: the task index.
        config: a `ConfigProto` (device counts, inter-op threads, operation timeout) or None.
        resolver: ``resolver(task_name) -> worker client`` (an in-process `Worker` or a
            `GrpcWorkerClient`), used to pull tensors produced on other tasks; task names look
            like "/job:worker/replica:0/task:1".
        recv_timeout_s: deadline of a RecvTensor wait, and of a pull when the step has no timeout.
        step_ttl_s: idle time after which a step's rendezvous that nobody cleaned up is dropped.
        devices: the devices to use instead of creating them from the plugins (tests).
        kernels: the `KernelRegistry` to compile with and advertise instead of the plugins' (tests:
            workers of one process with different plugins).
    """

    def __init__(self, job: str, task: int, config=None, resolver=None,
                 recv_timeout_s: float = DEFAULT_RECV_TIMEOUT_S, step_ttl_s: float = 600.0,
                 devices=None, kernels=None):
        regs = manager.registries()
        self.job = job
        self.task = int(task)
        self.task_name = f"/job:{job}/replica:0/task:{self.task}"
        self.config = config
        self.resolver = resolver
        self.recv_timeout_s = float(recv_timeout_s)
        self.step_ttl_s = float(step_ttl_s)
        self._kernels = kernels if kernels is not None else regs.kernels
        self._advertised = None   # (KernelLists, digest), built at the first GetStatus asking for them
        self.devices = list(devices) if devices is not None else \
            regs.devices.create_devices(config, job, 0, self.task)
        if not self.devices:
            raise errors.NotFoundError(None, None, f"No devices are registered for {self.task_name}: "
                                       f"install a kernel plugin such as kernflow-kernels-cpu.")
        self._by_name = {d.name: d for d in self.devices}
        cpus = [d for d in self.devices if d.device_type == "CPU"]
        self.default_device = (cpus or self.devices)[0]
        n = config.inter_op_parallelism_threads if config is not None else 0
        self._pool = _executor.ThreadPool(n if n > 0 else (os.cpu_count() or 2),
                                          name=f"kernflow-interop-{job}-{self.task}")
        # Pull threads are created on demand and reused; the cap is generous because each pull of a
        # step in flight holds one thread until its tensor arrives (a small cap could deadlock a
        # step whose early pulls wait on tensors that later, queued pulls would deliver).
        self.pull_pool = concurrent.futures.ThreadPoolExecutor(
            max_workers=256, thread_name_prefix=f"kernflow-recv-{job}-{self.task}")
        self._timeout_ms = config.operation_timeout_in_ms if config is not None else 0
        self.cost_model = _cost.CostModel()
        self._table = StepTable(self, self.step_ttl_s)
        self._lock = self._table.lock   # guards the step table, graphs, sessions and step counters
        self._register_lock = threading.Lock()
        self._graphs: dict[str, _Graph] = {}
        self._sessions: dict[str, dict] = {}     # session handle -> {"cache": {}, "graphs": set()}
        self._steps: dict[int, WorkerRendezvous] = self._table.steps
        self._handle_ids = itertools.count(1)
        self._local_cache: dict[str, bool] = {}        # the hot path's lookups, each bounded
        self._task_cache: dict[str, str] = {}
        self._receiver_cache: dict[str, object] = {}
        self._clients: dict[str, object] = {}
        self.transports = _transports.PeerTransports()   # how pulls reach each other task
        # Values pushed here (GetStatus reports them): bytes and tensors; updated under `_lock`.
        self.pushed_bytes_received = 0
        self.pushed_tensors_received = 0
        self._closed = False

    def __repr__(self):
        return f"<Worker {self.task_name}>"

    # ------------------------------------------------------------------ helpers for the rendezvous
    def is_local_device(self, device_name: str) -> bool:
        """True if `device_name` (a full name) belongs to this task."""
        r = self._local_cache.get(device_name)
        if r is None:
            try:
                s = device_spec.DeviceSpec.from_string(device_name)
                r = s.job == self.job and (s.replica or 0) == 0 and s.task == self.task
            except ValueError:
                r = False
            if len(self._local_cache) < _LOCAL_CACHE_SIZE:
                self._local_cache[device_name] = r
        return r

    def task_of(self, device_name: str) -> str:
        """Returns the task name ("/job:x/replica:0/task:i") of a full device name."""
        task = self._task_cache.get(device_name)
        if task is not None:
            return task
        try:
            s = device_spec.DeviceSpec.from_string(device_name)
        except ValueError as e:
            raise errors.InvalidArgumentError(None, None, f"bad device name {device_name!r}: {e}") from None
        if s.job is None or s.task is None:
            raise errors.InvalidArgumentError(None, None, f"device {device_name!r} names no job and task")
        task = f"/job:{s.job}/replica:{s.replica or 0}/task:{s.task}"
        if len(self._task_cache) < _LOCAL_CACHE_SIZE:
            self._task_cache[device_name] = task
        return task

    def receiver_of(self, key: str):
        """The device of this task that receives rendezvous `key` when its sender's device is of
        the same type (a pulled value goes into its memory), else None."""
        hit = self._receiver_cache.get(key, _MISSING)
        if hit is not _MISSING:
            return hit
        fields = key.split(";")
        dev = self.device_by_name(fields[2]) if device_type_of(fields[0]) == device_type_of(fields[2]) else None
        if len(self._receiver_cache) < _LOCAL_CACHE_SIZE:
            self._receiver_cache[key] = dev
        return dev

    def device_by_name(self, name: str):
        """Returns this task's device called `name` (any spelling of the full name).

        Raises:
            InvalidArgumentError: if it is not a device of this task.
        """
        d = self._by_name.get(name)
        if d is None:
            try:
                d = self._by_name.get(device_spec.canonical_name(name))
            except ValueError:
                d = None
        if d is None:
            raise errors.InvalidArgumentError(
                None, None, f"{name!r} is not a device of {self.task_name} (its devices: "
                f"{', '.join(sorted(self._by_name))})")
        return d

    def pull_client(self, task_name: str):
        """Returns the client of another task (through the resolver)."""
        if self.resolver is None:
            raise errors.UnavailableError(None, None, f"{self.task_name} cannot reach {task_name}: "
                                          f"the worker was started without a resolver")
        client = self.resolver(task_name)
        if client is None:
            raise errors.UnavailableError(None, None, f"{self.task_name} cannot resolve {task_name}")
        return client

    # ------------------------------------------------------------------ status
    def get_status(self, req=None, timeout=None) -> worker_pb2.GetStatusResponse:
        """Returns the task's devices, job, task index, protocol version, host id and transports
        (each with its answer to the caller's probe in `req`); with `req.list_kernels`, the digest
        of its kernels and, unless the caller holds that digest, the kernels themselves."""
        resp = worker_pb2.GetStatusResponse(job=self.job, task=self.task, protocol_version=PROTOCOL_VERSION,
                                            pushed_bytes_received=self.pushed_bytes_received,
                                            pushed_tensors_received=self.pushed_tensors_received)
        for d in self.devices:
            resp.device_attributes.add(name=d.name, device_type=d.device_type,
                                       memory_limit=int(d.memory_limit_bytes or 0),
                                       incarnation=int(d.incarnation))
        _transports.fill_status(resp, req)
        if req is not None and req.list_kernels:
            if self._advertised is None:
                self._advertised = advertised_kernels(self._kernels, [d.device_type for d in self.devices])
            lists, resp.kernels_digest = self._advertised
            if req.kernels_digest != resp.kernels_digest:
                resp.kernels.extend(lists)
        return resp

    # ------------------------------------------------------------------ graphs
    def register_graph(self, req, timeout=None) -> worker_pb2.RegisterGraphResponse:
        """Compiles a partition (one plan per device it uses) and returns its graph handle.

        Every node must name one of this task's devices (an empty device means the task's first
        CPU); inputs must come from nodes on the same device (the master's partitioning joins
        devices with _Send/_Recv). See the module docstring for how `_Arg`/`_Retval` are ordered.

        Raises:
            InvalidArgumentError: for an unknown op, a node on a device of another task, an input
                crossing devices, duplicate `_Arg`/`_Retval` indices, or a malformed graph.
            NotFoundError: when a device has no kernel for a node.
        """
        self._check_open()
        by_dev: dict[str, graph_pb2.GraphDef] = {}
        dev_of: dict[str, str] = {}
        gd = req.graph_def
        for nd in gd.node:
            try:
                op_def_registry.get(nd.op)
            except errors.NotFoundError as e:
                raise errors.InvalidArgumentError(None, None, f"node {nd.name!r}: {e.message}") from None
            dev = self.device_by_name(nd.device) if nd.device else self.default_device
            if nd.name in dev_of:
                raise errors.InvalidArgumentError(None, None, f"duplicate node name {nd.name!r}")
            dev_of[nd.name] = dev.name
        args, rets = [], []
        for nd in gd.node:
            for inp in nd.input:
                try:
                    name, _, _ = parse_input(inp)
                except Exception as e:  # noqa: BLE001 - malformed input strings
                    raise errors.InvalidArgumentError(None, None, f"node {nd.name!r}: bad input {inp!r}: {e}") from None
                src = dev_of.get(name)
                if src is None:
                    raise errors.InvalidArgumentError(None, None, f"node {nd.name!r}: unknown input node {inp!r}")
                if src != dev_of[nd.name]:
                    raise errors.InvalidArgumentError(
                        None, None, f"node {nd.name!r} on {dev_of[nd.name]} has input {inp!r} on {src}; "
                        f"devices must be joined by _Send/_Recv")
            part = by_dev.get(dev_of[nd.name])
            if part is None:
                part = by_dev[dev_of[nd.name]] = graph_pb2.GraphDef()
                part.versions.CopyFrom(gd.versions)
            new = part.node.add()
            new.CopyFrom(nd)
            new.device = dev_of[nd.name]
            if nd.op in ("_Arg", "_Retval"):
                if "index" not in nd.attr:
                    raise errors.InvalidArgumentError(None, None, f"{nd.op} {nd.name!r} has no index attr")
                (args if nd.op == "_Arg" else rets).append((nd.attr["index"].i, nd))
        idx = [i for i, _ in rets]
        if len(set(idx)) != len(idx):
            raise errors.InvalidArgumentError(None, None, f"duplicate _Retval indices {sorted(idx)}")
        # One feed may enter several devices here (an `_Arg` of one index on each device that
        # reads it): it is sent once, and every `_Arg` of its index takes that value.
        arg_type: dict[int, int] = {}
        for i, nd in args:
            t = nd.attr["T"].type
            if arg_type.setdefault(i, t) != t:
                raise errors.InvalidArgumentError(None, None, f"_Arg nodes of index {i} disagree on "
                                                  f"their dtype ({arg_type[i]} and {t})")
        distinct = sorted(arg_type)
        rets.sort(key=lambda t: t[0])
        position = {i: k for k, i in enumerate(distinct)}
        arg_pos = {nd.name: position[i] for i, nd in args}
        ret_pos = {nd.name: i for i, (_, nd) in enumerate(rets)}
        session = req.session_handle
        with self._register_lock:
            sess = self._sessions.get(session) or {"cache": {}, "graphs": set()}
            plans = []
            for dev_name in sorted(by_dev):
                part = by_dev[dev_name]
                dev = self._by_name[dev_name]
                try:
                    plan = _executor.compile_partition(part, dev, self._kernels, self._pool,
                                                       sess["cache"], session_handle=session or None)
                except errors.OpError:
                    raise
                except (ValueError, TypeError, KeyError) as e:
                    raise errors.InvalidArgumentError(None, None, f"cannot compile the partition on "
                                                      f"{dev_name}: {type(e).__name__}: {e}") from e
                a = sorted((nd.attr["index"].i, nd.name) for nd in part.node if nd.op == "_Arg")
                r = sorted((nd.attr["index"].i, nd.name) for nd in part.node if nd.op == "_Retval")
                plans.append(_DevicePlan(dev, plan, [arg_pos[n] for _, n in a], [ret_pos[n] for _, n in r],
                                         part))
            handle = f"{self.job}-{self.task}-g{next(self._handle_ids)}-{secrets.token_hex(4)}"
            g = _Graph(handle, session, plans, [arg_type[i] for i in distinct],
                       [nd.name for _, nd in rets],
                       not any(nd.op in ("_Send", "_Recv") for nd in gd.node),
                       sorted({self.task_of(nd.attr["recv_device"].s.decode()) for nd in gd.node
                               if nd.op == "_Send"
                               and not self.is_local_device(nd.attr["recv_device"].s.decode())}))
            with self._lock:
                self._graphs[handle] = g
                sess["graphs"].add(handle)
                self._sessions[session] = sess
        return worker_pb2.RegisterGraphResponse(graph_handle=handle)

    def deregister_graph(self, req, timeout=None) -> worker_pb2.DeregisterGraphResponse:
        """Forgets a registered graph (and the session's cached kernels with its last graph).

        Raises:
            NotFoundError: for an unknown graph handle.
        """
        with self._lock:
            g = self._graphs.get(req.graph_handle)
            if g is None or (req.session_handle and req.session_handle != g.session_handle):
                raise _unknown_graph(req.graph_handle, self.task_name, None)
            del self._graphs[req.graph_handle]
            sess = self._sessions.get(g.session_handle)
            if sess is not None:
                sess["graphs"].discard(g.handle)
                if not sess["graphs"]:
                    del self._sessions[g.session_handle]
        return worker_pb2.DeregisterGraphResponse()

    def _graph(self, session_handle: str, handle: str) -> _Graph:
        g = self._graphs.get(handle)
        if g is None or (session_handle and session_handle != g.session_handle):
            raise _unknown_graph(handle, self.task_name, session_handle)
        return g

    # ------------------------------------------------------------------ steps
    def _step(self, step_id: int, for_recv: bool = False) -> WorkerRendezvous:
        """Returns the step's rendezvous, creating it if needed (`StepTable.get`); a RecvTensor
        (`for_recv`) hands it back with `_recv_left`."""
        return self._table.get(step_id, for_recv)

    def _recv_left(self, step_id: int, rdv: WorkerRendezvous) -> None:
        self._table.recv_left(step_id, rdv)

    def run_graph(self, req, timeout=None, on_cancel=None) -> worker_pb2.RunGraphResponse:
        """Runs every device plan of a registered graph for step `req.step_id`.

        Args:
            req: a `RunGraphRequest` (see the module docstring for `send` and `recv_key`).
            timeout: an extra bound in seconds (the servicer passes the RPC's remaining time); the
                step's time limit is the smallest of it, `req.timeout_in_ms` and the config's
                `operation_timeout_in_ms` (0 means none).
            on_cancel: ``on_cancel(fn)`` registers `fn` to run when the caller's RPC ends (the
                servicer passes ``context.add_callback``); if it ends while the step still runs
                here, the step is aborted (CancelledError).

        Raises:
            NotFoundError: unknown graph handle. InvalidArgumentError: wrong number or dtype of
            feeds. DeadlineExceededError: the step ran out of time (it is aborted on this worker).
            Any error a kernel raised, or the error the step was aborted with.
        """
        if not _tracing():
            return self._run_graph(req, timeout, None, on_cancel)
        with _tracer.start_as_current_span("Worker.RunGraph", kind=_otel.SpanKind.SERVER,
                                           record_exception=True) as span:
            span.set_attribute("kernflow.task", self.task_name)
            span.set_attribute("kernflow.step_id", req.step_id)
            span.set_attribute("kernflow.graph_handle", req.graph_handle)
            return self._run_graph(req, timeout, _otel_context.get_current(), on_cancel)

    def run_graph_inline(self, req) -> worker_pb2.RunGraphResponse:
        """`run_graph` of a graph this worker runs inline (RunGraphStream's requests).

        Returns:
            The step's response; or, without running anything, one with only `not_inline` set when
            the graph is not inline (it may block or use other tasks) or the request collects
            stats: the caller uses RunGraph instead.

        Raises:
            As `run_graph`.
        """
        self._check_open()
        g = self._graph(req.session_handle, req.graph_handle)
        if g.inline is None or req.collect_stats:
            return worker_pb2.RunGraphResponse(not_inline=True)
        if _tracing():
            return self.run_graph(req)
        return self._run_graph(req, None, None, None, g)

    def _run_graph(self, req, timeout, trace_context, on_cancel, g=None) -> worker_pb2.RunGraphResponse:
        if g is None:   # (run_graph_inline looked it up already)
            self._check_open()
            g = self._graph(req.session_handle, req.graph_handle)
        send, recv_key = req.send, req.recv_key
        if len(send) != len(g.arg_dtypes):
            raise errors.InvalidArgumentError(None, None, f"graph {g.handle} takes {len(g.arg_dtypes)} "
                                              f"feeds, got {len(send)}")
        if recv_key and len(recv_key) != len(g.retval_names):
            raise errors.InvalidArgumentError(None, None, f"graph {g.handle} returns {len(g.retval_names)} "
                                              f"values, but {len(recv_key)} recv keys were given")
        feeds = []
        contents = split_contents(req)   # (a request parsed by `split`: payloads left in its bytes)
        for i, nt in enumerate(send):
            t = nt.tensor
            if t.dtype != g.arg_dtypes[i]:
                raise errors.InvalidArgumentError(
                    None, None, f"feed {i} ({nt.name or '?'}) has dtype enum {t.dtype}, the "
                    f"graph expects {g.arg_dtypes[i]}")
            feeds.append(codec.proto_to_tensor(t, contents[i]))
        if isinstance(req, SplitMessage):
            req.release()   # (the received bytes are freed now, not when the response is sent)
        if g.inline is not None and not req.collect_stats and req.step_id not in self._steps \
                and req.step_id not in self._table.aborted:
            # A cached small step (no step of this id was aborted here before it arrived).
            results = g.runner.inline(feeds, _executor.StepContext(req.step_id, None, g.inline.device))
            return self._response(g, recv_key, results, None)
        limits = [t for t in (req.timeout_in_ms / 1000.0 if req.timeout_in_ms > 0 else None,
                              self._timeout_ms / 1000.0 if self._timeout_ms > 0 else None,
                              timeout if timeout is not None and timeout > 0 else None) if t is not None]
        limit_s = min(limits) if limits else None
        rdv = self._step(req.step_id)
        if trace_context is not None and rdv.trace_context is None:
            rdv.trace_context = trace_context   # the parent of this step's pulls ("RecvTensor")
        with self._lock:
            rdv.active_runs += 1
            if limit_s is not None:
                d = time.monotonic() + limit_s
                rdv.deadline = d if rdv.deadline is None else max(rdv.deadline, d)
        collector = StepStatsCollector(self.cost_model, {dp.device.name: dp.graph_def for dp in g.plans}) \
            if req.collect_stats else None
        finished = []
        if on_cancel is not None:
            def caller_gone():
                if not finished:   # the caller left while the step was running: stop it here
                    rdv.abort(errors.CancelledError(None, None, f"step {req.step_id} on "
                                                    f"{self.task_name}: RunGraph caller went away"))
            on_cancel(caller_gone)
        try:
            results = self._execute(g, feeds, rdv, collector, limit_s)
            if g.receivers:
                rdv.wait_pushes(max(0.001, rdv.deadline - time.monotonic()) if rdv.deadline is not None else None)
        except errors.OpError as e:
            if g.receivers:
                self._tell_receivers(g.receivers, req.step_id, e)
            raise
        finally:
            finished.append(True)
            with self._lock:
                rdv.active_runs -= 1
                rdv.runs_done += 1
                rdv.last_used = time.monotonic()
                if g.self_contained and rdv.active_runs == 0 and self._steps.get(req.step_id) is rdv:
                    # No other task can pull from or push to this step here: its state ends with
                    # this call, and the master sends no CleanupGraph for it.
                    del self._steps[req.step_id]
        self._retire_if_done(req.step_id, rdv)
        return self._response(g, recv_key, results, collector)

    def _tell_receivers(self, tasks, step_id: int, err: errors.OpError) -> None:
        """The step failed here: the tasks waiting for values this graph would have pushed abort
        it with the same error now (one-way; as a pull of an aborted step's value failed at once
        before pushes), not only when the master's abort reaches them."""
        request = worker_pb2.PushTensorsRequest(step_id=step_id, abort_code=err.error_code,
                                                abort_message=err.message[:4000])
        for task in tasks:
            try:
                self.pull_client(task).push_tensors(request, on_error=_ignore)
            except Exception as e:  # noqa: BLE001 - best effort: the master aborts the step too
                _log.debug("could not tell %s that step %d failed: %s", task, step_id, e)

    def _retire_if_done(self, step_id: int, rdv: WorkerRendezvous) -> None:
        """Drops a step's state once its RunGraph calls here have finished and every value they sent
        was received (the end of a successful step), so the master sends no CleanupGraph after a
        successful RunStep. A RecvTensor of the step arriving later fails at once (AbortedError):
        everything this task sent for the step was already taken."""
        if rdv.active_runs or not rdv.runs_done:
            return
        self._table.retire(step_id, rdv)

    @staticmethod
    def _response(g: _Graph, recv_key, results, collector) -> worker_pb2.RunGraphResponse:
        """The RunGraphResponse of `results`; a `SplitMessage` of it when a value is large (its
        payload stays in the array until the response is serialized, a variable's live buffer
        being copied now: `tensor_requests.with_tensors`). Read its values with
        `tensor_requests.decode(resp, "recv")`."""
        resp = worker_pb2.RunGraphResponse()
        if collector is not None:
            collector.finalize(resp.step_stats, resp.cost_graph)
        return with_tensors(resp, "recv", recv_key or g.retval_names, results, is_state_buffer)

    def _execute(self, g: _Graph, feeds, rdv: WorkerRendezvous, collector, limit_s):
        """Runs the graph's plans for the step of `rdv` (`PartitionRunner.run`): aborted when the
        step is (AbortStep, CleanupGraph, a failure here or the caller leaving), and at the step's
        deadline when it has a time limit."""
        if limit_s is None:
            return g.runner.run(feeds, rdv, rdv.step_id, collector)
        deadline = rdv.deadline if rdv.deadline is not None else time.monotonic() + limit_s
        return g.runner.run(feeds, rdv, rdv.step_id, collector, deadline, f"step {rdv.step_id} on "
                            f"{self.task_name} timed out after {limit_s * 1000:.0f} ms")

    def push_tensors(self, req, timeout=None, on_error=None) -> worker_pb2.PushTensorsResponse:
        """Takes the values another task's _Sends pushed (or announced) for _Recvs of step
        `req.step_id` here (see `kernflow.worker.rendezvous`). Values for a step that already ended
        here are dropped. (`on_error` is the remote clients' fire-and-forget form; in process the
        call is synchronous and raises.)

        Raises:
            InvalidArgumentError: a malformed key or value, or a key whose receiver is not on this
            task (before anything is delivered). InternalError: a key delivered twice.
            UnavailableError: the worker is shut down.
        """
        self._check_open()
        if _tracing():
            with _tracer.start_as_current_span("Worker.PushTensors", kind=_otel.SpanKind.SERVER,
                                               record_exception=True) as span:
                span.set_attribute("kernflow.task", self.task_name)
                span.set_attribute("kernflow.step_id", req.step_id)
                span.set_attribute("kernflow.rendezvous_key", ",".join(t.rendezvous_key for t in req.tensors))
                return self._push_tensors(req)
        return self._push_tensors(req)

    def _push_tensors(self, req) -> worker_pb2.PushTensorsResponse:
        if req.abort_code:   # (a copy of another task's error: marked derived, TF's way)
            message = req.abort_message
            self._table.abort(req.step_id, req.abort_code,
                              message if message.startswith(DERIVED) else DERIVED + message)
            return worker_pb2.PushTensorsResponse()
        items, nbytes = [], 0
        for t in req.tensors:
            fields = parse_key(t.rendezvous_key)
            if not self.is_local_device(fields[2]) or self.is_local_device(fields[0]):
                raise errors.InvalidArgumentError(
                    None, None, f"PushTensors on {self.task_name} for {t.rendezvous_key!r}: its receiver "
                    f"is not on this task, or its sender is")
            if t.pull:
                items.append((t.rendezvous_key, fields[0], None, None))
                continue
            try:
                value, is_dead = codec.assemble_recv_chunks([codec.split_content(t.value, _RECV_RESPONSE)])
            except errors.OpError as e:
                raise errors.InvalidArgumentError(None, None, f"PushTensors on {self.task_name}: bad "
                                                  f"value for {t.rendezvous_key!r}: {e.message}") from None
            items.append((t.rendezvous_key, None, value, is_dead))
            nbytes += len(t.value)
        if nbytes:
            self._count_pushed(nbytes, sum(1 for _, send_device, _, _ in items if send_device is None))
        rdv = self._table.get(req.step_id, for_push=True)
        if rdv is not None:
            announced = [(key, send_device) for key, send_device, _, _ in items if send_device is not None]
            if announced:
                rdv.pull_announced(announced)
            for key, send_device, value, is_dead in items:
                if send_device is None:
                    self._deliver(rdv, key, value, is_dead)
        return worker_pb2.PushTensorsResponse()

    def deliver_pushed(self, step_id: int, key: str, value, is_dead: bool) -> None:
        """`push_tensors` of one value from a worker of this process (no encoding)."""
        self._check_open()
        self._count_pushed(0 if is_dead else int(getattr(value, "nbytes", 0)), 1)
        rdv = self._table.get(step_id, for_push=True)
        if rdv is not None:
            self._deliver(rdv, key, value, is_dead)

    def _count_pushed(self, nbytes: int, n: int) -> None:
        with self._lock:
            self.pushed_bytes_received += nbytes
            self.pushed_tensors_received += n

    @staticmethod
    def _deliver(rdv: WorkerRendezvous, key: str, value, is_dead: bool) -> None:
        try:
            rdv.deliver_pushed(key, value, is_dead)
        except errors.OpError as e:
            if rdv.error is None:   # (an aborted step's receivers already woke with its error)
                raise e

    def cleanup_graph(self, req, timeout=None) -> worker_pb2.CleanupGraphResponse:
        """Drops step `req.step_id`'s rendezvous (waking anything still waiting on it)."""
        rdv = self._table.cleanup(req.step_id)
        if rdv is not None:
            rdv.abort(errors.AbortedError(None, None, f"step {req.step_id} was cleaned up on {self.task_name}"))
        return worker_pb2.CleanupGraphResponse()

    def abort_step(self, req, timeout=None) -> worker_pb2.AbortStepResponse:
        """Aborts step `req.step_id` here with the error of `req.code` (AbortedError if 0).

        Waiting Recvs and RecvTensor calls wake with the error, running partitions stop being
        scheduled, and later RunGraph/RecvTensor calls of the step fail at once. A step with no
        state here yet leaves only a tombstone (`StepTable.abort`).
        """
        self._check_open()
        code = errors.exception_type_from_error_code(req.code).error_code if req.code else errors.ABORTED
        self._table.abort(req.step_id, code, req.message)
        return worker_pb2.AbortStepResponse()

    def cleanup_all(self, req=None, timeout=None) -> worker_pb2.CleanupAllResponse:
        """Clears the named resource containers (all when none are named) on every device."""
        names = list(req.container) if req is not None else []
        for d in self.devices:
            if names:
                for c in names:
                    d.resource_mgr.cleanup(c)
            else:
                d.resource_mgr.cleanup()
        return worker_pb2.CleanupAllResponse()

    # ------------------------------------------------------------------ lifecycle
    def _check_open(self) -> None:
        if self._closed:
            raise errors.UnavailableError(None, None, f"worker {self.task_name} is shut down")

    def close(self) -> None:
        """Aborts every step and stops the worker's threads (resources are kept for a new worker)."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
        steps = self._table.close()
        err = errors.UnavailableError(None, None, f"worker {self.task_name} is shutting down")
        for r in steps:
            r.abort(err)
        self.pull_pool.shutdown(wait=False, cancel_futures=True)
        self._pool.shutdown()


def advertised_kernels(kernels, device_types) -> tuple[list, str]:
    """The kernels of `device_types` in `kernels` as GetStatus lists them, and their digest.

    Per device type (sorted) one `KernelList`: the op types with an unconstrained kernel, then each
    dtype-constrained kernel of the other op types (an unconstrained kernel already covers every
    node of its op). Everything is sorted, so equal registries give equal lists and digests.

    Args:
        kernels: a `KernelRegistry`.
        device_types: the task's device types (repeats allowed).

    Returns:
        ([KernelList], hex digest of their serialized form).
    """
    lists = []
    for device_type in sorted(set(device_types)):
        defs = kernels.kernel_defs(device_type)
        free = sorted({kd.op_type for kd in defs if not kd.constraints})
        kl = worker_pb2.KernelList(device_type=device_type, op_types=free)
        constrained = []
        for kd in defs:
            if kd.constraints and kd.op_type not in free:
                constrained.append(worker_pb2.ConstrainedKernel(op_type=kd.op_type, constraints=[
                    worker_pb2.KernelConstraint(attr=attr, allowed=sorted({d.as_datatype_enum for d in allowed}))
                    for attr, allowed in sorted(kd.constraints.items())]))
        constrained.sort(key=lambda ck: (ck.op_type, ck.SerializeToString(deterministic=True)))
        kl.constrained.extend(constrained)
        lists.append(kl)
    body = worker_pb2.GetStatusResponse(kernels=lists).SerializeToString(deterministic=True)
    return lists, hashlib.sha256(body).hexdigest()[:32]
