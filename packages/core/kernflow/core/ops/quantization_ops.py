"""TF1's quantization ops: QuantizeV2 / Dequantize between float32 and the quantized types
(qint8, quint8, qint16, quint16, qint32) over a float range, QuantizedConcat, and the
simulated-quantization QuantizeAndDequantizeV2/V3.

A quantized tensor travels with the float range it represents: QuantizeV2 returns
(output, output_min, output_max), Dequantize and QuantizedConcat take the ranges as inputs.
`axis` (-1: one range for the whole tensor) gives one range per slice along that dimension.

OpDefs and wrappers here; CPU kernels in kernflow.kernels.cpu.quantization, gradients in
kernflow.core.grads.quantization_grad.
"""

from __future__ import annotations

import collections

from kernflow.core.framework import dtypes as _dtypes
from kernflow.core.framework import ops as _ops
from kernflow.core.framework import tensor_shape as _ts
from kernflow.core.framework.op_def_library import apply_op
from kernflow.core.framework.op_def_registry import register_op

__all__ = ["quantize", "quantize_v2", "dequantize", "quantized_concat", "quantize_and_dequantize",
           "quantize_and_dequantize_v3"]

# Op types of this module (the GPU plugin gives them no kernel: placement keeps them on the host).
QUANTIZATION_OPS = ("QuantizeV2", "Dequantize", "QuantizedConcat", "QuantizeAndDequantizeV2",
                    "QuantizeAndDequantizeV3")

_S = _ts.TensorShape
_MODE = "mode: {'MIN_COMBINED', 'MIN_FIRST', 'SCALED'} = 'MIN_COMBINED'"
_Q_T = "T: quantizedtype"

QuantizeV2Result = collections.namedtuple("QuantizeV2", ["output", "output_min", "output_max"])
QuantizedConcatResult = collections.namedtuple("QuantizedConcat", ["output", "output_min", "output_max"])


# ---------------------------------------------------------------------------- shape functions
def _range_shape(op, x_shape, axis, names):
    """The shape of a range input: a scalar, or [x_shape[axis]] per channel; checks both ranges."""
    want = _S([]) if axis == -1 else _S([x_shape[axis] if x_shape.rank is not None else None])
    if axis != -1 and x_shape.rank is not None and not -x_shape.rank <= axis < x_shape.rank:
        raise ValueError(f"{op.type}: axis {axis} is out of range for input of rank {x_shape.rank}")
    for t, n in zip(op.inputs[1:3], names):
        if not t.shape.is_compatible_with(want):
            raise ValueError(f"{op.type}: {n} must have shape {want}, got {t.shape}")
    return want


def _quantize_shape(op):
    x = op.inputs[0].shape
    r = _range_shape(op, x, op.get_attr("axis"), ("min_range", "max_range"))
    return [x, r, r]


def _dequantize_shape(op):
    _range_shape(op, op.inputs[0].shape, op.get_attr("axis"), ("min_range", "max_range"))
    return [op.inputs[0].shape]


def _qad_shape(op):
    _range_shape(op, op.inputs[0].shape, op.get_attr("axis"), ("input_min", "input_max"))
    if op.type == "QuantizeAndDequantizeV3":
        op.inputs[3].shape.with_rank(0)
    return [op.inputs[0].shape]


def _quantized_concat_shape(op):
    n = op.get_attr("N")
    op.inputs[0].shape.with_rank(0)
    for t in op.inputs[1 + n:]:
        t.shape.with_rank(0)
    from kernflow.core.framework import tensor_util
    values = op.inputs[1:1 + n]
    dim = tensor_util.constant_value(op.inputs[0])
    known = [v.shape for v in values if v.shape.rank is not None]
    if not known:
        return [_S(None), _S([]), _S([])]
    rank = known[0].rank
    if any(s.rank != rank for s in known):
        raise ValueError(f"QuantizedConcat: all values must have one rank, got "
                         f"{[str(v.shape) for v in values]}")
    if dim is None:
        return [_S([None] * rank), _S([]), _S([])]
    d = int(dim)
    if not -rank <= d < rank:
        raise ValueError(f"QuantizedConcat: concat_dim {d} is out of range for rank {rank}")
    d %= rank
    out = list(known[0].dim_values)
    out[d] = 0
    for s in [v.shape for v in values]:
        dims = s.dim_values if s.rank is not None else [None] * rank
        for i, v in enumerate(dims):
            if i == d:
                out[d] = None if out[d] is None or v is None else out[d] + v
            elif out[i] is None:
                out[i] = v
            elif v is not None and v != out[i]:
                raise ValueError(f"QuantizedConcat: dimension {i} of the values must agree, got "
                                 f"{[str(x.shape) for x in values]}")
    return [_S(out), _S([]), _S([])]


register_op("QuantizeV2", inputs=["input: float", "min_range: float", "max_range: float"],
            outputs=["output: T", "output_min: float", "output_max: float"],
            attrs=[_Q_T, _MODE, "round_mode: {'HALF_AWAY_FROM_ZERO', 'HALF_TO_EVEN'} = 'HALF_AWAY_FROM_ZERO'",
                   "narrow_range: bool = false", "axis: int = -1", "ensure_minimum_range: float = 0.01"],
            shape_fn=_quantize_shape,
            doc="Quantizes float `input` over [min_range, max_range] (widened to hold 0 and at least "
                "ensure_minimum_range wide) to T by MIN_COMBINED, MIN_FIRST or SCALED; also returns the "
                "range the output represents.")
register_op("Dequantize", inputs=["input: T", "min_range: float", "max_range: float"],
            outputs=["output: float"], attrs=[_Q_T, _MODE, "narrow_range: bool = false", "axis: int = -1"],
            shape_fn=_dequantize_shape,
            doc="Maps quantized `input` representing [min_range, max_range] back to float32 "
                "(MIN_COMBINED, MIN_FIRST or SCALED, as QuantizeV2).")
register_op("QuantizedConcat",
            inputs=["concat_dim: int32", "values: N * T", "input_mins: N * float", "input_maxes: N * float"],
            outputs=["output: T", "output_min: float", "output_max: float"],
            attrs=["N: int >= 2", "T: type"], shape_fn=_quantized_concat_shape,
            doc="Concatenates quantized tensors along concat_dim, requantizing each into one output "
                "range that covers every input range and 0 (symmetric about 0 for signed T).")
_QAD_ATTRS = ["signed_input: bool = true", "range_given: bool = false", "T: floattype",
              "narrow_range: bool = false", "axis: int = -1"]
register_op("QuantizeAndDequantizeV2", inputs=["input: T", "input_min: T", "input_max: T"],
            outputs=["output: T"],
            attrs=_QAD_ATTRS + ["num_bits: int = 8", "round_mode: {'HALF_TO_EVEN', 'HALF_UP'} = 'HALF_TO_EVEN'"],
            shape_fn=_qad_shape,
            doc="Scales `input` onto num_bits fixed-point steps (0 maps to 0), rounds, and scales back: "
                "simulates the precision lost by quantization. The gradient passes straight through.")
register_op("QuantizeAndDequantizeV3", inputs=["input: T", "input_min: T", "input_max: T", "num_bits: int32"],
            outputs=["output: T"], attrs=_QAD_ATTRS, shape_fn=_qad_shape,
            doc="As QuantizeAndDequantizeV2 with num_bits a tensor and rounding half to even.")


# ---------------------------------------------------------------------------- op wrappers
def quantize(input, min_range, max_range, T, mode="MIN_COMBINED",  # noqa: A002 - TF's names
             round_mode="HALF_AWAY_FROM_ZERO", name=None, narrow_range=False, axis=None,
             ensure_minimum_range=0.01):
    """Quantizes float32 `input` to the quantized type `T` (TF's QuantizeV2).

    The range is first widened to contain 0 and to be at least
    ``ensure_minimum_range * max(1, |min_range|, |max_range|)`` wide. Then, with
    lowest/highest the limits of T and range(T) = highest - lowest:

    - MIN_COMBINED: ``round((clamp(x) - min) * range(T) / (max - min)) + lowest``.
    - MIN_FIRST: with n = 2**bits and scale = n / ((max - min) * n / (n - 1)),
      ``round(x * scale) - round(min * scale) + lowest``, clamped to T.
    - SCALED: ``round(clamp(x) * s)`` with s the largest factor that maps min and max into
      [lowest (+1 if narrow_range), highest]; the returned range is that of T divided by s.

    Args:
        input: float32 Tensor.
        min_range, max_range: float32 scalars (or, with `axis`, vectors of input.shape[axis]).
        T: qint8, quint8, qint16, quint16 or qint32.
        mode: "MIN_COMBINED", "MIN_FIRST" or "SCALED".
        round_mode: "HALF_AWAY_FROM_ZERO", or "HALF_TO_EVEN" (SCALED mode only).
        name: op name.
        narrow_range: SCALED mode: the lowest quantized value is lowest + 1 (symmetric range).
        axis: quantize per slice along this dimension (None: one range).
        ensure_minimum_range: the minimum relative width of the range.

    Returns:
        A namedtuple (output, output_min, output_max).

    Raises:
        TypeError: T is not a quantized type.
        InvalidArgumentError (at run time): min_range > max_range, a range of the wrong size, or
            HALF_TO_EVEN rounding outside SCALED mode.
    """
    attrs = {"T": _dtypes.as_dtype(T), "mode": mode, "round_mode": round_mode,
             "narrow_range": bool(narrow_range), "axis": -1 if axis is None else int(axis),
             "ensure_minimum_range": float(ensure_minimum_range)}
    op = apply_op("QuantizeV2", [input, min_range, max_range], attrs, name=name)
    return QuantizeV2Result(*op.outputs)


def quantize_v2(input, min_range, max_range, T, mode="MIN_COMBINED", name=None,  # noqa: A002
                round_mode="HALF_AWAY_FROM_ZERO"):
    """TF1's deprecated `tf.quantize_v2`: `quantize` with `name` before `round_mode`."""
    return quantize(input, min_range, max_range, T, mode=mode, round_mode=round_mode, name=name)


def dequantize(input, min_range, max_range, mode="MIN_COMBINED", name=None,  # noqa: A002
               axis=None, narrow_range=False):
    """Dequantizes `input` (a quantized tensor representing [min_range, max_range]) to float32.

    - MIN_COMBINED: ``min + (q - lowest) * (max - min) / range(T)``.
    - MIN_FIRST: with n = 2**bits, ``min + (q - lowest) * (max - min) * n / (n - 1) / n``.
    - SCALED: ``q * s`` with s = max / highest for unsigned T, else
      ``max(min / (lowest (+1 if narrow_range)), max / highest)``.

    Args:
        input: a qint8, quint8, qint16, quint16 or qint32 Tensor.
        min_range, max_range: float32 scalars (or, with `axis`, vectors of input.shape[axis]).
        mode: "MIN_COMBINED", "MIN_FIRST" or "SCALED".
        name: op name.
        axis: dequantize per slice along this dimension (None: one range).
        narrow_range: SCALED mode: the input was quantized with a narrow range.

    Returns:
        A float32 Tensor of input's shape.
    """
    attrs = {"mode": mode, "narrow_range": bool(narrow_range), "axis": -1 if axis is None else int(axis)}
    return apply_op("Dequantize", [input, min_range, max_range], attrs, name=name).outputs[0]


def quantized_concat(concat_dim, values, input_mins, input_maxes, name=None):
    """Concatenates quantized tensors, each with its own float range, along `concat_dim`.

    The output range is [min(0, min(input_mins)), max(input_maxes)], made symmetric about 0 for
    signed types; an input whose range differs is requantized into it (MIN_FIRST arithmetic).

    Args:
        concat_dim: int32 scalar.
        values: a list of at least 2 tensors of one quantized type.
        input_mins, input_maxes: lists of float32 scalars, one per value.
        name: op name.

    Returns:
        A namedtuple (output, output_min, output_max).

    Raises:
        ValueError: fewer than 2 values, lists of different lengths, or shapes that do not concat.
    """
    values, input_mins, input_maxes = list(values), list(input_mins), list(input_maxes)
    if len(values) < 2 or not len(values) == len(input_mins) == len(input_maxes):
        raise ValueError(f"QuantizedConcat: needs N >= 2 values with one min and one max each, got "
                         f"{len(values)} values, {len(input_mins)} mins and {len(input_maxes)} maxes")
    op = apply_op("QuantizedConcat", [concat_dim, values, input_mins, input_maxes], name=name)
    return QuantizedConcatResult(*op.outputs)


def quantize_and_dequantize(input, input_min, input_max, signed_input=True,  # noqa: A002
                            num_bits=8, range_given=False, round_mode="HALF_TO_EVEN", name=None,
                            narrow_range=False, axis=None):
    """Quantizes then dequantizes `input` (QuantizeAndDequantizeV2): simulated quantization.

    The representable range is [-2**(num_bits-1) (+1 if narrow_range), 2**(num_bits-1) - 1]
    for signed input, else [0, 2**num_bits - 1]. The largest scale that maps
    [input_min, input_max] (the input's own min and max unless `range_given`) into it is used,
    and the other end of the range is widened to match; values are clamped to that range,
    multiplied by the scale, rounded (round_mode "HALF_TO_EVEN" or "HALF_UP") and divided by it.
    The gradient passes straight through to `input` (as TF1).

    Args:
        input: a float Tensor.
        input_min, input_max: scalars of input's dtype (vectors of input.shape[axis] with `axis`).
        signed_input: whether the quantized range is signed.
        num_bits: the bit width (1 <= num_bits < 62 signed, < 63 unsigned).
        range_given: use input_min/input_max rather than the input's range.
        round_mode: "HALF_TO_EVEN" or "HALF_UP".
        name: op name.
        narrow_range: the lowest signed level is one higher (a symmetric range).
        axis: quantize per slice along this dimension (None: one range).

    Returns:
        A Tensor of input's dtype and shape.

    Raises:
        InvalidArgumentError (at run time): num_bits out of range, or input_min > input_max
            with range_given.
    """
    with _ops.name_scope(name, "quantize_and_dequantize", [input]) as scope:
        x = _ops.convert_to_tensor(input, name="input")
        lo = _ops.convert_to_tensor(input_min, dtype=x.dtype, name="input_min")
        hi = _ops.convert_to_tensor(input_max, dtype=x.dtype, name="input_max")
        attrs = {"signed_input": bool(signed_input), "num_bits": int(num_bits),
                 "range_given": bool(range_given), "round_mode": round_mode,
                 "narrow_range": bool(narrow_range), "axis": -1 if axis is None else int(axis)}
        return apply_op("QuantizeAndDequantizeV2", [x, lo, hi], attrs, name=scope).outputs[0]


def quantize_and_dequantize_v3(input, input_min, input_max, num_bits, signed_input=True,  # noqa: A002
                               range_given=True, narrow_range=False, axis=None, name=None):
    """QuantizeAndDequantizeV3 (tf.raw_ops order): `quantize_and_dequantize` with `num_bits`
    an int32 scalar tensor, rounding half to even."""
    attrs = {"signed_input": bool(signed_input), "range_given": bool(range_given),
             "narrow_range": bool(narrow_range), "axis": -1 if axis is None else int(axis)}
    return apply_op("QuantizeAndDequantizeV3", [input, input_min, input_max, num_bits], attrs,
                    name=name).outputs[0]
