"""Numpy kernels of the quantized nn ops (kernflow.core.ops.nn_ops_quantized).

Levels are read out of the quantized (structured) arrays as int64, so sums and products never
overflow before the final clamp to the output type. The MIN_FIRST level helpers come from the
quantization family, the window geometry from the float nn kernels.
"""

from __future__ import annotations

import numpy as np

from kernflow.core.ops.nn_ops_quantized import check_conv_attrs
from kernflow.kernels.cpu.nn import _pad, _pool_geometry, _pool_setup, _taps, _window_counts, _windows
from kernflow.kernels.cpu.quantization import (_invalid, _ints, _storage, _to_quantized,
                                               float_to_quantized, quantized_to_float)

DEVICE = "CPU"
_F = np.float32


def _scalars(ctx, values, names):
    """The float range inputs as float32 scalars; InvalidArgumentError for any other shape."""
    for v, n in zip(values, names):
        if np.ndim(v) != 0:
            raise _invalid(ctx, f"{n} must be a scalar, got shape {list(np.shape(v))}")
    return [_F(v) for v in values]


def _levels(ctx, q, what="input", rank=None):
    """The int64 levels of quantized array `q`; InvalidArgumentError unless it has `rank` dims."""
    q = _ints(q)
    if rank is not None and q.ndim != rank:
        raise _invalid(ctx, f"{what} must be {rank}-dimensional, got shape {list(q.shape)}")
    return q.astype(np.int64)


# ---------------------------------------------------------------------------- QuantizedReluX
def _relu_x(ctx):
    in_t, out_t = ctx.get_attr("Tinput"), ctx.get_attr("out_type")

    def compute(q, max_value, lo, hi):
        max_value, lo, hi = _scalars(ctx, (max_value, lo, hi), ("max_value", "min_features", "max_features"))
        # TF clamps between the levels of 0 and max_value (max, then min: max wins when max_value < 0).
        y = np.minimum(np.maximum(_levels(ctx, q), float_to_quantized(0.0, lo, hi, in_t)),
                       float_to_quantized(max_value, lo, hi, in_t))
        if out_t != in_t:
            y = float_to_quantized(quantized_to_float(y, lo, hi, in_t), lo, hi, out_t)
        return _to_quantized(y, out_t), lo, hi
    return compute


# ---------------------------------------------------------------------------- pools
def _window_max(q, ksize, strides, out, pads):
    qp = _pad(q, pads, np.iinfo(np.int64).min)
    y = np.full(out, np.iinfo(np.int64).min, np.int64)
    for _, sl in _taps(ksize, strides, out):
        np.maximum(y, qp[sl], out=y)
    return y


def _window_mean(q, ksize, strides, out, pads):
    """Sum over the window's elements inside the input, divided by their count truncating (C++)."""
    qp = _pad(q, pads)
    y = np.zeros(out, np.int64)
    for _, sl in _taps(ksize, strides, out):
        y += qp[sl]
    count = _window_counts(q.shape, ksize, strides, out, pads, np.int64)
    return np.sign(y) * (np.abs(y) // count)


def _quantized_pool(reduce):
    def factory(ctx):
        ksize, strides, padding = _pool_setup(ctx)
        q_dtype = ctx.get_attr("T")

        def compute(x, lo, hi):
            lo, hi = _scalars(ctx, (lo, hi), ("min_input", "max_input"))
            q = _levels(ctx, x, rank=4)
            out, pads = _pool_geometry(ctx, q.shape, ksize, strides, padding)
            y = np.zeros(out, np.int64) if 0 in out else reduce(q, ksize, strides, out, pads)
            return _to_quantized(y, q_dtype), lo, hi
        return compute
    return factory


# ---------------------------------------------------------------------------- QuantizedConv2D
def _product_range(in_t, f_t, out_t, x_lo, x_hi, f_lo, f_hi):
    """[lowest, highest] of out_t times one product step (input step * filter step), in float32."""
    def step(t, lo, hi):
        _, lowest, highest = _storage(t)
        return _F((hi - lo) / _F(highest - lowest))
    _, lowest, highest = _storage(out_t)
    one = step(in_t, x_lo, x_hi) * step(f_t, f_lo, f_hi)
    return _F(one * _F(lowest)), _F(one * _F(highest))


def _quantized_conv2d(ctx):
    in_t, f_t, out_t = ctx.get_attr("Tinput"), ctx.get_attr("Tfilter"), ctx.get_attr("out_type")
    strides, padding = list(ctx.get_attr("strides")), ctx.get_attr("padding")
    try:
        check_conv_attrs(ctx.op_type, strides, ctx.get_attr("dilations"))
    except ValueError as e:
        raise _invalid(ctx, str(e)) from None

    def compute(x, w, x_lo, x_hi, f_lo, f_hi):
        x_lo, x_hi, f_lo, f_hi = _scalars(ctx, (x_lo, x_hi, f_lo, f_hi),
                                          ("min_input", "max_input", "min_filter", "max_filter"))
        x, w = _levels(ctx, x, "input", 4), _levels(ctx, w, "filter", 4)
        kh, kw, c, o = w.shape
        if x.shape[3] != c:
            raise _invalid(ctx, f"input depth {x.shape[3]} does not match the filter's input depth {c}")
        # Zero levels unclamped: padding and the offsets both stand for the float 0.0.
        x = x - np.int64(float_to_quantized(0.0, x_lo, x_hi, in_t, clamp=False))
        w = w - np.int64(float_to_quantized(0.0, f_lo, f_hi, f_t, clamp=False))
        shape = (x.shape[0], x.shape[1], x.shape[2], c)
        out, pads = _pool_geometry(ctx, shape, (1, kh, kw, 1), strides, padding)
        cols = _windows(_pad(x, pads), kh, kw, out[1], out[2], strides[1:3], (1, 1))
        y = (cols.reshape(-1, kh * kw * c) @ w.reshape(kh * kw * c, o)).reshape(out[:3] + (o,))
        return (_to_quantized(y, out_t),) + _product_range(in_t, f_t, out_t, x_lo, x_hi, f_lo, f_hi)
    return compute


def register(registry, device=DEVICE):
    """Registers this family's CPU kernels."""
    table = {"QuantizedReluX": _relu_x, "QuantizedMaxPool": _quantized_pool(_window_max),
             "QuantizedAvgPool": _quantized_pool(_window_mean), "QuantizedConv2D": _quantized_conv2d}
    for op, factory in table.items():
        registry.register(op, device, factory)
