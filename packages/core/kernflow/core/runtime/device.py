"""Devices: where kernels run and where state (resource containers) lives."""

from __future__ import annotations

import random

from kernflow.core.framework import device_spec
from kernflow.core.runtime.resource_mgr import ResourceMgr

__all__ = ["Device"]


class Device:
    """One device of a task, e.g. ``/job:localhost/replica:0/task:0/device:CPU:0``.

    Subclasses (in kernel plugins) override the host/device copies and the cost hints.

    Attributes:
        name: full device name.
        device_type: "CPU", "GPU"...
        resource_mgr: the device's resource containers (variables, queues); they outlive steps.
        incarnation: a random id that changes when the device is recreated (part of rendezvous keys).
        resource_key: devices sharing hardware (several logical CPUs of one process) share this key,
            so the placer's simulation does not expect them to run in parallel.
    """

    # Relative speed hints for the placement cost model: seconds per "unit" of work and the fixed
    # cost of launching one kernel.
    seconds_per_flop = 1.0 / 20e9
    launch_overhead_s = 1e-6
    memory_limit_bytes = 0

    def __init__(self, name: str, device_type: str, resource_key: str | None = None):
        self.name = device_spec.canonical_name(name)
        self.device_type = device_type
        self.spec = device_spec.DeviceSpec.from_string(self.name)
        self.resource_mgr = ResourceMgr()
        self.incarnation = random.getrandbits(63) or 1
        self.resource_key = resource_key or self.name

    # ------------------------------------------------------------------ memory
    def to_device(self, value):
        """Returns `value` (a host numpy array) in this device's memory."""
        return value

    def to_host(self, value):
        """Returns `value` (in this device's memory) as a host numpy array."""
        return value

    def sync(self) -> None:
        """Waits for work queued on this device to finish (no-op on the CPU)."""

    # Devices that can record a step's launches and replay them in one call set this and implement
    # `capture_step` (see runtime/replay.py, which decides which steps qualify).
    can_capture_steps = False

    def capture_step(self, run, args):
        """Records `run(args)` (one step's kernels) for replay; returns an object whose
        ``replay(args)`` copies `args` into the recorded inputs, replays the step and returns its
        outputs, or None where this device cannot. Raises if the recording fails."""
        return None

    def attributes(self) -> dict:
        """Describes the device for `Session.list_devices`."""
        return {"name": self.name, "device_type": self.device_type,
                "memory_limit_bytes": self.memory_limit_bytes, "incarnation": self.incarnation}

    def __repr__(self):
        return f"<{type(self).__name__} {self.name}>"
