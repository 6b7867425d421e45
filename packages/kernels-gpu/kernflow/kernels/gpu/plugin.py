"""Hook implementations of the GPU kernel plugin (entry point ``gpu`` in group ``kernflow``).

Without cupy, a CUDA driver or a device, the plugin registers nothing (one debug log line says
why), so installing it on a machine without a GPU is harmless.
"""

import logging

from kernflow.core.plugins import hookimpl

_log = logging.getLogger(__name__)


def _available() -> bool:
    from kernflow.kernels.gpu.device import visible_gpus
    return visible_gpus() > 0


@hookimpl
def kernflow_register_devices(registry):
    if not _available():
        return
    from kernflow.kernels.gpu.device import create_gpu_devices
    registry.register_device_factory("GPU", create_gpu_devices, priority=100)


@hookimpl
def kernflow_register_kernels(registry):
    if not _available():
        _log.debug("kernflow GPU plugin: no usable GPU, no GPU kernels registered")
        return
    from kernflow.kernels.gpu import fusion, kernels
    kernels.register(registry)
    fusion.register(registry, "GPU")
