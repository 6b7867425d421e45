"""TF1's quantized nn ops: QuantizedReluX, QuantizedMaxPool, QuantizedAvgPool, QuantizedConv2D.

Each takes quantized tensors with the float ranges they represent and returns
(output, min_output, max_output). The pools and QuantizedReluX keep the input's range;
QuantizedConv2D's output range is that of one product step (the input's step times the
filter's) over the whole out_type. OpDefs and `kf.nn` wrappers here; CPU kernels in
kernflow.kernels.cpu.nn_quantized; none is differentiable (kernflow.core.grads.quantization_grad).
"""

from __future__ import annotations

import collections

from kernflow.core.framework import dtypes as _dtypes
from kernflow.core.framework import tensor_shape as _ts
from kernflow.core.framework.op_def_library import apply_op
from kernflow.core.framework.op_def_registry import register_op
from kernflow.core.ops.nn_ops_conv import _pool_out, _rank4, window_geometry

__all__ = ["quantized_relu_x", "quantized_max_pool", "quantized_avg_pool", "quantized_conv2d"]

# Op types of this module (host only: the GPU plugin gives them no kernel).
QUANTIZED_NN_OPS = ("QuantizedReluX", "QuantizedMaxPool", "QuantizedAvgPool", "QuantizedConv2D")

_S = _ts.TensorShape
QuantizedResult = collections.namedtuple("QuantizedResult", ["output", "min_output", "max_output"])
QuantizedReluXResult = collections.namedtuple("QuantizedReluX",
                                              ["activations", "min_activations", "max_activations"])


# ---------------------------------------------------------------------------- shape functions
def _scalars(op, names):
    """Checks that the last len(names) inputs (the float range inputs) are scalars."""
    for t, n in zip(op.inputs[-len(names):], names):
        if not t.shape.is_compatible_with(_S([])):
            raise ValueError(f"{op.type}: {n} must be a scalar, got shape {t.shape}")


def _relu_x_shape(op):
    _scalars(op, ("max_value", "min_features", "max_features"))
    return [op.inputs[0].shape, _S([]), _S([])]


def _quantized_pool_shape(op):
    _scalars(op, ("min_input", "max_input"))
    return [_S(_pool_out(op, _rank4(op.inputs[0].shape).dim_values)), _S([]), _S([])]


def _quantized_conv2d_shape(op):
    _scalars(op, ("min_input", "max_input", "min_filter", "max_filter"))
    strides, dil, padding = op.get_attr("strides"), op.get_attr("dilations"), op.get_attr("padding")
    check_conv_attrs(op.type, strides, dil)
    n, h, w, c = _rank4(op.inputs[0].shape).dim_values
    kh, kw, ci, o = _rank4(op.inputs[1].shape).dim_values
    if c is not None and ci is not None and c != ci:
        raise ValueError(f"{op.type}: depth of input ({c}) does not match the input depth of the "
                         f"filter ({ci})")
    oh = window_geometry(h, kh, strides[1], 1, padding)[0]
    ow = window_geometry(w, kw, strides[2], 1, padding)[0]
    return [_S([n, oh, ow, o]), _S([]), _S([])]


def check_conv_attrs(op_type, strides, dilations):
    """ValueError unless strides has 4 entries >= 1 (1 for batch and depth) and dilations are all 1."""
    strides, dilations = list(strides), list(dilations)
    if len(strides) != 4 or strides[0] != 1 or strides[3] != 1 or min(strides) < 1:
        raise ValueError(f"{op_type}: strides must be 4 positive values with 1 in the batch and depth "
                         f"dimensions, got {strides}")
    if dilations != [1, 1, 1, 1]:
        raise ValueError(f"{op_type}: only dilations [1, 1, 1, 1] are supported (as TF), got {dilations}")


_RANGE = ["min_{0}: float", "max_{0}: float"]
_POOL_ATTRS = ["T: quantizedtype", "ksize: list(int)", "strides: list(int)", "padding: {'SAME', 'VALID'}"]
_POOL_OUT = ["output: T", "min_output: float", "max_output: float"]

register_op("QuantizedReluX",
            inputs=["features: Tinput", "max_value: float", "min_features: float", "max_features: float"],
            outputs=["activations: out_type", "min_activations: float", "max_activations: float"],
            attrs=["Tinput: quantizedtype", "out_type: quantizedtype = quint8"], shape_fn=_relu_x_shape,
            doc="min(max(features, 0), max_value) of quantized `features` representing [min_features, "
                "max_features]: clamps between the levels of 0 and max_value (MIN_FIRST), requantized to "
                "out_type over the same range, which it returns.")
register_op("QuantizedMaxPool", inputs=["input: T"] + [r.format("input") for r in _RANGE], outputs=_POOL_OUT,
            attrs=_POOL_ATTRS, shape_fn=_quantized_pool_shape,
            doc="Max pooling of a quantized 4-D NHWC input in the quantized domain; the output keeps "
                "the input's type and range.")
register_op("QuantizedAvgPool", inputs=["input: T"] + [r.format("input") for r in _RANGE], outputs=_POOL_OUT,
            attrs=_POOL_ATTRS, shape_fn=_quantized_pool_shape,
            doc="Average pooling of a quantized 4-D NHWC input in the quantized domain (the window sum "
                "over the elements inside the input, divided by their count as integers, truncating); "
                "the output keeps the input's type and range.")
register_op("QuantizedConv2D",
            inputs=["input: Tinput", "filter: Tfilter"] + [r.format("input") for r in _RANGE] +
                   [r.format("filter") for r in _RANGE],
            outputs=["output: out_type", "min_output: float", "max_output: float"],
            attrs=["Tinput: quantizedtype", "Tfilter: quantizedtype", "out_type: quantizedtype = qint32",
                   "strides: list(int)", "padding: {'SAME', 'VALID'}", "dilations: list(int) = [1, 1, 1, 1]"],
            shape_fn=_quantized_conv2d_shape,
            doc="2-D NHWC convolution of quantized input and filter: accumulates (input - input zero) * "
                "(filter - filter zero) in integers, where each zero is the (unclamped) level of 0.0 in its "
                "range; the output range is the product of the two quantization steps times out_type's "
                "lowest and highest values.")


# ---------------------------------------------------------------------------- op wrappers
def quantized_relu_x(features, max_value, min_features, max_features, out_type=_dtypes.quint8,
                     name=None):
    """Quantized rectified linear X: ``min(max(features, 0), max_value)``.

    Args:
        features: a quantized Tensor representing [min_features, max_features].
        max_value: float32 scalar, the upper clamp in the float domain.
        min_features, max_features: float32 scalars, the floats of the lowest and highest level.
        out_type: the quantized output type (default quint8).
        name: op name.

    Returns:
        A namedtuple (activations, min_activations, max_activations); the range is the input's.
    """
    attrs = {"out_type": _dtypes.as_dtype(out_type)}
    op = apply_op("QuantizedReluX", [features, max_value, min_features, max_features], attrs, name=name)
    return QuantizedReluXResult(*op.outputs)


def _quantized_pool(op_type, input, min_input, max_input, ksize, strides, padding, name):  # noqa: A002
    if isinstance(padding, bytes):
        padding = padding.decode()
    attrs = {"ksize": [int(k) for k in ksize], "strides": [int(s) for s in strides], "padding": padding}
    op = apply_op(op_type, [input, min_input, max_input], attrs, name=name)
    return QuantizedResult(*op.outputs)


def quantized_max_pool(input, min_input, max_input, ksize, strides, padding, name=None):  # noqa: A002
    """Max pooling of a quantized 4-D NHWC tensor.

    Args:
        input: a quantized Tensor [batch, height, width, channels].
        min_input, max_input: float32 scalars, the range `input` represents.
        ksize, strides: 4 ints (1 for the batch dimension).
        padding: "SAME" or "VALID".
        name: op name.

    Returns:
        A namedtuple (output, min_output, max_output): the output has input's type and range.
    """
    return _quantized_pool("QuantizedMaxPool", input, min_input, max_input, ksize, strides, padding, name)


def quantized_avg_pool(input, min_input, max_input, ksize, strides, padding, name=None):  # noqa: A002
    """Average pooling of a quantized 4-D NHWC tensor, in the quantized domain.

    Each output is the integer sum of its window's levels inside the input divided by their
    count, truncated (as TF's int32 pooling); padding is not counted.

    Args: as `quantized_max_pool`.

    Returns:
        A namedtuple (output, min_output, max_output): the output has input's type and range.
    """
    return _quantized_pool("QuantizedAvgPool", input, min_input, max_input, ksize, strides, padding, name)


def quantized_conv2d(input, filter, min_input, max_input, min_filter, max_filter,  # noqa: A002
                     strides, padding, out_type=_dtypes.qint32, dilations=(1, 1, 1, 1), name=None):
    """2-D convolution of quantized NHWC `input` with quantized HWIO `filter`.

    With z_x and z_f the levels of 0.0 in the input's and the filter's range (MIN_FIRST, not
    clamped), ``output = sum((input - z_x) * (filter - z_f))`` over each window, clamped to
    out_type. One output level is worth step_x * step_f with step = (max - min) / (highest -
    lowest), so the output represents [step_x * step_f * lowest(out_type),
    step_x * step_f * highest(out_type)].

    Args:
        input: a quantized Tensor [batch, height, width, in_channels].
        filter: a quantized Tensor [height, width, in_channels, out_channels].
        min_input, max_input, min_filter, max_filter: float32 scalars, the ranges.
        strides: 4 ints, 1 in the batch and depth dimensions.
        padding: "SAME" or "VALID".
        out_type: the quantized output type (default qint32).
        dilations: must be [1, 1, 1, 1] (as TF).
        name: op name.

    Returns:
        A namedtuple (output, min_output, max_output).

    Raises:
        ValueError: bad strides or dilations, ranks other than 4, or depths that differ.
    """
    if isinstance(padding, bytes):
        padding = padding.decode()
    attrs = {"out_type": _dtypes.as_dtype(out_type), "strides": [int(s) for s in strides],
             "padding": padding, "dilations": [int(d) for d in dilations]}
    op = apply_op("QuantizedConv2D", [input, filter, min_input, max_input, min_filter, max_filter],
                  attrs, name=name)
    return QuantizedResult(*op.outputs)
