"""Max and average pooling layers (1-D and 2-D) and their functional forms.

1-D pooling runs as 2-D pooling over an expanded axis, as TF does.
"""

from __future__ import annotations

from kernflow.core.layers import utils
from kernflow.core.layers.base import InputSpec, Layer
from kernflow.core.layers.core import _array, _nn

__all__ = ["MaxPooling1D", "max_pooling1d", "AveragePooling1D", "average_pooling1d",
           "MaxPooling2D", "max_pooling2d", "AveragePooling2D", "average_pooling2d"]


class _Pooling(Layer):
    """Pooling over `rank` spatial axes with `pool_fn` ("max" or "avg").

    Args:
        pool_size, strides: an int or `rank` ints.
        padding: 'valid' or 'same' (any case).
        data_format: 'channels_last' (default) or 'channels_first'.
        name, **kwargs: see `Layer`.
    """

    _rank = 2
    _pool = "max"

    def __init__(self, pool_size, strides, padding="valid", data_format="channels_last",
                 name=None, **kwargs):
        super().__init__(name=name, **kwargs)
        self.pool_size = utils.normalize_tuple(pool_size, self._rank, "pool_size")
        self.strides = utils.normalize_tuple(strides, self._rank, "strides")
        self.padding = utils.normalize_padding(padding)
        self.data_format = utils.normalize_data_format(data_format)
        self.input_spec = InputSpec(ndim=self._rank + 2)

    def _pool2d(self, x, size, strides):
        fn = _nn().max_pool if self._pool == "max" else _nn().avg_pool
        fmt = "NCHW" if self.data_format == "channels_first" else "NHWC"
        return fn(x, ksize=list(size), strides=list(strides), padding=self.padding.upper(),
                  data_format=fmt)

    def call(self, inputs):
        if self._rank == 2:
            outputs = self._pool2d(inputs, self.pool_size, self.strides)
        else:
            a = _array()
            axis = 2 if self.data_format == "channels_last" else 3
            outputs = self._pool2d(a.expand_dims(inputs, axis), self.pool_size + (1,),
                                   self.strides + (1,))
            outputs = a.squeeze(outputs, [axis])
        outputs.set_shape(self.compute_output_shape(inputs.shape))
        return outputs

    def compute_output_shape(self, input_shape):
        from kernflow.core.framework import tensor_shape
        shape = utils.dims(input_shape)
        first = self.data_format == "channels_first"
        spatial = shape[2:] if first else shape[1:-1]
        out = [utils.conv_output_length(n, k, self.padding, s)
               for n, k, s in zip(spatial, self.pool_size, self.strides)]
        dims = [shape[0], shape[1]] + out if first else [shape[0]] + out + [shape[-1]]
        return tensor_shape.TensorShape(dims)


class MaxPooling1D(_Pooling):
    """Max pooling for 1-D inputs [batch, steps, channels]."""
    _rank, _pool = 1, "max"


class AveragePooling1D(_Pooling):
    """Average pooling for 1-D inputs [batch, steps, channels]."""
    _rank, _pool = 1, "avg"


class MaxPooling2D(_Pooling):
    """Max pooling for 2-D inputs [batch, height, width, channels]."""
    _rank, _pool = 2, "max"


class AveragePooling2D(_Pooling):
    """Average pooling for 2-D inputs (padding positions are not counted)."""
    _rank, _pool = 2, "avg"


def max_pooling1d(inputs, pool_size, strides, padding="valid", data_format="channels_last",
                  name=None):
    """Functional form of `MaxPooling1D`."""
    return MaxPooling1D(pool_size, strides, padding, data_format, name=name).apply(inputs)


def average_pooling1d(inputs, pool_size, strides, padding="valid", data_format="channels_last",
                      name=None):
    """Functional form of `AveragePooling1D`."""
    return AveragePooling1D(pool_size, strides, padding, data_format, name=name).apply(inputs)


def max_pooling2d(inputs, pool_size, strides, padding="valid", data_format="channels_last",
                  name=None):
    """Functional form of `MaxPooling2D`."""
    return MaxPooling2D(pool_size, strides, padding, data_format, name=name).apply(inputs)


def average_pooling2d(inputs, pool_size, strides, padding="valid", data_format="channels_last",
                      name=None):
    """Functional form of `AveragePooling2D`."""
    return AveragePooling2D(pool_size, strides, padding, data_format, name=name).apply(inputs)
