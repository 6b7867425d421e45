"""Contract cases of the math ops (kernflow.core.ops.math_ops): TF semantics as numpy references."""

import numpy as np

import kernflow.core as kf
from kernflow.core.framework.op_def_library import apply_op
from kernflow.core.testing.kernel_contract import OpCase

_r = np.random.RandomState(7)


def _f(*shape, dtype=np.float64, lo=-2.0, hi=2.0):
    return _r.uniform(lo, hi, size=shape).astype(dtype)


def _i(*shape, dtype=np.int32, lo=-9, hi=10):
    return _r.randint(lo, hi, size=shape).astype(dtype)


def _nz(*shape, dtype=np.int32):
    """Integers without zeros (divisors)."""
    v = _i(*shape, dtype=dtype, lo=1, hi=8)
    if np.dtype(dtype).kind == "i":
        v *= np.where(_r.rand(*shape) < 0.5, -1, 1).astype(dtype)
    return v


def _away(*shape, lo=0.3, hi=2.0):
    """float64 values with |v| in [lo, hi], random signs: away from kinks at 0."""
    return _f(*shape, lo=lo, hi=hi) * np.where(_r.rand(*shape) < 0.5, -1.0, 1.0)


def _c(*shape, dtype=np.complex64):
    return (_f(*shape) + 1j * _f(*shape)).astype(dtype)


def _b(*shape):
    return _r.rand(*shape) < 0.5


def _quiet(ref):
    """A reference that computes inf/nan without numpy warnings."""
    def fn(*xs):
        with np.errstate(all="ignore"):
            return ref(*xs)
    return fn


def _op(op_type, **attrs):
    return lambda *xs: apply_op(op_type, list(xs), attrs).outputs[0]


def _trunc_div(x, y):
    return (np.trunc(x.astype(np.float64) / y)).astype(x.dtype)


def _int_mean(x, axis=None, keepdims=False):
    return np.trunc(np.mean(x, axis=axis, keepdims=keepdims)).astype(x.dtype)


def _sigmoid(x):
    return 1.0 / (1.0 + np.exp(-x.astype(np.float64)))


def _exclusive_cumsum_rev(x):
    return np.flip(np.cumsum(np.flip(x, 1), 1) - np.flip(x, 1), 1)


def _exclusive_cumprod(x):
    out = np.ones_like(x)
    out[1:] = np.cumprod(x, 0)[:-1]
    return out


def _logsumexp(x, axis):
    m = np.max(x, axis=axis, keepdims=True)
    return np.squeeze(np.log(np.sum(np.exp(x - m), axis=axis, keepdims=True)) + m, axis=axis)


_pos = _f(3, 4, lo=0.5, hi=3.0)
_words = np.array([b"ab", b"", b"xyz"], dtype=object)

CASES = [
    # ---- binary arithmetic
    OpCase("AddV2", lambda x, y: x + y, [_f(3, 4), _f(4)], np.add, grad=True, name="broadcast"),
    OpCase("AddV2", kf.add, [_i(2, 3), _i(2, 1)], np.add, name="int32"),
    OpCase("AddV2", kf.add, [_f(3, 1), _f(2, 1, 4)], np.add, grad=True, name="both_broadcast"),
    OpCase("AddV2", kf.add, [_f(2, 3), _f()], np.add, grad=True, name="scalar"),
    OpCase("AddV2", kf.add, [_i(4, dtype=np.uint8, lo=0), _i(4, dtype=np.uint8, lo=0)], np.add,
           name="uint8"),
    OpCase("AddV2", kf.add, [_c(2, 2), _c(2)], np.add, name="complex64"),
    OpCase("AddV2", lambda x, y: x + y, [_f(0, 4, dtype=np.float32), _f(4, dtype=np.float32)],
           np.add, name="empty"),
    OpCase("AddV2", lambda x: 1 + x, [_f(3, dtype=np.float32)], lambda x: 1 + x, name="radd"),
    OpCase("Add", kf.add, [_words, np.array([b"1", b"2", b"3"], dtype=object)], np.add, name="string"),
    OpCase("Sub", lambda x, y: x - y, [_f(2, 3, 1), _f(1, 4)], np.subtract, grad=True),
    OpCase("Sub", kf.subtract, [_i(3, dtype=np.int64), _i(3, dtype=np.int64)], np.subtract,
           name="int64"),
    OpCase("Sub", lambda x: 5 - x, [_i(3)], lambda x: 5 - x, name="rsub"),
    OpCase("Mul", lambda x, y: x * y, [_f(3, 4), _f(3, 1)], np.multiply, grad=True),
    OpCase("Mul", kf.multiply, [_i(5, dtype=np.int8, lo=-5, hi=5), _i(5, dtype=np.int8, lo=-5, hi=5)],
           np.multiply, name="int8"),
    OpCase("Mul", kf.multiply, [_c(3, dtype=np.complex128), _c(3, dtype=np.complex128)], np.multiply,
           name="complex128"),
    OpCase("Mul", lambda x: kf.scalar_mul(3, x), [_f(2, 2)], lambda x: 3 * x, name="scalar_mul"),
    OpCase("Mul", kf.multiply, [_f(1, 3, 1), _f(2, 1, 4)], np.multiply, grad=True, name="both_broadcast"),
    OpCase("RealDiv", lambda x, y: x / y, [_f(3, 4), _away(4)], np.true_divide, grad=True),
    OpCase("RealDiv", kf.realdiv, [_i(6), _nz(6)], _trunc_div, name="int32_truncates"),
    OpCase("RealDiv", lambda x, y: x / y, [_i(2, 3), _nz(3)], lambda x, y: x / y,
           name="truediv_int32_to_float64"),
    OpCase("RealDiv", lambda x, y: x / y, [_i(4, dtype=np.int16), _nz(4, dtype=np.int16)],
           lambda x, y: (x.astype(np.float32) / y.astype(np.float32)), name="truediv_int16_to_float32"),
    OpCase("RealDiv", lambda x, y: kf.divide(x, y), [_f(3), _away(3)], np.true_divide, name="divide"),
    OpCase("RealDiv", lambda x, y: x / y, [np.array([1.0, -1.0, 0.0], np.float32),
                                           np.zeros(3, np.float32)],
           _quiet(np.true_divide), name="by_zero"),
    OpCase("Div", _op("Div"), [_f(4), _away(4)], np.true_divide, grad=True, name="float64"),
    OpCase("Div", _op("Div"), [np.array([7, -7, 7, -7, 6], np.int32), np.array([2, 2, -2, -2, 3], np.int32)],
           _trunc_div, name="int32_truncates"),
    OpCase("FloorDiv", lambda x, y: kf.div(x, y), [np.array([7, -7, 7, -7], np.int32),
                                                   np.array([2, 2, -2, -2], np.int32)],
           np.floor_divide, name="tf1_div_int"),
    OpCase("FloorDiv", lambda x, y: x // y, [_i(3, 4), _nz(4)], np.floor_divide, name="int32"),
    OpCase("FloorDiv", kf.floordiv, [np.array([1.0, -7.5, 7.5], np.float32),
                                     np.array([0.1, 2.0, -2.0], np.float32)],
           lambda x, y: np.floor(x / y), name="float32"),
    OpCase("FloorDiv", kf.floordiv, [_i(4, dtype=np.uint16, lo=0), _nz(4, dtype=np.uint16)],
           np.floor_divide, name="uint16"),
    OpCase("FloorMod", lambda x, y: x % y, [_i(3, 4), _nz(4)], np.remainder, name="int32"),
    OpCase("FloorMod", kf.floormod, [np.array([7.5, -7.5, 7.5, -7.5]), np.array([2.0, 2.0, -2.0, -2.0])],
           np.remainder, grad=True, name="float64"),
    OpCase("FloorMod", kf.floormod, [np.array([[7.5, -6.5], [3.25, 0.5]]), np.array([2.0, -1.5])],
           np.remainder, grad=True, name="broadcast_grad"),
    OpCase("FloorMod", kf.mod, [_i(5, dtype=np.int64), _nz(1, dtype=np.int64)], np.remainder,
           name="int64"),
    OpCase("Pow", lambda x, y: x ** y, [_pos, _f(4)], np.power, grad=True),
    OpCase("Pow", kf.pow, [_f(3, lo=0.5, hi=2.0), _f(2, 1)], np.power, grad=True, name="broadcast_x"),
    OpCase("Pow", kf.pow, [_i(5, lo=-4, hi=5), _i(5, lo=0, hi=4)], np.power, name="int32"),
    OpCase("Pow", lambda x: 2.0 ** x, [_f(3)], lambda x: 2.0 ** x, name="rpow"),
    OpCase("Maximum", kf.maximum, [_f(3, 4), _f(4)], np.maximum, grad=True),
    OpCase("Maximum", kf.maximum, [_i(6, dtype=np.uint8, lo=0), _i(6, dtype=np.uint8, lo=0)], np.maximum,
           name="uint8"),
    OpCase("Minimum", kf.minimum, [_f(2, 3), _f(2, 1)], np.minimum, grad=True),
    OpCase("Maximum", kf.maximum, [np.array([[1.0, -1.0, 2.0], [0.5, 3.0, -2.0]]), np.array(0.75)],
           np.maximum, grad=True, name="scalar_y"),
    OpCase("Minimum", kf.minimum, [_i(6), _i(6)], np.minimum, name="int32"),
    OpCase("SquaredDifference", kf.squared_difference, [_f(3, 4), _f(4)],
           lambda x, y: (x - y) ** 2, grad=True),
    OpCase("SquaredDifference", kf.squared_difference, [_f(2, 1), _f(3)], lambda x, y: (x - y) ** 2,
           grad=True, name="both_broadcast"),
    OpCase("SquaredDifference", kf.squared_difference, [_i(5), _i(5)], lambda x, y: (x - y) ** 2,
           name="int32"),
    OpCase("SquaredDifference", kf.squared_difference, [_c(3), _c(3)],
           lambda x, y: (x - y) * np.conj(x - y), name="complex64"),
    # ---- comparisons and logic
    OpCase("Less", lambda x, y: x < y, [_f(3, 4, dtype=np.float32), _f(4, dtype=np.float32)], np.less),
    OpCase("Less", kf.less, [_i(4, dtype=np.uint16, lo=0), _i(4, dtype=np.uint16, lo=0)], np.less,
           name="uint16"),
    OpCase("LessEqual", lambda x, y: x <= y, [_i(3, 3, lo=0, hi=3), _i(3, lo=0, hi=3)], np.less_equal),
    OpCase("Greater", lambda x: x > 0.5, [_f(5, dtype=np.float32)], lambda x: x > 0.5),
    OpCase("Greater", lambda x: 0 < x, [_i(5)], lambda x: x > 0, name="reflected"),
    OpCase("GreaterEqual", kf.greater_equal, [_i(2, 3, dtype=np.int64), _i(3, dtype=np.int64)],
           np.greater_equal),
    OpCase("Equal", kf.equal, [_i(3, 4, lo=0, hi=3), _i(4, lo=0, hi=3)], np.equal),
    OpCase("Equal", kf.equal, [_words, np.array([b"ab", b"x", b"xyz"], dtype=object)], np.equal,
           name="string"),
    OpCase("Equal", kf.equal, [_b(4), _b(4)], np.equal, name="bool"),
    OpCase("Equal", _op("Equal", incompatible_shape_error=False), [_f(3), _f(4)],
           lambda x, y: np.array(False), dynamic_shapes=False, name="incompatible"),
    OpCase("NotEqual", kf.not_equal, [_f(2, 3, dtype=np.float32), np.zeros(3, np.float32)],
           np.not_equal),
    OpCase("NotEqual", _op("NotEqual", incompatible_shape_error=False), [_i(2), _i(3)],
           lambda x, y: np.array(True), dynamic_shapes=False, name="incompatible"),
    OpCase("LogicalAnd", lambda x, y: x & y, [_b(3, 4), _b(4)], np.logical_and),
    OpCase("LogicalAnd", kf.logical_xor, [_b(3, 4), _b(3, 4)], np.logical_xor, name="xor"),
    OpCase("LogicalAnd", lambda x, y: x ^ y, [_b(5), _b(1)], np.logical_xor, name="xor_operator"),
    OpCase("LogicalOr", lambda x, y: x | y, [_b(3, 4), _b(3, 1)], np.logical_or),
    OpCase("LogicalNot", lambda x: ~x, [_b(2, 3)], np.logical_not),
    # ---- unary
    OpCase("Neg", lambda x: -x, [_f(3, 4)], np.negative, grad=True),
    OpCase("Neg", kf.negative, [_i(5)], np.negative, name="int32"),
    OpCase("Abs", lambda x: abs(x), [_away(3, 4)], np.abs, grad=True),
    OpCase("Abs", kf.abs, [np.array([-128, -1, 0, 5, 127], np.int8)], np.abs, name="int8"),
    OpCase("ComplexAbs", kf.abs, [_c(3, 2)], np.abs),
    OpCase("Sign", kf.sign, [np.array([-2.5, 0.0, 3.0, -0.0], np.float32)], np.sign),
    OpCase("Sign", kf.sign, [_i(6)], np.sign, name="int32"),
    OpCase("Sign", kf.sign, [_away(2, 3)], np.sign, grad=True, name="float64_grad"),
    OpCase("Sign", kf.sign, [_c(4, dtype=np.complex128)], lambda x: x / np.abs(x), name="complex128"),
    OpCase("Square", kf.square, [_f(3, 4)], np.square, grad=True),
    OpCase("Square", kf.square, [_i(4, dtype=np.int64)], np.square, name="int64"),
    OpCase("Sqrt", kf.sqrt, [_pos], np.sqrt, grad=True),
    OpCase("Sqrt", kf.sqrt, [np.array([0.0, 4.0, -1.0], np.float32)], _quiet(np.sqrt), name="edge"),
    OpCase("Rsqrt", kf.rsqrt, [_pos], lambda x: 1 / np.sqrt(x), grad=True),
    OpCase("Rsqrt", kf.rsqrt, [np.array([0.0, 0.25], np.float32)],
           _quiet(lambda x: np.float32(1) / np.sqrt(x)),
           name="zero"),
    OpCase("Exp", kf.exp, [_f(3, 4)], np.exp, grad=True),
    OpCase("Exp", kf.exp, [np.array([0.0, 1.0, 100.0, -100.0], np.float32)], _quiet(np.exp), name="overflow"),
    OpCase("Exp", kf.exp, [_c(3)], np.exp, name="complex64"),
    OpCase("Expm1", kf.expm1, [_f(3, 4, lo=-1e-3, hi=1e-3)], np.expm1, grad=True),
    OpCase("Log", kf.log, [_pos], np.log, grad=True),
    OpCase("Log", kf.log, [np.array([0.0, 1.0, -1.0], np.float16)], _quiet(np.log), name="edge_half",
           rtol=1e-3),
    OpCase("Log1p", kf.log1p, [_f(3, 4, lo=-0.5, hi=2.0)], np.log1p, grad=True),
    OpCase("Sin", kf.sin, [_f(3, 4)], np.sin, grad=True),
    OpCase("Cos", kf.cos, [_f(3, 4, dtype=np.float32)], np.cos, name="float32"),
    OpCase("Cos", kf.cos, [_f(3, 4)], np.cos, grad=True),
    OpCase("Tanh", kf.tanh, [_f(3, 4)], np.tanh, grad=True),
    OpCase("Sigmoid", kf.sigmoid, [_f(3, 4, lo=-5, hi=5)], _sigmoid, grad=True),
    OpCase("Sigmoid", kf.sigmoid, [np.array([-100.0, -20.0, 0.0, 20.0, 100.0], np.float32)],
           lambda x: _sigmoid(x).astype(np.float32), name="extremes"),
    OpCase("Sigmoid", kf.sigmoid, [np.array([-1.0, 0.0, 3.0], np.float16)],
           lambda x: _sigmoid(x).astype(np.float16), rtol=1e-3, atol=1e-3, name="half"),
    OpCase("Sigmoid", kf.sigmoid, [_c(3, dtype=np.complex128)], lambda x: 1 / (1 + np.exp(-x)),
           name="complex128"),
    OpCase("Floor", kf.floor, [np.array([-1.5, -0.5, 0.5, 1.5, 2.0], np.float32)], np.floor),
    OpCase("Ceil", kf.ceil, [np.array([-1.5, -0.5, 0.5, 1.5, 2.0], np.float64)], np.ceil),
    OpCase("Round", kf.round, [np.array([-2.5, -1.5, -0.5, 0.5, 1.5, 2.5, 2.6], np.float32)], np.round,
           name="half_to_even"),
    OpCase("Round", _op("Round"), [_i(4)], lambda x: x, name="int32"),
    OpCase("Reciprocal", kf.reciprocal, [_away(3, 4)], np.reciprocal, grad=True),
    OpCase("Reciprocal", kf.reciprocal, [np.array([1, -1, 2, -3], np.int32)], lambda x: _trunc_div(
        np.ones_like(x), x), name="int32"),
    OpCase("Conj", kf.conj, [_c(2, 3)], np.conj),
    # ---- the gradient ops of unary functions: (y, dy) -> dx
    OpCase("TanhGrad", _op("TanhGrad"), [_f(3, 4, lo=-0.9, hi=0.9), _f(3, 4)],
           lambda y, dy: dy * (1 - y * y), grad=True),
    OpCase("TanhGrad", _op("TanhGrad"), [_c(3), _c(3)], lambda y, dy: dy * np.conj(1 - y * y),
           rtol=1e-4, name="complex64"),
    OpCase("SigmoidGrad", _op("SigmoidGrad"), [_f(3, 4, lo=0.1, hi=0.9), _f(3, 4)],
           lambda y, dy: dy * y * (1 - y), grad=True),
    OpCase("SigmoidGrad", _op("SigmoidGrad"), [_f(5, dtype=np.float32), _f(5, dtype=np.float32)],
           lambda y, dy: dy * y * (1 - y), name="float32"),
    OpCase("SqrtGrad", _op("SqrtGrad"), [_pos, _f(3, 4)], lambda y, dy: dy * 0.5 / y, grad=True),
    OpCase("SqrtGrad", _op("SqrtGrad"), [np.array([0.0, 2.0], np.float32), np.ones(2, np.float32)],
           _quiet(lambda y, dy: dy * np.float32(0.5) / y), name="zero"),
    OpCase("RsqrtGrad", _op("RsqrtGrad"), [_pos, _f(3, 4)], lambda y, dy: dy * -0.5 * y ** 3,
           grad=True),
    OpCase("RsqrtGrad", _op("RsqrtGrad"), [_c(2, dtype=np.complex128), _c(2, dtype=np.complex128)],
           lambda y, dy: dy * -0.5 * np.conj(y) ** 3, name="complex128"),
    OpCase("ReciprocalGrad", _op("ReciprocalGrad"), [_away(3, 4), _f(3, 4)],
           lambda y, dy: -dy * y * y, grad=True),
    OpCase("ReciprocalGrad", _op("ReciprocalGrad"), [_f(4, dtype=np.float16), _f(4, dtype=np.float16)],
           lambda y, dy: (-dy * y * y).astype(np.float16), rtol=1e-3, atol=1e-3, name="half"),
    # ---- selection
    OpCase("Select", lambda c, x, y: kf.where(c, x, y), [_b(3, 4), _f(3, 4), _f(3, 4)], np.where,
           grad=True, grad_inputs=[1, 2]),
    OpCase("Select", lambda c, x, y: kf.where(c, x, y), [_b(3), _i(3, 2), _i(3, 2)],
           lambda c, x, y: np.where(c[:, None], x, y), name="vector_condition"),
    OpCase("Select", lambda c, x, y: kf.where(c, x, y), [np.array(True), _i(2, 2), _i(2, 2)],
           np.where, name="scalar_condition"),
    OpCase("SelectV2", lambda c, x, y: kf.where_v2(c, x, y), [_b(3, 1), _f(1, 4), _f(4)], np.where,
           grad=True, grad_inputs=[1, 2]),
    OpCase("SelectV2", lambda c, x: kf.where_v2(c, x, 0), [_b(2, 3), _i(2, 3)],
           lambda c, x: np.where(c, x, 0), name="scalar_else"),
    OpCase("Where", lambda c: kf.where(c), [_b(3, 4)], np.argwhere),
    OpCase("Where", lambda x: kf.where_v2(x), [_i(2, 2, 3, lo=0, hi=2).astype(np.float32)], np.argwhere,
           name="float"),
    OpCase("Where", lambda c: kf.where(c), [np.zeros((0, 3), bool)], np.argwhere, name="empty"),
    # ---- casts, clipping, sums of lists
    OpCase("Cast", lambda x: kf.cast(x, kf.int32), [np.array([-1.7, -0.5, 0.5, 2.9], np.float32)],
           lambda x: x.astype(np.int32), name="float_to_int_truncates"),
    OpCase("Cast", kf.to_double, [_i(2, 3)], lambda x: x.astype(np.float64), name="to_double"),
    OpCase("Cast", kf.to_float, [_b(4)], lambda x: x.astype(np.float32), name="bool_to_float"),
    OpCase("Cast", lambda x: kf.cast(x, kf.bool), [np.array([0.0, 0.5, -2.0])], lambda x: x != 0,
           name="to_bool"),
    OpCase("Cast", lambda x: kf.cast(x, kf.float32), [_c(3)], lambda x: x.real.astype(np.float32),
           name="complex_to_real"),
    OpCase("Cast", kf.to_int64, [_i(3)], lambda x: x.astype(np.int64), name="to_int64"),
    OpCase("Cast", lambda x: kf.cast(x, kf.float32), [_f(2, 2)], lambda x: x.astype(np.float32),
           grad=True, name="grad"),
    OpCase("Cast", lambda x: kf.saturate_cast(x, kf.uint8), [np.array([-5.0, 3.2, 300.0], np.float32)],
           lambda x: np.clip(x, 0, 255).astype(np.uint8), name="saturate"),
    OpCase("ClipByValue", lambda t: kf.clip_by_value(t, -0.5, 0.5), [_f(3, 4, dtype=np.float32)],
           lambda t: np.clip(t, -0.5, 0.5)),
    OpCase("ClipByValue", lambda t, lo, hi: kf.clip_by_value(t, lo, hi),
           [_away(2, 3), np.full(3, -0.5), np.array(1.0)], np.clip, grad=True, grad_inputs=[0],
           name="broadcast_bounds"),
    OpCase("ClipByValue", lambda t, lo, hi: kf.clip_by_value(t, lo, hi),
           [np.array([[-1.0, -0.2, 0.3], [0.9, 2.0, -3.0]]), np.array([-0.5, -0.4, -0.3]),
            np.array([[1.0], [1.5]])], np.clip, grad=True, name="bound_grads"),
    OpCase("ClipByValue", lambda t: kf.clip_by_value(t, 0, 5), [_i(6)], lambda t: np.clip(t, 0, 5),
           name="int32"),
    OpCase("AddN", lambda a, b, c: kf.add_n([a, b, c]), [_f(2, 3), _f(2, 3), _f(2, 3)],
           lambda a, b, c: a + b + c, grad=True),
    OpCase("AddN", lambda a, b: kf.add_n([a, b]), [_i(4), _i(4)], np.add, name="int32"),
    # ---- matmul
    OpCase("MatMul", kf.matmul, [_f(2, 3, dtype=np.float32), _f(3, 4, dtype=np.float32)], np.matmul),
    OpCase("MatMul", lambda a, b: kf.matmul(a, b, transpose_a=True, transpose_b=True),
           [_f(3, 2), _f(4, 3)], lambda a, b: a.T @ b.T, grad=True, name="transposed"),
    OpCase("MatMul", kf.matmul, [_f(2, 3), _f(3, 4)], np.matmul, grad=True, name="float64"),
    OpCase("MatMul", lambda a, b: kf.matmul(a, b, transpose_a=True), [_f(3, 2), _f(3, 4)],
           lambda a, b: a.T @ b, grad=True, name="transpose_a"),
    OpCase("MatMul", lambda a, b: kf.matmul(a, b, transpose_b=True), [_f(2, 3), _f(4, 3)],
           lambda a, b: a @ b.T, grad=True, name="transpose_b"),
    OpCase("MatMul", lambda a, b: a @ b, [_i(2, 2), _i(2, 3)], np.matmul, name="int32"),
    OpCase("MatMul", lambda a, b: kf.matmul(a, b, adjoint_b=True), [_c(2, 3), _c(4, 3)],
           lambda a, b: a @ b.conj().T, rtol=1e-4, name="adjoint_complex"),
    OpCase("MatMul", kf.matmul, [np.zeros((2, 0)), np.zeros((0, 3))], np.matmul, name="empty_inner"),
    OpCase("BatchMatMulV2", kf.matmul, [_f(2, 2, 3), _f(3, 4)], np.matmul, grad=True),
    OpCase("BatchMatMulV2", lambda a, b: kf.matmul(a, b, adjoint_a=True), [_f(3, 2), _f(2, 3, 4)],
           lambda a, b: a.T @ b, grad=True, name="broadcast_y_adjoint_a"),
    OpCase("BatchMatMulV2", lambda a, b: kf.matmul(a, b, adjoint_b=True), [_f(2, 1, 2, 3), _f(3, 4, 3)],
           lambda a, b: a @ np.swapaxes(b, -1, -2), grad=True, name="broadcast_both_adjoint_b"),
    OpCase("BatchMatMulV2", lambda a, b: kf.matmul(a, b, adjoint_a=True, adjoint_b=True),
           [_f(2, 3, 2), _f(2, 4, 3)], lambda a, b: np.swapaxes(a, -1, -2) @ np.swapaxes(b, -1, -2),
           grad=True, name="adjoint_both"),
    OpCase("BatchMatMulV2", lambda a, b: kf.matmul(a, b, adjoint_a=True, transpose_b=True),
           [_f(2, 1, 3, 2, dtype=np.float32), _f(3, 4, 3, dtype=np.float32)],
           lambda a, b: np.swapaxes(a, -1, -2) @ np.swapaxes(b, -1, -2), rtol=1e-4,
           name="broadcast_adjoint"),
    OpCase("Conj", lambda a, b: kf.matmul(a, b, transpose_a=True), [_c(2, 3, 2), _c(2, 3, 2)],
           lambda a, b: np.swapaxes(a, -1, -2) @ b, rtol=1e-4, name="batch_transpose_complex"),
    # ---- reductions
    OpCase("Sum", lambda x: kf.reduce_sum(x, 1), [_f(3, 4)], lambda x: np.sum(x, 1), grad=True),
    OpCase("Sum", kf.reduce_sum, [_f(2, 3, 4)], np.sum, grad=True, name="all"),
    OpCase("Sum", lambda x: kf.reduce_sum(x, [0, -1], keepdims=True), [_f(2, 3, 4)],
           lambda x: np.sum(x, (0, 2), keepdims=True), grad=True, name="keepdims_grad"),
    OpCase("Sum", lambda x: kf.reduce_sum(x, [2, 0]), [_f(2, 3, 4)], lambda x: np.sum(x, (0, 2)),
           grad=True, name="inner_axes_grad"),
    OpCase("Sum", lambda x: kf.reduce_sum(x, 1), [_f(2, 1, 3)], lambda x: np.sum(x, 1), grad=True,
           name="size1_axis"),
    OpCase("Sum", lambda x: kf.reduce_sum(x, [0, -1], keepdims=True), [_f(2, 3, 4, dtype=np.float32)],
           lambda x: np.sum(x, (0, 2), keepdims=True), name="negative_axes_keepdims"),
    OpCase("Sum", lambda x: kf.reduce_sum(x, reduction_indices=0, keep_dims=True), [_i(3, 2)],
           lambda x: np.sum(x, 0, keepdims=True, dtype=np.int32), name="int32_deprecated_args"),
    OpCase("Sum", lambda x: kf.reduce_sum(x, 0), [np.zeros((0, 3), np.float32)], lambda x: np.sum(x, 0),
           name="empty"),
    OpCase("Sum", lambda x: kf.reduce_sum(x, []), [_f(2, 3)], lambda x: x, name="no_axes"),
    OpCase("Sum", lambda x: kf.reduce_sum(x, kf.constant([1], kf.int64)), [_f(2, 3, dtype=np.float16)],
           lambda x: np.sum(x.astype(np.float32), 1).astype(np.float16), rtol=1e-3, name="half_int64_axis"),
    OpCase("Mean", lambda x: kf.reduce_mean(x, 0), [_f(3, 4)], lambda x: np.mean(x, 0), grad=True),
    OpCase("Mean", lambda x: kf.reduce_mean(x, -1, keepdims=True), [_f(2, 3, 4)],
           lambda x: np.mean(x, -1, keepdims=True), grad=True, name="keepdims_grad"),
    OpCase("Mean", kf.reduce_mean, [_f(2, 3)], np.mean, grad=True, name="all_grad"),
    OpCase("Mean", lambda x: kf.reduce_mean(x, 1, keepdims=True), [np.array([[1, 2], [-1, -2], [3, 4]],
                                                                              np.int32)],
           lambda x: _int_mean(x, 1, True), name="int32_truncates"),
    OpCase("Mean", kf.reduce_mean, [np.zeros((0,), np.float32)], lambda x: np.float32(np.nan),
           name="empty"),
    OpCase("Prod", lambda x: kf.reduce_prod(x, -1), [_away(3, 4)], lambda x: np.prod(x, -1), grad=True),
    OpCase("Prod", lambda x: kf.reduce_prod(x, 1, keepdims=True), [_away(2, 3, 2)],
           lambda x: np.prod(x, 1, keepdims=True), grad=True, name="middle_axis"),
    OpCase("Prod", lambda x: kf.reduce_prod(x, [0, 2]), [_away(2, 3, 2)],
           lambda x: np.prod(x, (0, 2)), grad=True, name="outer_axes"),
    OpCase("Prod", kf.reduce_prod, [_away(2, 3)], np.prod, grad=True, name="all"),
    OpCase("Prod", lambda x: kf.reduce_prod(x, 0), [np.array([[0.0, 2.0, 0.0], [1.5, 0.0, 0.0],
                                                               [-2.0, 3.0, 1.25]])],
           lambda x: np.prod(x, 0), grad=True, name="zeros"),
    OpCase("Prod", kf.reduce_prod, [_i(2, 3, lo=1, hi=4)], lambda x: np.prod(x, dtype=np.int32),
           name="int32"),
    OpCase("Max", lambda x: kf.reduce_max(x, 1), [_f(3, 4)], lambda x: np.max(x, 1), grad=True),
    OpCase("Max", lambda x: kf.reduce_max(x, 0, keepdims=True),
           [np.array([[1.0, 2.0, -1.0], [1.0, 0.5, 3.0], [0.0, 2.0, 3.0]])],
           lambda x: np.max(x, 0, keepdims=True), grad=True, name="ties_split_evenly"),
    OpCase("Max", lambda x: kf.reduce_max(x, [0, 2]), [_f(2, 3, 2)], lambda x: np.max(x, (0, 2)),
           grad=True, name="outer_axes"),
    OpCase("Max", kf.reduce_max, [_i(3, 4)], np.max, name="int32"),
    OpCase("Max", lambda x: kf.reduce_max(x, 0), [np.zeros((0, 2), np.float32)],
           lambda x: np.full(2, -np.inf, np.float32), name="empty"),
    OpCase("Min", lambda x: kf.reduce_min(x, [0, 1]), [_f(3, 4)], np.min, grad=True),
    OpCase("Min", lambda x: kf.reduce_min(x, 0, keepdims=True), [_i(3, 2, dtype=np.uint8, lo=0)],
           lambda x: np.min(x, 0, keepdims=True), name="uint8"),
    OpCase("Any", lambda x: kf.reduce_any(x, 1), [_b(3, 4)], lambda x: np.any(x, 1)),
    OpCase("Any", kf.reduce_any, [np.zeros((2, 0), bool)], np.any, name="empty"),
    OpCase("All", lambda x: kf.reduce_all(x, 0, keepdims=True), [_b(3, 4)],
           lambda x: np.all(x, 0, keepdims=True)),
    OpCase("Max", lambda x: kf.reduce_logsumexp(x, 1), [_f(3, 4)], lambda x: _logsumexp(x, 1),
           grad=True, name="logsumexp"),
    OpCase("Max", lambda x: kf.reduce_logsumexp(x, 0, keepdims=True),
           [np.array([[1000.0, -np.inf], [1000.0, -np.inf]], np.float32)],
           lambda x: np.array([[1000.0 + np.log(2.0), -np.inf]], np.float32), name="logsumexp_extremes"),
    OpCase("Sum", lambda x: kf.count_nonzero(x, 1), [_i(3, 4, lo=-1, hi=2)],
           lambda x: np.count_nonzero(x, 1).astype(np.int64), name="count_nonzero"),
    OpCase("ArgMax", lambda x: kf.argmax(x, 1), [_f(3, 4, dtype=np.float32)], lambda x: np.argmax(x, 1)),
    OpCase("ArgMax", lambda x: kf.argmax(x, -1, output_type=kf.int32), [_i(2, 3, 4)],
           lambda x: np.argmax(x, -1).astype(np.int32), name="int32_output"),
    OpCase("ArgMin", lambda x: kf.argmin(x, dimension=0), [_i(4, 3, dtype=np.int64)],
           lambda x: np.argmin(x, 0)),
    OpCase("Cumsum", lambda x: kf.cumsum(x, 1), [_f(3, 4)], lambda x: np.cumsum(x, 1), grad=True),
    OpCase("Cumsum", lambda x: kf.cumsum(x, -1, exclusive=True, reverse=True), [_i(2, 4)],
           _exclusive_cumsum_rev, name="exclusive_reverse"),
    OpCase("Cumsum", lambda x: kf.cumsum(x, -1, exclusive=True, reverse=True), [_f(2, 4)],
           _exclusive_cumsum_rev, grad=True, name="exclusive_reverse_grad"),
    OpCase("Cumprod", lambda x: kf.cumprod(x, exclusive=True), [_away(4, 2)], _exclusive_cumprod,
           grad=True),
    OpCase("Cumprod", lambda x: kf.cumprod(x, 1, reverse=True), [_away(2, 3)],
           lambda x: np.flip(np.cumprod(np.flip(x, 1), 1), 1), grad=True, name="reverse_grad"),
    OpCase("Cumprod", lambda x: kf.cumprod(x, 1, reverse=True), [_i(2, 3, lo=1, hi=4)],
           lambda x: np.flip(np.cumprod(np.flip(x, 1), 1), 1).astype(np.int32), name="reverse"),
]
