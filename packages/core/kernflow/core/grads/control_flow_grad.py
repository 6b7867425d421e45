"""Gradients of the control-flow primitives.

Conditionals: a cond's Merge sends its gradient back through a Switch on the same predicate (so
only the taken branch's gradient ops run) and a branch Switch merges the gradient of the taken
branch with zeros from the other. While loops are differentiated as a whole by
ops/control_flow_grad_state.py (gradients_impl treats each loop as one node), so their Enter,
Exit, NextIteration and LoopCond ops are never differentiated one by one; reaching one here means
a loop built by hand from the primitives, which has no recorded structure to reverse.
"""

from kernflow.core.framework import gradient_registry
from kernflow.core.ops import control_flow_ops as _cf
from kernflow.core.ops import control_flow_v1 as _v1
from kernflow.core.ops import math_ops

RegisterGradient = gradient_registry.RegisterGradient


def _switch_grad(op, *grads):
    ctx = op._control_flow_context
    if isinstance(ctx, _v1.CondContext):
        live = [g for g in grads if g is not None]
        if not live:
            return None, None
        if len(live) == 1:
            return live[0], None
        return _cf.merge(list(grads), name="cond_grad")[0], None
    if ctx is not None and isinstance(ctx, _v1.WhileContext):
        raise LookupError(f"internal: loop Switch {op.name} reached op-by-op differentiation")
    f, t = grads
    parts = []
    if f is not None:
        parts.append(_cf.switch(f, op.inputs[1])[0])
    if t is not None:
        parts.append(_cf.switch(t, op.inputs[1])[1])
    if not parts:
        return None, None
    return (_cf.merge(parts)[0] if len(parts) > 1 else parts[0]), None


def _merge_grad(op, grad, _):
    ctx = _v1.get_output_context(op.inputs[0].op)
    if isinstance(ctx, _v1.CondContext):
        f, t = _cf.switch(grad, ctx.pred, name="cond_grad")
        return [f, t] if len(op.inputs) == 2 else [None] * len(op.inputs)
    return [_cf.switch(grad, math_ops.equal(op.outputs[1], i))[1] for i in range(len(op.inputs))]


for _ref in ("", "Ref"):
    RegisterGradient(f"{_ref}Switch")(_switch_grad)
    RegisterGradient(f"{_ref}Merge")(_merge_grad)
    for _name in ("Enter", "Exit", "NextIteration"):
        def _hand_built(op, *grads, _name=_name):
            raise LookupError(f"Cannot differentiate through {op.type} '{op.name}': it belongs to a "
                              f"loop built by hand from the primitives. Build loops with "
                              f"kf.while_loop to differentiate them.")
        RegisterGradient(f"{_ref}{_name}")(_hand_built)
gradient_registry.NotDifferentiable("LoopCond")
gradient_registry.NotDifferentiable("Assert")
gradient_registry.NotDifferentiable("ControlTrigger")
