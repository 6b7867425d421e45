"""Gradients of fractional pooling (kernflow.core.ops.nn_ops_fractional), as TF1 defines them.

The forward ops route their gradient through the grad ops with the boundary sequences they drew, so
the backward pass pools over the same regions; the sequences and the grad ops have no gradient.
"""

from __future__ import annotations

from kernflow.core.framework import dtypes as _dtypes
from kernflow.core.framework.gradient_registry import NotDifferentiable, RegisterGradient
from kernflow.core.framework.op_def_library import apply_op
from kernflow.core.grads.nn_grad import _dense
from kernflow.core.ops import array_ops

NotDifferentiable("FractionalMaxPoolGrad")
NotDifferentiable("FractionalAvgPoolGrad")


def _overlapping(op):
    return {"overlapping": op.get_attr("overlapping")}


@RegisterGradient("FractionalMaxPool")
def _fractional_max_pool_grad(op, grad, *_):
    x, y = op.inputs[0], op.outputs[0]
    return [apply_op("FractionalMaxPoolGrad", [x, y, _dense(grad), op.outputs[1], op.outputs[2]],
                     _overlapping(op)).outputs[0]]


@RegisterGradient("FractionalAvgPool")
def _fractional_avg_pool_grad(op, grad, *_):
    shape = array_ops.shape(op.inputs[0], out_type=_dtypes.int64)
    return [apply_op("FractionalAvgPoolGrad", [shape, _dense(grad), op.outputs[1], op.outputs[2]],
                     _overlapping(op)).outputs[0]]
