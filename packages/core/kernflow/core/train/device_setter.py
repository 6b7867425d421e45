"""`kf.train.replica_device_setter`: TF1's device function for between-graph replication.

Each worker process of a data-parallel job builds the same graph inside

    with kf.device(kf.train.replica_device_setter(cluster=cluster_spec,
                                                   worker_device=f"/job:worker/task:{i}")):
        ...

so the model's variables (and the other stateful ops that hold state shared by every replica:
hash tables, accumulators) land on the parameter-server tasks, spread over them in turn, while
everything else (the forward and backward computation) runs on this replica's own worker task.
Ops that read or update a variable follow it to its ps task through colocation (`Variable`'s
initializer and snapshot are created under ``colocate_with``; optimizer updates and slots too).
"""

from __future__ import annotations

from kernflow.core.framework import device_spec as _device_spec

__all__ = ["replica_device_setter", "STANDARD_PS_OPS", "GreedyLoadBalancingStrategy",
           "byte_size_load_fn"]

# Op types whose node holds state every replica shares: they go to a ps task.
STANDARD_PS_OPS = (
    "Variable", "VariableV2", "AutoReloadVariable", "VarHandleOp",
    "MutableHashTable", "MutableHashTableV2", "MutableHashTableOfTensors",
    "MutableHashTableOfTensorsV2", "MutableDenseHashTable", "MutableDenseHashTableV2",
    "ConditionalAccumulator", "SparseConditionalAccumulator", "ResourceConditionalAccumulator",
)


class _RoundRobin:
    """Hands out ps task indices 0, 1, ..., n-1, 0, 1, ... one per placed op."""

    def __init__(self, num_tasks: int):
        self._num_tasks = num_tasks
        self._next = 0

    def __call__(self, unused_op) -> int:
        task = self._next
        self._next = (self._next + 1) % self._num_tasks
        return task


class GreedyLoadBalancingStrategy:
    """Puts each ps op on the ps task with the least load so far (TF's contrib.training strategy).

    kernflow has no contrib: this is `kf.train.GreedyLoadBalancingStrategy`. With
    `byte_size_load_fn` the parts of a partitioned variable (and other variables) are spread by
    their size in bytes rather than by count; ties go to the lowest task index.

    Args:
        num_tasks: the number of ps tasks.
        load_fn: ``fn(op) -> load`` (a number) of one ps op.
    """

    def __init__(self, num_tasks, load_fn):
        if num_tasks < 1:
            raise ValueError(f"num_tasks must be positive, got {num_tasks}")
        self._num_tasks = int(num_tasks)
        self._load_fn = load_fn
        self._ps_loads = [0.0] * self._num_tasks

    def __call__(self, op) -> int:
        task = min(range(self._num_tasks), key=lambda i: self._ps_loads[i])
        self._ps_loads[task] += self._load_fn(op)
        return task

    @property
    def loads(self) -> list:
        """The load given to each task so far."""
        return list(self._ps_loads)


def byte_size_load_fn(op) -> int:
    """The byte size of a single-output op's output (a variable's size), for load balancing.

    A variable op's output shape is not known yet when device functions run, so its `shape`
    attr is used (TF does the same).

    Raises:
        ValueError: the op does not have exactly one output, or its shape is not fully defined.
    """
    from kernflow.core.framework import tensor_shape as _ts
    if len(op.outputs) != 1:
        raise ValueError(f"Op {op.name} must have a single output")
    out = op.outputs[0]
    shape = out.get_shape()
    if not shape.is_fully_defined():
        try:
            shape = _ts.as_shape(op.get_attr("shape"))
        except (ValueError, KeyError):
            pass
    if not shape.is_fully_defined():
        raise ValueError(f"Op {op.name} has an output of unknown shape {shape}: its byte size "
                         "is unknown")
    return shape.num_elements() * out.dtype.base_dtype.size


def _op_type(op) -> str:
    """The op type of an `Operation` (``.type``) or a `NodeDef` (``.op``)."""
    t = getattr(op, "type", None)
    if isinstance(t, str):
        return t
    return getattr(op, "op", "")


def _spec(device) -> _device_spec.DeviceSpec:
    if isinstance(device, _device_spec.DeviceSpec):
        return _device_spec.DeviceSpec.from_string(device.to_string())
    return _device_spec.DeviceSpec.from_string(device or "")


class _ReplicaDevicePolicy:
    """The device function `replica_device_setter` returns (callable on an op)."""

    def __init__(self, ps_tasks: int, ps_device: str, worker_device: str, ps_ops, ps_strategy):
        self._ps_tasks = ps_tasks
        self._ps_device = ps_device
        self._worker_device = worker_device
        self._ps_ops = frozenset(ps_ops)
        self._ps_strategy = ps_strategy

    def __call__(self, op) -> str:
        """Returns the device string for `op`, keeping whatever device fields it already has.

        Fields already requested on the op (by an inner ``kf.device`` scope) win over the policy's;
        a ps op whose requested job is the ps job (or none) gets its task from the strategy.
        """
        current = _spec(getattr(op, "device", "") or "")
        if self._ps_tasks and self._ps_device and _op_type(op) in self._ps_ops:
            target = _spec(self._ps_device)
            if target.job and (not current.job or current.job == target.job):
                target = target.replace(task=int(self._ps_strategy(op)))
            return target.make_merged_spec(current).to_string()
        target = _spec(self._worker_device)
        return target.make_merged_spec(current).to_string()

    def __repr__(self):
        return (f"replica_device_setter(ps_tasks={self._ps_tasks}, ps_device={self._ps_device!r}, "
                f"worker_device={self._worker_device!r})")


def replica_device_setter(ps_tasks=0, ps_device="/job:ps", worker_device="/job:worker",
                          merge_devices=True, cluster=None, ps_ops=None, ps_strategy=None):
    """Returns a device function for a replicated (between-graph) training program.

    Variable ops (``VariableV2`` and the other stateful ops in `ps_ops`) go to the ps tasks, spread
    over them by `ps_strategy` (round robin by default); every other op goes to `worker_device`.
    Device fields an op already requests (inner ``kf.device`` scopes) are kept.

    Args:
        ps_tasks: the number of ps tasks; ignored when `cluster` is given.
        ps_device: the ps job's device prefix, e.g. "/job:ps" (empty: do not place ps ops).
        worker_device: where non-variable ops go, e.g. "/job:worker/task:1".
        merge_devices: must be True: requested devices are always merged with the policy's.
        cluster: a `kf.train.ClusterSpec` (or its dict); the number of tasks of the ps job (the
            job `ps_device` names, "ps" by default) gives `ps_tasks`.
        ps_ops: the op types to place on ps tasks (default `STANDARD_PS_OPS`).
        ps_strategy: ``fn(op) -> ps task index`` (default: round robin over `ps_tasks`), e.g.
            ``GreedyLoadBalancingStrategy(ps_tasks, byte_size_load_fn)``. The parts of a
            partitioned variable are separate variable ops, so they are spread like any others.

    Returns:
        A function ``op -> device string`` for ``kf.device``, or None when there are no ps tasks
        (then ``kf.device(None)`` places nothing).

    Raises:
        TypeError: `cluster` is neither a dict nor a ClusterSpec, or `ps_strategy` is not callable.
        ValueError: `merge_devices` is False.
    """
    if not merge_devices:
        raise ValueError("replica_device_setter supports merge_devices=True only: requested device "
                         "fields are always merged with the replica policy's")
    if cluster is not None:
        from kernflow.core.train.server_lib import ClusterSpec
        if isinstance(cluster, ClusterSpec):
            spec = cluster
        elif isinstance(cluster, dict):
            spec = ClusterSpec(cluster)
        else:
            raise TypeError(f"cluster must be a dict or a ClusterSpec, got {type(cluster).__name__}")
        ps_job = _spec(ps_device).job or "ps"
        ps_tasks = spec.num_tasks(ps_job) if ps_job in spec.jobs else 0
    ps_tasks = int(ps_tasks or 0)
    if ps_tasks == 0:
        return None
    if ps_ops is None:
        ps_ops = STANDARD_PS_OPS
    if ps_strategy is None:
        ps_strategy = _RoundRobin(ps_tasks)
    elif not callable(ps_strategy):
        raise TypeError("ps_strategy must be a callable op -> ps task index")
    return _ReplicaDevicePolicy(ps_tasks, ps_device, worker_device, ps_ops, ps_strategy)
