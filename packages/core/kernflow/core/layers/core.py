"""Dense, Dropout and Flatten layers and their functional forms (TF1 `tf.layers`)."""

from __future__ import annotations

from kernflow.core.framework import ops as _ops
from kernflow.core.framework import tensor_shape as _ts
from kernflow.core.layers import utils
from kernflow.core.layers.base import InputSpec, Layer, smart_cond

__all__ = ["Dense", "dense", "Dropout", "dropout", "Flatten", "flatten"]


def _array():
    from kernflow.core.ops import array_ops
    return array_ops


def _math():
    from kernflow.core.ops import math_ops
    return math_ops


def _nn():
    from kernflow.core.ops import nn_ops
    return nn_ops


def zeros():
    from kernflow.core.ops import init_ops
    return init_ops.zeros_initializer()


class Dense(Layer):
    """Densely-connected layer: `activation(inputs @ kernel + bias)`.

    Inputs of rank > 2 are multiplied along their last axis.

    Args:
        units: output size.
        activation: fn(tensor) -> tensor, or None for linear.
        use_bias: whether to add a bias.
        kernel_initializer: default: the variable scope's initializer, else glorot_uniform.
        bias_initializer: default zeros.
        kernel_regularizer, bias_regularizer: fn(variable) -> scalar loss.
        activity_regularizer: fn(output) -> scalar loss.
        kernel_constraint, bias_constraint: projections kept on the variables.
        trainable, name, **kwargs: see `Layer`.
    """

    def __init__(self, units, activation=None, use_bias=True, kernel_initializer=None,
                 bias_initializer=None, kernel_regularizer=None, bias_regularizer=None,
                 activity_regularizer=None, kernel_constraint=None, bias_constraint=None,
                 trainable=True, name=None, **kwargs):
        super().__init__(trainable=trainable, name=name,
                         activity_regularizer=activity_regularizer, **kwargs)
        self.units = int(units)
        self.activation = activation
        self.use_bias = use_bias
        self.kernel_initializer = kernel_initializer
        self.bias_initializer = bias_initializer or zeros()
        self.kernel_regularizer = kernel_regularizer
        self.bias_regularizer = bias_regularizer
        self.kernel_constraint = kernel_constraint
        self.bias_constraint = bias_constraint
        self.input_spec = InputSpec(min_ndim=2)

    def build(self, input_shape):
        shape = utils.dims(input_shape)
        last = None if shape is None else shape[-1]
        if last is None:
            raise ValueError("The last dimension of the inputs to `Dense` should be defined. "
                             "Found `None`.")
        self.input_spec = InputSpec(min_ndim=2, axes={-1: last})
        self.kernel = self.add_weight("kernel", shape=[last, self.units],
                                      initializer=self.kernel_initializer,
                                      regularizer=self.kernel_regularizer,
                                      constraint=self.kernel_constraint)
        self.bias = None
        if self.use_bias:
            self.bias = self.add_weight("bias", shape=[self.units],
                                        initializer=self.bias_initializer,
                                        regularizer=self.bias_regularizer,
                                        constraint=self.bias_constraint)
        self.built = True

    def call(self, inputs):
        a, m = _array(), _math()
        shape = inputs.shape.as_list()
        if len(shape) > 2:
            flat = a.reshape(inputs, [-1, shape[-1]])
            outputs = m.matmul(flat, self.kernel)
            out_shape = a.concat([a.shape(inputs)[:-1], [self.units]], 0)
            outputs = a.reshape(outputs, out_shape)
            outputs.set_shape(shape[:-1] + [self.units])
        else:
            outputs = m.matmul(inputs, self.kernel)
        if self.use_bias:
            outputs = _nn().bias_add(outputs, self.bias)
        return self.activation(outputs) if self.activation is not None else outputs

    def compute_output_shape(self, input_shape):
        shape = utils.dims(input_shape)
        return _ts.TensorShape(shape[:-1] + [self.units])


def dense(inputs, units, activation=None, use_bias=True, kernel_initializer=None,
          bias_initializer=None, kernel_regularizer=None, bias_regularizer=None,
          activity_regularizer=None, kernel_constraint=None, bias_constraint=None,
          trainable=True, name=None, reuse=None):
    """Functional form of `Dense`; `reuse=True` reuses the variables of the layer `name`.

    Returns:
        The output tensor.
    """
    layer = Dense(units, activation=activation, use_bias=use_bias,
                  kernel_initializer=kernel_initializer, bias_initializer=bias_initializer,
                  kernel_regularizer=kernel_regularizer, bias_regularizer=bias_regularizer,
                  activity_regularizer=activity_regularizer, kernel_constraint=kernel_constraint,
                  bias_constraint=bias_constraint, trainable=trainable, name=name,
                  _scope=name, _reuse=reuse)
    return layer.apply(inputs)


class Dropout(Layer):
    """Applies dropout while training: `training=True` (bool or bool tensor) drops.

    Args:
        rate: the fraction of inputs dropped; the kept ones are scaled by `1 / (1 - rate)`.
        noise_shape: 1-D shape of the keep/drop mask (broadcast against the input).
        seed: Python integer seed.
        name, **kwargs: see `Layer`.
    """

    def __init__(self, rate=0.5, noise_shape=None, seed=None, name=None, **kwargs):
        super().__init__(name=name, **kwargs)
        self.rate = rate
        self.noise_shape = noise_shape
        self.seed = seed

    def call(self, inputs, training=False):
        def dropped():
            return _nn().dropout(inputs, noise_shape=self.noise_shape, seed=self.seed,
                                 rate=self.rate)
        return smart_cond(training, dropped, lambda: _array().identity(inputs))

    def compute_output_shape(self, input_shape):
        return _ts.TensorShape(input_shape)


def dropout(inputs, rate=0.5, noise_shape=None, seed=None, training=False, name=None):
    """Functional form of `Dropout` (identity unless `training`)."""
    return Dropout(rate, noise_shape=noise_shape, seed=seed, name=name).apply(
        inputs, training=training)


class Flatten(Layer):
    """Flattens each example: [batch, d1, d2...] -> [batch, d1 * d2 * ...].

    Args:
        data_format: 'channels_last' (default) or 'channels_first' (transposed to channels
            last first, so the element order matches channels_last models).
        name, **kwargs: see `Layer`.
    """

    def __init__(self, data_format="channels_last", name=None, **kwargs):
        super().__init__(name=name, **kwargs)
        self.data_format = utils.normalize_data_format(data_format)
        self.input_spec = InputSpec(min_ndim=1)

    def call(self, inputs):
        a = _array()
        shape = inputs.shape.as_list()
        if self.data_format == "channels_first" and len(shape) > 2:
            inputs = a.transpose(inputs, [0] + list(range(2, len(shape))) + [1])
        batch = shape[0] if shape[0] is not None else a.shape(inputs)[0]
        outputs = a.reshape(inputs, a.stack([batch, -1]) if isinstance(batch, _ops.Tensor)
                            else [batch, -1])
        outputs.set_shape(self.compute_output_shape(shape))
        return outputs

    def compute_output_shape(self, input_shape):
        shape = utils.dims(input_shape)
        rest = shape[1:]
        size = None if any(d is None for d in rest) else _prod(rest)
        return _ts.TensorShape([shape[0], size])


def _prod(dims):
    n = 1
    for d in dims:
        n *= d
    return n


def flatten(inputs, name=None, data_format="channels_last"):
    """Functional form of `Flatten`."""
    return Flatten(name=name, data_format=data_format).apply(inputs)
