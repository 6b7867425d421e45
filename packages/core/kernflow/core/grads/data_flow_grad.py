"""Gradients of the queue and conditional accumulator ops: none (they move values between steps,
as in TF)."""

from kernflow.core.framework.gradient_registry import NotDifferentiable
from kernflow.core.ops.accumulator_ops import ACCUMULATOR_OPS
from kernflow.core.ops.data_flow_ops import QUEUE_OPS

for _op in QUEUE_OPS + ACCUMULATOR_OPS:
    NotDifferentiable(_op)
