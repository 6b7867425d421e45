"""`MixedPrecisionLossScaleOptimizer` and `enable/disable_mixed_precision_graph_rewrite` (TF1.15's
`tf.train.experimental`): loss scaling around any `kf.train.Optimizer`.

`compute_gradients` differentiates ``loss * loss_scale`` and divides each gradient by the scale;
`apply_gradients` updates the loss scale and runs the wrapped optimizer's update (and its global
step increment) in the true branch of a `kf.cond` on "every gradient is finite". As in TF1.15, a
skipped step therefore leaves the variables, the slots *and the global step* as they were; only
the loss scale changes. With a `FixedLossScale` there is nothing to decide and `apply_gradients` is
the wrapped optimizer's.
"""

from __future__ import annotations

from kernflow.core import tf_logging as _logging
from kernflow.core.framework import ops as _ops
from kernflow.core.framework.indexed_slices import IndexedSlices
from kernflow.core.train import loss_scale as _loss_scale
from kernflow.core.train.optimizer import Optimizer

__all__ = ["MixedPrecisionLossScaleOptimizer", "enable_mixed_precision_graph_rewrite",
           "disable_mixed_precision_graph_rewrite"]


class MixedPrecisionLossScaleOptimizer(Optimizer):
    """An optimizer that applies loss scaling to another optimizer's steps.

    Example::

        opt = kf.train.experimental.MixedPrecisionLossScaleOptimizer(
            kf.train.AdamOptimizer(1e-3), "dynamic")
        train_op = opt.minimize(loss, global_step=kf.train.get_or_create_global_step())

    It takes the wrapped optimizer's name and locking, and shares its slots: `get_slot`,
    `get_slot_names` and `variables` are the wrapped optimizer's (the loss scale's variables are
    global variables of their own).
    """

    def __init__(self, opt, loss_scale):
        """
        Args:
            opt: the `kf.train.Optimizer` to wrap.
            loss_scale: a `LossScale`, a Python number (a `FixedLossScale`) or ``"dynamic"`` (a
                `DynamicLossScale` with its defaults, its variables made in the default graph).

        Raises:
            ValueError: `opt` is not an Optimizer, or `loss_scale` is None or not one of the above.
        """
        if not isinstance(opt, Optimizer):
            raise ValueError(f'"opt" must be an instance of Optimizer, but got: {type(opt)}')
        super().__init__(opt._use_locking, opt.get_name())
        self._optimizer = opt
        self._loss_scale = _loss_scale.get(loss_scale)
        if self._loss_scale is None:
            raise ValueError("loss_scale cannot be None.")

    @property
    def loss_scale(self):
        """The `LossScale` in use (kernflow's accessor; TF1.15 keeps it private)."""
        return self._loss_scale

    def compute_gradients(self, loss, var_list=None, gate_gradients=Optimizer.GATE_OP,
                          aggregation_method=None, colocate_gradients_with_ops=False, grad_loss=None):
        """The wrapped optimizer's gradients of ``loss * loss_scale``, divided by the loss scale.

        Returns:
            A list of (gradient, variable) pairs; a gradient is None where the wrapped optimizer's is.
        """
        from kernflow.core.ops import math_ops
        scale = self._loss_scale()
        loss = _ops.convert_to_tensor(loss)
        scaled = math_ops.multiply(loss, math_ops.cast(scale, loss.dtype.base_dtype), name="scaled_loss")
        grads_and_vars = self._optimizer.compute_gradients(
            scaled, var_list=var_list, gate_gradients=gate_gradients,
            aggregation_method=aggregation_method,
            colocate_gradients_with_ops=colocate_gradients_with_ops, grad_loss=grad_loss)
        reciprocal = 1.0 / scale
        return [(_unscale(g, reciprocal), v) for g, v in grads_and_vars]

    def apply_gradients(self, grads_and_vars, global_step=None, name=None):
        """Updates the loss scale and, when every gradient is finite, applies them with the
        wrapped optimizer (incrementing `global_step` only then, as TF1.15 does).

        Returns:
            An op that does both.
        """
        from kernflow.core.ops import control_flow_ops
        if isinstance(self._loss_scale, _loss_scale.FixedLossScale):
            return self._optimizer.apply_gradients(grads_and_vars, global_step=global_step, name=name)
        grads_and_vars = list(grads_and_vars)
        update_op, should_apply = self._loss_scale.update([g for g, _ in grads_and_vars])

        def apply():
            return self._optimizer.apply_gradients(grads_and_vars, global_step=global_step, name=name)

        if isinstance(should_apply, bool):
            maybe_apply = apply() if should_apply else control_flow_ops.no_op()
        else:
            maybe_apply = control_flow_ops.cond(should_apply, apply, control_flow_ops.no_op,
                                                name="maybe_apply")
        return control_flow_ops.group(maybe_apply, update_op, name=name or self._name)

    def get_slot(self, var, name):
        return self._optimizer.get_slot(var, name)

    def get_slot_names(self):
        return self._optimizer.get_slot_names()

    def variables(self):
        return self._optimizer.variables()

    # The update ops are the wrapped optimizer's: these hooks are never reached.
    def _create_slots(self, var_list):
        raise RuntimeError("MixedPrecisionLossScaleOptimizer._create_slots should never be called")

    def _apply_dense(self, grad, var):
        raise RuntimeError("MixedPrecisionLossScaleOptimizer._apply_dense should never be called")

    def _apply_sparse(self, grad, var):
        raise RuntimeError("MixedPrecisionLossScaleOptimizer._apply_sparse should never be called")


def _unscale(grad, reciprocal):
    from kernflow.core.ops import math_ops
    if grad is None:
        return None
    if isinstance(grad, IndexedSlices):
        values = grad.values * math_ops.cast(reciprocal, grad.values.dtype.base_dtype)
        return IndexedSlices(values, grad.indices, grad.dense_shape)
    grad = _ops.convert_to_tensor(grad)
    return grad * math_ops.cast(reciprocal, grad.dtype.base_dtype)


# --------------------------------------------------------------------------- the "graph rewrite"
_rewrite = {"enabled": False, "logged": False}

_NO_REWRITE = ("kernflow has no automatic mixed precision graph rewrite: no op is converted to "
               "float16 (as TF1 on a device without float16 support). The optimizer is wrapped in "
               "a MixedPrecisionLossScaleOptimizer, so loss scaling applies to float16 computation "
               "you write yourself (variables in float32, cast to float16 for the compute).")


def enable_mixed_precision_graph_rewrite(opt, loss_scale="dynamic"):
    """Wraps `opt` for mixed-precision training and turns the graph rewrite flag on.

    In TensorFlow this also makes new Sessions rewrite float32 ops into float16 on GPUs with
    float16 support. kernflow has no such rewrite (logged once, as TF does where no device
    supports float16); what remains, and what matters for training with float16 ops you write
    yourself, is the loss-scaling optimizer returned here.

    Args:
        opt: a `kf.train.Optimizer`, not already a `MixedPrecisionLossScaleOptimizer`.
        loss_scale: a `LossScale`, a Python number or ``"dynamic"`` (the default).

    Returns:
        `opt` wrapped in a `MixedPrecisionLossScaleOptimizer`.

    Raises:
        ValueError: `opt` is already wrapped, not an Optimizer, or `loss_scale` is invalid.
    """
    if isinstance(opt, MixedPrecisionLossScaleOptimizer):
        raise ValueError('"opt" must not already be an instance of a MixedPrecisionLossScaleOptimizer. '
                         "`enable_mixed_precision_graph_rewrite` will automatically wrap the optimizer "
                         "with a MixedPrecisionLossScaleOptimizer.")
    if not isinstance(opt, Optimizer):
        raise ValueError(f'"opt" must be an instance of a kf.train.Optimizer, but got: {opt!r}')
    wrapped = MixedPrecisionLossScaleOptimizer(opt, loss_scale)
    _rewrite["enabled"] = True
    if not _rewrite["logged"]:
        _rewrite["logged"] = True
        _logging.warning(_NO_REWRITE)
    return wrapped


def disable_mixed_precision_graph_rewrite():
    """Turns the graph rewrite flag off. Optimizers already wrapped keep scaling their loss."""
    if not _rewrite["enabled"]:
        _logging.warning("disable_mixed_precision_graph_rewrite() called when mixed precision is "
                         "already disabled.")
    _rewrite["enabled"] = False


def mixed_precision_graph_rewrite_is_enabled() -> bool:
    """Whether `enable_mixed_precision_graph_rewrite` was called last (not disable)."""
    return _rewrite["enabled"]
