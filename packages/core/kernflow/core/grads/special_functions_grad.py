"""Gradients of kernflow.core.ops.math_ops_special_functions, TF's formulas: each op's derivative
dy/dx as a function of its input x and output y, multiplied into the incoming gradient.

Where a formula has a removable singularity the limit is taken: J1(x)/x -> 1/2 at 0 and
log(x)/(1 - x) -> -1 at 1. Y and K are singular at 0 themselves, so their derivatives are too.
"""

from __future__ import annotations

import math

from kernflow.core.framework.gradient_registry import RegisterGradient
from kernflow.core.grads.math_grad import _dense
from kernflow.core.grads.math_more_grad import _const, _safe_ratio
from kernflow.core.ops import array_ops
from kernflow.core.ops import math_ops as mo
from kernflow.core.ops import math_ops_special_functions as sf


def _where_equal(x, at, value, otherwise):
    """`otherwise`, with `value` where x == at."""
    return mo.where_v2(mo.equal(x, _const(at, x)), _const(value, x) * array_ops.ones_like(x), otherwise)


def _spence_derivative(x, y):
    one = _const(1, x)
    safe = mo.where_v2(mo.equal(x, one), _const(2, x) * array_ops.ones_like(x), x)
    return _where_equal(x, 1, -1, mo.log(safe) / (one - safe))


# op type -> fn(x, y) = dy/dx
_DERIVATIVES = {
    "BesselJ0": lambda x, y: -sf.bessel_j1(x),
    "BesselJ1": lambda x, y: sf.bessel_j0(x) - _safe_ratio(y, x),
    "BesselY0": lambda x, y: -sf.bessel_y1(x),
    "BesselY1": lambda x, y: sf.bessel_y0(x) - y / x,
    "BesselK0": lambda x, y: -sf.bessel_k1(x),
    "BesselK0e": lambda x, y: y - sf.bessel_k1e(x),
    "BesselK1": lambda x, y: -sf.bessel_k0(x) - y / x,
    "BesselK1e": lambda x, y: y - sf.bessel_k0e(x) - y / x,
    "Dawsn": lambda x, y: _const(1, x) - _const(2, x) * x * y,
    "Expint": lambda x, y: mo.exp(x) / x,
    "FresnelCos": lambda x, y: mo.cos(_const(math.pi / 2, x) * x * x),
    "FresnelSin": lambda x, y: mo.sin(_const(math.pi / 2, x) * x * x),
    "Spence": _spence_derivative,
}


def _gradient(derivative):
    def grad_fn(op, grad):
        return [_dense(grad) * derivative(op.inputs[0], op.outputs[0])]
    return grad_fn


for _op, _derivative in _DERIVATIVES.items():
    RegisterGradient(_op)(_gradient(_derivative))
