"""More elementwise math: trigonometric and hyperbolic functions, special functions, safe
divisions, truncating division, float classification, and ops composed from them.

OpDefs and wrappers (the TF1 top-level names in ``__all__`` become kf.<name>; kernflow.core.math
re-exports the rest); CPU kernels are in kernflow.kernels.cpu.special (host only: no GPU kernels
yet), gradients in kernflow.core.grads.math_special_grad.
"""

from __future__ import annotations

from kernflow.core.framework import ops as _ops
from kernflow.core.framework.op_def_registry import register_op
from kernflow.core.ops import common_shapes
from kernflow.core.ops.math_ops_elementwise import _out, _unary

__all__ = ["tan", "asin", "acos", "atan", "sinh", "cosh", "asinh", "acosh", "atanh", "atan2",
           "erf", "erfc", "lgamma", "digamma", "rint", "is_finite", "is_inf", "is_nan",
           "truncatediv", "truncatemod", "div_no_nan", "log_sigmoid", "lbeta"]

_FLOAT = "half, float, double"
_FLOAT_COMPLEX = "half, float, double, complex64, complex128"
_SIGNED_REAL = "half, float, double, int8, int16, int32, int64"

_UNARY = [  # (op type, allowed T, what y is)
    ("Tan", _FLOAT_COMPLEX, "tan(x)"),
    ("Asin", _FLOAT_COMPLEX, "arcsin(x)"),
    ("Acos", _FLOAT_COMPLEX, "arccos(x)"),
    ("Atan", _FLOAT_COMPLEX, "arctan(x)"),
    ("Sinh", _FLOAT_COMPLEX, "sinh(x)"),
    ("Cosh", _FLOAT_COMPLEX, "cosh(x)"),
    ("Asinh", _FLOAT_COMPLEX, "arsinh(x)"),
    ("Acosh", _FLOAT_COMPLEX, "arcosh(x)"),
    ("Atanh", _FLOAT_COMPLEX, "artanh(x)"),
    ("Erf", _FLOAT, "the error function of x"),
    ("Erfc", _FLOAT, "the complementary error function 1 - erf(x)"),
    ("Lgamma", _FLOAT, "log(|Gamma(x)|)"),
    ("Digamma", _FLOAT, "the derivative of lgamma(x), psi(x)"),
    ("Rint", _FLOAT, "x rounded to the nearest integer, half to even"),
]
for _name, _types, _what in _UNARY:
    register_op(_name, inputs=["x: T"], outputs=["y: T"], attrs=[f"T: {{{_types}}}"],
                shape_fn=common_shapes.unchanged, doc=f"Returns {_what} elementwise.")

for _name, _what in (("IsFinite", "finite"), ("IsInf", "+inf or -inf"), ("IsNan", "NaN")):
    register_op(_name, inputs=["x: T"], outputs=["y: bool"], attrs=[f"T: {{{_FLOAT}}}"],
                shape_fn=common_shapes.unchanged,
                doc=f"Returns whether each element of x is {_what}.")

_BINARY = [  # (op type, allowed T, what z is)
    ("Atan2", _FLOAT, "arctan(y / x) with the quadrant of (x, y); the inputs are (y, x)"),
    ("Xlogy", _FLOAT_COMPLEX, "x * log(y), 0 where x == 0"),
    ("Xdivy", _FLOAT_COMPLEX, "x / y, 0 where x == 0"),
    ("DivNoNan", _FLOAT_COMPLEX, "x / y, 0 where y == 0"),
    ("TruncateDiv", f"{_SIGNED_REAL}, uint8, uint16, uint32, uint64",
     "x / y rounded toward zero (C division)"),
    ("TruncateMod", "float, double, int32, int64",
     "x - truncatediv(x, y) * y (the sign of x, as C's fmod)"),
]
for _name, _types, _what in _BINARY:
    register_op(_name, inputs=["y: T", "x: T"] if _name == "Atan2" else ["x: T", "y: T"],
                outputs=["z: T"], attrs=[f"T: {{{_types}}}"],
                shape_fn=common_shapes.broadcast_binary,
                doc=f"Returns {_what} elementwise, with numpy broadcasting.")

# Op types of this module: host only (kernel_contract.HOST_ONLY_OPS) until they get GPU kernels.
SPECIAL_MATH_OPS = tuple(u[0] for u in _UNARY) + ("IsFinite", "IsInf", "IsNan") + \
    tuple(b[0] for b in _BINARY)


def _binary(op_type, py_name, what, args=("x", "y")):
    a, b = args

    def wrapper(x, y, name=None):
        x = _ops.convert_to_tensor(x, name=a)
        y = _ops.convert_to_tensor(y, name=b, preferred_dtype=x.dtype.base_dtype)
        return _out(op_type, [x, y], name)
    wrapper.__name__ = wrapper.__qualname__ = py_name
    wrapper.__doc__ = f"""Returns {what} elementwise, with numpy broadcasting (op `{op_type}`).

    Args:
        {a}: a Tensor, or a value convertible to one.
        {b}: a Tensor of the same dtype, or a value convertible to it.
        name: optional op name (default "{op_type}").

    Returns:
        A Tensor of the broadcast shape.

    Raises:
        TypeError: the dtypes differ or are not supported by `{op_type}`.
        ValueError: the shapes do not broadcast.
    """
    return wrapper


_BOOL = "a bool Tensor of x's shape"
tan = _unary("Tan", "tan", "tan(x)")
asin = _unary("Asin", "asin", "arcsin(x)")
acos = _unary("Acos", "acos", "arccos(x)")
atan = _unary("Atan", "atan", "arctan(x)")
sinh = _unary("Sinh", "sinh", "sinh(x)")
cosh = _unary("Cosh", "cosh", "cosh(x)")
asinh = _unary("Asinh", "asinh", "arsinh(x)")
acosh = _unary("Acosh", "acosh", "arcosh(x)")
atanh = _unary("Atanh", "atanh", "artanh(x)")
erf = _unary("Erf", "erf", "the error function of x")
erfc = _unary("Erfc", "erfc", "the complementary error function 1 - erf(x)")
lgamma = _unary("Lgamma", "lgamma", "log(|Gamma(x)|)")
digamma = _unary("Digamma", "digamma", "psi(x), the derivative of lgamma(x)")
rint = _unary("Rint", "rint", "x rounded to the nearest integer, half to even")
is_finite = _unary("IsFinite", "is_finite", "whether x is finite", out=_BOOL)
is_inf = _unary("IsInf", "is_inf", "whether x is +-inf", out=_BOOL)
is_nan = _unary("IsNan", "is_nan", "whether x is NaN", out=_BOOL)
atan2 = _binary("Atan2", "atan2", "arctan(y / x) in the quadrant of (x, y)", ("y", "x"))
xlogy = _binary("Xlogy", "xlogy", "x * log(y), 0 where x == 0")
xdivy = _binary("Xdivy", "xdivy", "x / y, 0 where x == 0")
div_no_nan = _binary("DivNoNan", "div_no_nan", "x / y, 0 where y == 0")
divide_no_nan = div_no_nan
truncatediv = _binary("TruncateDiv", "truncatediv", "x / y rounded toward zero (C division)")
truncatemod = _binary("TruncateMod", "truncatemod", "x - truncatediv(x, y) * y (C's fmod)")


def log_sigmoid(x, name=None):
    """Returns log(sigmoid(x)) = -softplus(-x) elementwise, without overflow.

    Args:
        x: a floating Tensor.
        name: optional name scope (default "LogSigmoid").
    """
    from kernflow.core.ops import nn_ops
    with _ops.name_scope(name, "LogSigmoid", [x]) as name:
        x = _ops.convert_to_tensor(x, name="x")
        return _out("Neg", [nn_ops.softplus(_out("Neg", [x]))], name)


def lbeta(x, name=None):
    """Returns log(|Beta(x)|) reduced over the last dimension of x: sum(lgamma(x)) - lgamma(sum(x)).

    An empty last dimension gives 0, as in TF.

    Args:
        x: a floating Tensor of rank >= 1.
        name: optional name scope (default "lbeta").
    """
    from kernflow.core.ops import math_ops
    with _ops.name_scope(name, "lbeta", [x]) as name:
        x = _ops.convert_to_tensor(x, name="x")
        log_prod = math_ops.reduce_sum(lgamma(x), axis=[-1])
        log_sum = lgamma(math_ops.reduce_sum(x, axis=[-1]))
        return math_ops.subtract(log_prod, log_sum, name=name)

