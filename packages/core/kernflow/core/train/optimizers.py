"""The built-in optimizers: GradientDescent, Momentum, Adagrad, RMSProp, Adam (TF1 semantics).

Each builds one fused update op per variable (`kernflow.core.ops.training_ops`), dense or sparse
(IndexedSlices gradients touch only the rows present). They are registered by name through the
`kernflow_register_optimizers` hook, as third-party optimizers are.
"""

from __future__ import annotations

import numpy as np

from kernflow.core.framework import ops as _ops
from kernflow.core.ops import training_ops as T
from kernflow.core.train.optimizer import Optimizer

__all__ = ["GradientDescentOptimizer", "MomentumOptimizer", "AdagradOptimizer", "RMSPropOptimizer",
           "AdamOptimizer"]


def _base(v):
    return v.dtype.base_dtype


class GradientDescentOptimizer(Optimizer):
    """var -= learning_rate * grad."""

    _sparse_apply_sums_duplicates = True   # (its sparse kernel sums repeated indices, as TF's results do)

    def __init__(self, learning_rate, use_locking=False, name="GradientDescent"):
        super().__init__(use_locking, name)
        self._learning_rate = learning_rate

    def _apply_dense(self, grad, var):
        return T.apply_gradient_descent(var, self._hyper(self._learning_rate, "learning_rate", _base(var)),
                                        grad, use_locking=self._use_locking).op

    def _apply_sparse(self, grad, var):
        return T.sparse_apply_gradient_descent(
            var, self._hyper(self._learning_rate, "learning_rate", _base(var)), grad.values, grad.indices,
            use_locking=self._use_locking).op


class MomentumOptimizer(Optimizer):
    """accum = momentum * accum + grad; var -= lr * accum (or the Nesterov form)."""

    _sparse_apply_sums_duplicates = True   # (its sparse kernel sums repeated indices, as TF's results do)

    def __init__(self, learning_rate, momentum, use_locking=False, name="Momentum", use_nesterov=False):
        super().__init__(use_locking, name)
        self._learning_rate, self._momentum, self._nesterov = learning_rate, momentum, use_nesterov

    def _create_slots(self, var_list):
        for v in var_list:
            self._zeros_slot(v, "momentum", self._name)

    def _args(self, var):
        dt = _base(var)
        return (self.get_slot(var, "momentum"), self._hyper(self._learning_rate, "learning_rate", dt),
                self._hyper(self._momentum, "momentum", dt))

    def _apply_dense(self, grad, var):
        acc, lr, mom = self._args(var)
        return T.apply_momentum(var, acc, lr, grad, mom, use_locking=self._use_locking,
                                use_nesterov=self._nesterov).op

    def _apply_sparse(self, grad, var):
        acc, lr, mom = self._args(var)
        return T.sparse_apply_momentum(var, acc, lr, grad.values, grad.indices, mom,
                                       use_locking=self._use_locking, use_nesterov=self._nesterov).op


class AdagradOptimizer(Optimizer):
    """accum += grad**2; var -= lr * grad / sqrt(accum)."""

    _sparse_apply_sums_duplicates = True   # (its sparse kernel sums repeated indices, as TF's results do)

    def __init__(self, learning_rate, initial_accumulator_value=0.1, use_locking=False, name="Adagrad"):
        if initial_accumulator_value <= 0.0:
            raise ValueError(f"initial_accumulator_value must be positive: {initial_accumulator_value}")
        super().__init__(use_locking, name)
        self._learning_rate, self._initial = learning_rate, initial_accumulator_value

    def _create_slots(self, var_list):
        for v in var_list:
            init = lambda v=v: np.full(v.shape.as_list(), self._initial, _base(v).as_numpy_dtype)
            self._slot(v, "accumulator", self._name, init)

    def _apply_dense(self, grad, var):
        return T.apply_adagrad(var, self.get_slot(var, "accumulator"),
                               self._hyper(self._learning_rate, "learning_rate", _base(var)), grad,
                               use_locking=self._use_locking).op

    def _apply_sparse(self, grad, var):
        return T.sparse_apply_adagrad(var, self.get_slot(var, "accumulator"),
                                      self._hyper(self._learning_rate, "learning_rate", _base(var)),
                                      grad.values, grad.indices, use_locking=self._use_locking).op


class RMSPropOptimizer(Optimizer):
    """TF1's RMSProp, with momentum and the centered variant."""

    _sparse_apply_sums_duplicates = True   # (its sparse kernel sums repeated indices, as TF's results do)

    def __init__(self, learning_rate, decay=0.9, momentum=0.0, epsilon=1e-10, use_locking=False,
                 centered=False, name="RMSProp"):
        super().__init__(use_locking, name)
        self._lr, self._decay, self._momentum, self._epsilon = learning_rate, decay, momentum, epsilon
        self._centered = centered

    def _create_slots(self, var_list):
        for v in var_list:
            self._slot(v, "rms", self._name, lambda v=v: np.ones(v.shape.as_list(), _base(v).as_numpy_dtype))
            if self._centered:
                self._zeros_slot(v, "mg", self._name)
            self._zeros_slot(v, "momentum", self._name)

    def _args(self, var):
        dt = _base(var)
        return [self._hyper(self._lr, "learning_rate", dt), self._hyper(self._decay, "decay", dt),
                self._hyper(self._momentum, "momentum", dt), self._hyper(self._epsilon, "epsilon", dt)]

    def _apply_dense(self, grad, var):
        rms, mom = self.get_slot(var, "rms"), self.get_slot(var, "momentum")
        if self._centered:
            return T.apply_centered_rms_prop(var, self.get_slot(var, "mg"), rms, mom, *self._args(var),
                                             grad, use_locking=self._use_locking).op
        return T.apply_rms_prop(var, rms, mom, *self._args(var), grad, use_locking=self._use_locking).op

    def _apply_sparse(self, grad, var):
        rms, mom = self.get_slot(var, "rms"), self.get_slot(var, "momentum")
        if self._centered:
            return T.sparse_apply_centered_rms_prop(var, self.get_slot(var, "mg"), rms, mom,
                                                    *self._args(var), grad.values, grad.indices,
                                                    use_locking=self._use_locking).op
        return T.sparse_apply_rms_prop(var, rms, mom, *self._args(var), grad.values, grad.indices,
                                       use_locking=self._use_locking).op


class AdamOptimizer(Optimizer):
    """Adam (Kingma & Ba) with TF1's bias correction folded into the step size.

    Sparse gradients use lazy updates: the moments and the variable change only in the rows present.
    """

    _sparse_apply_sums_duplicates = True   # (its sparse kernel sums repeated indices, as TF's results do)

    def __init__(self, learning_rate=0.001, beta1=0.9, beta2=0.999, epsilon=1e-8, use_locking=False,
                 name="Adam"):
        super().__init__(use_locking, name)
        self._lr, self._beta1, self._beta2, self._epsilon = learning_rate, beta1, beta2, epsilon

    def _create_slots(self, var_list):
        first = min(var_list, key=lambda v: v.name)
        self._get_or_make_non_slot(np.asarray(self._beta1, _base(first).as_numpy_dtype), "beta1_power", first)
        self._get_or_make_non_slot(np.asarray(self._beta2, _base(first).as_numpy_dtype), "beta2_power", first)
        for v in var_list:
            self._zeros_slot(v, "m", self._name)
            self._zeros_slot(v, "v", self._name)

    def _args(self, var):
        from kernflow.core.ops import math_ops
        dt = _base(var)
        b1p, b2p = self._non_slot["beta1_power"], self._non_slot["beta2_power"]
        cast = (lambda t: t) if _base(b1p) == dt else (lambda t: math_ops.cast(t, dt))
        return [cast(b1p.value()), cast(b2p.value()), self._hyper(self._lr, "learning_rate", dt),
                self._hyper(self._beta1, "beta1", dt), self._hyper(self._beta2, "beta2", dt),
                self._hyper(self._epsilon, "epsilon", dt)]

    def _apply_dense(self, grad, var):
        return T.apply_adam(var, self.get_slot(var, "m"), self.get_slot(var, "v"), *self._args(var), grad,
                            use_locking=self._use_locking).op

    def _apply_sparse(self, grad, var):
        return T.sparse_apply_adam(var, self.get_slot(var, "m"), self.get_slot(var, "v"),
                                   *self._args(var), grad.values, grad.indices,
                                   use_locking=self._use_locking).op

    def _finish(self, update_ops, name_scope):
        from kernflow.core.ops import control_flow_ops
        b1p, b2p = self._non_slot["beta1_power"], self._non_slot["beta2_power"]
        with _ops.control_dependencies(update_ops), _ops.colocate_with(b1p):
            u1 = b1p.assign(b1p.value() * self._beta1, use_locking=self._use_locking)
            u2 = b2p.assign(b2p.value() * self._beta2, use_locking=self._use_locking)
        return control_flow_ops.group(*update_ops, u1, u2, name=name_scope)


BUILTIN = {"GradientDescent": GradientDescentOptimizer, "Momentum": MomentumOptimizer,
           "Adagrad": AdagradOptimizer, "RMSProp": RMSPropOptimizer, "Adam": AdamOptimizer}
