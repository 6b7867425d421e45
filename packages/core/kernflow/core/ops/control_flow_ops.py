"""Control flow: the whitepaper's primitives (Switch, Merge, Enter, Exit, NextIteration, LoopCond)
and grouping ops (no_op, group, tuple, with_dependencies).

The primitives are real dataflow ops run by the executor (runtime/control_flow_executor.py): a Switch forwards its
input to one output and makes the other *dead*; ops with a dead input do not run; Merge forwards
its first live input; Enter/Exit move values into and out of a loop frame and NextIteration into
the next iteration. `cond` and `while_loop` (control_flow_v1.py) build on them as TF1 does.
"""

from __future__ import annotations

from kernflow.core.framework import ops as _ops
from kernflow.core.framework import tensor_shape as _ts
from kernflow.core.framework.op_def_library import apply_op
from kernflow.core.framework.op_def_registry import register_op
from kernflow.core.ops import array_ops

__all__ = ["no_op", "group", "tuple", "with_dependencies", "Assert", "cond", "case", "while_loop"]

_builtin_tuple = tuple

register_op("NoOp", shape_fn=lambda op: [], doc="Does nothing; useful as a control-dependency anchor.")


def _same(op):
    return [op.inputs[0].shape]


def _merge_shape(op):
    shape = op.inputs[0].shape
    for t in op.inputs[1:]:
        if shape.rank is None or t.shape.rank is None or shape.rank != t.shape.rank:
            shape = _ts.TensorShape(None)
            break
        shape = _ts.TensorShape([a if a == b else None for a, b in
                                 zip(shape.as_list(), t.shape.as_list())])
    return [shape, _ts.TensorShape([])]


def _pred_scalar(op):
    pred = op.inputs[-1]
    if pred.shape.rank not in (None, 0):
        raise ValueError(f"{op.type} '{op.name}': the predicate must be a scalar, got shape {pred.shape}")
    return None


def _switch_shape(op):
    _pred_scalar(op)
    return [op.inputs[0].shape] * 2


for _ref in ("", "Ref"):
    _t = "Ref(T)" if _ref else "T"
    register_op(f"{_ref}Switch", inputs=[f"data: {_t}", "pred: bool"],
                outputs=[f"output_false: {_t}", f"output_true: {_t}"], attrs=["T: type"],
                shape_fn=_switch_shape,
                doc="Forwards `data` to `output_true` if `pred`, else to `output_false`; the other "
                    "output is dead.")
    register_op(f"{_ref}Merge", inputs=[f"inputs: N * {_t}"],
                outputs=[f"output: {_t}", "value_index: int32"], attrs=["T: type", "N: int >= 1"],
                shape_fn=_merge_shape,
                doc="Forwards the first live input and its index; dead only if every input is.")
    register_op(f"{_ref}Enter", inputs=[f"data: {_t}"], outputs=[f"output: {_t}"],
                attrs=["T: type", "frame_name: string", "is_constant: bool = false",
                       "parallel_iterations: int = 10"], shape_fn=_same,
                doc="Makes `data` available in the child frame `frame_name` (every iteration of it "
                    "when is_constant).")
    register_op(f"{_ref}Exit", inputs=[f"data: {_t}"], outputs=[f"output: {_t}"], attrs=["T: type"],
                shape_fn=_same, doc="Makes `data` available in the parent frame.")
    register_op(f"{_ref}NextIteration", inputs=[f"data: {_t}"], outputs=[f"output: {_t}"],
                attrs=["T: type"], shape_fn=_same,
                doc="Makes `data` available to the next iteration of the frame.")
def _loop_cond_shape(op):
    if op.inputs[0].shape.rank not in (None, 0):
        raise ValueError(f"LoopCond '{op.name}': the loop condition must be a scalar, got shape "
                         f"{op.inputs[0].shape}")
    return [_ts.TensorShape([])]


register_op("LoopCond", inputs=["input: bool"], outputs=["output: bool"],
            shape_fn=_loop_cond_shape,
            doc="Forwards the loop predicate; marks the node the loop's Switches depend on.")
register_op("ControlTrigger", shape_fn=lambda op: [],
            doc="Does nothing; runs even when its inputs are dead (a control anchor).")


def switch(data, pred, name=None):
    """Forwards `data` to output 1 if `pred` is true, else to output 0 (TF's Switch).

    Returns:
        (output_false, output_true); the output not taken is dead at run time.
    """
    with _ops.name_scope(name, "Switch", [data, pred]) as name:
        data = _ops.convert_to_tensor(data, name="data")
        pred = _ops.convert_to_tensor(pred, name="pred")
        op_type = "RefSwitch" if data.dtype.is_ref_dtype else "Switch"
        op = apply_op(op_type, [data, pred], name=name)
        return op.outputs[0], op.outputs[1]


def merge(inputs, name=None):
    """Returns (the first live input, its index) (TF's Merge)."""
    with _ops.name_scope(name, "Merge", inputs) as name:
        inputs = [_ops.convert_to_tensor(x) for x in inputs]
        op_type = "RefMerge" if all(x.dtype.is_ref_dtype for x in inputs) else "Merge"
        if op_type == "Merge":
            inputs = [array_ops.identity(x) if x.dtype.is_ref_dtype else x for x in inputs]
        op = apply_op(op_type, [inputs], name=name)
        return op.outputs[0], op.outputs[1]


def enter(data, frame_name, is_constant=False, parallel_iterations=10, name=None):
    """Makes `data` available in the loop frame `frame_name`."""
    data = _ops.convert_to_tensor(data)
    op_type = "RefEnter" if data.dtype.is_ref_dtype else "Enter"
    return apply_op(op_type, [data], {"frame_name": frame_name, "is_constant": bool(is_constant),
                                      "parallel_iterations": int(parallel_iterations)},
                    name=name or "Enter").outputs[0]


def exit(data, name=None):  # noqa: A001 - TF name
    """Makes `data` available in the parent frame of its loop."""
    data = _ops.convert_to_tensor(data)
    op_type = "RefExit" if data.dtype.is_ref_dtype else "Exit"
    return apply_op(op_type, [data], name=name or "Exit").outputs[0]


def next_iteration(data, name=None):
    """Makes `data` available to the next iteration."""
    data = _ops.convert_to_tensor(data)
    op_type = "RefNextIteration" if data.dtype.is_ref_dtype else "NextIteration"
    return apply_op(op_type, [data], name=name or "NextIteration").outputs[0]


def loop_cond(pred, name=None):
    """Forwards the loop predicate (the pivot of a while loop)."""
    return apply_op("LoopCond", [_ops.convert_to_tensor(pred)], name=name or "LoopCond").outputs[0]


def control_trigger(name=None):
    """An op that runs even when its control inputs are dead."""
    return apply_op("ControlTrigger", [], name=name or "ControlTrigger")


def no_op(name=None):
    """An op that does nothing (runs after its control inputs)."""
    return apply_op("NoOp", [], name=name)


def _as_op(x):
    if hasattr(x, "_as_graph_element"):
        x = x._as_graph_element()
    if isinstance(x, _ops.Tensor):
        return x.op
    if isinstance(x, _ops.Operation):
        return x
    raise TypeError(f"Expected a Tensor or Operation, got {x!r}")


def group(*inputs, **kwargs):
    """Returns an op that runs after every input (TF1 `tf.group`).

    Args:
        *inputs: Tensors, Operations, or (nested) lists of them.
        name: optional name.
    """
    name = kwargs.pop("name", None)
    if kwargs:
        raise TypeError(f"Unknown keyword arguments: {list(kwargs)}")
    flat = []

    def walk(x):
        if isinstance(x, (list, _builtin_tuple, set)):
            for y in x:
                walk(y)
        elif isinstance(x, dict):
            for y in x.values():
                walk(y)
        elif x is not None:
            flat.append(_as_op(x))

    walk(inputs)
    by_device: dict[str, list] = {}
    for op in dict.fromkeys(flat):
        by_device.setdefault(op.device, []).append(op)
    g = flat[0].graph if flat else _ops.get_default_graph()
    with g.as_default():
        if len(by_device) <= 1:
            with _ops.control_dependencies(list(dict.fromkeys(flat))):
                return no_op(name=name or "group_deps")
        deps = []
        with _ops.name_scope(name, "group_deps") as scope:
            for dev in sorted(by_device):
                with _ops.device(dev), _ops.control_dependencies(by_device[dev]):
                    deps.append(no_op())
            with _ops.control_dependencies(deps):
                return no_op(name=scope)


def with_dependencies(dependencies, output_tensor, name=None):
    """Returns `output_tensor`'s value, computed only after `dependencies` ran."""
    with _ops.name_scope(name, "control_dependency"):
        with _ops.control_dependencies(dependencies):
            return array_ops.identity(output_tensor, name=name)


def tuple(tensors, name=None, control_inputs=None):  # noqa: A001 - TF1 name
    """Returns identities of `tensors` that are all available only after every one is computed."""
    with _ops.name_scope(name, "tuple") as scope:
        ops = [_as_op(t) for t in tensors if t is not None]
        if control_inputs:
            ops += [_as_op(c) for c in control_inputs]
        gate = group(*ops)
        out = []
        for t in tensors:
            if t is None:
                out.append(None)
            elif isinstance(t, _ops.Tensor):
                with _ops.control_dependencies([gate]):
                    out.append(array_ops.identity(t))
            else:
                out.append(gate)
        return out


register_op("Assert", inputs=["condition: bool", "data: T"], attrs=["T: list(type)", "summarize: int = 3"],
            shape_fn=lambda op: [], stateful=True,
            doc="Fails the step with InvalidArgumentError, showing `data`, when `condition` is false.")


def Assert(condition, data, summarize=None, name=None):  # noqa: N802 - TF name
    """Asserts that `condition` holds at run time (TF1 `tf.Assert`); returns the op.

    Args:
        condition: a boolean scalar Tensor.
        data: Tensors (or strings) printed in the error when the assertion fails.
        summarize: how many entries of each tensor to print (default 3).
    """
    with _ops.name_scope(name, "Assert", [condition]) as name:
        condition = _ops.convert_to_tensor(condition)
        data = [_ops.convert_to_tensor(d) for d in data]
        return apply_op("Assert", [condition, data],
                        {"summarize": 3 if summarize is None else int(summarize)}, name=name)


from kernflow.core.ops.control_flow_v1 import case, cond, while_loop  # noqa: E402
