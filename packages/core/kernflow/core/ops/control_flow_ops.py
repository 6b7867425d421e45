"""Grouping ops: no_op, group, tuple, with_dependencies (dynamic control flow arrives later)."""

from __future__ import annotations

from kernflow.core.framework import ops as _ops
from kernflow.core.framework.op_def_library import apply_op
from kernflow.core.framework.op_def_registry import register_op
from kernflow.core.ops import array_ops

__all__ = ["no_op", "group", "tuple", "with_dependencies"]

_builtin_tuple = tuple

register_op("NoOp", shape_fn=lambda op: [], doc="Does nothing; useful as a control-dependency anchor.")


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
