"""The embedded runtime: a session that prunes, places, partitions and runs in this process."""

from __future__ import annotations

import collections
import itertools
import os
import threading
import time
import weakref

from kernflow.core.framework import errors
from kernflow.core.ops.session_ops import HANDLE_OPS as _HANDLE_OPS
from kernflow.core.plugins import manager
from kernflow.core.runtime import cost_model as _cost
from kernflow.core.runtime import executor as _executor
from kernflow.core.runtime import fusion
from kernflow.core.runtime.graph_execution_state import GraphExecutionState
from kernflow.core.runtime.partition_runner import Partition, PartitionRunner
from kernflow.core.runtime.placer import PlacementOptions
from kernflow.core.runtime.plan_cache import plan_cache_size
from kernflow.core.runtime.rendezvous import LocalRendezvous
from kernflow.core.runtime.step_stats_collector import StepStatsCollector

__all__ = ["DirectSession", "SessionTensors", "StepStatsCollector"]

_step_ids = itertools.count(1)
# Ids of kept tensors: unique in the process, so a handle never names another session's tensor.
_tensor_ids = itertools.count()
_live_sessions: "weakref.WeakSet[DirectSession]" = weakref.WeakSet()


class _Step:
    """A compiled (feeds, fetches, targets) signature: one plan per partition, and their runner.

    Feeds and fetches sit in whichever partitions hold their `_Arg`/`_Retval` nodes; each plan
    knows the step-wide positions of its own (`ExecutorPlan.arg_indices`/`retval_indices`).
    """

    def __init__(self, plans, partition_graphs, num_feeds, num_fetches):
        self.plans = plans
        self.partition_graphs = partition_graphs
        self.num_fetches = num_fetches
        self.runner = PartitionRunner([Partition.of(p) for p in plans], num_feeds, num_fetches)
        # fn(args, ctx) when one synchronous partition runs the step (`PartitionRunner.inline`),
        # and the replay.ReplayRunner behind it when the step is captured and replayed.
        self.run_inline = self.runner.inline
        self.replay = self.runner.replay
        # Whether the step runs a GetSessionHandle kernel, so that the session keeps what it
        # stages (`DirectSession._keeping`); other steps run without that wrapper.
        self.keeps_tensors = any(n.op in _HANDLE_OPS for g in partition_graphs for n in g.node)


class SessionTensors:
    """The tensors a session keeps between steps (`kf.get_session_handle`; TF's SessionState and
    per-step TensorStore). GetSessionHandle kernels reach it as ``ctx.session_handle.session_tensors``.

    Invariants: `staged` maps a running step's id to what its GetSessionHandle kernels produced,
    ``{op name: (handle, value)}``; nothing staged is readable. When the step ends, `finish` moves
    to `_tensors` only the values whose handle the step fetched, and only if it succeeded; the rest
    are dropped. `_tensors` maps a handle string to its value until `delete` or `clear` (close).
    """

    def __init__(self):
        self._lock = threading.Lock()
        self._tensors: dict = {}
        self.staged: dict = {}

    def stage(self, step_id: int, op_name: str, device_name: str, value) -> str:
        """Holds `value` for the step and returns its new handle, ``"op;id;device"``."""
        handle = f"{op_name};{next(_tensor_ids)};{device_name}"
        with self._lock:
            self.staged.setdefault(step_id, {})[op_name] = (handle, value)
        return handle

    def finish(self, step_id: int, fetch_names=None) -> None:
        """Ends a step: keeps what it staged for the handles in `fetch_names` (None: it failed)."""
        with self._lock:
            staged = self.staged.pop(step_id, None)
            for name in (fetch_names or ()) if staged else ():
                entry = staged.get(name.rpartition(":")[0])
                if entry is not None:
                    self._tensors[entry[0]] = entry[1]

    def _missing(self, handle: str, where: str):
        return errors.InvalidArgumentError(None, None, f"{where}: the tensor with handle {handle!r} is "
                                           "not in the session store.")

    def get(self, handle: str, where: str):
        """The value kept under `handle`. Raises InvalidArgumentError (naming `where`) if none."""
        try:
            return self._tensors[handle]
        except KeyError:
            raise self._missing(handle, where) from None

    def delete(self, handle: str, where: str, missing_ok: bool = False) -> None:
        """Removes `handle`. Raises InvalidArgumentError if it is not kept, unless `missing_ok`."""
        with self._lock:
            if self._tensors.pop(handle, None) is None and not missing_ok:
                raise self._missing(handle, where)

    def clear(self) -> None:
        with self._lock:
            self._tensors.clear()
            self.staged.clear()

    def __len__(self):
        return len(self._tensors)


def _graphs_by_device(step) -> dict:
    """{device name: partition GraphDef} of a compiled step (a traced step's labels and costs)."""
    return {plan.device.name: g for plan, g in zip(step.plans, step.partition_graphs)}


class DirectSession:
    """The session implementation behind ``kf.Session("")``.

    Devices, and with them every resource container, belong to the session (as in TF's
    DirectSession): state lives until `close` or `reset`; tensors kept by `kf.get_session_handle`
    live in `session_tensors` until deleted or `close`. Compiled steps are cached per signature,
    at most `plan_cache_size()` of them (``$KERNFLOW_PLAN_CACHE_SIZE``, default 1024), the least
    recently used dropped first (a `runner` keeps its own step).
    """

    def __init__(self, target, graph, config):
        regs = manager.registries()
        self.graph = graph
        self.config = config
        self._kernels = regs.kernels
        self.devices = regs.devices.create_devices(config)
        if not self.devices:
            raise errors.NotFoundError(None, None, "No devices are registered: install a kernel plugin "
                                       "such as kernflow-kernels-cpu (pip install packages/kernels-cpu).")
        self._type_priority = {t: regs.devices.priority(t) for t in regs.devices.device_types()}
        self._by_name = {d.name: d for d in self.devices}
        cpu = [d for d in self.devices if d.device_type == "CPU"]
        self.client_device = (cpu or self.devices)[0].name
        n = config.inter_op_parallelism_threads if config is not None else 0
        self._pool = _executor.ThreadPool(n if n > 0 else (os.cpu_count() or 2))
        self._lock = threading.Lock()
        self._steps: collections.OrderedDict = collections.OrderedDict()   # signature -> _Step, LRU last
        self._max_steps = plan_cache_size()
        self._kernel_cache: dict = {}
        self._graph_def = None
        self._gd_version = 0
        self.cost_model = _cost.CostModel()
        self._closed = False
        self._inflight: set = set()   # rendezvous of running dataflow steps (cancelled by close)
        self.session_tensors = SessionTensors()
        self._timeout_ms = config.operation_timeout_in_ms if config is not None else 0
        self._jit_level = fusion.jit_level(config)
        self._state = GraphExecutionState(self._kernels, self._jit_level)
        self._placement = PlacementOptions(
            allow_soft_placement=bool(config and config.allow_soft_placement),
            log_device_placement=bool(config and config.log_device_placement),
            client_device=self.client_device, cost_model=self.cost_model,
            type_priority=self._type_priority)
        _live_sessions.add(self)

    # ------------------------------------------------------------------ graph
    def _current_graph_def(self):
        v = self.graph.version
        if self._graph_def is None or v != self._gd_version:
            if self._graph_def is None:
                self._graph_def = self.graph.as_graph_def(add_shapes=True)
            else:
                delta = self.graph.as_graph_def(from_version=self._gd_version, add_shapes=True)
                self._graph_def.node.extend(delta.node)
            self._gd_version = v
        return self._graph_def

    def _placed_graph_def(self):
        """The whole graph, placed once per graph version (`GraphExecutionState.placed`).

        Placing the full graph rather than each pruned step keeps every step's view of a node on
        the same device; stateful nodes (variables) additionally keep their device when the graph
        grows and is placed again.
        """
        gd = self._current_graph_def()
        return self._state.placed(gd, self.devices, self._placement, key=self._gd_version)

    def _build(self, key):
        feeds, fetches, targets = key
        with self._lock:
            step = self._steps.get(key)
            if step is not None:
                return step
            _, parts = self._state.step(self._placed_graph_def(), feeds, fetches, targets,
                                        self.client_device, self._by_name,
                                        {d.name: d.incarnation for d in self.devices})
            parts = {n: p for n, p in parts.items() if len(p.node)}
            if not parts:
                from kernflow.core.protobuf import graph_pb2
                parts[self.client_device] = graph_pb2.GraphDef()
            names = sorted(parts, key=lambda n: (n != self.client_device, n))
            # global_jit_level=OFF: no compilation at all, loops included (loops.py).
            loops = False if self._jit_level <= fusion.OFF else None
            plans = [_executor.compile_partition(parts[n], self._by_name[n], self._kernels, self._pool,
                                                 self._kernel_cache, session_handle=self,
                                                 compile_loops=loops)
                     for n in names]
            step = _Step(plans, [parts[n] for n in names], len(feeds), len(fetches))
            self._steps[key] = step
            while len(self._steps) > self._max_steps:
                self._steps.popitem(last=False)
            return step

    def _step(self, key) -> _Step:
        """The compiled step of a signature, now the most recently used."""
        step = self._steps.get(key)
        if step is None:
            return self._build(key)
        try:
            self._steps.move_to_end(key)
        except KeyError:   # evicted by another thread meanwhile
            pass
        return step

    # ------------------------------------------------------------------ run
    def run(self, feeds, feed_values, fetches, targets, options=None, run_metadata=None):
        """Runs one step. `feeds`, `fetches`, `targets` are tuples of names; returns fetched values."""
        if self._closed:
            raise RuntimeError("Attempted to use a closed Session.")
        step = self._step((feeds, fetches, targets))
        trace = options is not None and options.trace_level > 0
        timeout = (options.timeout_in_ms if options is not None and options.timeout_in_ms else 0) \
            or self._timeout_ms
        step_id = next(_step_ids)
        if step.run_inline is not None and not trace:
            ctx = _executor.StepContext(step_id, None, step.plans[0].device)
            results = self._keeping(step_id, fetches, step.run_inline, feed_values, ctx) \
                if step.keeps_tensors else step.run_inline(feed_values, ctx)
            collector = None
        else:
            collector = StepStatsCollector(self.cost_model, _graphs_by_device(step)) if trace else None
            args = (step, feed_values, collector, timeout, step_id)
            results = self._keeping(step_id, fetches, self._run_partitions, *args) \
                if step.keeps_tensors else self._run_partitions(*args)
        if run_metadata is not None:
            if collector is not None:
                collector.finalize(run_metadata.step_stats, run_metadata.cost_graph)
            if options is not None and options.output_partition_graphs:
                for g in step.partition_graphs:
                    run_metadata.partition_graphs.add().CopyFrom(g)
        return results

    def runner(self, feeds, fetches, targets):
        """fn(feed_values) -> fetched values for one step signature, run with default options.

        `Session.make_callable`'s path: the step is resolved once (on the first call) instead of
        per call, and a single synchronous partition runs straight from here.
        """
        key = (feeds, fetches, targets)
        resolved = []

        def run(values):
            if not resolved:
                if self._closed:
                    raise RuntimeError("Attempted to use a closed Session.")
                step = self._step(key)
                resolved.append((step.run_inline, step.plans[0].device, step.keeps_tensors))
            run_inline, device, keeps = resolved[0]
            if run_inline is None:
                return self.run(feeds, values, fetches, targets)
            step_id = next(_step_ids)
            if keeps:
                return self._keeping(step_id, fetches, run_inline, values,
                                     _executor.StepContext(step_id, None, device))
            return run_inline(values, _executor.StepContext(step_id, None, device))
        return run

    def _keeping(self, step_id, fetches, fn, *args):
        """fn(*args) for step `step_id`; then the session keeps what the step's GetSessionHandle
        kernels staged for the fetched handles, or drops it all when fn raised (`SessionTensors`)."""
        kept = self.session_tensors
        try:
            results = fn(*args)
        except BaseException:
            kept.finish(step_id)
            raise
        if kept.staged:
            kept.finish(step_id, fetches)
        return results

    def _run_partitions(self, step, feed_values, collector, timeout_ms, step_id):
        """Runs a step that is not one inline partition (`PartitionRunner.run`), with a rendezvous of
        its own that `close` aborts."""
        rdv = LocalRendezvous()
        with self._lock:
            if self._closed:
                raise errors.CancelledError(None, None, "Session has been closed.")
            self._inflight.add(rdv)
        try:
            if timeout_ms > 0:
                return step.runner.run(feed_values, rdv, step_id, collector,
                                       time.monotonic() + timeout_ms / 1000.0,
                                       f"Timed out after {timeout_ms} ms waiting for the step to finish")
            return step.runner.run(feed_values, rdv, step_id, collector)
        finally:
            with self._lock:
                self._inflight.discard(rdv)

    def variable_reader(self, op_name: str):
        """fn() -> the current buffer of the ref variable `op_name`, read without running a step,
        or None when this session cannot read it so (not a VariableV2 of its graph, or placed on a
        device with memory of its own).

        The buffer is the variable's own (update kernels change it in place): a caller copies
        what it keeps. fn raises FailedPreconditionError while the variable is uninitialized.
        The monitored session's hooks read the global step after each step through it instead of
        fetching it in every step (`training_util.global_step_reader`).
        """
        with self._lock:
            if self._closed:
                return None
            gd = self._placed_graph_def()
        node = next((n for n in gd.node if n.name == op_name), None)
        if node is None or node.op != "VariableV2":
            return None
        device = self._by_name.get(node.device)
        if device is None or getattr(device, "has_device_memory", False):
            return None
        container = node.attr["container"].s.decode()
        name = node.attr["shared_name"].s.decode() or op_name
        mgr = device.resource_mgr
        cached = [None, -1]   # (the Var, the resource generation it was looked up in)

        def read():
            var, generation = cached
            if generation != mgr.generation:
                generation = mgr.generation
                try:
                    var = mgr.lookup(container, name)
                except errors.NotFoundError:   # (its kernel has not run: never initialized)
                    raise errors.FailedPreconditionError(
                        None, op_name, f"Attempting to use uninitialized value {op_name}") from None
                cached[0], cached[1] = var, generation
            return var.read()
        return read

    # ------------------------------------------------------------------ management
    def delete_session_tensors(self, handles) -> None:
        """Deletes kept tensors without a step (garbage-collected TensorHandles); a handle
        already deleted is skipped."""
        for h in handles:
            self.session_tensors.delete(h, "TensorHandle", missing_ok=True)

    def list_devices(self):
        return [d.attributes() for d in self.devices]

    def reset(self, containers=None) -> None:
        for d in self.devices:
            if containers:
                for c in containers:
                    d.resource_mgr.cleanup(c)
            else:
                d.resource_mgr.cleanup()

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        with self._lock:
            inflight = list(self._inflight)
        # Wakes every blocked op of running steps (queue dequeues, Recvs) with a clear error.
        for rdv in inflight:
            rdv.abort(errors.CancelledError(None, None, "Session has been closed."))
        self._pool.shutdown()
        for d in self.devices:
            d.resource_mgr.cleanup()
        self._steps.clear()
        self._kernel_cache.clear()
        self.session_tensors.clear()


def reset_all(containers=None) -> None:
    """Clears the containers of every live embedded session (`kf.Session.reset("")`)."""
    for s in list(_live_sessions):
        if not s._closed:
            s.reset(containers)
