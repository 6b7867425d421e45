"""The GPU device: cupy arrays in one CUDA device's memory.

Memory comes from cupy's memory pool (so freed buffers are reused without cudaFree, as TF's BFC
allocator does); `per_process_gpu_memory_fraction` caps the pool. Kernels run on the device's
compute stream, the CUDA legacy default stream: every kernel and every host<->device copy of one
device is ordered on it whichever executor thread launched it, so a copy of a kernel's output
always follows the kernel. Data-dependent launches need no other synchronization, because a
consumer is launched only after its producer's launch returned.
"""

from __future__ import annotations

import contextlib
import logging
import threading

import numpy as np

from kernflow.core.framework import device_spec
from kernflow.core.runtime.device import Device

__all__ = ["GPUDevice", "create_gpu_devices", "visible_gpus"]

_log = logging.getLogger(__name__)


def visible_gpus() -> int:
    """Number of CUDA devices cupy can use (0 without cupy, a driver or a device)."""
    try:
        import cupy
        return int(cupy.cuda.runtime.getDeviceCount())
    except Exception as e:  # noqa: BLE001 - ImportError, CUDARuntimeError, missing libraries
        _log.debug("kernflow GPU plugin: no GPU (%s: %s)", type(e).__name__, e)
        return 0


class GPUDevice(Device):
    """One CUDA device. Tensors are cupy arrays; int32 and shape tensors live in host memory."""

    has_device_memory = True
    # Placement cost hints: a launch costs the host a few microseconds whatever the size, and
    # the device computes far faster than the host (H100: ~50 TFLOP/s float32).
    seconds_per_flop = 1.0 / 20e12
    launch_overhead_s = 4e-6
    # Straight-line steps are recorded as CUDA graphs and replayed (runtime/replay.py).
    can_capture_steps = True

    def __init__(self, name: str, ordinal: int, memory_fraction: float = 0.0):
        import cupy
        super().__init__(name, "GPU")
        self._cp = cupy
        self._ndarray = cupy.ndarray
        self.ordinal = ordinal
        self._cuda = cupy.cuda.Device(ordinal)
        props = cupy.cuda.runtime.getDeviceProperties(ordinal)
        self.physical_name = props["name"].decode() if isinstance(props["name"], bytes) else props["name"]
        self.compute_capability = f"{props['major']}.{props['minor']}"
        with self._cuda:
            _free, total = cupy.cuda.runtime.memGetInfo()
            pool = cupy.get_default_memory_pool()
            if memory_fraction and 0 < memory_fraction <= 1:
                pool.set_limit(fraction=memory_fraction)
        self.memory_limit_bytes = int(total * memory_fraction) if memory_fraction else int(total)
        self._pool = pool
        self._recording = None   # capture._Recording while a thread records a step
        self.can_capture_steps = not getattr(cupy.cuda.runtime, "is_hip", False)

    # ------------------------------------------------------------------ memory
    def to_device(self, value):
        """Returns `value` as a cupy array on this device (device arrays of it pass through)."""
        if type(value) is self._ndarray and (self.ordinal == 0 or value.device.id == self.ordinal):
            return value
        if isinstance(value, np.ndarray) and value.dtype.kind in "OSUV":
            return value  # strings stay on the host: no GPU kernel reads them
        rec = self._recording
        if rec is not None and rec.thread == threading.get_ident():
            from kernflow.kernels.gpu import capture
            return capture.upload(rec, value)   # a step being captured: upload outside the graph
        if self.ordinal == 0:
            return self._cp.asarray(value)
        with self._cuda:
            return self._cp.asarray(value)

    def to_host(self, value):
        """Returns `value` as a numpy array (host values pass through)."""
        if isinstance(value, self._ndarray):
            return value.get()
        return value

    def sync(self) -> None:
        # The stream every kernel of this device is launched on, not the whole device: a device-wide
        # synchronisation fails while another thread records a step (CUDA refuses it during capture).
        with self.scope():
            self._cp.cuda.Stream.null.synchronize()

    def capture_step(self, run, args):
        """Records one step's launches as a CUDA graph (see `kernflow.kernels.gpu.capture`)."""
        from kernflow.kernels.gpu import capture
        with self.scope():
            return capture.capture_step(self, run, args)

    def scope(self):
        """Context making this the current CUDA device (a no-op context for device 0)."""
        return contextlib.nullcontext() if self.ordinal == 0 else self._cuda

    def attributes(self) -> dict:
        out = super().attributes()
        out["physical_device_desc"] = (f"device: {self.ordinal}, name: {self.physical_name}, "
                                       f"compute capability: {self.compute_capability}")
        return out

    def memory_stats(self) -> dict:
        """Bytes the pool holds and bytes in use by live tensors."""
        return {"pool_bytes": self._pool.total_bytes(), "in_use_bytes": self._pool.used_bytes(),
                "limit_bytes": self.memory_limit_bytes}


def create_gpu_devices(count, config, job, replica, task):
    """Creates one device per visible CUDA device (at most `count`), none without a GPU.

    Honours ``config.gpu_options.visible_device_list`` ("0,1") and
    ``per_process_gpu_memory_fraction``.
    """
    n = visible_gpus()
    if n == 0:
        return []
    ordinals = list(range(n))
    fraction = 0.0
    if config is not None and config.HasField("gpu_options"):
        vis = config.gpu_options.visible_device_list.strip()
        if vis:
            ordinals = [int(x) for x in vis.split(",") if x.strip()]
            bad = [o for o in ordinals if not 0 <= o < n]
            if bad:
                from kernflow.core.framework import errors
                raise errors.InvalidArgumentError(
                    None, None, f"'visible_device_list' lists GPU {bad[0]}, but only {n} GPU(s) "
                    f"are visible")
        fraction = config.gpu_options.per_process_gpu_memory_fraction
    if count is not None:
        ordinals = ordinals[:int(count)]
    devices = []
    for i, o in enumerate(ordinals):
        name = device_spec.full_device_name(job, replica, task, "GPU", i)
        devices.append(GPUDevice(name, o, fraction))
    _log.debug("kernflow GPU plugin: %d GPU device(s): %s", len(devices),
               ", ".join(d.physical_name for d in devices))
    return devices
