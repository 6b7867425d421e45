"""Convolution and pooling ops of `kf.nn`: Conv2D, MaxPool, AvgPool and their backprops.

Re-exported by `kernflow.core.ops.nn_ops`; CPU kernels are in kernflow.kernels.cpu.nn.
"""

from __future__ import annotations

from collections.abc import Sized

from kernflow.core.framework import ops as _ops
from kernflow.core.framework import tensor_shape as _ts
from kernflow.core.framework import tensor_util
from kernflow.core.framework.op_def_library import apply_op
from kernflow.core.framework.gradient_registry import NotDifferentiable
from kernflow.core.framework.op_def_registry import register_op

__all__ = ["conv2d", "conv2d_backprop_input", "conv2d_backprop_filter", "conv2d_transpose",
           "conv1d", "max_pool", "avg_pool", "max_pool2d", "avg_pool2d"]


def window_geometry(in_size, k, stride, dilation=1, padding="VALID", explicit=(0, 0)):
    """Output size and padding of one windowed dimension, as TF computes them.

    Args:
        in_size: input size (None when unknown).
        k: window (filter) size before dilation (None when unknown).
        stride, dilation: ints >= 1.
        padding: "VALID", "SAME" or "EXPLICIT" (then `explicit` gives (before, after)).

    Returns:
        (output size, pad before, pad after); all None when `in_size` or `k` is unknown.

    Raises:
        ValueError: if the output size would be negative.
    """
    if in_size is None or k is None:
        return None, None, None
    eff = (k - 1) * dilation + 1
    if padding == "SAME":
        out = (in_size + stride - 1) // stride
        total = max((out - 1) * stride + eff - in_size, 0)
        before, after = total // 2, total - total // 2
    else:
        before, after = (int(explicit[0]), int(explicit[1])) if padding == "EXPLICIT" else (0, 0)
        q = in_size + before + after - eff + stride
        out = q // stride if q >= 0 else -(-q // stride)  # C++ division truncates
    if out < 0:
        raise ValueError(f"Computed output size would be negative: {out} [input_size: {in_size}, "
                         f"effective_filter_size: {eff}, stride: {stride}]")
    return out, before, after


def spatial_axes(data_format):
    """(height axis, width axis, channel axis) of a 4-D tensor in `data_format`."""
    return (2, 3, 1) if data_format == "NCHW" else (1, 2, 3)


def _check_conv_attrs(strides, dilations, padding, explicit, fmt):
    if len(strides) != 4:
        raise ValueError(f"Conv2D requires the stride attribute to contain 4 values, but got: "
                         f"{len(strides)}")
    if len(dilations) != 4:
        raise ValueError(f"Conv2D requires the dilation attribute to contain 4 values, but got: "
                         f"{len(dilations)}")
    _, _, c = spatial_axes(fmt)
    if strides[0] != 1 or strides[c] != 1:
        raise ValueError("Current implementation does not yet support strides in the batch and "
                         "depth dimensions.")
    if dilations[0] != 1 or dilations[c] != 1:
        raise ValueError("Current implementation does not yet support dilations in the batch and "
                         "depth dimensions.")
    if min(strides) < 1 or min(dilations) < 1:
        raise ValueError(f"Conv2D strides and dilations must be >= 1, got strides {strides} and "
                         f"dilations {dilations}")
    if padding == "EXPLICIT":
        if len(explicit) != 8:
            raise ValueError(f"explicit_paddings attribute must contain 8 values, but got: "
                             f"{len(explicit)}")
        if any(p < 0 for p in explicit):
            raise ValueError(f"All elements of explicit_paddings must be nonnegative, got "
                             f"{explicit}")
        if explicit[0] or explicit[1] or explicit[2 * c] or explicit[2 * c + 1]:
            raise ValueError("Nonzero explicit padding in the batch or depth dimensions is not "
                             "supported")
    elif explicit:
        raise ValueError("explicit_paddings attribute must be empty if the padding attribute is "
                         "not EXPLICIT")


def conv_params(attrs_get):
    """Reads the Conv2D attrs through `attrs_get(name)`.

    Returns:
        (data_format, (stride_h, stride_w), (dilation_h, dilation_w), padding,
        ((pad_top, pad_bottom), (pad_left, pad_right)) for EXPLICIT padding else zeros).
    """
    fmt = attrs_get("data_format")
    strides, dil = list(attrs_get("strides")), list(attrs_get("dilations"))
    padding, explicit = attrs_get("padding"), list(attrs_get("explicit_paddings"))
    _check_conv_attrs(strides, dil, padding, explicit, fmt)
    h, w, _ = spatial_axes(fmt)
    pads = ((explicit[2 * h], explicit[2 * h + 1]), (explicit[2 * w], explicit[2 * w + 1])) \
        if padding == "EXPLICIT" else ((0, 0), (0, 0))
    return fmt, (strides[h], strides[w]), (dil[h], dil[w]), padding, pads


def _rank4(s):
    return _ts.unknown_shape(4) if s.rank is None else s.with_rank(4)


def _to_nhwc(dims, fmt):
    return [dims[0], dims[2], dims[3], dims[1]] if fmt == "NCHW" else list(dims)


def _from_nhwc(dims, fmt):
    return [dims[0], dims[3], dims[1], dims[2]] if fmt == "NCHW" else list(dims)


def _conv_out_nhwc(op, x_nhwc, filt):
    fmt, (sh, sw), (dh, dw), padding, pads = conv_params(op.get_attr)
    n, h, w, c = x_nhwc
    kh, kw, ci, o = filt
    if c is not None and ci is not None and c != ci:
        raise ValueError(f"Depth of input ({c}) does not match the input depth of the filter "
                         f"({ci}); grouped convolutions are not supported")
    oh = window_geometry(h, kh, sh, dh, padding, pads[0])[0]
    ow = window_geometry(w, kw, sw, dw, padding, pads[1])[0]
    return [n, oh, ow, o], fmt


def _conv2d_shape(op):
    fmt = op.get_attr("data_format")
    x = _to_nhwc(_rank4(op.inputs[0].shape).dim_values, fmt)
    out, fmt = _conv_out_nhwc(op, x, _rank4(op.inputs[1].shape).dim_values)
    return [_from_nhwc(out, fmt)]


def _sizes_shape(op, i):
    s = tensor_util.constant_value_as_shape(op.inputs[i])
    return _ts.unknown_shape(4) if s.rank is None else s.with_rank(4)


def _backprop_input_shape(op):
    conv_params(op.get_attr)
    _rank4(op.inputs[1].shape)
    _rank4(op.inputs[2].shape)
    return [_sizes_shape(op, 0)]


def _backprop_filter_shape(op):
    conv_params(op.get_attr)
    _rank4(op.inputs[0].shape)
    _rank4(op.inputs[2].shape)
    return [_sizes_shape(op, 1)]


_CONV_ATTRS = ["T: {half, float, double, int32}", "strides: list(int)",
               "use_cudnn_on_gpu: bool = true", "padding: {'SAME', 'VALID', 'EXPLICIT'}",
               "explicit_paddings: list(int) = []", "data_format: {'NHWC', 'NCHW'} = 'NHWC'",
               "dilations: list(int) = [1, 1, 1, 1]"]

register_op("Conv2D", inputs=["input: T", "filter: T"], outputs=["output: T"], attrs=_CONV_ATTRS,
            shape_fn=_conv2d_shape,
            doc="2-D convolution (cross-correlation) of a 4-D `input` with a "
                "[filter_height, filter_width, in_channels, out_channels] `filter`.")


# TF's internal op of the same name (made by Grappler's remapper; here by
# kernflow.core.runtime.remapper): Conv2D followed by the `fused_ops` (BiasAdd, then optionally
# Relu) over `args` (the bias).
register_op("_FusedConv2D", inputs=["input: T", "filter: T", "args: num_args * T"], outputs=["output: T"],
            attrs=["T: {half, float, double}", "num_args: int >= 0", "strides: list(int)",
                   "padding: {'SAME', 'VALID', 'EXPLICIT'}", "explicit_paddings: list(int) = []",
                   "data_format: {'NHWC', 'NCHW'} = 'NHWC'", "dilations: list(int) = [1, 1, 1, 1]",
                   "use_cudnn_on_gpu: bool = true", "fused_ops: list(string) = []",
                   "epsilon: float = 0.0001"],
            shape_fn=_conv2d_shape,
            doc="Conv2D followed by `fused_ops` (['BiasAdd'] or ['BiasAdd', 'Relu']) applied with "
                "`args` (the bias), in one kernel. Made by the remapper pass after the gradients "
                "are built.")
NotDifferentiable("_FusedConv2D")
register_op("Conv2DBackpropInput", inputs=["input_sizes: int32", "filter: T", "out_backprop: T"],
            outputs=["output: T"], attrs=_CONV_ATTRS, shape_fn=_backprop_input_shape,
            doc="Gradient of Conv2D with respect to its input, whose shape is `input_sizes`.")
register_op("Conv2DBackpropFilter", inputs=["input: T", "filter_sizes: int32", "out_backprop: T"],
            outputs=["output: T"], attrs=_CONV_ATTRS, shape_fn=_backprop_filter_shape,
            doc="Gradient of Conv2D with respect to its filter, whose shape is `filter_sizes`.")


def _get_sequence(value, n, channel_index, name):
    """Expands an int or a list of 1, n or n+2 ints to n+2 entries (ones in batch/channel)."""
    if value is None:
        value = [1]
    elif not isinstance(value, Sized):
        value = [value]
    value = [int(v) for v in value]
    if len(value) == n + 2:
        return value
    if len(value) == 1:
        value = value * n
    elif len(value) != n:
        raise ValueError(f"{name} should be of length 1, {n} or {n + 2} but was {len(value)}")
    return [1, 1] + value if channel_index == 1 else [1] + value + [1]


def _convert_padding(padding, expected_length=4):
    """Returns (padding string, flat explicit paddings) from a string or a list of pairs."""
    if isinstance(padding, bytes):
        padding = padding.decode()
    if padding == "EXPLICIT":
        raise ValueError('"EXPLICIT" is not a valid value for the padding parameter. To use '
                         'explicit padding, the padding parameter must be a list.')
    explicit = []
    if isinstance(padding, (list, tuple)):
        for i, pair in enumerate(padding):
            if not isinstance(pair, (list, tuple)):
                raise ValueError(f"When padding is a list, each element of padding must be a "
                                 f"list/tuple of size 2. Element with index {i} of padding is "
                                 f"not a list/tuple")
            if len(pair) != 2:
                raise ValueError(f"When padding is a list, each element of padding must be a "
                                 f"list/tuple of size 2. Element with index {i} of padding has "
                                 f"size {len(pair)}")
            explicit.extend(int(p) for p in pair)
        if len(padding) != expected_length:
            raise ValueError(f"When padding is a list, it must be of size {expected_length}. Got "
                             f"padding of size: {len(padding)}")
        padding = "EXPLICIT"
    return padding, explicit


def _conv_attrs(strides, padding, data_format, dilations, use_cudnn_on_gpu=True):
    data_format = data_format or "NHWC"
    ch = 1 if data_format.startswith("NC") else 3
    padding, explicit = _convert_padding(padding)
    return {"strides": _get_sequence(strides, 2, ch, "strides"), "padding": padding,
            "explicit_paddings": explicit, "data_format": data_format,
            "dilations": _get_sequence(dilations, 2, ch, "dilations"),
            "use_cudnn_on_gpu": bool(use_cudnn_on_gpu)}


def _pick(new_name, new, old_name, old):
    if new is not None and old is not None:
        raise ValueError(f"Cannot specify both '{new_name}' and '{old_name}'")
    return new if new is not None else old


def conv2d(input, filter=None, strides=None, padding=None, use_cudnn_on_gpu=True,  # noqa: A002
           data_format="NHWC", dilations=[1, 1, 1, 1], name=None, filters=None):  # noqa: B006
    """Computes a 2-D convolution of a 4-D `input` with a 4-D `filter`.

    Args:
        input: [batch, in_height, in_width, in_channels] Tensor (NCHW: channels at dimension 1)
            of type half, float32, float64 or int32.
        filter: [filter_height, filter_width, in_channels, out_channels] Tensor of the same type.
        strides: an int or list of 1, 2 or 4 ints: the window stride per dimension.
        padding: "SAME", "VALID", or a list of 4 [before, after] pairs (explicit padding; the
            batch and channel pairs must be [0, 0]).
        use_cudnn_on_gpu: ignored (kept for signature compatibility).
        data_format: "NHWC" (default) or "NCHW".
        dilations: an int or list of 1, 2 or 4 ints: the dilation rate per dimension.
        name: op name (default "Conv2D").
        filters: alias of `filter`.

    Returns:
        A 4-D Tensor of the type of `input`.

    Raises:
        ValueError: for bad strides, dilations or padding, or mismatched channel counts.
    """
    filter = _pick("filters", filters, "filter", filter)  # noqa: A001
    attrs = _conv_attrs(strides, padding, data_format, dilations, use_cudnn_on_gpu)
    return apply_op("Conv2D", [input, filter], attrs, name=name).outputs[0]


def conv2d_backprop_input(input_sizes, filter=None, out_backprop=None, strides=None,  # noqa: A002
                          padding=None, use_cudnn_on_gpu=True, data_format="NHWC",
                          dilations=[1, 1, 1, 1], name=None, filters=None):  # noqa: B006
    """Computes the gradient of conv2d with respect to its input.

    Args:
        input_sizes: int32 1-D Tensor of 4 values: the shape of the conv2d input.
        filter: the conv2d filter [filter_height, filter_width, in_channels, out_channels].
        out_backprop: gradient with respect to the conv2d output.
        strides, padding, use_cudnn_on_gpu, data_format, dilations: as in `conv2d`.
        name: op name (default "Conv2DBackpropInput").
        filters: alias of `filter`.
    """
    filter = _pick("filters", filters, "filter", filter)  # noqa: A001
    attrs = _conv_attrs(strides, padding, data_format, dilations, use_cudnn_on_gpu)
    return apply_op("Conv2DBackpropInput", [input_sizes, filter, out_backprop], attrs,
                    name=name).outputs[0]


def conv2d_backprop_filter(input, filter_sizes, out_backprop, strides, padding,  # noqa: A002
                           use_cudnn_on_gpu=True, data_format="NHWC", dilations=[1, 1, 1, 1],  # noqa: B006
                           name=None):
    """Computes the gradient of conv2d with respect to its filter.

    Args:
        input: the conv2d input.
        filter_sizes: int32 1-D Tensor of 4 values: the shape of the filter.
        out_backprop: gradient with respect to the conv2d output.
        strides, padding, use_cudnn_on_gpu, data_format, dilations: as in `conv2d`.
        name: op name (default "Conv2DBackpropFilter").
    """
    attrs = _conv_attrs(strides, padding, data_format, dilations, use_cudnn_on_gpu)
    return apply_op("Conv2DBackpropFilter", [input, filter_sizes, out_backprop], attrs,
                    name=name).outputs[0]


def conv2d_transpose(value=None, filter=None, output_shape=None, strides=None,  # noqa: A002
                     padding="SAME", data_format="NHWC", name=None, input=None,  # noqa: A002
                     filters=None, dilations=None):
    """The transpose of conv2d (sometimes called deconvolution): the gradient of conv2d with
    respect to its input.

    Args:
        value: 4-D input Tensor [batch, height, width, in_channels] (NHWC).
        filter: [height, width, output_channels, in_channels] Tensor; its last dimension must
            match the channels of `value`.
        output_shape: 1-D Tensor or list of 4 ints: the shape of the output.
        strides, padding, data_format, dilations: as in `conv2d`.
        name: op name (default "conv2d_transpose").
        input, filters: aliases of `value` and `filter`.

    Raises:
        ValueError: if `output_shape` does not have 4 elements, or channel counts disagree.
    """
    value = _pick("input", input, "value", value)
    filter = _pick("filters", filters, "filter", filter)  # noqa: A001
    with _ops.name_scope(name, "conv2d_transpose", [value, filter, output_shape]) as name:
        value = _ops.convert_to_tensor(value, name="value")
        filter = _ops.convert_to_tensor(filter, dtype=value.dtype, name="filter")  # noqa: A001
        if not isinstance(output_shape, _ops.Tensor):
            output_shape = [int(d) for d in output_shape]
            if len(output_shape) != 4:
                raise ValueError(f"output_shape must have shape (4,), got ({len(output_shape)},)")
        output_shape = _ops.convert_to_tensor(output_shape, name="output_shape")
        ch = 1 if (data_format or "NHWC").startswith("NC") else 3
        vc = value.shape.dim_values[ch] if value.shape.rank == 4 else None
        fo = filter.shape.dim_values[3] if filter.shape.rank == 4 else None
        if vc is not None and fo is not None and vc != fo:
            raise ValueError(f"input channels does not match filter's input channels, {vc} != "
                             f"{fo}")
        static = tensor_util.constant_value(output_shape)
        fi = filter.shape.dim_values[2] if filter.shape.rank == 4 else None
        if static is not None and fi is not None and int(static[ch]) != fi:
            raise ValueError(f"output_shape does not match filter's output channels, "
                             f"{int(static[ch])} != {fi}")
        return conv2d_backprop_input(output_shape, filter, value, strides, padding,
                                     data_format=data_format, dilations=dilations or 1, name=name)


def conv1d(value=None, filters=None, stride=None, padding=None, use_cudnn_on_gpu=None,
           data_format=None, name=None, input=None, dilations=None):  # noqa: A002
    """Computes a 1-D convolution of a 3-D input with a 3-D filter (via conv2d).

    Args:
        value: [batch, in_width, in_channels] Tensor ("NWC", the default) or [batch,
            in_channels, in_width] ("NCW").
        filters: [filter_width, in_channels, out_channels] Tensor.
        stride: an int or list of 1 or 3 ints.
        padding: "SAME" or "VALID".
        data_format: "NWC" or "NCW".
        name: name scope (default "conv1d").
        input: alias of `value`.
        dilations: an int or list of 1 or 3 ints.
    """
    from kernflow.core.ops import array_ops
    value = _pick("input", input, "value", value)
    with _ops.name_scope(name, "conv1d", [value, filters]) as name:
        if data_format is None or data_format in ("NHWC", "NWC"):
            data_format, spatial, ch = "NHWC", 1, 2
        elif data_format in ("NCHW", "NCW"):
            data_format, spatial, ch = "NCHW", 2, 1
        else:
            raise ValueError("data_format must be \"NWC\" or \"NCW\".")
        stride = [1] + _get_sequence(stride, 1, ch, "stride")
        dilations = [1] + _get_sequence(dilations, 1, ch, "dilations")
        value = array_ops.expand_dims(value, spatial)
        filters = array_ops.expand_dims(filters, 0)
        result = conv2d(value, filters, stride, padding, data_format=data_format,
                        dilations=dilations)
        return array_ops.squeeze(result, [spatial], name=name)


# -------------------------------------------------------------------------------------- pooling
def pool_params(op_type, ksize, strides, padding):
    """Validates pooling attrs; returns (ksize, strides) as lists of 4 ints."""
    ksize, strides = [int(k) for k in ksize], [int(s) for s in strides]
    if len(ksize) != 4:
        raise ValueError(f"{op_type}: sliding window ksize field must specify 4 dimensions")
    if len(strides) != 4:
        raise ValueError(f"{op_type}: sliding window stride field must specify 4 dimensions")
    if ksize[0] != 1 or strides[0] != 1:
        raise ValueError(f"{op_type}: pooling is not yet supported on the batch dimension.")
    if min(ksize) < 1 or min(strides) < 1:
        raise ValueError(f"{op_type}: ksize and strides must be positive, got ksize {ksize} "
                         f"and strides {strides}")
    return ksize, strides


def _pool_out(op, dims):
    ksize, strides = pool_params(op.type, op.get_attr("ksize"), op.get_attr("strides"),
                                 op.get_attr("padding"))
    padding = op.get_attr("padding")
    return [window_geometry(d, k, s, 1, padding)[0] for d, k, s in zip(dims, ksize, strides)]


def _pool_shape(op):
    return [_pool_out(op, _rank4(op.inputs[0].shape).dim_values)]


def _max_pool_grad_shape(op):
    s = _rank4(op.inputs[0].shape)
    _pool_out(op, s.dim_values)
    for t in op.inputs[1:]:
        _rank4(t.shape)
    return [s]


def _max_pool_grad_grad_shape(op):
    try:
        x = _rank4(op.inputs[0].shape).merge_with(_rank4(op.inputs[2].shape))
    except ValueError:
        raise ValueError(f"grad must have the shape of orig_input, got {op.inputs[2].shape} and "
                         f"{op.inputs[0].shape}") from None
    out = _ts.TensorShape(_pool_out(op, x.dim_values))
    try:
        return [out.merge_with(_rank4(op.inputs[1].shape))]
    except ValueError:
        raise ValueError(f"orig_output has shape {op.inputs[1].shape}, but pooling orig_input "
                         f"gives {out}") from None


def _avg_pool_grad_shape(op):
    s = _sizes_shape(op, 0)
    _pool_out(op, s.dim_values)
    _rank4(op.inputs[1].shape)
    return [s]


_POOL_ATTRS = ["ksize: list(int)", "strides: list(int)", "padding: {'SAME', 'VALID'}",
               "data_format: {'NHWC', 'NCHW'} = 'NHWC'"]
_MAX_T = "T: {half, float, double, int8, int16, int32, int64, uint8, uint16} = float"

register_op("MaxPool", inputs=["input: T"], outputs=["output: T"], attrs=_POOL_ATTRS + [_MAX_T],
            shape_fn=_pool_shape,
            doc="Max pooling of a 4-D input over `ksize` windows moved by `strides`.")
register_op("AvgPool", inputs=["value: T"], outputs=["output: T"],
            attrs=_POOL_ATTRS + ["T: {half, float, double}"], shape_fn=_pool_shape,
            doc="Average pooling of a 4-D input; with SAME padding each window averages only "
                "the elements inside the input.")
register_op("MaxPoolGrad", inputs=["orig_input: T", "orig_output: T", "grad: T"],
            outputs=["output: T"], attrs=_POOL_ATTRS + [_MAX_T], shape_fn=_max_pool_grad_shape,
            doc="MaxPool backprop: each grad entry goes to the first maximum of its window in "
                "`orig_input`.")
register_op("MaxPoolGradGrad", inputs=["orig_input: T", "orig_output: T", "grad: T"],
            outputs=["output: T"], attrs=_POOL_ATTRS + ["T: realnumbertype"],
            shape_fn=_max_pool_grad_grad_shape,
            doc="MaxPool second-order backprop: each output entry is the `grad` entry (shaped "
                "like `orig_input`) at the first maximum of its window in `orig_input`.")
register_op("AvgPoolGrad", inputs=["orig_input_shape: int32", "grad: T"], outputs=["output: T"],
            attrs=_POOL_ATTRS + ["T: {half, float, double}"], shape_fn=_avg_pool_grad_shape,
            doc="AvgPool backprop: each grad entry is spread evenly over the input elements of "
                "its window.")


def _pool(op_type, default_name, value, ksize, strides, padding, data_format, name):
    with _ops.name_scope(name, default_name, [value]) as name:
        data_format = data_format or "NHWC"
        ch = 1 if data_format.startswith("NC") else 3
        ksize = _get_sequence(ksize, 2, ch, "ksize")
        strides = _get_sequence(strides, 2, ch, "strides")
        if any(k == 0 for k in ksize):
            raise ValueError("ksize cannot be zero.")
        if isinstance(padding, bytes):
            padding = padding.decode()
        attrs = {"ksize": ksize, "strides": strides, "padding": padding,
                 "data_format": data_format}
        return apply_op(op_type, [value], attrs, name=name).outputs[0]


def max_pool(value, ksize, strides, padding, data_format="NHWC", name=None, input=None):  # noqa: A002
    """Performs max pooling on a 4-D input.

    Args:
        value: 4-D Tensor in `data_format` layout.
        ksize: an int or list of 1, 2 or 4 ints: the window size per dimension.
        strides: an int or list of 1, 2 or 4 ints: the window stride per dimension.
        padding: "VALID" or "SAME".
        data_format: "NHWC" (default) or "NCHW".
        name: op name (default "MaxPool").
        input: alias of `value`.

    Returns:
        The max pooled Tensor, of the type of `value`.
    """
    value = _pick("input", input, "value", value)
    return _pool("MaxPool", "MaxPool", value, ksize, strides, padding, data_format, name)


def avg_pool(value, ksize, strides, padding, data_format="NHWC", name=None, input=None):  # noqa: A002
    """Performs average pooling on a 4-D input.

    With SAME padding each output averages only the input elements inside its window (padding is
    not counted).

    Args:
        value: 4-D float Tensor in `data_format` layout.
        ksize, strides, padding, data_format: as in `max_pool`.
        name: op name (default "AvgPool").
        input: alias of `value`.
    """
    value = _pick("input", input, "value", value)
    return _pool("AvgPool", "AvgPool", value, ksize, strides, padding, data_format, name)


def max_pool2d(input, ksize, strides, padding, data_format="NHWC", name=None):  # noqa: A002
    """Performs max pooling on a 4-D input (TF2-style signature of `max_pool`)."""
    return _pool("MaxPool", "MaxPool2d", input, ksize, strides, padding, data_format, name)


def avg_pool2d(input, ksize, strides, padding, data_format="NHWC", name=None):  # noqa: A002
    """Performs average pooling on a 4-D input (TF2-style signature of `avg_pool`)."""
    return _pool("AvgPool", "AvgPool2D", input, ksize, strides, padding, data_format, name)


def max_pool_grad(orig_input, orig_output, grad, ksize, strides, padding, data_format="NHWC",
                  name=None):
    """Builds a `MaxPoolGrad` op (the gradient of max_pool with respect to its input)."""
    attrs = {"ksize": list(ksize), "strides": list(strides), "padding": padding,
             "data_format": data_format}
    return apply_op("MaxPoolGrad", [orig_input, orig_output, grad], attrs, name=name).outputs[0]


def max_pool_grad_grad(orig_input, orig_output, grad, ksize, strides, padding,
                       data_format="NHWC", name=None):
    """Builds a `MaxPoolGradGrad` op (the gradient of max_pool_grad with respect to its grad)."""
    attrs = {"ksize": list(ksize), "strides": list(strides), "padding": padding,
             "data_format": data_format}
    return apply_op("MaxPoolGradGrad", [orig_input, orig_output, grad], attrs,
                    name=name).outputs[0]


def avg_pool_grad(orig_input_shape, grad, ksize, strides, padding, data_format="NHWC", name=None):
    """Builds an `AvgPoolGrad` op (the gradient of avg_pool with respect to its input)."""
    attrs = {"ksize": list(ksize), "strides": list(strides), "padding": padding,
             "data_format": data_format}
    return apply_op("AvgPoolGrad", [orig_input_shape, grad], attrs, name=name).outputs[0]
