"""Gradients of the queue, conditional accumulator and mutex ops: none (they move values between
steps or order them, as in TF)."""

from kernflow.core.framework.gradient_registry import NotDifferentiable
from kernflow.core.ops.accumulator_ops import ACCUMULATOR_OPS
from kernflow.core.ops.critical_section_ops import MUTEX_OPS
from kernflow.core.ops.data_flow_ops import QUEUE_OPS

for _op in QUEUE_OPS + ACCUMULATOR_OPS + MUTEX_OPS:
    NotDifferentiable(_op)
