"""The cost model behind placement: static estimates first, measured node times once steps ran."""

from __future__ import annotations

import threading


__all__ = ["CostModel"]

# Work per output element, relative to an elementwise add, for ops much costlier than that.
_HEAVY = {"Exp": 4, "Log": 4, "Tanh": 4, "Sigmoid": 4, "Softmax": 8, "Pow": 6, "Conv2D": 0,
          "MatMul": 0, "BatchMatMul": 0, "BatchMatMulV2": 0}


def _elements(shape_attr) -> float:
    total = 1.0
    for d in shape_attr.dim if hasattr(shape_attr, "dim") else shape_attr:
        size = d.size if hasattr(d, "size") else d
        total *= 32 if size is None or size < 0 else max(size, 1)
    return total


class CostModel:
    """Estimates node compute time per device and transfer time between devices.

    Measured times (`record`) replace the static estimate for a (node, device type) once known, so
    a session's later placements follow what its earlier steps actually cost.
    """

    def __init__(self):
        self._lock = threading.Lock()
        self._measured: dict[tuple[str, str], float] = {}

    def record(self, node_name: str, device_type: str, seconds: float) -> None:
        """Folds one measured execution time into the model (exponential moving average)."""
        key = (node_name, device_type)
        with self._lock:
            old = self._measured.get(key)
            self._measured[key] = seconds if old is None else 0.8 * old + 0.2 * seconds

    def measured(self, node_name: str, device_type: str):
        return self._measured.get((node_name, device_type))

    def _out_elements(self, nd) -> float:
        shapes = nd.attr.get("_output_shapes") if "_output_shapes" in nd.attr else None
        if shapes is None or not shapes.list.shape:
            return 1.0
        return sum(_elements(s) for s in shapes.list.shape)

    def node_seconds(self, nd, attrs, device) -> float:
        m = self._measured.get((nd.name, device.device_type))
        if m is not None:
            return m
        if nd.op in ("_Arg", "_Retval", "NoOp", "Const", "VariableV2", "Identity"):
            return device.launch_overhead_s * 0.1
        work = self._out_elements(nd)
        if nd.op in ("MatMul", "BatchMatMul", "BatchMatMulV2", "Conv2D"):
            work *= 2 * 64  # inner dimension unknown here; a typical reduction length
        else:
            work *= _HEAVY.get(nd.op, 1)
        return device.launch_overhead_s + work * device.seconds_per_flop

    def transfer_seconds(self, src_nd, idx, src_device, dst_device) -> float:
        """Time for output `idx` of `src_nd` to move from `src_device` to `dst_device`."""
        nbytes = 4.0
        shapes = src_nd.attr.get("_output_shapes") if "_output_shapes" in src_nd.attr else None
        if shapes is not None and idx < len(shapes.list.shape):
            nbytes = 4.0 * _elements(shapes.list.shape[idx])
        latency = 20e-6
        if src_device.resource_key == dst_device.resource_key or (
                src_device.device_type == "CPU" and dst_device.device_type == "CPU"):
            return latency  # same host memory: the tensor is handed over, not copied
        return latency + nbytes / 10e9
