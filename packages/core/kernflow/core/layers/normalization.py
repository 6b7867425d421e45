"""Batch normalization layer and its functional form (TF1 `tf.layers.batch_normalization`).

4-D inputs normalized over the channel axis (1 or 3) use the fused op, as TF1 does by default
(its moving variance is then updated with the n/(n-1)-corrected batch variance); other inputs use
moments + batch_normalization (biased batch variance).
"""

from __future__ import annotations

from kernflow.core.framework import ops as _ops
from kernflow.core.layers import utils
from kernflow.core.layers.base import InputSpec, Layer, constant_value, smart_cond
from kernflow.core.layers.core import _array, _math, _nn

__all__ = ["BatchNormalization", "batch_normalization"]


def _init(name):
    from kernflow.core.ops import init_ops
    return getattr(init_ops, name)()


class BatchNormalization(Layer):
    """Normalizes with batch statistics when training, with moving averages otherwise.

    When training, the moving-average update ops are added to the layer's `updates` and the
    UPDATE_OPS collection: run them with the train op, e.g. under
    ``kf.control_dependencies(kf.get_collection(kf.GraphKeys.UPDATE_OPS))``.

    Args:
        axis: the feature axis (int or list of ints), default -1.
        momentum: moving averages keep `momentum` of the old value.
        epsilon: added to the variance.
        center, scale: learn `beta` / `gamma`.
        beta_initializer, gamma_initializer, moving_mean_initializer,
        moving_variance_initializer: default zeros, ones, zeros, ones.
        beta_regularizer, gamma_regularizer, beta_constraint, gamma_constraint: as in `Dense`.
        renorm, virtual_batch_size, adjustment: not supported (must be left unset).
        fused: None/True (fused op when possible) or False.
        trainable, name, **kwargs: see `Layer`.
    """

    def __init__(self, axis=-1, momentum=0.99, epsilon=1e-3, center=True, scale=True,
                 beta_initializer=None, gamma_initializer=None, moving_mean_initializer=None,
                 moving_variance_initializer=None, beta_regularizer=None, gamma_regularizer=None,
                 beta_constraint=None, gamma_constraint=None, renorm=False, renorm_clipping=None,
                 renorm_momentum=0.99, fused=None, trainable=True, virtual_batch_size=None,
                 adjustment=None, name=None, **kwargs):
        super().__init__(trainable=trainable, name=name, **kwargs)
        if renorm or virtual_batch_size is not None or adjustment is not None:
            raise NotImplementedError("kf.layers.BatchNormalization: renorm, virtual_batch_size "
                                      "and adjustment are not supported")
        del renorm_clipping, renorm_momentum
        self.axis = list(axis) if isinstance(axis, (list, tuple)) else axis
        self.momentum, self.epsilon = momentum, epsilon
        self.center, self.scale = center, scale
        self.initializers = (beta_initializer or _init("zeros_initializer"),
                             gamma_initializer or _init("ones_initializer"),
                             moving_mean_initializer or _init("zeros_initializer"),
                             moving_variance_initializer or _init("ones_initializer"))
        self.beta_regularizer, self.gamma_regularizer = beta_regularizer, gamma_regularizer
        self.beta_constraint, self.gamma_constraint = beta_constraint, gamma_constraint
        self.fused = True if fused is None else fused

    def build(self, input_shape):
        shape = utils.dims(input_shape)
        if shape is None:
            raise ValueError(f"Input has undefined rank: {input_shape}")
        ndims = len(shape)
        axes = self.axis if isinstance(self.axis, list) else [self.axis]
        axes = sorted(a + ndims if a < 0 else a for a in axes)
        for a in axes:
            if not 0 <= a < ndims:
                raise ValueError(f"Invalid axis: {a}")
            if shape[a] is None:
                raise ValueError(f"Input has undefined `axis` dimension. Input shape: {shape}")
        self.axis = axes
        self.fused = bool(self.fused) and ndims == 4 and axes in ([1], [3])
        self.input_spec = InputSpec(ndim=ndims, axes={a: shape[a] for a in axes})
        param_shape = [shape[a] for a in axes] if len(axes) == 1 else [
            shape[i] if i in axes else 1 for i in range(ndims)]
        beta_i, gamma_i, mean_i, var_i = self.initializers
        self.gamma = self.add_weight("gamma", shape=param_shape, initializer=gamma_i,
                                     regularizer=self.gamma_regularizer,
                                     constraint=self.gamma_constraint) if self.scale else None
        self.beta = self.add_weight("beta", shape=param_shape, initializer=beta_i,
                                    regularizer=self.beta_regularizer,
                                    constraint=self.beta_constraint) if self.center else None
        self.moving_mean = self.add_weight("moving_mean", shape=param_shape,
                                           initializer=mean_i, trainable=False)
        self.moving_variance = self.add_weight("moving_variance", shape=param_shape,
                                               initializer=var_i, trainable=False)
        self.built = True

    def _assign_moving_average(self, variable, value, momentum):
        from kernflow.core.ops import state_ops
        m = _math()
        with _ops.name_scope(None, "AssignMovingAvg", [variable, value, momentum]) as scope:
            decay = m.cast(m.subtract(1.0, momentum), variable.dtype.base_dtype)
            delta = m.multiply(m.subtract(variable, m.cast(value, variable.dtype.base_dtype)),
                               decay)
            return state_ops.assign_sub(variable, delta, name=scope)

    def _add_moving_updates(self, training, mean, variance):
        value = constant_value(training)
        if value is False:
            return
        momentum = _ops.convert_to_tensor(float(self.momentum))
        if value is None:
            momentum = smart_cond(training, lambda: momentum,
                                  lambda: _ops.convert_to_tensor(1.0))
        self.add_update(self._assign_moving_average(self.moving_mean, mean, momentum))
        self.add_update(self._assign_moving_average(self.moving_variance, variance, momentum))

    def _fused(self, inputs, training):
        a, nn = _array(), _nn()
        c = inputs.shape.as_list()[self.axis[0]]
        gamma = self.gamma if self.scale else a.ones([c], dtype=inputs.dtype)
        beta = self.beta if self.center else a.zeros([c], dtype=inputs.dtype)
        fmt = "NCHW" if self.axis == [1] else "NHWC"

        def train():
            return nn.fused_batch_norm(inputs, gamma, beta, epsilon=self.epsilon,
                                       data_format=fmt)

        def infer():
            return nn.fused_batch_norm(inputs, gamma, beta, mean=self.moving_mean,
                                       variance=self.moving_variance, epsilon=self.epsilon,
                                       is_training=False, data_format=fmt)
        output, mean, variance = smart_cond(training, train, infer)
        self._add_moving_updates(training, mean, variance)
        return output

    def call(self, inputs, training=False):
        if self.fused:
            return self._fused(inputs, training)
        a, nn = _array(), _nn()
        ndims = inputs.shape.rank
        reduction = [i for i in range(ndims) if i not in self.axis]
        bshape = [inputs.shape.as_list()[i] if i in self.axis else 1 for i in range(ndims)]
        multi = len(self.axis) > 1
        needs_reshape = not multi and reduction != list(range(ndims - 1))

        def shaped(v):
            return a.reshape(v, bshape) if v is not None and needs_reshape else v

        def batch_stats():
            return nn.moments(inputs, reduction, keep_dims=multi)
        mean, variance = smart_cond(training, batch_stats,
                                    lambda: (self.moving_mean, self.moving_variance))
        self._add_moving_updates(training, mean, variance)
        out = nn.batch_normalization(inputs, shaped(mean), shaped(variance), shaped(self.beta),
                                     shaped(self.gamma), self.epsilon)
        out.set_shape(inputs.shape)
        return out

    def compute_output_shape(self, input_shape):
        from kernflow.core.framework import tensor_shape
        return tensor_shape.TensorShape(input_shape)


def batch_normalization(inputs, axis=-1, momentum=0.99, epsilon=1e-3, center=True, scale=True,
                        beta_initializer=None, gamma_initializer=None,
                        moving_mean_initializer=None, moving_variance_initializer=None,
                        beta_regularizer=None, gamma_regularizer=None, beta_constraint=None,
                        gamma_constraint=None, training=False, trainable=True, name=None,
                        reuse=None, renorm=False, renorm_clipping=None, renorm_momentum=0.99,
                        fused=None, virtual_batch_size=None, adjustment=None):
    """Functional form of `BatchNormalization` (`training` a bool or a bool tensor).

    Returns:
        The normalized tensor; the moving-statistics updates are in UPDATE_OPS when training.
    """
    layer = BatchNormalization(
        axis=axis, momentum=momentum, epsilon=epsilon, center=center, scale=scale,
        beta_initializer=beta_initializer, gamma_initializer=gamma_initializer,
        moving_mean_initializer=moving_mean_initializer,
        moving_variance_initializer=moving_variance_initializer,
        beta_regularizer=beta_regularizer, gamma_regularizer=gamma_regularizer,
        beta_constraint=beta_constraint, gamma_constraint=gamma_constraint, renorm=renorm,
        renorm_clipping=renorm_clipping, renorm_momentum=renorm_momentum, fused=fused,
        trainable=trainable, virtual_batch_size=virtual_batch_size, adjustment=adjustment,
        name=name, _reuse=reuse, _scope=name)
    return layer.apply(inputs, training=training)
