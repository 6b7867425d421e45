"""Math ops: elementwise arithmetic, comparisons, matmul, reductions.

OpDefs and wrappers; CPU kernels are in kernflow.kernels.cpu.math, gradients in
kernflow.core.grads.math_grad. Python operators on Tensors are installed at the bottom.
"""

from __future__ import annotations

from kernflow.core.framework import ops as _ops
from kernflow.core.framework.op_def_library import apply_op
from kernflow.core.framework.op_def_registry import register_op
from kernflow.core.ops import common_shapes

__all__ = ["add"]

register_op("AddV2", inputs=["x: T", "y: T"], outputs=["z: T"],
            attrs=["T: {half, float, double, int8, int16, int32, int64, uint8, complex64, complex128}"],
            shape_fn=common_shapes.broadcast_binary, doc="Returns x + y elementwise, with broadcasting.")


def add(x, y, name=None):
    """Returns x + y elementwise (numpy broadcasting)."""
    return apply_op("AddV2", [x, y], name=name).outputs[0]


def _binary_operator(fn):
    def op(a, b):
        return fn(a, b)

    def rop(a, b):
        return fn(b, a)
    return op, rop


_ops.Tensor._override_operator("__add__", _binary_operator(add)[0])
_ops.Tensor._override_operator("__radd__", _binary_operator(add)[1])
