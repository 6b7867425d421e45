"""State ops: VariableV2, Assign and in-place updates, scatter updates, initialization checks.

A VariableV2 output is a reference (dtype ``float32_ref``...): the executor hands the variable's
state to ops with `Ref` inputs and its current value to everything else.
"""

from __future__ import annotations

from kernflow.core.framework import dtypes as _dtypes
from kernflow.core.framework import tensor_shape as _ts
from kernflow.core.framework.op_def_library import apply_op
from kernflow.core.framework.op_def_registry import register_op
from kernflow.core.ops import common_shapes

__all__ = ["assign", "assign_add", "assign_sub", "scatter_update", "scatter_add", "scatter_sub",
           "is_variable_initialized", "variable_op_v2"]


def _assign_shape(op):
    if op.get_attr("validate_shape"):
        return [op.inputs[0].shape.merge_with(op.inputs[1].shape)]
    return [op.inputs[1].shape]


def _scatter_shape(op):
    ref, idx, upd = (t.shape for t in op.inputs)
    if ref.rank is not None and idx.rank is not None and upd.rank is not None:
        upd.assert_is_compatible_with(idx.concatenate(ref[1:]))
    return [ref]


register_op("VariableV2", outputs=["ref: Ref(dtype)"],
            attrs=["shape: shape", "dtype: type", "container: string = ''", "shared_name: string = ''"],
            shape_fn=lambda op: [op.get_attr("shape")], stateful=True,
            doc="Holds state that persists across steps, in the device's resource container "
                "`container` under `shared_name` (the node name when empty).")
register_op("Assign", inputs=["ref: Ref(T)", "value: T"], outputs=["output_ref: Ref(T)"],
            attrs=["T: type", "validate_shape: bool = true", "use_locking: bool = true"],
            shape_fn=_assign_shape, allows_uninitialized_input=True,
            doc="Updates `ref` to hold `value` (a copy); outputs `ref` for chaining.")
for _name, _verb in (("AssignAdd", "adding"), ("AssignSub", "subtracting")):
    register_op(_name, inputs=["ref: Ref(T)", "value: T"], outputs=["output_ref: Ref(T)"],
                attrs=["T: numbertype", "use_locking: bool = false"],
                shape_fn=lambda op: [op.inputs[0].shape.merge_with(op.inputs[1].shape)],
                doc=f"Updates `ref` in place by {_verb} `value` (same shape).")
for _name, _verb in (("ScatterUpdate", "assigning"), ("ScatterAdd", "adding"), ("ScatterSub", "subtracting")):
    register_op(_name, inputs=["ref: Ref(T)", "indices: Tindices", "updates: T"],
                outputs=["output_ref: Ref(T)"],
                attrs=["T: type", "Tindices: {int32, int64}", "use_locking: bool = true"],
                shape_fn=_scatter_shape,
                doc=f"Updates rows `indices` of `ref` in place by {_verb} `updates` "
                    "(duplicate indices accumulate for add/sub).")
register_op("IsVariableInitialized", inputs=["ref: Ref(dtype)"], outputs=["is_initialized: bool"],
            attrs=["dtype: type"], shape_fn=common_shapes.scalar, allows_uninitialized_input=True,
            doc="True once the variable has been assigned a value.")


def variable_op_v2(shape, dtype, name="Variable", container="", shared_name=""):
    """Creates a VariableV2 op and returns its reference output."""
    return apply_op("VariableV2", [], {"shape": _ts.as_shape(shape), "dtype": _dtypes.as_dtype(dtype),
                                       "container": container, "shared_name": shared_name},
                    name=name).outputs[0]


def _ref_of(ref):
    from kernflow.core.framework import ops as _ops
    if hasattr(ref, "_ref") and not isinstance(ref, _ops.Tensor):
        return ref._ref()
    return ref


def assign(ref, value, validate_shape=None, use_locking=None, name=None):
    """Assigns `value` to the variable `ref`; returns the reference (its value once run)."""
    attrs = {}
    if validate_shape is not None:
        attrs["validate_shape"] = validate_shape
    if use_locking is not None:
        attrs["use_locking"] = use_locking
    return apply_op("Assign", [_ref_of(ref), value], attrs, name=name).outputs[0]


def assign_add(ref, value, use_locking=None, name=None):
    """Adds `value` to the variable `ref` in place; returns the reference."""
    attrs = {} if use_locking is None else {"use_locking": use_locking}
    return apply_op("AssignAdd", [_ref_of(ref), value], attrs, name=name).outputs[0]


def assign_sub(ref, value, use_locking=None, name=None):
    """Subtracts `value` from the variable `ref` in place; returns the reference."""
    attrs = {} if use_locking is None else {"use_locking": use_locking}
    return apply_op("AssignSub", [_ref_of(ref), value], attrs, name=name).outputs[0]


def _scatter(op_type, ref, indices, updates, use_locking, name):
    attrs = {} if use_locking is None else {"use_locking": use_locking}
    return apply_op(op_type, [_ref_of(ref), indices, updates], attrs, name=name).outputs[0]


def scatter_update(ref, indices, updates, use_locking=True, name=None):
    """Sets ``ref[indices, ...] = updates``."""
    return _scatter("ScatterUpdate", ref, indices, updates, use_locking, name)


def scatter_add(ref, indices, updates, use_locking=False, name=None):
    """Adds `updates` into rows `indices` of `ref` (duplicates accumulate)."""
    return _scatter("ScatterAdd", ref, indices, updates, use_locking, name)


def scatter_sub(ref, indices, updates, use_locking=False, name=None):
    """Subtracts `updates` from rows `indices` of `ref` (duplicates accumulate)."""
    return _scatter("ScatterSub", ref, indices, updates, use_locking, name)


def is_variable_initialized(ref, name=None):
    """Returns a bool scalar: whether `ref` has been initialized."""
    r = _ref_of(ref)
    return apply_op("IsVariableInitialized", [r], {"dtype": r.dtype.base_dtype}, name=name).outputs[0]
