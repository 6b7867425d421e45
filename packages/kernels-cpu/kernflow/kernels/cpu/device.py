"""The CPU device: numpy arrays in host memory."""

from __future__ import annotations

from kernflow.core.framework import device_spec
from kernflow.core.runtime.device import Device

__all__ = ["CPUDevice", "create_cpu_devices"]


class CPUDevice(Device):
    """A logical CPU. Several CPUs of one task share the host's cores (one `resource_key`)."""

    seconds_per_flop = 1.0 / 20e9
    launch_overhead_s = 1e-6


def create_cpu_devices(count, config, job, replica, task):
    """Creates `count` (default 1) CPU devices for one task."""
    from kernflow.kernels.cpu.allocator import tune_host_allocator
    tune_host_allocator()
    intra = getattr(config, "intra_op_parallelism_threads", 0) if config is not None else 0
    from kernflow.kernels.cpu import intra_op
    intra_op.configure(int(intra) if intra and intra > 0 else 0)
    n = 1 if count is None else int(count)
    host = f"host:/job:{job}/task:{task}"
    return [CPUDevice(device_spec.full_device_name(job, replica, task, "CPU", i), "CPU", host)
            for i in range(n)]
