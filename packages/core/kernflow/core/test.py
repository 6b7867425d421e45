"""`kf.test`: gradient checking and device queries for tests (TF1's tf.test)."""

from kernflow.core.testing.gradient_checker import compute_gradient, compute_gradient_error

__all__ = ["compute_gradient", "compute_gradient_error", "is_gpu_available", "gpu_device_name",
           "is_built_with_cuda"]


def _gpu_devices():
    from kernflow.core.plugins import registries
    regs = registries()
    if "GPU" not in regs.devices.device_types():
        return []
    return [d for d in regs.devices.create_devices() if d.device_type == "GPU"]


def is_gpu_available(cuda_only=False, min_cuda_compute_capability=None):
    """True if a GPU device plugin is installed and found a device."""
    return bool(_gpu_devices())


def is_built_with_cuda():
    return is_gpu_available()


def gpu_device_name():
    """The name of the first GPU device, or "" when there is none."""
    devs = _gpu_devices()
    return devs[0].name if devs else ""
