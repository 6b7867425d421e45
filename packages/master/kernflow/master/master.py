"""The master: turns a client's steps into partitions run by the workers of a cluster.

The whitepaper's master, as a plain class speaking `master_pb2` messages (the gRPC servicer is a
thin adapter, so tests run it in process against in-process workers). Per session it keeps the
graph (grown by ExtendSession), the whole graph placed once per graph version over every task's
devices (stateful nodes keep their device), and per step signature (feeds, fetches, targets) the
pruned graph split into one GraphDef per task, registered once with each task's worker.

A step runs every participating task's partition concurrently under a fresh random step id. The
first failure aborts the step on every other task; the error names the failed task. Every worker
call has a deadline, and tasks that stay silent are health-checked, so a dead worker fails the
step instead of hanging it. The master decodes no tensors: feeds and fetches pass through as the
client's `TensorProto`s.

Caches are bounded: a session keeps at most `plan_cache_size` step plans (least recently used
evicted, its graphs deregistered once no step uses them: `PlanCache`), and a session with no call
and no running step for `session_gc_seconds` is closed (`session_gc`).
"""

from __future__ import annotations

import dataclasses
import logging
import random
import threading
import time
import uuid

from opentelemetry import trace as _otel

from kernflow.core.framework import device_spec
from kernflow.core.framework import errors
from kernflow.core.plugins import manager
from kernflow.core.runtime import fusion
from kernflow.core.runtime.cost_graph import merge_cost_graph
from kernflow.core.runtime.graph_execution_state import FeedCheck, GraphExecutionState
from kernflow.core.runtime.placer import PlacementOptions
from kernflow.core.runtime.plan_cache import PlanCache
from kernflow.core.runtime.plan_cache import plan_cache_size as plan_cache_size_of

from kernflow.client import channels
from kernflow.client.graph_stream import NotInline
from kernflow.client.protocol import PROTOCOL_VERSION, check_peer
from kernflow.client.protobuf import master_pb2, worker_pb2
from kernflow.client.tensor_requests import forward_tensors
from kernflow.master.fetch_responses import run_step_response
from kernflow.master.devices import (RemoteDevice, TaskCostModel, canonical_task,
                                     device_sort_key, task_of, task_sort_key)
from kernflow.master.graph_util import apply_default_task, check_graph, group_by_task
from kernflow.master.kernel_support import ClusterKernels, SessionKernels
from kernflow.master.session_gc import SessionGC
from kernflow.master.step_errors import REFRESH_ERRORS, as_op_error, blame_unreachable, name_task
from kernflow.master.task_health import TaskHealth
from kernflow.master.task_routes import CLIENT_DEVICE, Routes, read_routes
from kernflow.master.task_step import TaskStep, deadline_error
from kernflow.master.threads import ElasticPool, call_all

__all__ = ["Master"]

_log = logging.getLogger(__name__)
# How often CreateSession logs the tasks it still waits for (TF: every 10 s).
WAIT_LOG_S = 10.0
_tracer = _otel.get_tracer("kernflow.master")
_tracing = channels.tracing_active   # True once an application installed an OpenTelemetry SDK


@dataclasses.dataclass
class _StepPlan:
    """One step signature, split per task and registered with the workers."""
    tasks: list                 # participating tasks, sorted
    graphs: dict                # task -> GraphDef
    handles: dict               # task -> graph handle
    routes: Routes              # which task gets which feeds, returns or sends which fetches
    incarnations: dict          # device name -> incarnation, as registered
    rendezvous_tasks: set       # tasks whose graphs use _Send/_Recv (their step state needs CleanupGraph)
    # Tasks whose worker refused to run this plan's graph over RunGraphStream (unary from then on).
    not_inline: set = dataclasses.field(default_factory=set)
    users: int = 0              # steps using it now (`PlanCache`)
    evicted: bool = False       # out of the session's cache; deregistered after its last use
    feed_check: FeedCheck | None = None   # the feeds' dtypes and placeholder shapes, checked per step


class _Session:
    def __init__(self, handle: str, config, graph_def, kernels, plan_cache_size: int):
        from kernflow.core.protobuf import graph_pb2
        self.handle = handle
        self.config = config
        self.graph_def = graph_pb2.GraphDef()
        self.graph_def.CopyFrom(graph_def)
        self.version = 0
        self.lock = threading.RLock()
        self.devices: list[RemoteDevice] | None = None
        self.by_name: dict[str, RemoteDevice] = {}
        self.incarnations: dict[str, int] = {}
        self.client_device = ""
        self.unreachable: dict[str, errors.OpError] = {}
        # Placement (by the kernels the tasks advertise), pruning, rewrites and partitioning.
        self.state = GraphExecutionState(SessionKernels(kernels, self), fusion.jit_level(config))
        self.plans = PlanCache(plan_cache_size)   # (signature, pull) -> _StepPlan
        self.cost_model = TaskCostModel()
        self.refresh = True
        self.closed = False
        self.running: dict[int, list] = {}   # step id -> tasks, while the step runs
        self.last_used = time.monotonic()    # of the last call naming the session, or step's end

    @property
    def filters(self):
        return list(self.config.device_filters) if self.config is not None else []

    def timeout_ms(self, options) -> int:
        t = options.timeout_in_ms if options is not None else 0
        if t <= 0 and self.config is not None:
            t = self.config.operation_timeout_in_ms
        return t if t > 0 else 0


class Master:
    """The master service, in process.

    Args:
        workers: ``{task name: worker client}`` (task names like "/job:worker/task:1"; clients are
            in-process `Worker`s or `GrpcWorkerClient`s), or a callable ``resolver(task_name)`` that
            returns the client for a task on every use (then `tasks` lists the task names).
        config: a `ConfigProto` used by sessions created without one.
        tasks: the cluster's task names when `workers` is a resolver.
        local_task: the task this master serves with (a `Server`'s own task): sessions whose
            device filters admit it use its CPU:0 as the client device, where feeds enter, fetches
            leave and ops that name no job or task run. Without one (a standalone master): the
            `default_task`, else TF1's convention among the tasks the session's device filters
            admit: the chief, else the worker job's first task, else the first task (sorted).
        default_task: the client task of a master that serves from no task of its own (`kernflow
            master --default-task`); used when the session's filters admit it.
        rpc_timeout_s: deadline of the short worker calls (GetStatus, RegisterGraph, ...).
        run_graph_timeout_s: deadline of a RunGraph call when the step itself has no timeout.
        health_check_interval_s: while a step runs, tasks that have not answered are probed with
            GetStatus this often; a task that does not answer (or restarted) fails the step.
        abort_grace_s: how long a failed step waits for the other tasks to stop after AbortStep.
        session_gc_seconds: a session with no call and no running step for this long is closed
            (`session_gc`); 0 never closes one. Default: ``$KERNFLOW_SESSION_GC_SECONDS``, else 24 h.
        plan_cache_size: the most step plans (signatures) a session keeps registered (`PlanCache`).
            Default: ``$KERNFLOW_PLAN_CACHE_SIZE``, else 1024.
    """

    def __init__(self, workers, config=None, *, tasks=None, local_task: str | None = None,
                 default_task: str | None = None, rpc_timeout_s: float = 10.0,
                 run_graph_timeout_s: float = 24 * 3600.0, health_check_interval_s: float = 2.0,
                 abort_grace_s: float = 2.0, session_gc_seconds: float | None = None,
                 plan_cache_size: int | None = None):
        if callable(workers) and not isinstance(workers, dict):
            if not tasks:
                raise ValueError("Master(resolver) needs the list of task names (tasks=...)")
            self._resolve = workers
            names = [canonical_task(t) for t in tasks]
        else:
            mapping = {canonical_task(k): v for k, v in dict(workers).items()}
            self._resolve = mapping.__getitem__
            names = list(mapping)
        if not names:
            raise ValueError("a Master needs at least one worker task")
        self.tasks = sorted(set(names), key=task_sort_key)
        self.local_task = canonical_task(local_task) if local_task else None
        if self.local_task is not None and self.local_task not in self.tasks:
            raise ValueError(f"local_task {local_task} is not a task of the cluster ({self.tasks})")
        self.default_task = canonical_task(default_task) if default_task else None
        self.config = config
        self.rpc_timeout_s = rpc_timeout_s
        self.run_graph_timeout_s = run_graph_timeout_s
        self.health_check_interval_s = health_check_interval_s
        self.abort_grace_s = abort_grace_s
        self._gc = SessionGC(self.collect_idle_sessions, session_gc_seconds)
        self.session_gc_seconds = self._gc.timeout_s
        self.plan_cache_size = plan_cache_size_of(plan_cache_size)
        regs = manager.registries()
        self._kernels = ClusterKernels()   # what each task advertises; the placer asks it, not regs
        self._type_priority = {t: regs.devices.priority(t) for t in regs.devices.device_types()}
        self._sessions: dict[str, _Session] = {}
        self._lock = threading.Lock()
        self._pool = ElasticPool()
        self.task_health = TaskHealth()   # logs a task going unreachable / coming back, once each

    # ------------------------------------------------------------------ plumbing
    def _worker(self, task: str):
        """Resolves a task to its worker client (on every use: addresses may change)."""
        try:
            return self._resolve(task)
        except KeyError:
            raise errors.UnavailableError(None, None, f"No worker is known for task {task}") from None

    def _call_tasks(self, tasks, method: str, make_req, timeout_s: float) -> dict:
        """Calls `method` on every task concurrently; returns ``{task: (response, OpError|None)}``."""
        def caller(task):
            return lambda: getattr(self._worker(task), method)(make_req(task), timeout=timeout_s)
        raw = call_all(self._pool, {t: caller(t) for t in tasks}, timeout_s + 1.0)
        out = {t: (res, None if err is None else as_op_error(err, f"{method} on task {t}"))
               for t, (res, err) in raw.items()}
        if method == "get_status":   # every health check and device refresh goes through here
            for t, (_, err) in out.items():
                self.task_health.observe(t, err)
        return out

    def _session(self, handle: str) -> _Session:
        s = self._sessions.get(handle)
        if s is None or s.closed:
            raise self._gc.not_found(handle)
        s.last_used = time.monotonic()
        return s

    def _tasks_for(self, filters) -> list[str]:
        if not filters:
            return list(self.tasks)
        out = []
        for t in self.tasks:
            for f in filters:
                spec = device_spec.DeviceSpec.from_string(f).replace(device_type=None, device_index=None)
                if device_spec.is_compatible(spec, t):
                    out.append(t)
                    break
        if not out:
            raise errors.InvalidArgumentError(None, None, f"No task of the cluster matches the device "
                                              f"filters {list(filters)}; tasks: {', '.join(self.tasks)}")
        return out

    def _client_task(self, filters) -> str:
        tasks = self._tasks_for(filters)
        for t in (self.local_task, self.default_task):
            if t is not None and t in tasks:
                return t
        for job in ("chief", "worker"):   # TF1's convention (tasks are sorted: task 0 first)
            for t in tasks:
                if t.startswith(f"/job:{job}/"):
                    return t
        return tasks[0]

    def _gather(self, filters, kernels: bool = False) -> tuple[list[RemoteDevice], dict]:
        """Asks every (filtered) task for its devices (and its kernels); returns (devices, {task: error})."""
        tasks = self._tasks_for(filters)
        got = self._call_tasks(tasks, "get_status", self._kernels.request if kernels else
                               lambda t: worker_pb2.GetStatusRequest(), self.rpc_timeout_s)
        devices, unreachable = [], {}
        for task in tasks:
            resp, err = got[task]
            if err is not None:
                unreachable[task] = name_task(err, task)
                continue
            check_peer(resp.protocol_version, f"Task {task}")
            if kernels:
                self._kernels.observe(task, resp)
            for attrs in resp.device_attributes:
                d = RemoteDevice(attrs)
                if d.task != task:
                    raise errors.InvalidArgumentError(
                        None, None, f"Task {task} reports device {d.name}, which belongs to another "
                        "task: check the cluster spec (each address must serve the task it names)")
                if filters and not any(device_spec.is_compatible(f, d.name) for f in filters):
                    continue
                devices.append(d)
        devices.sort(key=lambda d: device_sort_key(d.name))
        return devices, unreachable

    # ------------------------------------------------------------------ sessions
    def create_session(self, request, deadline_s: float | None = None,
                       cancelled=None) -> master_pb2.CreateSessionResponse:
        """Creates a session holding `request.graph_def`; its graph version starts at 0.

        As TF's CreateSession, it first waits until every task the session needs (all, or those
        its `device_filters` match) answers, logging "CreateSession still waiting for response from
        worker: ..." every `WAIT_LOG_S` seconds, so a chief started before its ps simply waits.

        Args:
            request: the CreateSessionRequest.
            deadline_s: the longest wait for the tasks (the caller's RPC deadline); the session
                config's `operation_timeout_in_ms`, when set, bounds it too.
            cancelled: fn() -> True when the caller went away (the wait stops).

        Raises:
            DeadlineExceededError: naming the tasks that did not answer in time.
            InvalidArgumentError: a malformed graph, or device filters matching no task.
            FailedPreconditionError: a task speaks another protocol version (`protocol.check_peer`).
        """
        config = request.config if request.HasField("config") else self.config
        check_graph(request.graph_def)
        handle = uuid.uuid4().hex
        s = _Session(handle, config, request.graph_def, self._kernels, self.plan_cache_size)
        tasks = self._tasks_for(s.filters)  # validates the filters now rather than at the first step
        limit = [t for t in (deadline_s, s.config.operation_timeout_in_ms / 1000.0 if s.config is not None
                             and s.config.operation_timeout_in_ms > 0 else None) if t is not None]
        self._wait_for_tasks(tasks, min(limit) if limit else None, cancelled)
        self._kernels.check_graph(request.graph_def.node, tasks)
        with self._lock:
            self._sessions[handle] = s
        self._gc.start()
        return master_pb2.CreateSessionResponse(session_handle=handle, graph_version=s.version,
                                                protocol_version=PROTOCOL_VERSION)

    def _wait_for_tasks(self, tasks, timeout_s: float | None, cancelled=None) -> None:
        """Returns once every task answers GetStatus; see `create_session`."""
        start = time.monotonic()
        next_log = start + WAIT_LOG_S
        pause = 0.1
        while True:
            got = self._call_tasks(tasks, "get_status", self._kernels.request,
                                   min(self.rpc_timeout_s, timeout_s or self.rpc_timeout_s))
            missing = [t for t in tasks if got[t][1] is not None]
            for t in tasks:
                if got[t][1] is None:   # a task that answers in another protocol fails at once
                    check_peer(got[t][0].protocol_version, f"Task {t}")
                    self._kernels.observe(t, got[t][0])
            if not missing:
                return
            now = time.monotonic()
            if timeout_s is not None and now - start + pause >= timeout_s:
                raise errors.DeadlineExceededError(
                    None, None, f"CreateSession timed out after {now - start:.1f} s waiting for "
                    f"response from worker(s): {', '.join(missing)} ({got[missing[0]][1].message})")
            if cancelled is not None and cancelled():
                raise errors.CancelledError(None, None, "CreateSession: the caller went away")
            if now >= next_log:
                for t in missing:
                    _log.info("CreateSession still waiting for response from worker: %s", t)
                next_log = now + WAIT_LOG_S
            time.sleep(pause)
            pause = min(pause * 2, 1.0)

    def extend_session(self, request) -> master_pb2.ExtendSessionResponse:
        """Adds nodes to a session's graph (the whitepaper's Extend).

        Raises:
            AbortedError: when `current_graph_version` is not the session's version (another
                client extended the session meanwhile).
            InvalidArgumentError: for a node whose name the graph already has.
        """
        s = self._session(request.session_handle)
        with s.lock:
            if request.current_graph_version != s.version:
                raise errors.AbortedError(
                    None, None, f"Current graph version {request.current_graph_version} does not match "
                    f"the session's graph version {s.version}: the session was extended by another "
                    "client; create a new session")
            check_graph(request.graph_def, s.graph_def)
            self._kernels.check_graph(request.graph_def.node, self._tasks_for(s.filters))
            s.graph_def.node.extend(request.graph_def.node)
            if request.graph_def.HasField("versions") and not s.graph_def.HasField("versions"):
                s.graph_def.versions.CopyFrom(request.graph_def.versions)
            s.version += 1
            return master_pb2.ExtendSessionResponse(new_graph_version=s.version)

    def close_session(self, request) -> master_pb2.CloseSessionResponse:
        """Closes a session and deregisters its graphs from the workers (best effort).

        Closing a session the master already closed for idleness succeeds.
        """
        with self._lock:
            s = self._sessions.pop(request.session_handle, None)
        if s is None:
            if self._gc.was_collected(request.session_handle):
                return master_pb2.CloseSessionResponse()
            raise errors.AbortedError(None, None, f"Session {request.session_handle} is not found.")
        with s.lock:
            s.closed = True
            running, s.running = dict(s.running), {}
        self._release_session(s, running)
        return master_pb2.CloseSessionResponse()

    def _release_session(self, s: _Session, running: dict) -> None:
        """Cancels a closed session's running steps (a dequeue blocked on a worker wakes up, as in
        TF) and deregisters its graphs."""
        for step_id, tasks in running.items():
            self._abort(tasks, step_id, errors.CANCELLED, "Session has been closed.")
        self._deregister(s.handle, s.plans.clear())

    def collect_idle_sessions(self, now: float | None = None) -> list[str]:
        """Closes every session with no call and no running step for `session_gc_seconds` (what
        the collecting thread runs), deregistering its graphs; returns their handles."""
        gone = []
        for s in [s for s in list(self._sessions.values()) if self._gc.is_idle(s, now)]:
            with s.lock:
                if s.closed or s.running or not self._gc.is_idle(s, now):
                    continue
                s.closed = True
            with self._lock:
                if self._sessions.get(s.handle) is s:
                    del self._sessions[s.handle]
            self._gc.collected(s.handle)
            self._release_session(s, {})
            gone.append(s.handle)
        return gone

    def _deregister(self, handle: str, steps) -> None:
        pairs = [(t, p.handles[t]) for p in steps for t in p.tasks if t in p.handles]
        if not pairs:
            return
        calls = {}
        for i, (task, gh) in enumerate(pairs):
            req = worker_pb2.DeregisterGraphRequest(session_handle=handle, graph_handle=gh)
            calls[i] = (lambda t=task, r=req: self._worker(t).deregister_graph(r, timeout=self.rpc_timeout_s))
        for i, (res, err) in call_all(self._pool, calls, self.rpc_timeout_s + 1.0).items():
            if err is not None:
                _log.info("DeregisterGraph on %s failed (ignored): %s", pairs[i][0], err)

    def list_devices(self, request) -> master_pb2.ListDevicesResponse:
        """Lists the devices of every reachable task (the session's filtered ones for a handle).

        The client task's devices are `local_device`, the others' `remote_device`.
        """
        filters = self._session(request.session_handle).filters if request.session_handle else []
        devices, unreachable = self._gather(filters)
        if not devices and unreachable:
            raise next(iter(unreachable.values()))
        local = self._client_task(filters)
        resp = master_pb2.ListDevicesResponse()
        for d in devices:
            (resp.local_device if d.task == local else resp.remote_device).add().CopyFrom(d.attrs)
        return resp

    def reset(self, request) -> master_pb2.ResetResponse:
        """Clears resource containers (all when none named) on every (filtered) task.

        Raises:
            The first task's error, naming it, after every task was tried.
        """
        tasks = self._tasks_for(list(request.device_filters))
        got = self._call_tasks(tasks, "cleanup_all",
                               lambda t: worker_pb2.CleanupAllRequest(container=request.container),
                               self.rpc_timeout_s)
        for task in tasks:
            if got[task][1] is not None:
                raise name_task(got[task][1], task)
        return master_pb2.ResetResponse()

    def close(self) -> None:
        """Closes every session (deregistering its graphs) and stops collecting idle ones."""
        self._gc.stop()
        for handle in list(self._sessions):
            try:
                self.close_session(master_pb2.CloseSessionRequest(session_handle=handle))
            except errors.OpError:
                pass

    # ------------------------------------------------------------------ building a step
    def _refresh_devices(self, s: _Session) -> None:
        """Re-gathers the devices; drops placements and registrations made for other incarnations."""
        devices, unreachable = self._gather(s.filters, kernels=True)
        if unreachable and s.devices:
            # Keep the last known devices of tasks that do not answer now: placements and cached
            # plans stay valid, and only the steps that need a dead task fail (naming it).
            seen = {d.name for d in devices}
            devices = devices + [d for d in s.devices if d.task in unreachable and d.name not in seen]
        if not devices:
            raise next(iter(unreachable.values()), None) or errors.NotFoundError(
                None, None, "No worker of the cluster reports any device")
        first_task = self._client_task(s.filters)
        if first_task in unreachable:
            raise unreachable[first_task]
        incarnations = {d.name: d.incarnation for d in devices}
        if incarnations != s.incarnations:
            stale = s.plans.clear()
            s.state.invalidate()
            if stale:
                self._pool.submit(lambda: self._deregister(s.handle, stale))
        s.devices, s.incarnations, s.unreachable = devices, incarnations, unreachable
        s.by_name = {d.name: d for d in devices}
        mine = [d for d in devices if d.task == first_task]
        cpus = [d for d in mine if d.device_type == "CPU"]
        s.client_device = (cpus or mine or devices)[0].name
        s.refresh = False

    def _placement_options(self, s: _Session) -> PlacementOptions:
        c = s.config
        return PlacementOptions(allow_soft_placement=bool(c is not None and c.allow_soft_placement),
                                log_device_placement=bool(c is not None and c.log_device_placement),
                                client_device=s.client_device, cost_model=s.cost_model,
                                type_priority=self._type_priority)

    def _placed(self, s: _Session):
        """The whole graph placed over the session's devices, once per (graph version, devices);
        nodes without a job go to the client's task (`apply_default_task`)."""
        key = (s.version, tuple(sorted(s.incarnations.items())))
        try:
            return s.state.placed(s.graph_def, s.devices, self._placement_options(s), key,
                                  transform=lambda gd: apply_default_task(gd, task_of(s.client_device)))
        except errors.InvalidArgumentError as e:
            blamed = blame_unreachable(s.graph_def, s) if s.unreachable else None
            if blamed is None:
                raise
            node, task = blamed
            s.refresh = True
            raise errors.UnavailableError(
                None, None, f"Cannot place node {node.name} on '{node.device}': task {task} is "
                f"unreachable ({s.unreachable[task].message})") from e

    def _prepare(self, s: _Session, sig: tuple, pull: bool = False) -> _StepPlan:
        with s.lock:
            if s.closed:
                raise errors.AbortedError(None, None, f"Session {s.handle} was closed.")
            refreshed = s.refresh
            if refreshed:
                self._refresh_devices(s)
            plan = s.plans.get((sig, pull))
            if plan is not None:
                return plan
            if not refreshed:  # a new signature: look at the cluster again (a worker may have restarted)
                self._refresh_devices(s)
            feeds, fetches, targets = sig
            # Feeds and fetches are placed before partitioning; a pulled step's fetches are
            # `_Send`s to us.
            _, parts = s.state.step(self._placed(s), feeds, fetches, targets, s.client_device,
                                    s.by_name, s.incarnations,
                                    pull_device=CLIENT_DEVICE if pull else None)
            graphs = group_by_task(parts)
            routes = read_routes(graphs)
            tasks = sorted(graphs, key=task_sort_key)
            got = self._call_tasks(
                tasks, "register_graph",
                lambda t: worker_pb2.RegisterGraphRequest(session_handle=s.handle, graph_def=graphs[t],
                                                          config=s.config),
                self.rpc_timeout_s)
            handles, failure = {}, None
            for task in tasks:
                resp, err = got[task]
                if err is None:
                    handles[task] = resp.graph_handle
                elif failure is None:
                    failure = name_task(err, task)
            rendezvous_tasks = {t for t, g in graphs.items()
                                if any(nd.op in ("_Send", "_Recv") for nd in g.node)}
            plan = _StepPlan(tasks, graphs, handles, routes, dict(s.incarnations), rendezvous_tasks,
                             feed_check=FeedCheck(s.graph_def, feeds))
            if failure is not None:
                self._pool.submit(lambda: self._deregister(s.handle, [plan]))
                if isinstance(failure, REFRESH_ERRORS):
                    s.refresh = True
                raise failure
            evicted = s.plans.add((sig, pull), plan)
            if evicted:
                self._pool.submit(lambda: self._deregister(s.handle, evicted))
            return plan

    # ------------------------------------------------------------------ running a step
    def run_step(self, request, on_cancel=None) -> master_pb2.RunStepResponse:
        """Runs one step: feeds go to the task holding the _Args, fetches come from the _Retvals.

        With tracing on, the step is a "Master.RunStep" span (a child of the caller's trace) with a
        "RunGraph" child per task, whose context travels on to the workers.

        Args:
            request: a `RunStepRequest`.
            on_cancel: ``on_cancel(fn)`` calls `fn` when the caller's call ends (the servicer passes
                ``context.add_callback``): a step still running then is aborted on every task
                (CancelledError), so a client that cancelled or died leaves nothing blocked behind.

        Returns:
            The `RunStepResponse`; a `SplitMessage` of it sharing the tasks' buffers when a fetched
            value is large (`fetch_responses`: read it with `tensor_requests.decode(resp, "tensor")`).

        Raises:
            The failing task's error (its class; the message names the task and, for a kernel,
            the node), `UnavailableError`/`AbortedError` for a worker that died or restarted,
            `DeadlineExceededError` when the step's timeout passed.
        """
        if not _tracing():
            return self._run_step(request, on_cancel)
        with _tracer.start_as_current_span("Master.RunStep", kind=_otel.SpanKind.SERVER,
                                           record_exception=True) as span:
            span.set_attribute("kernflow.session", request.session_handle)
            span.set_attribute("kernflow.fetch_count", len(request.fetch))
            return self._run_step(request, on_cancel)

    def _run_step(self, request, on_cancel=None) -> master_pb2.RunStepResponse:
        s, plan, options = self._plan_for(request, pull=False)
        if not plan.tasks:
            return master_pb2.RunStepResponse()
        step_id, reqs, timeout_ms = self._run_graph_requests(s, plan, request, options)
        ended = self.watch_caller(on_cancel, plan.tasks, step_id, "RunStep")
        try:
            results = self._run_tasks(s, plan, step_id, reqs, timeout_ms)
        except BaseException as e:
            if isinstance(e, REFRESH_ERRORS):
                s.refresh = True
            self._cleanup(plan.tasks, step_id)
            raise
        finally:
            ended.append(True)
        # After a successful step each worker has dropped the step's state itself (the last of its
        # sent values taken, its RunGraph done: `Worker._retire_if_done`): no CleanupGraph calls,
        # which were three RPCs of every asynchronous training step with two ps tasks.
        resp = run_step_response(request.fetch, plan.routes.fetches, results)
        if options is not None:
            self._fill_metadata(s, plan, options, results, resp.metadata)
        return resp

    def run_step_stream(self, request, trace_context=None, on_cancel=None, raw: bool = False):
        """Runs one step like `run_step`, streaming the fetched values back as they arrive.

        Every fetch is pulled with RecvTensor from the task that produced it and forwarded chunk
        by chunk (`stream_step`); errors are those of `run_step`.

        Args:
            request: a `RunStepRequest`.
            trace_context: the caller's OpenTelemetry context (the servicer passes the one from
                the call metadata); default: the context current when this is called.
            on_cancel: as `run_step`'s.
            raw: yield the messages serialized (the servicer's; relayed chunks are not parsed).

        Returns:
            An iterator of `RunStepStreamResponse`: chunks of fetch 0, then of fetch 1, ..., then
            a last message with ``done`` set (and the metadata asked for).
        """
        from kernflow.master.stream_step import run_step_stream
        return run_step_stream(self, request, trace_context, on_cancel, raw)

    def run_step_pull(self, requests, trace_context=None, on_cancel=None, raw: bool = False):
        """Runs one step whose fetches waiting on remote tasks the client pulls itself.

        Like `run_step_stream`, but a fetch produced on a task this master reaches over gRPC is
        answered with its `FetchLocation` instead of its chunks (`stream_step`).

        Args:
            requests: an iterator of `RunStepPullRequest`: the step first; after ``done``, relay
                requests for located fetches; it ends when the client has every value.
            trace_context, raw: as for `run_step_stream`.
            on_cancel: as `run_step`'s.

        Returns:
            An iterator of `RunStepStreamResponse`: locations, then the chunks of the other fetches,
            then ``done``, then the chunks of each relayed fetch.
        """
        from kernflow.master.stream_step import run_step_pull
        return run_step_pull(self, requests, trace_context, on_cancel, raw)

    def _plan_for(self, request, pull: bool):
        """Returns (session, step plan, RunOptions or None) of a RunStep request."""
        s = self._session(request.session_handle)
        options = request.options if request.HasField("options") else None
        sig = (tuple([t.name for t in request.feed]), tuple(request.fetch), tuple(request.target))
        plan = None if s.refresh else s.plans.get((sig, pull))   # in use until `_run_tasks` ends
        if plan is None:   # (a cached plan's signature was checked when it was prepared)
            if len(set(sig[0])) != len(sig[0]):
                raise errors.InvalidArgumentError(None, None, "A tensor is fed more than once")
            try:
                plan = self._prepare(s, sig, pull)
            except REFRESH_ERRORS:
                s.refresh = True
                raise
        plan.feed_check.check_protos(request.feed)   # (the client's own checks may be absent)
        return s, plan, options

    def _run_graph_requests(self, s: _Session, plan: _StepPlan, request, options):
        """Returns (step id, {task: RunGraphRequest}, step timeout in ms) of one step."""
        trace = options is not None and options.trace_level > 0
        timeout_ms = s.timeout_ms(options)
        step_id = random.getrandbits(63) or 1
        reqs = {}
        feeds, fetches = plan.routes.feeds, plan.routes.fetches
        for task in plan.tasks:
            r = worker_pb2.RunGraphRequest(session_handle=s.handle, graph_handle=plan.handles[task],
                                           step_id=step_id, collect_stats=trace, timeout_in_ms=timeout_ms)
            for i in fetches.get(task, ()):
                r.recv_key.append(request.fetch[i])
            # (a client's feeds parsed by `split` are forwarded as they came: no copy until sent)
            reqs[task] = forward_tensors(request, "feed", feeds.get(task, ()), r, "send")
        return step_id, reqs, timeout_ms

    def _fill_metadata(self, s: _Session, plan: _StepPlan, options, results: dict, metadata) -> None:
        if options is not None and options.trace_level > 0:
            self._record_stats(s, results, metadata.step_stats)
            for task in sorted(results, key=task_sort_key):   # one id space over all tasks
                merge_cost_graph(metadata.cost_graph, results[task].cost_graph)
        if options is not None and options.output_partition_graphs:
            for task in plan.tasks:
                metadata.partition_graphs.add().CopyFrom(plan.graphs[task])

    def _record_stats(self, s: _Session, results: dict, step_stats) -> None:
        for task in sorted(results, key=task_sort_key):
            for ds in results[task].step_stats.dev_stats:
                step_stats.dev_stats.add().CopyFrom(ds)
                dev = s.by_name.get(device_spec.canonical_name(ds.device)) if ds.device else None
                if dev is None:
                    continue
                for ns in ds.node_stats:
                    if ns.op_type not in ("_Send", "_Recv", "_Arg", "_Retval"):
                        secs = (ns.op_end_rel_micros - ns.op_start_rel_micros) / 1e6
                        s.cost_model.record(ns.node_name, dev.device_type, max(secs, 0.0))

    def _cleanup(self, tasks, step_id: int) -> None:
        """Frees the step's state on `tasks`, in the background (best effort).

        A task whose graph uses no _Send/_Recv needs none after a successful step: its worker drops
        the step's state when RunGraph returns.
        """
        if not tasks:
            return
        req = worker_pb2.CleanupGraphRequest(step_id=step_id)
        for task in tasks:
            def run(task=task):
                try:
                    self._worker(task).cleanup_graph(req, timeout=self.rpc_timeout_s)
                except Exception as e:  # noqa: BLE001 - best effort
                    _log.info("CleanupGraph of step %d on %s failed (ignored): %s", step_id, task, e)
            self._pool.submit(run)

    def watch_caller(self, on_cancel, tasks, step_id: int, method: str) -> list:
        """Aborts step `step_id` on `tasks` (CancelledError) if the caller's call ends first.

        Args:
            on_cancel: ``on_cancel(fn)`` that calls `fn` when the caller's call ends, or None.

        Returns:
            A list: append to it once the step has ended (the caller leaving after that is no
            cancellation).
        """
        ended: list = []
        if on_cancel is not None:
            def caller_gone():
                if not ended:
                    _log.info("step %d: its %s caller went away; aborting it on %s", step_id, method,
                              ", ".join(tasks))
                    self._abort(tasks, step_id, errors.CANCELLED, f"Step {step_id} cancelled: its "
                                f"{method} call ended (the client cancelled it or went away)")
            on_cancel(caller_gone)
        return ended

    def _abort(self, tasks, step_id: int, code: int, message: str) -> None:
        req = worker_pb2.AbortStepRequest(step_id=step_id, code=code, message=message)
        for task in tasks:
            def run(task=task):
                try:
                    self._worker(task).abort_step(req, timeout=self.rpc_timeout_s)
                except Exception as e:  # noqa: BLE001 - the task's RunGraph reports its own failure
                    _log.info("AbortStep of step %d on %s failed: %s", step_id, task, e)
            self._pool.submit(run)

    def _run_tasks(self, s: _Session, plan: _StepPlan, step_id: int, reqs: dict, timeout_ms: int) -> dict:
        """Runs the step's RunGraph calls; ends the use of `plan` that `_plan_for` began."""
        try:
            with s.lock:
                if s.closed:
                    raise errors.CancelledError(None, None, "Session has been closed.")
                s.running[step_id] = list(reqs)
            try:
                return self._run_tasks_inner(s, plan, step_id, reqs, timeout_ms)
            finally:
                with s.lock:
                    s.running.pop(step_id, None)
                    s.last_used = time.monotonic()
        finally:
            if s.plans.release(plan):   # evicted while this step ran: its graphs go now
                self._pool.submit(lambda: self._deregister(s.handle, [plan]))

    def _run_tasks_inner(self, s: _Session, plan: _StepPlan, step_id: int, reqs: dict,
                         timeout_ms: int) -> dict:
        """Runs every task's RunGraph concurrently, watching deadlines and the tasks' health."""
        rpc_deadline_s = timeout_ms / 1000.0 + 1.0 if timeout_ms else self.run_graph_timeout_s
        if len(reqs) == 1 and getattr(self._worker(next(iter(reqs))), "address", None) is None:
            # One task, in this process: nothing to coordinate or to health-check (it cannot freeze
            # apart from this process), so call it on this thread (saves two thread hand-offs per
            # step). A remote task, even alone, runs under TaskStep's health checks: a frozen
            # worker fails the step within `health_check_interval_s` + `rpc_timeout_s`.
            ((task, req),) = reqs.items()
            try:
                return {task: self._run_graph(task, req, step_id, rpc_deadline_s, plan)}
            except Exception as e:  # noqa: BLE001 - reported as a TF error naming the task
                err = name_task(as_op_error(e, f"RunGraph on task {task}"), task)
                if timeout_ms and isinstance(err, errors.DeadlineExceededError):
                    err = deadline_error(err, timeout_ms)
                raise err from None
        return TaskStep(self, plan, step_id, reqs, timeout_ms, rpc_deadline_s, _tracing()).wait()

    def _run_graph_async(self, task: str, req, timeout_s: float, on_done):
        """Starts RunGraph on `task` with no thread waiting for it, when its worker is reached over
        the same-host channel (`GrpcWorkerClient.run_graph_async`: `on_done` runs on the channel's
        reader thread); returns a function that cancels the call, or None: call `_run_graph`."""
        start = getattr(self._worker(task), "run_graph_async", None)
        return None if start is None else start(req, timeout_s, on_done)

    def _run_graph(self, task: str, req, step_id: int, timeout_s: float, plan: _StepPlan):
        """Calls RunGraph on `task`; traced, it is a "RunGraph" span whose context the call carries.

        A graph that touches no other task goes over a pooled RunGraphStream call when the worker
        is remote (`graph_stream`: no per-call setup), unless its worker said it cannot run it
        inline; traced steps use unary calls (the trace context travels in their metadata).
        """
        if not _tracing():
            w = self._worker(task)
            streamed = getattr(w, "run_graph_streamed", None)
            if streamed is not None and task not in plan.rendezvous_tasks and \
                    task not in plan.not_inline and not req.collect_stats:
                try:
                    return streamed(req, timeout=timeout_s)
                except NotInline:
                    plan.not_inline.add(task)   # nothing ran: unary from now on
            return w.run_graph(req, timeout=timeout_s)
        with _tracer.start_as_current_span("RunGraph", kind=_otel.SpanKind.CLIENT,
                                           record_exception=True) as span:
            span.set_attribute("kernflow.task", task)
            span.set_attribute("kernflow.step_id", step_id)
            return self._worker(task).run_graph(req, timeout=timeout_s)
