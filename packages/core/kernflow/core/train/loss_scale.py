"""Loss scales for mixed-precision training (TF1.15's `tf.train.experimental.LossScale` family).

A loss scale is the factor `MixedPrecisionLossScaleOptimizer` multiplies the loss by before
differentiating (and divides the gradients by after), so that small float16 gradients do not flush
to zero. `FixedLossScale` is a constant; `DynamicLossScale` keeps its state in two non-trainable
global variables, so `global_variables_initializer` initializes them and a `Saver` checkpoints them:

* ``current_loss_scale`` (float32): the scale `__call__` reads;
* ``good_steps`` (int64): consecutive steps with all-finite gradients since the scale last changed.

`update(grads)` returns ``(update_op, should_apply_gradients)``. For a dynamic scale both depend on
one bool tensor, "every gradient is finite": when false, the scale is divided by the multiplier
(never below 1), the count restarts and the step is to be skipped; when true the count grows, and
when it reaches `increment_period` the scale is multiplied (kept as is if that overflows float32)
and the count restarts.
"""

from __future__ import annotations

import abc

from kernflow.core.framework import dtypes as _dtypes
from kernflow.core.framework import nest as _nest
from kernflow.core.framework import ops as _ops
from kernflow.core.framework.indexed_slices import IndexedSlices

__all__ = ["LossScale", "FixedLossScale", "DynamicLossScale", "get"]


class LossScale(abc.ABC):
    """Base class of loss scales: `__call__` gives the current scale, `update` adjusts it.

    A subclass's state lives in variables made with `_add_weight` (non-trainable, in
    GLOBAL_VARIABLES); `get_config` returns the constructor arguments `from_config` takes back.
    """

    def __init__(self):
        self._weights: dict[str, object] = {}

    @abc.abstractmethod
    def __call__(self):
        """Returns the current loss scale as a scalar float32 Tensor."""

    @abc.abstractmethod
    def update(self, grads):
        """Updates the loss scale from this step's gradients.

        Args:
            grads: a nested structure of the (unscaled) gradients; None entries are ignored.

        Returns:
            ``(update_op, should_apply_gradients)``: an op that updates the scale, and a
            bool (a Python bool or a scalar bool Tensor) saying whether to apply this step.
        """

    @abc.abstractmethod
    def get_config(self):
        """Returns the constructor arguments of this loss scale as a dict."""

    @classmethod
    def from_config(cls, config):
        """Creates a loss scale from `get_config`'s dict."""
        return cls(**config)

    def _add_weight(self, name, initial_value, dtype):
        """A non-trainable global variable holding part of this loss scale's state."""
        from kernflow.core.ops.variables import Variable
        with _ops.init_scope(), _ops.name_scope(None):
            var = Variable(_ops.convert_to_tensor(initial_value, dtype=dtype, name=f"{name}/initial_value"),
                           name=name, trainable=False, dtype=dtype)
        self._weights[name] = var
        return var

    def _kf_checkpoint_children(self):
        """The state variables by name, for an object-based checkpoint that reaches this object."""
        return sorted(self._weights.items())


class FixedLossScale(LossScale):
    """A loss scale that never changes: every step applies its gradients."""

    def __init__(self, loss_scale_value):
        """
        Args:
            loss_scale_value: a Python int or float, at least 1.

        Raises:
            ValueError: a value that is not a Python number, or is below 1.
        """
        super().__init__()
        if isinstance(loss_scale_value, bool) or not isinstance(loss_scale_value, (int, float)):
            raise ValueError(f"loss_scale_value must be a Python int or float, got "
                             f"{type(loss_scale_value).__name__}: {loss_scale_value!r}")
        if loss_scale_value < 1:
            raise ValueError(f"loss_scale_value must be at least 1, got {loss_scale_value}")
        self._loss_scale_value = float(loss_scale_value)

    def __call__(self):
        return _ops.convert_to_tensor(self._loss_scale_value, dtype=_dtypes.float32, name="loss_scale")

    def update(self, grads):
        from kernflow.core.ops import control_flow_ops
        del grads
        return control_flow_ops.no_op(), True

    def get_config(self):
        return {"loss_scale_value": self._loss_scale_value}

    def __repr__(self):
        return f"FixedLossScale({self._loss_scale_value})"


class DynamicLossScale(LossScale):
    """A loss scale that backs off on non-finite gradients and grows after finite steps.

    Its variables are created in the default graph when it is constructed (see the module
    docstring); build it in the graph that trains with it.
    """

    def __init__(self, initial_loss_scale=2 ** 15, increment_period=2000, multiplier=2.0):
        """
        Args:
            initial_loss_scale: the first scale, a Python number (default 2**15, about half of
                float16's largest value).
            increment_period: the number of consecutive steps with finite gradients after which
                the scale is multiplied by `multiplier`.
            multiplier: the factor the scale grows by, and shrinks by on a non-finite gradient.

        Raises:
            TypeError: an argument that is not a number.
            ValueError: an argument that is not a number, or (kernflow's checks) a scale or a
                multiplier that is not positive, or an `increment_period` below 1.
        """
        super().__init__()
        self._initial_loss_scale = float(initial_loss_scale)
        self._increment_period = int(increment_period)
        self._multiplier = float(multiplier)
        if not self._initial_loss_scale > 0:
            raise ValueError(f"initial_loss_scale must be positive, got {initial_loss_scale}")
        if self._increment_period < 1:
            raise ValueError(f"increment_period must be at least 1, got {increment_period}")
        if not self._multiplier > 0:
            raise ValueError(f"multiplier must be positive, got {multiplier}")
        self._current_loss_scale = self._add_weight("current_loss_scale", self._initial_loss_scale,
                                                    _dtypes.float32)
        self._num_good_steps = self._add_weight("good_steps", 0, _dtypes.int64)

    @property
    def initial_loss_scale(self):
        return self._initial_loss_scale

    @property
    def increment_period(self):
        return self._increment_period

    @property
    def multiplier(self):
        return self._multiplier

    def __call__(self):
        return self._current_loss_scale.value()

    def update(self, grads):
        from kernflow.core.ops import control_flow_ops, math_ops
        from kernflow.core.ops.math_ops_special import is_finite
        with _ops.name_scope("update_loss_scale"):
            finite = all_finite(grads)
            scale, good = self._current_loss_scale.value(), self._num_good_steps.value()
            grown_good = good + 1
            due = math_ops.logical_and(finite, grown_good >= self._increment_period)
            grown = scale * self._multiplier
            # A scale that would overflow float32 stays as it is (the count still restarts).
            grow = math_ops.logical_and(due, is_finite(grown))
            shrunk = math_ops.maximum(scale / self._multiplier, 1.0)
            new_scale = math_ops.where(finite, math_ops.where(grow, grown, scale), shrunk)
            new_good = math_ops.where(math_ops.logical_and(finite, math_ops.logical_not(due)),
                                      grown_good, _ops.convert_to_tensor(0, dtype=_dtypes.int64))
            update_op = control_flow_ops.group(self._current_loss_scale.assign(new_scale),
                                               self._num_good_steps.assign(new_good))
        return update_op, finite

    def get_config(self):
        return {"initial_loss_scale": self._initial_loss_scale,
                "increment_period": self._increment_period, "multiplier": self._multiplier}

    def __repr__(self):
        return (f"DynamicLossScale(initial_loss_scale={self._initial_loss_scale}, "
                f"increment_period={self._increment_period}, multiplier={self._multiplier})")


def all_finite(grads):
    """A scalar bool Tensor: whether every element of every gradient in `grads` is finite."""
    from kernflow.core.ops import array_ops, math_ops
    from kernflow.core.ops.math_ops_special import is_finite
    flat = [g.values if isinstance(g, IndexedSlices) else g for g in _nest.flatten(grads) if g is not None]
    if not flat:
        return _ops.convert_to_tensor(True, dtype=_dtypes.bool)
    per_grad = [math_ops.reduce_all(is_finite(_ops.convert_to_tensor(g))) for g in flat]
    return per_grad[0] if len(per_grad) == 1 else math_ops.reduce_all(array_ops.stack(per_grad))


def get(identifier):
    """A loss scale from `identifier`: a number (a `FixedLossScale`), ``"dynamic"`` (a default
    `DynamicLossScale`), a `LossScale` (itself) or None (None).

    Raises:
        ValueError: anything else.
    """
    if isinstance(identifier, (int, float)) and not isinstance(identifier, bool):
        return FixedLossScale(identifier)
    if isinstance(identifier, str) and identifier == "dynamic":
        return DynamicLossScale()
    if isinstance(identifier, LossScale) or identifier is None:
        return identifier
    raise ValueError(f"Invalid argument: loss_scale={identifier!r} (expected a number, 'dynamic' or "
                     f"a LossScale)")
