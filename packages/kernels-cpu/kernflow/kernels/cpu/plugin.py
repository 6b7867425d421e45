"""Hook implementations of the CPU kernel plugin (entry point ``cpu`` in group ``kernflow``)."""

from kernflow.core.plugins import hookimpl

# Op families with numpy kernels; each module has register(registry).
FAMILIES = ("base", "math", "array", "state", "nn", "random", "segment", "training", "io", "fusion",
            "queues", "accumulators", "tensor_array", "sparse", "candidate_sampling", "special",
            "linalg", "image", "image_more", "strings", "nn_extra", "parsing", "data", "ctc",
            "sparse_more", "array_more", "math_more", "linalg_more", "io_more", "script", "readers", "lookup",
            "training_more", "misc_more", "summary", "audio", "session_tensors", "nn_fractional",
            "mutex", "special_functions", "quantization", "nn_quantized")


@hookimpl
def kernflow_register_devices(registry):
    from kernflow.kernels.cpu.device import create_cpu_devices
    registry.register_device_factory("CPU", create_cpu_devices, priority=50)


@hookimpl
def kernflow_register_kernels(registry):
    import importlib
    for fam in FAMILIES:
        importlib.import_module(f"kernflow.kernels.cpu.{fam}").register(registry)
