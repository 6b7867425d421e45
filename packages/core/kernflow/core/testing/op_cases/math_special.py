"""Contract cases of the special elementwise math ops (kernflow.core.ops.math_ops_special)."""

import math

import numpy as np

from kernflow.core.ops import math_ops_special as sp
from kernflow.core.testing.kernel_contract import OpCase

_r = np.random.RandomState(11)


def _f(*shape, lo=-2.0, hi=2.0, dtype=np.float64):
    return _r.uniform(lo, hi, size=shape).astype(dtype)


def _mapped(fn):
    return lambda x: np.vectorize(fn, otypes=[np.float64])(x.astype(np.float64)).astype(x.dtype)


def _zero_where(cond, v):
    out = np.array(v, copy=True)
    out[cond] = 0
    return out


_ints_x = np.array([7, -7, 7, -7, 6, 0], np.int32)
_ints_y = np.array([2, 2, -2, -2, 4, 3], np.int32)
# Known digamma values: psi(1) = -gamma, psi(1/2) = -gamma - 2 log 2, psi(2) = 1 - gamma, ...
_psi_x = np.array([1.0, 0.5, 2.0, 10.0, -0.5, 0.1])
_psi_y = np.array([-0.5772156649015329, -1.9635100260214235, 0.42278433509846713,
                   2.251752589066721, 0.03648997397857652, -10.423754940411076])
_xs_with_zeros = np.array([[0.0, 1.5, -2.0], [0.0, 0.5, 3.0]])

CASES = [
    OpCase("Tan", sp.tan, [_f(3, 4, lo=-1.2, hi=1.2)], np.tan, grad=True),
    OpCase("Asin", sp.asin, [_f(3, 4, lo=-0.8, hi=0.8)], np.arcsin, grad=True),
    OpCase("Acos", sp.acos, [_f(3, 4, lo=-0.8, hi=0.8)], np.arccos, grad=True),
    OpCase("Atan", sp.atan, [_f(3, 4)], np.arctan, grad=True),
    OpCase("Atan", sp.atan, [_f(5, dtype=np.float32)], np.arctan, name="float32"),
    OpCase("Sinh", sp.sinh, [_f(3, 4)], np.sinh, grad=True),
    OpCase("Cosh", sp.cosh, [_f(3, 4)], np.cosh, grad=True),
    OpCase("Asinh", sp.asinh, [_f(3, 4)], np.arcsinh, grad=True),
    OpCase("Acosh", sp.acosh, [_f(3, 4, lo=1.2, hi=3.0)], np.arccosh, grad=True),
    OpCase("Atanh", sp.atanh, [_f(3, 4, lo=-0.8, hi=0.8)], np.arctanh, grad=True),
    OpCase("Erf", sp.erf, [_f(3, 4)], _mapped(math.erf), grad=True),
    OpCase("Erf", sp.erf, [_f(4, dtype=np.float32)], _mapped(math.erf), name="float32"),
    OpCase("Erfc", sp.erfc, [_f(3, 4)], _mapped(math.erfc), grad=True),
    OpCase("Lgamma", sp.lgamma, [_f(3, 4, lo=0.3, hi=5.0)], _mapped(math.lgamma), grad=True),
    OpCase("Lgamma", sp.lgamma, [np.array([0.0, -1.0, -2.5, 1.0])],
           lambda x: np.array([np.inf, np.inf, math.lgamma(-2.5), 0.0]), name="poles"),
    OpCase("Digamma", sp.digamma, [_psi_x], lambda x: _psi_y, rtol=1e-10),
    OpCase("Rint", sp.rint, [np.array([-2.5, -1.5, -0.5, 0.5, 1.5, 2.5, 1.7, -1.2])], np.rint,
           name="half_to_even"),
    OpCase("Rint", sp.rint, [np.array([1.7, -1.2, 0.2, 3.9])], np.rint, grad=True, name="grad"),
    OpCase("IsFinite", sp.is_finite, [np.array([1.0, np.inf, -np.inf, np.nan, 0.0])], np.isfinite),
    OpCase("IsInf", sp.is_inf, [np.array([1.0, np.inf, -np.inf, np.nan], np.float32)], np.isinf),
    OpCase("IsNan", sp.is_nan, [np.array([1.0, np.inf, np.nan], np.float16)], np.isnan),
    OpCase("Atan2", sp.atan2, [_f(3, 4), _f(4, lo=0.3, hi=2.0)], np.arctan2, grad=True),
    OpCase("Xlogy", sp.xlogy, [_xs_with_zeros, _f(3, lo=0.2, hi=3.0)],
           lambda x, y: _zero_where(x == 0, x * np.log(y)), grad=True, grad_inputs=[1]),
    OpCase("Xlogy", sp.xlogy, [_f(2, 3), _f(3, lo=0.2, hi=3.0)], lambda x, y: x * np.log(y), grad=True,
           name="nonzero_x"),
    OpCase("Xlogy", sp.xlogy, [np.zeros(2), np.zeros(2)], lambda x, y: np.zeros(2), name="zero_zero"),
    OpCase("Xdivy", sp.xdivy, [_xs_with_zeros, _f(3, lo=0.2, hi=3.0)],
           lambda x, y: _zero_where(x == 0, x / y), grad=True, grad_inputs=[1]),
    OpCase("Xdivy", sp.xdivy, [_f(2, 3), _f(3, lo=0.2, hi=3.0)], lambda x, y: x / y, grad=True,
           name="nonzero_x"),
    OpCase("DivNoNan", sp.div_no_nan, [_f(2, 3), np.array([0.0, 1.5, -0.7])],
           lambda x, y: np.where(y == 0, 0.0, x / np.where(y == 0, 1.0, y)), grad=True, grad_inputs=[0]),
    OpCase("DivNoNan", sp.div_no_nan, [_f(2, 3), _f(3, lo=0.3, hi=2.0)], lambda x, y: x / y, grad=True,
           name="nonzero_y"),
    OpCase("DivNoNan", sp.div_no_nan, [np.array([1.0, np.inf], np.float32), np.zeros(2, np.float32)],
           lambda x, y: np.zeros(2, np.float32), name="inf_by_zero"),
    OpCase("TruncateDiv", sp.truncatediv, [_ints_x, _ints_y],
           lambda x, y: np.trunc(x / y).astype(np.int32), name="int32"),
    OpCase("TruncateDiv", sp.truncatediv, [_f(5), _f(5, lo=0.3, hi=1.0)],
           lambda x, y: np.trunc(x / y), name="float64"),
    OpCase("TruncateMod", sp.truncatemod, [_ints_x, _ints_y], np.fmod, name="int32"),
    OpCase("TruncateMod", sp.truncatemod,
           [np.array([7.5, -7.5, 7.5, -7.5]), np.array([2.0, 2.0, -2.0, -2.0])],
           np.fmod, grad=True, name="float64"),
]
