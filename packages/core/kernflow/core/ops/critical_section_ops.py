"""TF1's `tf.CriticalSection` (graph mode) and its mutex ops: MutexV2, MutexLock, ConsumeMutexLock.

A critical section is a mutex resource (``MutexV2``, a ``resource`` handle in its device's resource
container) plus `CriticalSection.execute(fn)`, which builds fn's ops so that they run only while
the step holds the mutex:

* ``MutexLock(mutex)`` waits until the mutex is free and takes it; its output is the *lock*, a
  ``variant`` scalar. Every op fn creates runs after it (control edges).
* ``ConsumeMutexLock(lock)`` runs after fn's outputs were computed and releases the mutex. The
  tensors `execute` returns wait for it, so fetching any of them runs fn and releases the lock.

Release point (TF releases when the last reference to the lock tensor dies): in kernflow the mutex
is released by ConsumeMutexLock on success, by the step's cancellation when the step fails, hits its
deadline or its session closes (the lock kernel registers a release with the step's
CancellationManager), and, as a backstop for a step that took the lock but never ran
ConsumeMutexLock (a fetch of one of fn's internal tensors prunes it), when the lock value is
garbage-collected after the step. Waiting for the mutex holds no thread and ends with the step's
cancellation: CancelledError when the session closes, DeadlineExceededError at the step's
deadline (RunOptions.timeout_in_ms or the session's operation_timeout_in_ms). Kernels:
kernflow.kernels.cpu.mutex.

Example::

    v = kf.Variable(0)
    cs = kf.CriticalSection(shared_name="counter")

    def count():
        value = v.read_value() + 0
        with kf.control_dependencies([value]):
            with kf.control_dependencies([v.assign_add(1)]):
                return kf.identity(value)

    n = cs.execute(count)     # concurrent sess.run(n) calls see 0, 1, 2, ... once each
"""

from __future__ import annotations

import collections
import threading

from kernflow.core.framework import dtypes as _dtypes
from kernflow.core.framework import nest
from kernflow.core.framework import ops as _ops
from kernflow.core.framework import tensor_shape as _ts
from kernflow.core.framework.op_def_library import apply_op
from kernflow.core.framework.op_def_registry import register_op
from kernflow.core.ops import array_ops, control_flow_ops

__all__ = ["CriticalSection"]

MUTEX_OPS = ("MutexV2", "MutexLock", "ConsumeMutexLock")
# The graph collection of `_Execution` records, one per `execute` (checked for shared resources).
CRITICAL_SECTION_EXECUTIONS = "critical_section_executions"


# ---------------------------------------------------------------------------- op definitions
def _scalar_inputs(op):
    for t in op.inputs:
        t.shape.with_rank(0)


def _scalar_out(op):
    _scalar_inputs(op)
    return [_ts.TensorShape([])]


def _no_out(op):
    _scalar_inputs(op)
    return []


register_op("MutexV2", outputs=["resource: resource"],
            attrs=["container: string = ''", "shared_name: string = ''"], shape_fn=_scalar_out,
            stateful=True,
            doc="Creates a mutex (or finds the existing one) in the resource container `container` "
                "of its device under `shared_name` (the node name when empty) and returns its "
                "handle. Sessions that name the same mutex on one server share it.")
register_op("MutexLock", inputs=["mutex: resource"], outputs=["mutex_lock: variant"],
            shape_fn=_scalar_out, stateful=True,
            doc="Waits until the mutex `mutex` is free, takes it and returns the lock. The mutex "
                "stays taken until ConsumeMutexLock runs on the lock, the step fails or is "
                "cancelled, or the lock value is released after a step that did not consume it. "
                "Holds no thread while it waits; fails with Cancelled or DeadlineExceeded with its "
                "step.")
register_op("ConsumeMutexLock", inputs=["mutex_lock: variant"], shape_fn=_no_out,
            stateful=True,
            doc="Releases the mutex held by the lock `mutex_lock` (a MutexLock output), letting the "
                "next waiting MutexLock take it. A lock already released (its step was cancelled) "
                "is left as it is.")


def mutex_v2(container="", shared_name="", name=None):
    """A MutexV2 op; returns the mutex's ``resource`` handle."""
    return apply_op("MutexV2", [], {"container": container or "", "shared_name": shared_name or ""},
                    name=name).outputs[0]


def mutex_lock(mutex, name=None):
    """A MutexLock op on the handle `mutex`; returns the lock (a ``variant`` scalar)."""
    return apply_op("MutexLock", [mutex], {}, name=name).outputs[0]


def consume_mutex_lock(mutex_lock, name=None):
    """A ConsumeMutexLock op releasing `mutex_lock`; returns the op."""
    return apply_op("ConsumeMutexLock", [mutex_lock], {}, name=name)


# ---------------------------------------------------------------------------- CriticalSection
_Execution = collections.namedtuple("_Execution", ["lock_op", "handle", "resources", "exclusive"])
_running = threading.local()   # .handles: the CriticalSection handles whose fn this thread builds


def _running_handles() -> list:
    if not hasattr(_running, "handles"):
        _running.handles = []
    return _running.handles


def _identity(x):
    """A passthrough of one leaf of fn's result that runs inside the section."""
    if x is None:
        return None
    if isinstance(x, _ops.Operation):
        return control_flow_ops.group(x)
    return array_ops.identity(x)


def _after(x, op):
    """`x` (an `_identity` result) made to wait for `op`."""
    if x is None:
        return None
    with _ops.control_dependencies([op]):
        if isinstance(x, _ops.Operation):
            return control_flow_ops.no_op()
        return array_ops.identity(x)


def _accessed_resources(created: set) -> list:
    """The resource handles and variable references the ops in `created` read from outside it.

    TF looks at resource inputs only; kernflow's `kf.Variable` is TF1's reference variable, so
    reference inputs (the variable's own tensor) count too.
    """
    seen, out = set(), []
    for op in created:
        for t in op.inputs:
            if t.op in created or t in seen:
                continue
            if t.dtype.base_dtype == _dtypes.resource or t.dtype.is_ref_dtype:
                seen.add(t)
                out.append(t)
    return out


class CriticalSection:
    """Runs subgraphs exclusively: at most one `execute`'s ops at a time, over all steps.

    Args:
        name: the name of the mutex op (default "CriticalSection").
        shared_name: the name the mutex is shared under on its device (default: the op's name).
        critical_section_def: instead of creating a mutex, use the one of an existing critical
            section: an object with a ``critical_section_name`` attribute (the handle's op name).
        import_scope: the name scope `critical_section_def`'s name is under.

    Raises:
        ValueError: if both `critical_section_def` and `shared_name` are given.
    """

    def __init__(self, name=None, shared_name=None, critical_section_def=None, import_scope=None):
        if critical_section_def is not None and shared_name is not None:
            raise ValueError("critical_section_def and shared_name are mutually exclusive.")
        if critical_section_def is not None:
            self._handle = self._lookup(critical_section_def, import_scope)
        else:
            with _ops.init_scope(), _ops.name_scope(name, "CriticalSection", []) as scope:
                self._handle = mutex_v2(
                    shared_name=scope.rstrip("/") if shared_name is None else shared_name, name=scope)

    @staticmethod
    def _lookup(critical_section_def, import_scope):
        name = critical_section_def.critical_section_name
        if import_scope:
            name = f"{import_scope.rstrip('/')}/{name}"
        op = _ops.get_default_graph().as_graph_element(name, allow_tensor=False)
        if op.type != "MutexV2":
            raise ValueError(f"critical_section_def names {op.name}, a {op.type} op, not a MutexV2")
        return op.outputs[0]

    @property
    def name(self) -> str:
        """The name of the mutex op."""
        return self._handle.op.name

    def execute(self, fn, exclusive_resource_access=True, name=None):
        """Builds ``fn()`` so that its ops run only while this critical section's mutex is held.

        The mutex is taken after every tensor fn reads from outside has been computed (so an
        input computed by another critical section cannot deadlock this one) and released once
        all of fn's outputs were computed.

        Args:
            fn: a function of no arguments that builds ops and returns a nested structure of
                tensors, operations (or None).
            exclusive_resource_access: when True, no other critical section may touch a resource
                (a variable, a queue...) fn touches; when False, only those executions that asked
                for exclusive access are checked against this one.
            name: name scope of the ops created.

        Returns:
            fn's result, each tensor replaced by one that is available once the section ran (and
            its lock was released).

        Raises:
            ValueError: if fn executes this critical section itself (a deadlock), or shares a
                resource with an execution of another critical section where either asked for
                exclusive access.
        """
        running = _running_handles()
        if any(h is self._handle for h in running):
            raise ValueError(f"Attempting to lock a CriticalSection in which we are already running "
                             f"(CriticalSection: {self.name}). This is illegal and may cause "
                             f"deadlocks.")
        graph = _ops.get_default_graph()
        with _ops.name_scope(name, "critical_section_execute", []):
            with _ops.colocate_with(self._handle):
                lock = mutex_lock(self._handle)
            with graph._lock:   # ops made by other threads meanwhile are not fn's
                before = set(graph.get_operations())
                running.append(self._handle)
                try:
                    with _ops.control_dependencies([lock]):
                        result = fn()
                finally:
                    running.pop()
                created = set(graph.get_operations()) - before
            self._order_around_lock(created, lock.op)
            resources = _accessed_resources(created)
            if any(r is self._handle for r in resources):
                raise ValueError(f"Attempting to lock a CriticalSection in which we are already "
                                 f"running: fn uses the mutex of {self.name} itself. This is illegal "
                                 f"and may cause deadlocks.")
            self._check_exclusive(graph, resources, exclusive_resource_access)
            graph.add_to_collection(CRITICAL_SECTION_EXECUTIONS, _Execution(
                lock.op, self._handle, resources, exclusive_resource_access))
            return self._release_after(result, lock)

    def _release_after(self, result, lock):
        """fn's `result`, each leaf waiting for the ConsumeMutexLock that runs after all of them."""
        inner = [_identity(x) for x in nest.flatten(result)]
        with _ops.control_dependencies([x for x in inner if x is not None]):
            with _ops.colocate_with(self._handle):
                release = consume_mutex_lock(lock)
        return nest.pack_sequence_as(result, [_after(x, release) for x in inner])

    @staticmethod
    def _order_around_lock(created: set, lock_op) -> None:
        """Makes the lock wait for what fn reads from outside, and every op fn made wait for it.

        Without the first, the mutex could be held while waiting on an input that itself needs the
        mutex (the result of an earlier `execute`): a deadlock within one step. The second covers
        ops built under ``control_dependencies(None)``.
        """
        outside = []
        for op in created:
            producers = [t.op for t in op.inputs] + list(op.control_inputs)
            outside.extend(p for p in producers if p not in created and p is not lock_op)
            if not any(p in created or p is lock_op for p in producers):
                op._add_control_input(lock_op)
        handle_op = lock_op.inputs[0].op
        lock_op._add_control_inputs(sorted({p for p in outside if p is not handle_op},
                                           key=lambda p: p.name))

    def _check_exclusive(self, graph, resources, exclusive: bool) -> None:
        if not resources:
            return
        mine = set(resources)
        for prior in graph.get_collection(CRITICAL_SECTION_EXECUTIONS):
            if prior.handle is self._handle or not (exclusive or prior.exclusive):
                continue
            shared = [r for r in prior.resources if r in mine]
            if shared:
                who = "this execution" if exclusive else f"the execution at {prior.lock_op.name}"
                raise ValueError(
                    f"This execution would access resources "
                    f"{sorted(r.op.name for r in shared)} that an execution of another "
                    f"CriticalSection ({prior.handle.op.name}, lock {prior.lock_op.name}) also "
                    f"accesses, and {who} requested exclusive resource access (CriticalSection: "
                    f"{self.name}). Did you mean to call execute with keyword argument "
                    f"exclusive_resource_access=False?")
