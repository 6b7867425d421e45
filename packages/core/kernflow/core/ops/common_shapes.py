"""Shape-function helpers shared by the op families."""

from __future__ import annotations

from kernflow.core.framework import tensor_shape as _ts
from kernflow.core.framework import tensor_util

__all__ = ["unchanged", "broadcast_binary", "scalar", "unknown", "input_shape", "const_value",
           "shape_from_input"]


def input_shape(op, i: int = 0) -> _ts.TensorShape:
    return op.inputs[i].shape


def unchanged(op):
    """Every output has the shape of input 0."""
    return [op.inputs[0].shape] * len(op.outputs)


def broadcast_binary(op):
    """One output with the numpy broadcast of inputs 0 and 1."""
    return [_ts.broadcast_shape(op.inputs[0].shape, op.inputs[1].shape)]


def scalar(op):
    return [_ts.TensorShape([])] * len(op.outputs)


def unknown(op):
    return [_ts.TensorShape(None)] * len(op.outputs)


def const_value(op, i: int):
    """The static value of input i, or None."""
    return tensor_util.constant_value(op.inputs[i])


def shape_from_input(op, i: int) -> _ts.TensorShape:
    """The (partial) shape described by 1-D shape tensor input i."""
    return tensor_util.constant_value_as_shape(op.inputs[i])
