"""Argument normalization shared by the `kf.layers` modules (TF's `layers/utils.py`)."""

from __future__ import annotations

from kernflow.core.framework import tensor_shape as _ts

__all__ = ["normalize_tuple", "normalize_padding", "normalize_data_format", "convert_data_format",
           "conv_output_length", "deconv_output_length", "dims"]


def normalize_tuple(value, n, name):
    """An int or an iterable of `n` ints -> a tuple of `n` ints."""
    if isinstance(value, int):
        return (value,) * n
    try:
        value = tuple(value)
    except TypeError:
        raise ValueError(f"The `{name}` argument must be a tuple of {n} integers. Received: "
                         f"{value}") from None
    if len(value) != n or not all(isinstance(v, int) for v in value):
        raise ValueError(f"The `{name}` argument must be a tuple of {n} integers. Received: "
                         f"{value}")
    return value


def normalize_padding(value):
    """'valid'/'same' in any case -> 'valid'/'same'."""
    padding = str(value).lower()
    if padding not in ("valid", "same"):
        raise ValueError(f"The `padding` argument must be one of 'valid', 'same'. Received: "
                         f"{value}")
    return padding


def normalize_data_format(value):
    """None -> 'channels_last'; checks 'channels_last'/'channels_first'."""
    data_format = "channels_last" if value is None else str(value).lower()
    if data_format not in ("channels_first", "channels_last"):
        raise ValueError(f"The `data_format` argument must be one of 'channels_first', "
                         f"'channels_last'. Received: {value}")
    return data_format


def convert_data_format(data_format, ndim):
    """'channels_last'/'channels_first' -> 'NWC'/'NHWC'/'NCHW'... for a rank-`ndim` tensor."""
    spatial = {3: "W", 4: "HW", 5: "DHW"}[ndim]
    return f"N{spatial}C" if data_format == "channels_last" else f"NC{spatial}"


def conv_output_length(length, filter_size, padding, stride, dilation=1):
    """Output length of a convolution or pooling along one axis (None stays None)."""
    if length is None:
        return None
    eff = filter_size + (filter_size - 1) * (dilation - 1)
    out = length - eff + 1 if padding == "valid" else length
    return (out + stride - 1) // stride


def deconv_output_length(length, filter_size, padding, stride):
    """Output length of a transposed convolution along one axis (None stays None)."""
    if length is None:
        return None
    length *= stride
    if padding == "valid":
        length += max(filter_size - stride, 0)
    return length


def dims(shape):
    """A shape (TensorShape, list or tuple) as a list of ints/None; None for unknown rank."""
    shape = _ts.TensorShape(shape)
    return None if shape.rank is None else shape.as_list()
