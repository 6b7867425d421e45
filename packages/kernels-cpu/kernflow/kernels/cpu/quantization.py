"""Numpy kernels of the quantization ops (kernflow.core.ops.quantization_ops).

Quantized arrays are numpy structured arrays of one integer field (the dtypes' as_numpy_dtype);
kernels read the field and write integers back through a view. Ranges broadcast against the
input (a scalar, or one value per slice along `axis`), so per-tensor and per-channel share one
code path. Arithmetic follows TF's kernels: float32 for MIN_COMBINED, SCALED and
QuantizeAndDequantize, float64 for MIN_FIRST (TF computes its range scale in double).
"""

from __future__ import annotations

import numpy as np

from kernflow.core.framework import errors

DEVICE = "CPU"
_F = np.float32


def _invalid(ctx, msg: str):
    return errors.InvalidArgumentError(None, None, f"{ctx.op_type} node {ctx.name}: {msg}")


def _storage(q_dtype):
    """(numpy integer type, lowest, highest) of a quantized DType."""
    t = q_dtype.as_numpy_dtype[0].type
    info = np.iinfo(t)
    return t, int(info.min), int(info.max)


def _ints(a):
    """The integers a quantized (structured) array holds."""
    a = np.asarray(a)
    return a[a.dtype.names[0]] if a.dtype.names else a


def _to_quantized(q, q_dtype):
    t, lo, hi = _storage(q_dtype)
    return np.ascontiguousarray(np.clip(q, lo, hi).astype(t)).view(q_dtype.as_numpy_dtype)


def _round(x, mode):
    if mode == "HALF_TO_EVEN":
        return np.rint(x)
    if mode == "HALF_UP":
        return np.floor(x + x.dtype.type(0.5))
    return np.sign(x) * np.floor(np.abs(x) + x.dtype.type(0.5))   # HALF_AWAY_FROM_ZERO


def _ranges(ctx, x, lo, hi, names=("min_range", "max_range")):
    """min and max as arrays that broadcast against x: scalars, or [d, 1, ...] along `axis`."""
    axis = ctx.get_attr("axis")
    lo, hi = np.asarray(lo), np.asarray(hi)
    if axis == -1:
        for v, n in zip((lo, hi), names):
            if v.size != 1:
                raise _invalid(ctx, f"{n} must be a scalar without axis, got shape {list(v.shape)}")
        return lo.reshape(()), hi.reshape(())
    if not -x.ndim <= axis < x.ndim:
        raise _invalid(ctx, f"axis {axis} is out of range for input of shape {list(x.shape)}")
    axis %= x.ndim
    tail = (1,) * (x.ndim - axis - 1)
    for v, n in zip((lo, hi), names):
        if v.shape != (x.shape[axis],):
            raise _invalid(ctx, f"{n} must have shape [{x.shape[axis]}] (input dimension {axis}), "
                                f"got {list(v.shape)}")
    return lo.reshape((-1,) + tail), hi.reshape((-1,) + tail)


def _min_first_steps(q_dtype, lo, hi):
    """(lowest, n / ((hi - lo) * n / (n - 1))) of MIN_FIRST: levels per unit of the range."""
    _, lowest, _ = _storage(q_dtype)
    n = float(1 << (8 * np.dtype(_storage(q_dtype)[0]).itemsize))
    with np.errstate(divide="ignore"):
        return lowest, n / ((np.float64(hi) - np.float64(lo)) * (n / (n - 1)))


def float_to_quantized(x, lo, hi, q_dtype, clamp=True):
    """MIN_FIRST quantization of float `x` over [lo, hi] (lowest where lo == hi), as integers;
    rounding is half away from zero (Eigen's round, as TF). With clamp=False the level may lie
    outside q_dtype (TF's FloatToQuantizedUnclamped, e.g. the level of 0.0 in [1, 2])."""
    lowest, scale = _min_first_steps(q_dtype, lo, hi)
    x = np.asarray(x, np.float64)
    with np.errstate(invalid="ignore", over="ignore"):
        q = _round(x * scale, "") - _round(np.float64(lo) * scale, "") + lowest
    q = np.where(np.broadcast_to(lo == hi, q.shape), lowest, q)
    _, lo_t, hi_t = _storage(q_dtype)
    return np.clip(q, lo_t, hi_t) if clamp else q


def quantized_to_float(q, lo, hi, q_dtype):
    """MIN_FIRST dequantization of integers `q` representing [lo, hi] (lo where lo == hi)."""
    lowest, scale = _min_first_steps(q_dtype, lo, hi)
    with np.errstate(divide="ignore", invalid="ignore"):
        out = (np.asarray(q, np.float64) - lowest) / scale + np.float64(lo)
    return np.where(np.broadcast_to(lo == hi, out.shape), np.float64(lo), out)


# ---------------------------------------------------------------------------- QuantizeV2
def _adjusted_range(ctx, lo, hi):
    """TF's widening: the range holds 0 and is at least ensure_minimum_range (relative) wide."""
    if np.any(lo > hi):
        raise _invalid(ctx, f"min_range must be <= max_range, got min_range {lo.tolist()} and "
                            f"max_range {hi.tolist()}")
    lo, hi = np.minimum(_F(0), lo.astype(_F)), hi.astype(_F)
    eps = np.maximum(_F(1), np.maximum(np.abs(lo), np.abs(hi))) * _F(ctx.get_attr("ensure_minimum_range"))
    return lo, np.maximum(_F(0), np.maximum(hi, lo + eps))


def _scaled_factor(q_dtype, lo, hi, narrow):
    """SCALED: the largest factor mapping [lo, hi] into [lowest (+1 if narrow), highest]."""
    _, lowest, highest = _storage(q_dtype)
    lowest += int(narrow and lowest < 0)
    big = _F(np.finfo(_F).max)
    with np.errstate(divide="ignore", invalid="ignore"):
        from_min = np.where(lowest * lo > 0, _F(lowest) / lo, big)
        from_max = np.where(highest * hi > 0, _F(highest) / hi, big)
    return np.minimum(from_min, from_max).astype(_F), lowest, highest


def _quantize_v2(ctx):
    q_dtype, mode = ctx.get_attr("T"), ctx.get_attr("mode")
    round_mode, narrow = ctx.get_attr("round_mode"), ctx.get_attr("narrow_range")
    if round_mode == "HALF_TO_EVEN" and mode != "SCALED":
        raise _invalid(ctx, f"round_mode 'HALF_TO_EVEN' is only supported in mode 'SCALED', got "
                            f"mode '{mode}'")

    def compute(x, lo, hi):
        x = np.asarray(x, _F)
        lo, hi = _adjusted_range(ctx, *_ranges(ctx, x, lo, hi))
        _, lowest, highest = _storage(q_dtype)
        if mode == "MIN_COMBINED":
            scale = _F((highest - lowest) / (hi.astype(np.float64) - lo))
            q = _round((np.clip(x, lo, hi) - lo) * scale, round_mode) + lowest
            out_lo, out_hi = lo, hi
        elif mode == "MIN_FIRST":
            q, out_lo, out_hi = float_to_quantized(x, lo, hi, q_dtype), lo, hi
        else:
            scale, lowest, highest = _scaled_factor(q_dtype, lo, hi, narrow)
            out_lo, out_hi = _F(lowest) / scale, _F(highest) / scale
            q = _round(np.clip(x, out_lo, out_hi) * scale, round_mode)
            q = np.clip(q, lowest, highest)
        shape = np.shape(lo)[:1]
        return (_to_quantized(q, q_dtype), np.asarray(out_lo, _F).reshape(shape),
                np.asarray(out_hi, _F).reshape(shape))
    return compute


# ---------------------------------------------------------------------------- Dequantize
def _dequantize(ctx):
    q_dtype, mode, narrow = ctx.get_attr("T"), ctx.get_attr("mode"), ctx.get_attr("narrow_range")

    def compute(q, lo, hi):
        q = _ints(q)
        lo, hi = (v.astype(_F) for v in _ranges(ctx, q, lo, hi))
        _, lowest, highest = _storage(q_dtype)
        if mode == "MIN_COMBINED":
            scale = ((hi.astype(np.float64) - lo) / (highest - lowest)).astype(_F)
            return ((q.astype(_F) - _F(lowest)) * scale + lo).astype(_F)
        if mode == "MIN_FIRST":
            return quantized_to_float(q, lo, hi, q_dtype).astype(_F)
        if lowest == 0:
            scale = hi / _F(highest)
        else:
            scale = np.maximum(lo / _F(lowest + int(narrow)), hi / _F(highest))
        return (q.astype(_F) * scale).astype(_F)
    return compute


# ---------------------------------------------------------------------------- QuantizedConcat
def _quantized_concat(ctx):
    q_dtype = ctx.get_attr("T")
    if not q_dtype.is_quantized:
        raise _invalid(ctx, f"T must be a quantized type, got {q_dtype.name}")

    def compute(dim, *args):
        n = len(args) // 3
        values, mins, maxes = args[:n], args[n:2 * n], args[2 * n:]
        for what, vs in (("input_mins", mins), ("input_maxes", maxes)):
            for i, v in enumerate(vs):
                if np.ndim(v) != 0:
                    raise _invalid(ctx, f"{what}[{i}] must be a scalar, got shape {list(np.shape(v))}")
        ints = [_ints(v) for v in values]
        rank, d = ints[0].ndim, int(dim)
        if not -rank <= d < rank:
            raise _invalid(ctx, f"concat_dim {d} is out of range for values of rank {rank}")
        d %= rank
        for i, a in enumerate(ints):
            if a.ndim != rank or a.shape[:d] + a.shape[d + 1:] != ints[0].shape[:d] + ints[0].shape[d + 1:]:
                raise _invalid(ctx, f"values[{i}] of shape {list(a.shape)} does not concat with values[0] "
                                    f"of shape {list(ints[0].shape)} along dimension {d}")
        lo = min(_F(0), min(_F(m) for m in mins))
        hi = max(_F(m) for m in maxes)
        if _storage(q_dtype)[1] < 0:
            hi = max(abs(lo), abs(hi))
            lo = -hi
        parts = [a if (_F(mn), _F(mx)) == (lo, hi) else
                 float_to_quantized(quantized_to_float(a, _F(mn), _F(mx), q_dtype), lo, hi, q_dtype)
                 for a, mn, mx in zip(ints, mins, maxes)]
        return _to_quantized(np.concatenate(parts, axis=d), q_dtype), _F(lo), _F(hi)
    return compute


# ---------------------------------------------------------------------------- QuantizeAndDequantize
def _data_range(x, axis):
    """The min and max of x, over everything or per slice along axis (shaped as `_ranges`)."""
    if axis == -1:
        return x.min(), x.max()
    a = axis % x.ndim
    others = tuple(i for i in range(x.ndim) if i != a)
    shape = (-1,) + (1,) * (x.ndim - a - 1)
    return x.min(axis=others).reshape(shape), x.max(axis=others).reshape(shape)


def _qad(ctx, x, lo, hi, num_bits, round_mode):
    """QuantizeAndDequantize of `x` (float) over [lo, hi] with num_bits levels."""
    signed, narrow = ctx.get_attr("signed_input"), ctx.get_attr("narrow_range")
    if not 0 < num_bits < (62 if signed else 63):
        raise _invalid(ctx, f"num_bits is out of range: {num_bits} with signed_input {signed}")
    t = x.dtype.type
    lo, hi = _ranges(ctx, x, lo, hi, ("input_min", "input_max"))
    if ctx.get_attr("range_given"):
        if np.any(lo > hi):
            raise _invalid(ctx, f"Invalid range: input_min {lo.tolist()} > input_max {hi.tolist()}")
    elif x.size:
        lo, hi = _data_range(x, ctx.get_attr("axis"))
    lo, hi = np.asarray(lo, t), np.asarray(hi, t)
    q_lo = t(-(1 << (num_bits - 1)) + int(narrow)) if signed else t(0)
    q_hi = t((1 << (num_bits - 1)) - 1) if signed else t((1 << num_bits) - 1)
    big = t(np.finfo(t).max)
    with np.errstate(divide="ignore", invalid="ignore"):
        from_min = np.where(q_lo * lo > 0, q_lo / lo, big)
        from_max = np.where(q_hi * hi > 0, q_hi / hi, big)
        use_min = from_min < from_max
        scale = np.where(use_min, from_min, from_max).astype(t)
        inverse = np.where(use_min, lo / q_lo, hi / q_hi).astype(t)
    lo = np.where(use_min, lo, q_lo * inverse).astype(t)
    hi = np.where(use_min, q_hi * inverse, hi).astype(t)
    with np.errstate(over="ignore", invalid="ignore"):
        return (_round(np.clip(x, lo, hi) * scale, round_mode) * inverse).astype(t)


def _qad_v2(ctx):
    num_bits, round_mode = ctx.get_attr("num_bits"), ctx.get_attr("round_mode")

    def compute(x, lo, hi):
        return _qad(ctx, np.asarray(x), lo, hi, num_bits, round_mode)
    return compute


def _qad_v3(ctx):
    def compute(x, lo, hi, num_bits):
        if np.ndim(num_bits) != 0:
            raise _invalid(ctx, f"num_bits must be a scalar, got shape {list(np.shape(num_bits))}")
        return _qad(ctx, np.asarray(x), lo, hi, int(num_bits), "HALF_TO_EVEN")
    return compute


def register(registry, device=DEVICE):
    """Registers this family's CPU kernels."""
    table = {"QuantizeV2": _quantize_v2, "Dequantize": _dequantize, "QuantizedConcat": _quantized_concat,
             "QuantizeAndDequantizeV2": _qad_v2, "QuantizeAndDequantizeV3": _qad_v3}
    for op, factory in table.items():
        registry.register(op, device, factory)
