"""The `Optimizer` base class (TF1's tf.train.Optimizer): gradients in, fused updates out."""

from __future__ import annotations

from kernflow.core.framework import ops as _ops
from kernflow.core.framework.indexed_slices import IndexedSlices

__all__ = ["Optimizer"]


def _var_key(var):
    return var.op.name


class Optimizer:
    """Base class of optimizers. Subclasses implement `_create_slots`, `_prepare`, `_apply_dense`
    and `_apply_sparse` (each building one fused update op per variable).

    Slot variables are named after their variable and the optimizer, as TF names them
    ("w/Momentum", "w/Adam", "w/Adam_1"), and placed with the variable.
    """

    GATE_NONE = 0
    GATE_OP = 1
    GATE_GRAPH = 2

    def __init__(self, use_locking, name):
        if not name:
            raise ValueError("Must specify the optimizer name")
        self._use_locking = use_locking
        self._name = name
        self._slots: dict[str, dict] = {}
        self._non_slot: dict = {}

    def get_name(self):
        return self._name

    # ------------------------------------------------------------------ public API
    def minimize(self, loss, global_step=None, var_list=None, gate_gradients=GATE_OP,
                 aggregation_method=None, colocate_gradients_with_ops=False, name=None, grad_loss=None):
        """compute_gradients + apply_gradients.

        Raises:
            ValueError: if no variable has a gradient.
        """
        gv = self.compute_gradients(loss, var_list=var_list, gate_gradients=gate_gradients,
                                    aggregation_method=aggregation_method,
                                    colocate_gradients_with_ops=colocate_gradients_with_ops,
                                    grad_loss=grad_loss)
        vars_with_grad = [v for g, v in gv if g is not None]
        if not vars_with_grad:
            raise ValueError(f"No gradients provided for any variable, check your graph for ops that "
                             f"do not support gradients, between variables "
                             f"{[v.name for _, v in gv]} and loss {loss}.")
        return self.apply_gradients(gv, global_step=global_step, name=name)

    def compute_gradients(self, loss, var_list=None, gate_gradients=GATE_OP, aggregation_method=None,
                          colocate_gradients_with_ops=False, grad_loss=None):
        """Returns [(gradient, variable)] for `var_list` (default: trainable variables).

        Raises:
            ValueError: no variables to optimize, or a gradient for a non-float variable.
        """
        from kernflow.core.ops import control_flow_ops, gradients_impl, variables
        if var_list is None:
            var_list = variables.trainable_variables() + _ops.get_collection(
                _ops.GraphKeys.TRAINABLE_RESOURCE_VARIABLES if hasattr(
                    _ops.GraphKeys, "TRAINABLE_RESOURCE_VARIABLES") else "_none_")
        var_list = _flatten_partitioned(var_list)
        if not var_list:
            raise ValueError("No variables to optimize.")
        for v in var_list:
            if not v.dtype.base_dtype.is_floating:
                raise ValueError(f"Invalid type {v.dtype.base_dtype.name} for {v.name}, expected: "
                                 f"float32, float64, float16.")
        grads = gradients_impl.gradients(loss, var_list, grad_ys=grad_loss,
                                         gate_gradients=(gate_gradients == Optimizer.GATE_OP),
                                         colocate_gradients_with_ops=colocate_gradients_with_ops,
                                         aggregation_method=aggregation_method)
        if gate_gradients == Optimizer.GATE_GRAPH:
            dense = [g for g in grads if isinstance(g, _ops.Tensor)]
            gated = iter(control_flow_ops.tuple(dense))
            grads = [next(gated) if isinstance(g, _ops.Tensor) else g for g in grads]
        return list(zip(grads, var_list))

    def apply_gradients(self, grads_and_vars, global_step=None, name=None):
        """Builds the update ops; returns an op that runs them all (and increments global_step).

        Raises:
            ValueError: if no (gradient, variable) pair has a gradient.
        """
        from kernflow.core.ops import state_ops
        gv = [(g, v) for g, v in grads_and_vars]
        if not gv:
            raise ValueError("No variables provided.")
        live = [(g, v) for g, v in gv if g is not None]
        if not live:
            raise ValueError(f"No gradients provided for any variable: {[v.name for _, v in gv]}.")
        var_list = [v for _, v in live]
        with _ops.init_scope():
            self._create_slots(var_list)
        updates = []
        with _ops.name_scope(name, self._name) as scope:
            self._prepare()
            for g, v in live:
                with _ops.name_scope("update_" + v.op.name), _ops.colocate_with(v):
                    if isinstance(g, IndexedSlices):
                        updates.append(self._apply_sparse_duplicate_indices(g, v))
                    else:
                        updates.append(self._apply_dense(_ops.convert_to_tensor(g), v))
            if global_step is None:
                return self._finish(updates, scope)
            with _ops.control_dependencies([self._finish(updates, "update")]):
                with _ops.colocate_with(global_step):
                    return state_ops.assign_add(global_step, 1, name=scope).op

    def get_slot(self, var, name):
        """Returns the slot variable `name` created for `var`, or None."""
        return self._slots.get(name, {}).get(_var_key(var))

    def get_slot_names(self):
        return sorted(self._slots)

    def variables(self):
        """All variables this optimizer created (slots and non-slot variables)."""
        out = list(self._non_slot.values())
        for slots in self._slots.values():
            out.extend(slots.values())
        return out

    # ------------------------------------------------------------------ for subclasses
    def _create_slots(self, var_list):
        pass

    def _prepare(self):
        pass

    def _apply_dense(self, grad, var):
        raise NotImplementedError

    def _apply_sparse(self, grad, var):
        raise NotImplementedError

    # The built-in optimizers' sparse kernels sum the rows of repeated indices themselves (as TF's
    # results do); they set this, and skip the extra ops.
    _sparse_apply_sums_duplicates = False

    def _apply_sparse_duplicate_indices(self, grad, var):
        """TF1's: `_apply_sparse` of `grad` with the rows of repeated indices summed, so that a
        subclass's `_apply_sparse` sees each index once (override it to take them as they come)."""
        if self._sparse_apply_sums_duplicates:
            return self._apply_sparse(grad, var)
        from kernflow.core.ops import array_ops, array_ops_extra, segment_ops
        unique, positions = array_ops_extra.unique(grad.indices)
        summed = segment_ops.unsorted_segment_sum(grad.values, positions, array_ops.shape(unique)[0])
        return self._apply_sparse(IndexedSlices(summed, unique, grad.dense_shape), var)

    def _finish(self, update_ops, name_scope):
        from kernflow.core.ops import control_flow_ops
        return control_flow_ops.group(*update_ops, name=name_scope)

    def _hyper(self, value, name, dtype):
        """A hyper-parameter as a tensor of the variable's dtype (a Python number or a Tensor)."""
        from kernflow.core.ops import math_ops
        if isinstance(value, _ops.Tensor):
            return value if value.dtype.base_dtype == dtype else math_ops.cast(value, dtype)
        if callable(value):
            value = value()
            return self._hyper(value, name, dtype)
        return _ops.convert_to_tensor(value, dtype=dtype, name=name)

    def _zeros_slot(self, var, slot_name, op_name):
        return self._slot(var, slot_name, op_name, lambda: _zeros_for(var))

    def _slot(self, var, slot_name, op_name, init):
        from kernflow.core.ops.variables import Variable
        slots = self._slots.setdefault(slot_name, {})
        key = _var_key(var)
        if key not in slots:
            # "w/Adam", then "w/Adam_1" for a second slot of the same optimizer (TF's names).
            with _ops.colocate_with(var), _ops.name_scope(None):
                slots[key] = Variable(init(), name=f"{var.op.name}/{op_name}", trainable=False)
            _slice_slot(slots[key], var)
        return slots[key]

    def _get_or_make_non_slot(self, initial_value, name, colocate_with):
        from kernflow.core.ops.variables import Variable
        v = self._non_slot.get(name)
        if v is None:
            with _ops.colocate_with(colocate_with), _ops.name_scope(None):
                v = Variable(initial_value, name=name, trainable=False)
            self._non_slot[name] = v
        return v


def _flatten_partitioned(var_list):
    """`var_list` with each PartitionedVariable replaced by its parts (TF lists the parts)."""
    from kernflow.core.ops.partitioned_variables import PartitionedVariable
    out = []
    for v in var_list:
        out.extend(list(v) if isinstance(v, PartitionedVariable) else [v])
    return out


def _slice_slot(slot, var):
    """A slot of a part is a part of the full slot (TF's slot_creator): "w/part_0/Adam_1" is
    the slice of "w/Adam_1" where "w/part_0" sits in "w"."""
    info = getattr(var, "_save_slice_info", None)
    if info is not None:
        from kernflow.core.ops.partitioned_variables import SaveSliceInfo
        suffix = slot.op.name[len(var.op.name) + 1:]
        slot._save_slice_info = SaveSliceInfo(f"{info.full_name}/{suffix}", info.full_shape,
                                              info.var_offset, info.var_shape)


def _zeros_for(var):
    import numpy as np
    shape = var.shape.as_list()
    return np.zeros(shape, dtype=var.dtype.base_dtype.as_numpy_dtype)
