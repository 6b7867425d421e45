"""The master's view of the cluster's devices: lightweight stand-ins for the placer.

The master never runs kernels, so it does not create `Device` objects of its own. It asks every task
for its devices (``GetStatus``) and wraps each `DeviceAttributes` in a `RemoteDevice`, which carries
exactly what `kernflow.core.runtime.placer.place` and the cost model read: the name, the type, the
parsed spec, a resource key (one per task: the devices of a task share its host) and cost hints.
Which kernels a device has is its task's advertisement (`kernel_support`), not the master's registry.
"""

from __future__ import annotations

from kernflow.core.framework import device_spec
from kernflow.core.runtime import cost_model as _cost

__all__ = ["RemoteDevice", "TaskCostModel", "canonical_task", "task_of", "task_sort_key"]

# Cost hints per device type (seconds per unit of work, seconds per kernel launch); unknown types
# get the CPU's. They only steer the placer's simulation, so rough values are enough.
_HINTS = {"CPU": (1.0 / 20e9, 1e-6), "GPU": (1.0 / 2e12, 8e-6)}


def canonical_task(name: str) -> str:
    """Returns the canonical task name ``/job:J/replica:R/task:T`` for a task or device name.

    Raises:
        ValueError: when the name lacks a job or a task.
    """
    spec = device_spec.DeviceSpec.from_string(name)
    if spec.job is None or spec.task is None:
        raise ValueError(f"{name!r} does not name a task (expected '/job:NAME/task:INDEX')")
    return f"/job:{spec.job}/replica:{spec.replica or 0}/task:{spec.task}"


def task_of(device_name: str) -> str:
    """Returns the task part (``/job:J/replica:R/task:T``) of a full device name."""
    return canonical_task(device_name)


def task_sort_key(task: str):
    """Orders tasks by job name, then numerically by replica and task (task:2 before task:10)."""
    spec = device_spec.DeviceSpec.from_string(task)
    return (spec.job or "", spec.replica or 0, spec.task or 0)


def device_sort_key(name: str):
    spec = device_spec.DeviceSpec.from_string(name)
    return (spec.job or "", spec.replica or 0, spec.task or 0, spec.device_type != "CPU",
            spec.device_type or "", spec.device_index or 0)


class RemoteDevice:
    """A device of some task, as the placer sees it.

    Attributes:
        name: full device name, e.g. ``/job:worker/replica:0/task:1/device:CPU:0``.
        device_type: "CPU", "GPU"...
        spec: the parsed `DeviceSpec`.
        task: the owning task's canonical name.
        resource_key: the task name: the devices of one task share its host.
        incarnation: the worker's incarnation of the device (changes on restart).
        memory_limit_bytes: as reported by the worker.
    """

    def __init__(self, attrs):
        self.name = device_spec.canonical_name(attrs.name)
        self.device_type = attrs.device_type
        self.spec = device_spec.DeviceSpec.from_string(self.name)
        self.task = task_of(self.name)
        self.resource_key = self.task
        self.incarnation = int(attrs.incarnation)
        self.memory_limit_bytes = int(attrs.memory_limit)
        self.seconds_per_flop, self.launch_overhead_s = _HINTS.get(self.device_type, _HINTS["CPU"])
        self.attrs = attrs

    def attributes(self) -> dict:
        return {"name": self.name, "device_type": self.device_type,
                "memory_limit_bytes": self.memory_limit_bytes, "incarnation": self.incarnation}

    def __repr__(self):
        return f"<RemoteDevice {self.name}>"


class TaskCostModel(_cost.CostModel):
    """Core's cost model, plus a network cost for tensors that cross tasks.

    Core's model treats CPU-to-CPU transfers as free hand-overs (true within one process); between
    tasks the tensor travels over the network, so the placer should keep chains together.
    """

    latency_s = 200e-6
    bytes_per_second = 1e9

    def transfer_seconds(self, src_nd, idx, src_device, dst_device) -> float:
        if getattr(src_device, "task", None) == getattr(dst_device, "task", None):
            return super().transfer_seconds(src_nd, idx, src_device, dst_device)
        nbytes = 4.0
        shapes = src_nd.attr["_output_shapes"] if "_output_shapes" in src_nd.attr else None
        if shapes is not None and idx < len(shapes.list.shape):
            nbytes = 4.0 * _cost._elements(shapes.list.shape[idx])
        return self.latency_s + nbytes / self.bytes_per_second

