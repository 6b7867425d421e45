"""More optimizers of TF1's tf.train: Adadelta, AdagradDA, Ftrl, ProximalAdagrad and
ProximalGradientDescent, with TF's constructor arguments, slot names and update formulas.

Each builds one fused update op per variable (`kernflow.core.ops.training_ops_more`), dense or
sparse (IndexedSlices gradients touch only the rows present, duplicates summed).
"""

from __future__ import annotations

import numpy as np

from kernflow.core.framework import dtypes as _dtypes
from kernflow.core.framework import ops as _ops
from kernflow.core.ops import training_ops_more as T
from kernflow.core.train.optimizer import Optimizer

__all__ = ["AdadeltaOptimizer", "AdagradDAOptimizer", "FtrlOptimizer", "ProximalAdagradOptimizer",
           "ProximalGradientDescentOptimizer"]


def _base(v):
    return v.dtype.base_dtype


def _filled(var, value):
    return lambda: np.full(var.shape.as_list(), value, _base(var).as_numpy_dtype)


class AdadeltaOptimizer(Optimizer):
    """Adadelta (Zeiler, 2012): slots "accum" and "accum_update".

    accum = rho * accum + (1 - rho) * grad**2; update = sqrt(accum_update + epsilon) /
    sqrt(accum + epsilon) * grad; accum_update = rho * accum_update + (1 - rho) * update**2;
    var -= learning_rate * update.
    """

    _sparse_apply_sums_duplicates = True   # (its sparse kernel sums repeated indices, as TF's results do)

    def __init__(self, learning_rate=0.001, rho=0.95, epsilon=1e-8, use_locking=False, name="Adadelta"):
        super().__init__(use_locking, name)
        self._lr, self._rho, self._epsilon = learning_rate, rho, epsilon

    def _create_slots(self, var_list):
        for v in var_list:
            self._zeros_slot(v, "accum", self._name)
            self._zeros_slot(v, "accum_update", self._name)

    def _args(self, var):
        dt = _base(var)
        return (self.get_slot(var, "accum"), self.get_slot(var, "accum_update"),
                self._hyper(self._lr, "learning_rate", dt), self._hyper(self._rho, "rho", dt),
                self._hyper(self._epsilon, "epsilon", dt))

    def _apply_dense(self, grad, var):
        return T.apply_adadelta(var, *self._args(var), grad, use_locking=self._use_locking).op

    def _apply_sparse(self, grad, var):
        return T.sparse_apply_adadelta(var, *self._args(var), grad.values, grad.indices,
                                       use_locking=self._use_locking).op


class AdagradDAOptimizer(Optimizer):
    """Adagrad Dual Averaging (Duchi et al.), for sparse linear models: slots
    "gradient_accumulator" and "gradient_squared_accumulator"; the update uses global_step + 1.

    Raises:
        ValueError: `initial_gradient_squared_accumulator_value` is not positive.
    """

    _sparse_apply_sums_duplicates = True   # (its sparse kernel sums repeated indices, as TF's results do)

    def __init__(self, learning_rate, global_step, initial_gradient_squared_accumulator_value=0.1,
                 l1_regularization_strength=0.0, l2_regularization_strength=0.0, use_locking=False,
                 name="AdagradDA"):
        if initial_gradient_squared_accumulator_value <= 0.0:
            raise ValueError(f"initial_gradient_squared_accumulator_value must be positive: "
                             f"{initial_gradient_squared_accumulator_value}")
        super().__init__(use_locking, name)
        self._lr, self._initial = learning_rate, initial_gradient_squared_accumulator_value
        self._l1, self._l2 = l1_regularization_strength, l2_regularization_strength
        self._global_step = global_step
        self._global_step_on_worker = None

    def _create_slots(self, var_list):
        for v in var_list:
            self._zeros_slot(v, "gradient_accumulator", self._name)
            self._slot(v, "gradient_squared_accumulator", self._name, _filled(v, self._initial))

    def _prepare(self):
        from kernflow.core.ops import array_ops, math_ops
        with _ops.colocate_with(self._global_step):
            step = array_ops.identity(self._global_step) + 1
        self._global_step_on_worker = math_ops.cast(step, _dtypes.int64)

    def _args(self, var):
        dt = _base(var)
        return (self._hyper(self._lr, "learning_rate", dt), self._hyper(self._l1, "l1", dt),
                self._hyper(self._l2, "l2", dt), self._global_step_on_worker)

    def _apply_dense(self, grad, var):
        return T.apply_adagrad_da(var, self.get_slot(var, "gradient_accumulator"),
                                  self.get_slot(var, "gradient_squared_accumulator"), grad, *self._args(var),
                                  use_locking=self._use_locking).op

    def _apply_sparse(self, grad, var):
        return T.sparse_apply_adagrad_da(var, self.get_slot(var, "gradient_accumulator"),
                                         self.get_slot(var, "gradient_squared_accumulator"), grad.values,
                                         grad.indices, *self._args(var), use_locking=self._use_locking).op


def _non_negative(value, what):
    if value < 0.0:
        raise ValueError(f"{what} {value:f} needs to be positive or zero")


class FtrlOptimizer(Optimizer):
    """FTRL-Proximal (McMahan et al., 2013): slots "accum" (starting at initial_accumulator_value)
    and "linear", named after `accum_name` / `linear_name` (default: the optimizer's name).

    With `l2_shrinkage_regularization_strength` > 0 it runs ApplyFtrlV2 (the shrinkage acts on the
    linear term only); `beta` adds beta / (2 * learning_rate) to the L2 strength.

    Raises:
        ValueError: a negative accumulator value or regularization strength, or a positive
            learning_rate_power.
    """

    _sparse_apply_sums_duplicates = True   # (its sparse kernel sums repeated indices, as TF's results do)

    def __init__(self, learning_rate, learning_rate_power=-0.5, initial_accumulator_value=0.1,
                 l1_regularization_strength=0.0, l2_regularization_strength=0.0, use_locking=False,
                 name="Ftrl", accum_name=None, linear_name=None, l2_shrinkage_regularization_strength=0.0,
                 beta=None):
        super().__init__(use_locking, name)
        _non_negative(initial_accumulator_value, "initial_accumulator_value")
        if learning_rate_power > 0.0:
            raise ValueError(f"learning_rate_power {learning_rate_power:f} needs to be negative or zero")
        _non_negative(l1_regularization_strength, "l1_regularization_strength")
        _non_negative(l2_regularization_strength, "l2_regularization_strength")
        _non_negative(l2_shrinkage_regularization_strength, "l2_shrinkage_regularization_strength")
        self._lr, self._lr_power = learning_rate, learning_rate_power
        self._initial = initial_accumulator_value
        self._l1, self._l2 = l1_regularization_strength, l2_regularization_strength
        self._l2_shrinkage = l2_shrinkage_regularization_strength
        self._beta = 0.0 if beta is None else beta
        self._accum_name, self._linear_name = accum_name, linear_name

    def _create_slots(self, var_list):
        for v in var_list:
            self._slot(v, "accum", self._accum_name or self._name, _filled(v, self._initial))
            self._zeros_slot(v, "linear", self._linear_name or self._name)

    def _l2_adjusted(self, dt):
        l2 = self._hyper(self._l2, "l2_regularization_strength", dt)
        if isinstance(self._beta, (int, float)) and self._beta == 0.0:
            return l2
        from kernflow.core.ops import math_ops
        lr = self._hyper(self._lr, "learning_rate", dt)
        return l2 + self._hyper(self._beta, "beta", dt) / (2.0 * math_ops.maximum(lr, 1e-36))

    def _args(self, var):
        dt = _base(var)
        head = [self._hyper(self._lr, "learning_rate", dt),
                self._hyper(self._l1, "l1_regularization_strength", dt), self._l2_adjusted(dt)]
        power = self._hyper(self._lr_power, "learning_rate_power", dt)
        if self._l2_shrinkage <= 0.0:
            return head + [power]
        return head + [self._hyper(self._l2_shrinkage, "l2_shrinkage_regularization_strength", dt), power]

    def _apply_dense(self, grad, var):
        fn = T.apply_ftrl if self._l2_shrinkage <= 0.0 else T.apply_ftrl_v2
        return fn(var, self.get_slot(var, "accum"), self.get_slot(var, "linear"), grad, *self._args(var),
                  use_locking=self._use_locking).op

    def _apply_sparse(self, grad, var):
        fn = T.sparse_apply_ftrl if self._l2_shrinkage <= 0.0 else T.sparse_apply_ftrl_v2
        return fn(var, self.get_slot(var, "accum"), self.get_slot(var, "linear"), grad.values,
                  grad.indices, *self._args(var), use_locking=self._use_locking).op


class ProximalAdagradOptimizer(Optimizer):
    """Adagrad with a proximal (L1/L2-regularized) step: slot "accumulator".

    Raises:
        ValueError: `initial_accumulator_value` is not positive.
    """

    _sparse_apply_sums_duplicates = True   # (its sparse kernel sums repeated indices, as TF's results do)

    def __init__(self, learning_rate, initial_accumulator_value=0.1, l1_regularization_strength=0.0,
                 l2_regularization_strength=0.0, use_locking=False, name="ProximalAdagrad"):
        if initial_accumulator_value <= 0.0:
            raise ValueError(f"initial_accumulator_value must be positive: {initial_accumulator_value}")
        super().__init__(use_locking, name)
        self._lr, self._initial = learning_rate, initial_accumulator_value
        self._l1, self._l2 = l1_regularization_strength, l2_regularization_strength

    def _create_slots(self, var_list):
        for v in var_list:
            self._slot(v, "accumulator", self._name, _filled(v, self._initial))

    def _args(self, var):
        dt = _base(var)
        return (self.get_slot(var, "accumulator"), self._hyper(self._lr, "learning_rate", dt),
                self._hyper(self._l1, "l1_regularization_strength", dt),
                self._hyper(self._l2, "l2_regularization_strength", dt))

    def _apply_dense(self, grad, var):
        return T.apply_proximal_adagrad(var, *self._args(var), grad, use_locking=self._use_locking).op

    def _apply_sparse(self, grad, var):
        return T.sparse_apply_proximal_adagrad(var, *self._args(var), grad.values, grad.indices,
                                               use_locking=self._use_locking).op


class ProximalGradientDescentOptimizer(Optimizer):
    """Gradient descent with a proximal (L1/L2-regularized) step; no slots."""

    _sparse_apply_sums_duplicates = True   # (its sparse kernel sums repeated indices, as TF's results do)

    def __init__(self, learning_rate, l1_regularization_strength=0.0, l2_regularization_strength=0.0,
                 use_locking=False, name="ProximalGradientDescent"):
        super().__init__(use_locking, name)
        self._lr, self._l1, self._l2 = learning_rate, l1_regularization_strength, l2_regularization_strength

    def _args(self, var):
        dt = _base(var)
        return (self._hyper(self._lr, "learning_rate", dt),
                self._hyper(self._l1, "l1_regularization_strength", dt),
                self._hyper(self._l2, "l2_regularization_strength", dt))

    def _apply_dense(self, grad, var):
        return T.apply_proximal_gradient_descent(var, *self._args(var), grad,
                                                 use_locking=self._use_locking).op

    def _apply_sparse(self, grad, var):
        return T.sparse_apply_proximal_gradient_descent(var, *self._args(var), grad.values, grad.indices,
                                                        use_locking=self._use_locking).op


# Registered by name like optimizers.BUILTIN (kernflow_register_optimizers).
MORE = {"Adadelta": AdadeltaOptimizer, "AdagradDA": AdagradDAOptimizer, "Ftrl": FtrlOptimizer,
        "ProximalAdagrad": ProximalAdagradOptimizer,
        "ProximalGradientDescent": ProximalGradientDescentOptimizer}
