"""TF1 conditional accumulators: ConditionalAccumulator and SparseConditionalAccumulator.

An accumulator aggregates gradients for synchronous training. It keeps a global step (0 at first):
`apply_grad(grad, local_step)` adds `grad` unless `local_step` is smaller than the global step (a
stale gradient is silently dropped); `take_grad(num_required)` blocks until at least
`num_required` gradients were added, then returns their mean (their sum with
``reduction_type="SUM"``), clears the aggregate and increments the global step by one.
`set_global_step` sets the global step (also lower; the kernel logs a warning then). The sparse
accumulator aggregates `IndexedSlices` and averages each row over the gradients that touched it.
`num_dropped` (a kernflow extension, op ``AccumulatorNumDropped``; TF never exposed it) counts the
stale gradients an accumulator dropped since it was created.

Handles: TF1 types these ops' handle as ``Ref(string)``; kernflow follows its queues instead (TF's
V2 queue ops) and makes every accumulator handle a ``resource`` scalar, under the TF1 op names
(``ConditionalAccumulator``, ``AccumulatorApplyGradient``...; TF's ``ResourceConditionalAccumulator``
and ``ResourceAccumulator*`` variants are not registered). Every op of an accumulator is colocated
with it, so on a cluster each worker's applies and takes run on the accumulator's task (the ps).
take_grad is an asynchronous kernel that holds no thread while it waits and fails with Cancelled
when its step is cancelled (kernflow.kernels.cpu.accumulators).

Example::

    acc = kf.ConditionalAccumulator(kf.float32, shape=[2], shared_name="grad_w")
    apply = acc.apply_grad(grad_w, local_step=step)      # on every worker
    mean = acc.take_grad(num_workers)                     # on the chief
"""

from __future__ import annotations

import numpy as np

from kernflow.core.framework import dtypes as _dtypes
from kernflow.core.framework import ops as _ops
from kernflow.core.framework import tensor_shape as _ts
from kernflow.core.framework.indexed_slices import IndexedSlices
from kernflow.core.framework.op_def_library import apply_op
from kernflow.core.framework.op_def_registry import register_op
from kernflow.core.ops import math_ops

__all__ = ["ConditionalAccumulatorBase", "ConditionalAccumulator", "SparseConditionalAccumulator"]

ACCUMULATOR_OPS = ("ConditionalAccumulator", "SparseConditionalAccumulator",
                   "AccumulatorApplyGradient", "AccumulatorTakeGradient",
                   "AccumulatorNumAccumulated", "AccumulatorSetGlobalStep",
                   "SparseAccumulatorApplyGradient", "SparseAccumulatorTakeGradient",
                   "AccumulatorNumDropped")


# ---------------------------------------------------------------------------- op definitions
def _scalar(op):
    return [_ts.TensorShape([])]


def _scalar_inputs(*indices):
    """A shape function: the inputs at `indices` must be scalars; no outputs."""
    def shape_fn(op):
        for i in indices:
            op.inputs[i].shape.with_rank(0)
        return []
    return shape_fn


def _take_shape(op):
    op.inputs[1].shape.with_rank(0)
    return [_ts.TensorShape(None)]  # the Python wrapper sets the accumulator's shape


def _sparse_take_shape(op):
    op.inputs[1].shape.with_rank(0)
    return [_ts.TensorShape([None]), _ts.TensorShape(None), _ts.TensorShape([None])]


def _sparse_apply_shape(op):
    op.inputs[1].shape.with_rank(0)
    op.inputs[2].shape.with_rank(1)
    op.inputs[3].shape.with_rank_at_least(1)
    op.inputs[4].shape.with_rank(1)
    return []


_CREATE_ATTRS = ["dtype: numbertype", "shape: shape", "container: string = ''",
                 "shared_name: string = ''", "reduction_type: {'MEAN', 'SUM'} = 'MEAN'"]
_SHARED = (" It lives in the resource container `container` of its device, under `shared_name` (a "
           "private name when empty); sessions that name the same shared accumulator on one server "
           "share it. Its global step starts at 0.")

register_op("ConditionalAccumulator", outputs=["handle: resource"], attrs=_CREATE_ATTRS,
            shape_fn=_scalar, stateful=True,
            doc="A conditional accumulator for aggregating dense gradients of type `dtype` and shape "
                "`shape` (partially known shapes allowed; an unknown one accepts any, then every "
                "gradient until the next take must have the shape of the first). Gradients whose "
                "local step is below the accumulator's global step are dropped. `reduction_type` "
                "MEAN takes the average, SUM the sum." + _SHARED)
register_op("SparseConditionalAccumulator", outputs=["handle: resource"], attrs=_CREATE_ATTRS,
            shape_fn=_scalar, stateful=True,
            doc="A conditional accumulator for aggregating sparse gradients (indices, values, dense "
                "shape), of type `dtype` and dense shape `shape`. With MEAN, each row of the result "
                "is averaged over the gradients that had that row." + _SHARED)
register_op("AccumulatorApplyGradient",
            inputs=["handle: resource", "local_step: int64", "gradient: dtype"],
            attrs=["dtype: numbertype"], shape_fn=_scalar_inputs(1), stateful=True,
            doc="Adds `gradient` to the ConditionalAccumulator `handle`, unless `local_step` is "
                "smaller than its global step (then the stale gradient is silently dropped). Fails "
                "with InvalidArgument when the type or the shape differs from the accumulator's.")
register_op("AccumulatorTakeGradient", inputs=["handle: resource", "num_required: int32"],
            outputs=["average: dtype"], attrs=["dtype: numbertype"], shape_fn=_take_shape,
            stateful=True,
            doc="Waits until at least `num_required` (>= 1) gradients were added to the "
                "ConditionalAccumulator `handle`, then returns their mean (or sum), resets the "
                "aggregate and increments the accumulator's global step by 1. Holds no thread while "
                "it waits; fails with Cancelled when the step is cancelled.")
register_op("AccumulatorNumAccumulated", inputs=["handle: resource"],
            outputs=["num_accumulated: int32"], shape_fn=_scalar, stateful=True,
            doc="The number of gradients added to the (dense or sparse) accumulator since the last "
                "take.")
register_op("AccumulatorNumDropped", inputs=["handle: resource"],
            outputs=["num_dropped: int64"], shape_fn=_scalar, stateful=True,
            doc="The number of stale gradients (local step below the global step) the (dense or "
                "sparse) accumulator `handle` dropped since it was created. A kernflow extension: TF "
                "drops stale gradients without counting them.")
register_op("AccumulatorSetGlobalStep", inputs=["handle: resource", "new_global_step: int64"],
            shape_fn=_scalar_inputs(1), stateful=True,
            doc="Sets the global step of the (dense or sparse) accumulator `handle` to "
                "`new_global_step`; a value below the current one is set too, with a logged warning.")
register_op("SparseAccumulatorApplyGradient",
            inputs=["handle: resource", "local_step: int64", "gradient_indices: int64",
                    "gradient_values: dtype", "gradient_shape: int64"],
            attrs=["dtype: numbertype", "has_known_shape: bool"], shape_fn=_sparse_apply_shape,
            stateful=True,
            doc="Adds the sparse gradient (`gradient_indices`, a vector of row indices, in any order "
                "and possibly repeated; `gradient_values`, one row per index; `gradient_shape` its "
                "dense shape, checked against the accumulator's when `has_known_shape`) to the "
                "SparseConditionalAccumulator `handle`, unless `local_step` is smaller than its "
                "global step. Repeated indices of one gradient add up and count as one gradient for "
                "that row.")
register_op("SparseAccumulatorTakeGradient", inputs=["handle: resource", "num_required: int32"],
            outputs=["indices: int64", "values: dtype", "shape: int64"],
            attrs=["dtype: numbertype"], shape_fn=_sparse_take_shape, stateful=True,
            doc="Waits until at least `num_required` (>= 1) gradients were added to the "
                "SparseConditionalAccumulator `handle`, then returns their aggregate: sorted unique "
                "`indices`, the `values` of those rows (each averaged over the gradients that had "
                "it, or summed) and the dense `shape` (dimension 0 is -1 when the accumulator's is "
                "unknown). Resets the aggregate and increments the global step by 1; fails with "
                "Cancelled when the step is cancelled.")


# ---------------------------------------------------------------------------- Python classes
def _int64(value, name):
    """`value` as an int64 tensor: Python and numpy values directly, tensors and variables of
    other integer types through a Cast (as TF)."""
    if isinstance(value, (int, list, tuple, np.ndarray, np.integer)):
        return _ops.convert_to_tensor(value, dtype=_dtypes.int64, name=name)
    t = _ops.convert_to_tensor(value, name=name)
    return t if t.dtype.base_dtype == _dtypes.int64 else math_ops.cast(t, _dtypes.int64)


def _create(op_type, dtype, shape, shared_name, name, reduction_type):
    attrs = {"dtype": dtype, "shape": shape, "shared_name": shared_name or "",
             "reduction_type": reduction_type}
    with _ops.init_scope():
        return apply_op(op_type, [], attrs, name=name).outputs[0]


def _new(op_type, dtype, shape, shared_name, name, reduction_type):
    """(dtype, shape, handle) of a new accumulator op of `op_type`."""
    dtype = _dtypes.as_dtype(dtype).base_dtype
    shape = _ts.as_shape(shape) if shape is not None else _ts.TensorShape(None)
    return dtype, shape, _create(op_type, dtype, shape, shared_name, name, _reduction(reduction_type))


class ConditionalAccumulatorBase:
    """The ops every conditional accumulator has: num_accumulated and set_global_step.

    Args:
        dtype: the type of the accumulated gradients.
        shape: their (possibly partial) shape, a TensorShape.
        accumulator_ref: the accumulator's ``resource`` handle tensor.
    """

    def __init__(self, dtype, shape, accumulator_ref):
        self._dtype = dtype
        self._shape = shape
        self._accumulator_ref = accumulator_ref
        self._name = accumulator_ref.op.name.split("/")[-1]

    @property
    def accumulator_ref(self):
        """The accumulator's handle tensor."""
        return self._accumulator_ref

    @property
    def name(self) -> str:
        """The name of the accumulator op."""
        return self._accumulator_ref.op.name

    @property
    def dtype(self):
        """The type of the accumulated gradients."""
        return self._dtype

    def _apply(self, op_type, inputs, attrs, name):
        with _ops.colocate_with(self._accumulator_ref):
            return apply_op(op_type, [self._accumulator_ref] + inputs, attrs, name=name)

    def num_accumulated(self, name=None):
        """A scalar int32 tensor: the number of gradients added since the last take."""
        if name is None:
            name = f"{self._name}_NumAccumulated"
        return self._apply("AccumulatorNumAccumulated", [], {}, name).outputs[0]

    def num_dropped(self, name=None):
        """A scalar int64 tensor: the stale gradients dropped since the accumulator was created.

        A kernflow extension (op ``AccumulatorNumDropped``): TF drops stale gradients silently.
        """
        if name is None:
            name = f"{self._name}_NumDropped"
        return self._apply("AccumulatorNumDropped", [], {}, name).outputs[0]

    def set_global_step(self, new_global_step, name=None):
        """Sets the accumulator's global step (gradients with a smaller local step are dropped).

        Args:
            new_global_step: an integer scalar (tensor); cast to int64.
            name: op name.

        Returns:
            The set Operation.
        """
        step = _int64(new_global_step, "new_global_step")
        return self._apply("AccumulatorSetGlobalStep", [step], {}, name)

    def _take_inputs(self, num_required):
        with _ops.colocate_with(self._accumulator_ref):
            return [_ops.convert_to_tensor(num_required, dtype=_dtypes.int32, name="num_required")]


def _reduction(reduction_type: str) -> str:
    if reduction_type not in ("MEAN", "SUM"):
        raise ValueError(f"reduction_type must be 'MEAN' or 'SUM', got {reduction_type!r}")
    return reduction_type


class ConditionalAccumulator(ConditionalAccumulatorBase):
    """A conditional accumulator for aggregating dense gradients.

    Up-to-date gradients (computed at a local step no smaller than the accumulator's global step)
    are added; taking the aggregate waits until enough of them arrived.

    Args:
        dtype: the type of the accumulated gradients.
        shape: their shape (None: any, fixed by each first gradient until the next take).
        shared_name: share the accumulator, under this name, with other sessions of the server.
        name: op name.
        reduction_type: "MEAN" (take_grad averages) or "SUM".
    """

    def __init__(self, dtype, shape=None, shared_name=None, name="conditional_accumulator",
                 reduction_type="MEAN"):
        super().__init__(*_new("ConditionalAccumulator", dtype, shape, shared_name, name, reduction_type))

    def apply_grad(self, grad, local_step=0, name=None):
        """Adds `grad` unless it is stale (`local_step` below the accumulator's global step).

        Args:
            grad: the gradient (converted to the accumulator's dtype).
            local_step: the step at which it was computed (cast to int64).
            name: op name.

        Returns:
            The Operation that (conditionally) applies the gradient.

        Raises:
            ValueError: `grad`'s static shape is incompatible with the accumulator's.
        """
        grad = _ops.convert_to_tensor(grad, dtype=self._dtype, name="grad")
        if not grad.shape.is_compatible_with(self._shape):
            raise ValueError(f"Shape {grad.shape} of gradient {grad.name} is incompatible with the "
                             f"shape {self._shape} of accumulator {self.name}")
        step = _int64(local_step, "local_step")
        return self._apply("AccumulatorApplyGradient", [step, grad], {"dtype": self._dtype}, name)

    def take_grad(self, num_required, name=None):
        """Waits for `num_required` gradients; returns their mean (or sum) and bumps the step.

        Args:
            num_required: int32 scalar, at least 1 (InvalidArgumentError at run time otherwise).
            name: op name.

        Returns:
            The aggregate gradient, a tensor of the accumulator's dtype and shape.
        """
        out = self._apply("AccumulatorTakeGradient", self._take_inputs(num_required),
                          {"dtype": self._dtype}, name).outputs[0]
        out.set_shape(self._shape)
        return out


class SparseConditionalAccumulator(ConditionalAccumulatorBase):
    """A conditional accumulator for aggregating sparse gradients (`IndexedSlices`).

    Args:
        dtype, shared_name, name, reduction_type: as `ConditionalAccumulator`.
        shape: the dense shape of the gradients (None: unknown).
    """

    def __init__(self, dtype, shape=None, shared_name=None, name="sparse_conditional_accumulator",
                 reduction_type="MEAN"):
        super().__init__(*_new("SparseConditionalAccumulator", dtype, shape, shared_name, name,
                               reduction_type))

    def apply_indexed_slices_grad(self, grad, local_step=0, name=None):
        """Adds the `IndexedSlices` `grad` unless it is stale; see `apply_grad`."""
        return self.apply_grad(grad.indices, grad.values, grad.dense_shape, local_step, name)

    def apply_grad(self, grad_indices, grad_values, grad_shape=None, local_step=0, name=None):
        """Adds a sparse gradient unless it is stale (`local_step` below the global step).

        Args:
            grad_indices: a vector of row indices (any order; repeated rows add up).
            grad_values: one row per index, of the accumulator's dtype.
            grad_shape: the gradient's dense shape, checked against the accumulator's (or None).
            local_step: the step at which it was computed (cast to int64).
            name: op name.

        Returns:
            The Operation that (conditionally) applies the gradient.
        """
        values = _ops.convert_to_tensor(grad_values, dtype=self._dtype, name="grad_values")
        indices = _int64(grad_indices, "grad_indices")
        shape = _int64([] if grad_shape is None else grad_shape, "grad_shape")
        step = _int64(local_step, "local_step")
        return self._apply("SparseAccumulatorApplyGradient", [step, indices, values, shape],
                           {"dtype": self._dtype, "has_known_shape": grad_shape is not None}, name)

    def take_grad(self, num_required, name=None):
        """Waits for `num_required` gradients; returns ``(indices, values, shape)`` of the aggregate.

        Indices are sorted and unique; with MEAN each row is averaged over the gradients that had
        it. Increments the global step by 1.
        """
        op = self._apply("SparseAccumulatorTakeGradient", self._take_inputs(num_required),
                         {"dtype": self._dtype}, name)
        indices, values, shape = op.outputs
        if self._shape.rank is not None:
            values.set_shape(_ts.TensorShape([None]).concatenate(self._shape[1:]))
            shape.set_shape([self._shape.rank])
        return indices, values, shape

    def take_indexed_slices_grad(self, num_required, name=None):
        """Like `take_grad`, as an `IndexedSlices` (values, indices, dense_shape)."""
        indices, values, shape = self.take_grad(num_required, name=name)
        return IndexedSlices(values=values, indices=indices, dense_shape=shape)
