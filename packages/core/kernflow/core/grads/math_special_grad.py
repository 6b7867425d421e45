"""Gradients of the special elementwise math ops (kernflow.core.ops.math_ops_special), with TF1's
formulas; binary ops sum their broadcast gradients back like math_grad's."""

from __future__ import annotations

import math

from kernflow.core.framework.gradient_registry import NotDifferentiable, RegisterGradient
from kernflow.core.grads.math_grad import _dense, _reduce_pair
from kernflow.core.ops import array_ops
from kernflow.core.ops import math_ops as mo
from kernflow.core.ops import math_ops_special as sp

# Digamma's derivative is polygamma(1, x), which kernflow lacks (see kernflow.core.math).
for _op in ("IsFinite", "IsInf", "IsNan", "TruncateDiv", "Digamma"):
    NotDifferentiable(_op)


def _x(op):
    return mo.conj(op.inputs[0])


def _one(x):
    return array_ops.ones([], x.dtype.base_dtype)


@RegisterGradient("Tan")
def _tan_grad(op, grad):
    c = mo.cos(_x(op))
    return [_dense(grad) * mo.reciprocal(c * c)]


@RegisterGradient("Asin")
def _asin_grad(op, grad):
    x = _x(op)
    return [_dense(grad) * mo.rsqrt(_one(x) - x * x)]


@RegisterGradient("Acos")
def _acos_grad(op, grad):
    x = _x(op)
    return [-_dense(grad) * mo.rsqrt(_one(x) - x * x)]


@RegisterGradient("Atan")
def _atan_grad(op, grad):
    x = _x(op)
    return [_dense(grad) * mo.reciprocal(_one(x) + x * x)]


@RegisterGradient("Sinh")
def _sinh_grad(op, grad):
    return [_dense(grad) * sp.cosh(_x(op))]


@RegisterGradient("Cosh")
def _cosh_grad(op, grad):
    return [_dense(grad) * sp.sinh(_x(op))]


@RegisterGradient("Asinh")
def _asinh_grad(op, grad):
    return [_dense(grad) * mo.reciprocal(sp.cosh(mo.conj(op.outputs[0])))]


@RegisterGradient("Acosh")
def _acosh_grad(op, grad):
    return [_dense(grad) * mo.reciprocal(sp.sinh(mo.conj(op.outputs[0])))]


@RegisterGradient("Atanh")
def _atanh_grad(op, grad):
    x = _x(op)
    return [_dense(grad) * mo.reciprocal(_one(x) - x * x)]


@RegisterGradient("Erf")
def _erf_grad(op, grad):
    x = op.inputs[0]
    two_over_root_pi = array_ops.constant(2 / math.sqrt(math.pi), dtype=x.dtype.base_dtype)
    return [_dense(grad) * two_over_root_pi * mo.exp(-x * x)]


@RegisterGradient("Erfc")
def _erfc_grad(op, grad):
    x = op.inputs[0]
    minus_two_over_root_pi = array_ops.constant(-2 / math.sqrt(math.pi), dtype=x.dtype.base_dtype)
    return [_dense(grad) * minus_two_over_root_pi * mo.exp(-x * x)]


@RegisterGradient("Lgamma")
def _lgamma_grad(op, grad):
    return [_dense(grad) * sp.digamma(op.inputs[0])]


@RegisterGradient("Rint")
def _rint_grad(op, grad):
    return [array_ops.zeros_like(op.inputs[0])]


@RegisterGradient("Atan2")
def _atan2_grad(op, grad):
    y, x = op.inputs
    grad = _dense(grad)
    inv = mo.reciprocal(x * x + y * y)
    return list(_reduce_pair(y, x, grad * x * inv, -grad * y * inv))


@RegisterGradient("Xlogy")
def _xlogy_grad(op, grad):
    x, y = op.inputs
    grad = _dense(grad)
    not_zero_x = mo.cast(mo.not_equal(x, mo.cast(0, x.dtype.base_dtype)), x.dtype.base_dtype)
    return list(_reduce_pair(x, y, sp.xlogy(not_zero_x, y) * grad, sp.xdivy(x, y) * grad))


@RegisterGradient("Xdivy")
def _xdivy_grad(op, grad):
    x, y = op.inputs
    grad = _dense(grad)
    not_zero_x = mo.cast(mo.not_equal(x, mo.cast(0, x.dtype.base_dtype)), x.dtype.base_dtype)
    return list(_reduce_pair(x, y, sp.xdivy(not_zero_x, y) * grad,
                             sp.xdivy(mo.negative(x), y * y) * grad))


@RegisterGradient("DivNoNan")
def _div_no_nan_grad(op, grad):
    x, y = op.inputs
    grad = _dense(grad)
    gx = sp.div_no_nan(grad, y)
    gy = grad * sp.div_no_nan(sp.div_no_nan(mo.negative(x), y), y)
    return list(_reduce_pair(x, y, gx, gy))


@RegisterGradient("TruncateMod")
def _truncate_mod_grad(op, grad):
    x, y = op.inputs
    grad = _dense(grad)
    return list(_reduce_pair(x, y, grad, -grad * sp.truncatediv(x, y)))
