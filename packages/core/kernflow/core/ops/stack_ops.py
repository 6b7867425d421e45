"""Stack ops: StackV2, StackPushV2, StackPopV2 and StackCloseV2 (TF1's per-step LIFO stacks).

While-loop gradients use them to save forward values: the forward loop pushes each iteration's
value, the backward loop pops them in reverse order. A stack lives for one step (each run of StackV2
creates a new one); its handle is a ``resource`` scalar. CPU kernels are in
kernflow.kernels.cpu.tensor_array. Not exported into `kf` (as in TF, an internal family).

Example::

    h = stack_v2(-1, kf.float32)
    push = stack_push_v2(h, x)
    with kf.control_dependencies([push]):
        y = stack_pop_v2(h, kf.float32)        # == x
"""

from __future__ import annotations

from kernflow.core.framework import dtypes as _dtypes
from kernflow.core.framework import tensor_shape as _ts
from kernflow.core.framework.op_def_library import apply_op
from kernflow.core.framework.op_def_registry import register_op

__all__ = ["stack_v2", "stack_push_v2", "stack_pop_v2", "stack_close_v2"]


def _stack_shape(op):
    op.inputs[0].shape.with_rank(0)
    return [_ts.TensorShape([])]


register_op("StackV2", inputs=["max_size: int32"], outputs=["handle: resource"],
            attrs=["elem_type: type", "stack_name: string = ''"],
            shape_fn=_stack_shape, stateful=True,
            doc="Creates an empty stack of `elem_type` values holding at most `max_size` elements "
                "(unlimited when negative), for this step only; returns its handle. `stack_name` "
                "names it in error messages (default: the node name).")
register_op("StackPushV2", inputs=["handle: resource", "elem: T"], outputs=["output: T"],
            attrs=["T: type", "swap_memory: bool = false"],
            shape_fn=lambda op: [op.inputs[1].shape], stateful=True,
            doc="Pushes `elem` on top of the stack `handle` and returns it. `swap_memory` is "
                "accepted for TF compatibility (values always stay in host memory).")
register_op("StackPopV2", inputs=["handle: resource"], outputs=["elem: elem_type"],
            attrs=["elem_type: type"], shape_fn=lambda op: [_ts.TensorShape(None)], stateful=True,
            doc="Removes the top element of the stack `handle` and returns it; fails when the "
                "stack is empty.")
register_op("StackCloseV2", inputs=["handle: resource"], shape_fn=lambda op: [], stateful=True,
            doc="Closes the stack `handle`, releasing its elements; later pushes and pops fail.")


def stack_v2(max_size, elem_type, stack_name="", name=None):
    """Creates a stack for this step.

    Args:
        max_size: int32 scalar, the most elements it may hold (negative: unlimited).
        elem_type: the dtype of its elements.
        stack_name: the name used in error messages (default: the node name).
        name: op name.

    Returns:
        The stack's handle (a ``resource`` scalar).
    """
    return apply_op("StackV2", [max_size], {"elem_type": _dtypes.as_dtype(elem_type),
                                            "stack_name": stack_name or ""}, name=name).outputs[0]


def stack_push_v2(handle, elem, swap_memory=False, name=None):
    """Pushes `elem` on the stack `handle`; returns `elem` (once pushed)."""
    return apply_op("StackPushV2", [handle, elem], {"swap_memory": bool(swap_memory)},
                    name=name).outputs[0]


def stack_pop_v2(handle, elem_type, name=None):
    """Pops the top element (of dtype `elem_type`) off the stack `handle` and returns it."""
    return apply_op("StackPopV2", [handle], {"elem_type": _dtypes.as_dtype(elem_type)},
                    name=name).outputs[0]


def stack_close_v2(handle, name=None):
    """Closes the stack `handle`; returns the op."""
    return apply_op("StackCloseV2", [handle], {}, name=name)
