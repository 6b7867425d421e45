"""Gradients of the queue ops: none (queues move values between steps, as in TF)."""

from kernflow.core.framework.gradient_registry import NotDifferentiable
from kernflow.core.ops.data_flow_ops import QUEUE_OPS

for _op in QUEUE_OPS:
    NotDifferentiable(_op)
