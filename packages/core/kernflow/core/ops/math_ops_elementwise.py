"""Elementwise math ops: arithmetic, unary functions, comparisons, logic, casts, selection.

OpDefs and wrappers (re-exported by `kernflow.core.ops.math_ops`); CPU kernels are in
kernflow.kernels.cpu.math. Binary ops broadcast with numpy's rules.
"""

from __future__ import annotations

import numpy as np

from kernflow.core.framework import dtypes as _dtypes
from kernflow.core.framework import ops as _ops
from kernflow.core.framework import tensor_shape as _ts
from kernflow.core.framework.op_def_library import apply_op
from kernflow.core.framework.op_def_registry import register_op
from kernflow.core.ops import common_shapes

__all__ = [
    "add", "subtract", "multiply", "divide", "truediv", "realdiv", "div", "floordiv", "floor_div",
    "mod", "floormod", "pow", "maximum", "minimum", "squared_difference", "scalar_mul", "add_n",
    "negative", "abs", "sign", "square", "sqrt", "rsqrt", "exp", "expm1", "log", "log1p", "sin",
    "cos", "tanh", "sigmoid", "floor", "ceil", "round", "reciprocal", "conj",
    "less", "less_equal", "greater", "greater_equal", "equal", "not_equal",
    "logical_and", "logical_or", "logical_not", "logical_xor",
    "where", "where_v2", "cast", "saturate_cast", "to_float", "to_double", "to_int32", "to_int64",
    "clip_by_value",
]

# Type sets of TF's OpDefs.
_FLOAT = "half, float, double"
_FLOAT_COMPLEX = "half, float, double, complex64, complex128"
_SIGNED = "half, float, double, int8, int16, int32, int64, complex64, complex128"
_SIGNED_REAL = "half, float, double, int8, int16, int32, int64"
_UINTS = "uint8, uint16, uint32, uint64"
_ARITH = f"{_SIGNED}, {_UINTS}"
_REAL = f"{_SIGNED_REAL}, {_UINTS}"


def _is_tensorlike(v) -> bool:
    return isinstance(v, _ops.Tensor) or hasattr(v, "_as_graph_element")


def _out(op_type, inputs, name=None, attrs=None):
    return apply_op(op_type, inputs, attrs, name=name).outputs[0]


def _equality_shape(op):
    try:
        return common_shapes.broadcast_binary(op)
    except ValueError:
        if op.get_attr("incompatible_shape_error"):
            raise
        return [_ts.TensorShape([])]


def _select_shape(op):
    """TF1 Select: `t` and `e` agree; `condition` is a scalar, a vector over dim 0, or their shape."""
    c, t, e = (x.shape for x in op.inputs)
    out = t.merge_with(e)
    if c.rank is None or out.rank is None or c.rank == 0:
        return [out]
    if c.rank == out.rank:
        return [out.merge_with(c)]
    if c.rank == 1 and out.rank > 1:
        first = out[0].merge_with(c[0]).value
        return [_ts.TensorShape([first] + list(out.dim_values[1:]))]
    allowed = "0" if out.rank == 0 else ("0 or 1" if out.rank == 1 else f"0, 1 or {out.rank}")
    raise ValueError(f"Shape must be rank {allowed} but is rank {c.rank}: 'condition' must be a "
                     f"scalar, a vector matching the first dimension of 'x', or x's shape")


def _select_v2_shape(op):
    c, t, e = (x.shape for x in op.inputs)
    return [_ts.broadcast_shape(_ts.broadcast_shape(c, t), e)]


def _where_shape(op):
    return [_ts.TensorShape([None, op.inputs[0].shape.rank])]


def _clip_shape(op):
    t = op.inputs[0].shape
    for bound in op.inputs[1:]:
        b = _ts.broadcast_shape(t, bound.shape)
        if not t.is_compatible_with(b):
            raise ValueError(f"Shapes {t} and {b} are incompatible: clip bounds must broadcast to the "
                             f"shape of 't'")
        t = t.merge_with(b)
    return [t]


def _add_n_shape(op):
    out = _ts.TensorShape(None)
    for t in op.inputs:
        out = out.merge_with(t.shape)
    return [out]


# ---------------------------------------------------------------------------- OpDefs
_BINARY = [  # (op type, allowed T, what z is)
    ("AddV2", _ARITH, "x + y"),
    ("Add", f"{_ARITH}, string", "x + y (strings concatenate)"),
    ("Sub", _ARITH, "x - y"),
    ("Mul", _ARITH, "x * y"),
    ("RealDiv", _ARITH, "x / y (integers divide truncating toward zero)"),
    ("Div", _ARITH, "x / y (integers divide truncating toward zero)"),
    ("FloorDiv", _REAL, "floor(x / y)"),
    ("FloorMod", f"{_SIGNED_REAL}, {_UINTS}", "x - floor(x / y) * y (the sign of y, as in Python)"),
    ("Pow", _SIGNED, "x ** y"),
    ("Maximum", _REAL, "max(x, y)"),
    ("Minimum", _REAL, "min(x, y)"),
    ("SquaredDifference", "half, float, double, int32, int64, complex64, complex128",
     "(x - y) * conj(x - y)"),
]
for _name, _types, _what in _BINARY:
    register_op(_name, inputs=["x: T", "y: T"], outputs=["z: T"], attrs=[f"T: {{{_types}}}"],
                shape_fn=common_shapes.broadcast_binary,
                doc=f"Returns {_what} elementwise, with numpy broadcasting.")

_COMPARISONS = [("Less", "x < y"), ("LessEqual", "x <= y"), ("Greater", "x > y"),
                ("GreaterEqual", "x >= y")]
for _name, _what in _COMPARISONS:
    register_op(_name, inputs=["x: T", "y: T"], outputs=["z: bool"], attrs=[f"T: {{{_REAL}}}"],
                shape_fn=common_shapes.broadcast_binary,
                doc=f"Returns the truth value of {_what} elementwise, with numpy broadcasting.")
for _name, _what in (("Equal", "x == y"), ("NotEqual", "x != y")):
    register_op(_name, inputs=["x: T", "y: T"], outputs=["z: bool"],
                attrs=["T: type", "incompatible_shape_error: bool = true"], shape_fn=_equality_shape,
                doc=f"Returns the truth value of {_what} elementwise, with numpy broadcasting. With "
                    f"incompatible_shape_error=false, shapes that do not broadcast give a scalar.")
for _name, _what in (("LogicalAnd", "x AND y"), ("LogicalOr", "x OR y")):
    register_op(_name, inputs=["x: bool", "y: bool"], outputs=["z: bool"],
                shape_fn=common_shapes.broadcast_binary,
                doc=f"Returns the truth value of {_what} elementwise, with numpy broadcasting.")
register_op("LogicalNot", inputs=["x: bool"], outputs=["y: bool"], shape_fn=common_shapes.unchanged,
            doc="Returns the truth value of NOT x elementwise.")

_UNARY = [  # (op type, allowed T, what y is)
    ("Neg", _SIGNED, "-x"),
    ("Abs", _SIGNED_REAL, "|x|"),
    ("Sign", _SIGNED, "the sign of x: -1, 0 or 1 (x / |x| for complex x)"),
    ("Square", _ARITH, "x * x"),
    ("Sqrt", _FLOAT_COMPLEX, "sqrt(x)"),
    ("Rsqrt", _FLOAT_COMPLEX, "1 / sqrt(x)"),
    ("Exp", _FLOAT_COMPLEX, "e ** x"),
    ("Expm1", _FLOAT_COMPLEX, "e ** x - 1"),
    ("Log", _FLOAT_COMPLEX, "the natural logarithm of x"),
    ("Log1p", _FLOAT_COMPLEX, "log(1 + x)"),
    ("Sin", _FLOAT_COMPLEX, "sin(x)"),
    ("Cos", _FLOAT_COMPLEX, "cos(x)"),
    ("Tanh", _FLOAT_COMPLEX, "tanh(x)"),
    ("Sigmoid", _FLOAT_COMPLEX, "1 / (1 + exp(-x))"),
    ("Floor", _FLOAT, "the largest integer not greater than x"),
    ("Ceil", _FLOAT, "the smallest integer not less than x"),
    ("Round", _SIGNED, "x rounded to the nearest integer, half to even"),
    ("Reciprocal", _SIGNED, "1 / x (integers divide truncating toward zero)"),
]
for _name, _types, _what in _UNARY:
    register_op(_name, inputs=["x: T"], outputs=["y: T"], attrs=[f"T: {{{_types}}}"],
                shape_fn=common_shapes.unchanged, doc=f"Returns {_what} elementwise.")


def _same_shape(op):
    y, dy = op.inputs[0].shape, op.inputs[1].shape
    if not y.is_compatible_with(dy):
        raise ValueError(f"Shapes {y} and {dy} are incompatible: 'y' and 'dy' must have one shape")
    return [y.merge_with(dy)]


# The derivatives of unary ops in terms of their output y, for their gradients (one op each).
_UNARY_GRADS = [
    ("TanhGrad", "dy * (1 - y * y)", "tanh"),
    ("SigmoidGrad", "dy * y * (1 - y)", "sigmoid"),
    ("SqrtGrad", "dy * 0.5 / y", "sqrt"),
    ("RsqrtGrad", "dy * -0.5 * y * y * y", "rsqrt"),
    ("ReciprocalGrad", "-dy * y * y", "reciprocal"),
]
for _name, _what, _fn in _UNARY_GRADS:
    register_op(_name, inputs=["y: T", "dy: T"], outputs=["z: T"],
                attrs=[f"T: {{{_FLOAT_COMPLEX}}}"],
                shape_fn=_same_shape,
                doc=f"The gradient of {_fn}(x) given its output y and the gradient dy of y: z = "
                    f"{_what} (conj(y) in place of y for complex types).")
register_op("Conj", inputs=["input: T"], outputs=["output: T"],
            attrs=["T: {complex64, complex128, variant} = complex64"], shape_fn=common_shapes.unchanged,
            doc="Returns the complex conjugate of input elementwise.")
register_op("ComplexAbs", inputs=["x: T"], outputs=["y: Tout"],
            attrs=["T: {complex64, complex128} = complex64", "Tout: {float, double} = float"],
            shape_fn=common_shapes.unchanged, doc="Returns |x| of complex x elementwise, as reals.")

register_op("Select", inputs=["condition: bool", "t: T", "e: T"], outputs=["output: T"],
            attrs=["T: type"], shape_fn=_select_shape,
            doc="Picks elements of t where condition is true, else of e. t and e have one shape; "
                "condition is a scalar, a vector over their first dimension, or of their shape.")
register_op("SelectV2", inputs=["condition: bool", "t: T", "e: T"], outputs=["output: T"],
            attrs=["T: type"], shape_fn=_select_v2_shape,
            doc="Picks elements of t where condition is true, else of e, broadcasting all three.")
register_op("Where", inputs=["input: T"], outputs=["index: int64"],
            attrs=["T: {numbertype, bool} = bool"], shape_fn=_where_shape,
            doc="Returns the coordinates of the true (nonzero) elements of input, one row each, in "
                "row-major order: an int64 matrix [num_true, rank].")
register_op("Cast", inputs=["x: SrcT"], outputs=["y: DstT"],
            attrs=["SrcT: type", "DstT: type", "Truncate: bool = false"],
            shape_fn=common_shapes.unchanged, doc="Casts x to type DstT elementwise.")
register_op("ClipByValue", inputs=["t: T", "clip_value_min: T", "clip_value_max: T"],
            outputs=["output: T"], attrs=[f"T: {{{_REAL}}}"], shape_fn=_clip_shape,
            doc="Clips t elementwise to [clip_value_min, clip_value_max]; the bounds broadcast to "
                "t's shape.")
register_op("AddN", inputs=["inputs: N * T"], outputs=["sum: T"],
            attrs=["N: int >= 1", f"T: {{{_ARITH}, variant}}"], shape_fn=_add_n_shape,
            doc="Adds N tensors of one shape and type elementwise.")


# ---------------------------------------------------------------------------- binary wrappers
def _binary(op_type, py_name, what, scope=None):
    """Returns the wrapper of a binary op; `scope` names its default op name like TF's wrapper."""
    default = scope or op_type

    def wrapper(x, y, name=None):
        if scope is None:
            return _out(op_type, [x, y], name)
        with _ops.name_scope(name, scope, [x, y]) as name:
            return _out(op_type, [x, y], name)
    wrapper.__name__ = wrapper.__qualname__ = py_name
    wrapper.__doc__ = f"""Returns {what} elementwise, with numpy broadcasting (op `{op_type}`).

    Args:
        x: a Tensor, or a value convertible to one.
        y: a Tensor of the same dtype as `x`, or a value convertible to it.
        name: optional op name (default "{default}").

    Returns:
        A Tensor of the broadcast shape.

    Raises:
        TypeError: the dtypes differ or are not supported by `{op_type}`.
        ValueError: the shapes do not broadcast.
    """
    return wrapper


subtract = _binary("Sub", "subtract", "x - y")
multiply = _binary("Mul", "multiply", "x * y")
realdiv = _binary("RealDiv", "realdiv", "x / y (integers divide truncating toward zero)")
floordiv = _binary("FloorDiv", "floordiv", "floor(x / y)", scope="floordiv")
floor_div = _binary("FloorDiv", "floor_div", "floor(x / y)")
floormod = _binary("FloorMod", "floormod", "x mod y, with the sign of y (Python's %)")
mod = floormod
pow = _binary("Pow", "pow", "x ** y", scope="Pow")  # noqa: A001 - TF's name
maximum = _binary("Maximum", "maximum", "max(x, y)")
minimum = _binary("Minimum", "minimum", "min(x, y)")
squared_difference = _binary("SquaredDifference", "squared_difference", "(x - y) ** 2")
less = _binary("Less", "less", "x < y")
less_equal = _binary("LessEqual", "less_equal", "x <= y")
greater = _binary("Greater", "greater", "x > y")
greater_equal = _binary("GreaterEqual", "greater_equal", "x >= y")
equal = _binary("Equal", "equal", "x == y")
not_equal = _binary("NotEqual", "not_equal", "x != y")
logical_and = _binary("LogicalAnd", "logical_and", "x AND y (bool tensors)")
logical_or = _binary("LogicalOr", "logical_or", "x OR y (bool tensors)")


def add(x, y, name=None):
    """Returns x + y elementwise, with numpy broadcasting.

    Emits op `AddV2` (`Add` for strings, which concatenates).

    Args:
        x: a Tensor, or a value convertible to one.
        y: a Tensor of the same dtype as `x`, or a value convertible to it.
        name: optional op name (default "Add").

    Returns:
        A Tensor of the broadcast shape.
    """
    with _ops.name_scope(name, "Add", [x, y]) as name:
        x, y = _convert_pair(x, y)
        return _out("Add" if x.dtype.base_dtype == _dtypes.string else "AddV2", [x, y], name)


def _convert_pair(x, y):
    """Converts x (default dtype) and then y (preferring x's dtype), like TF's binary wrappers."""
    x = _ops.convert_to_tensor(x, name="x")
    y = _ops.convert_to_tensor(y, name="y", preferred_dtype=x.dtype.base_dtype)
    return x, y


# TF's _TRUEDIV_TABLE: the float type integers are cast to before a true division.
_TRUEDIV_TABLE = {
    _dtypes.uint8: _dtypes.float32, _dtypes.int8: _dtypes.float32, _dtypes.uint16: _dtypes.float32,
    _dtypes.int16: _dtypes.float32, _dtypes.uint32: _dtypes.float64, _dtypes.uint64: _dtypes.float64,
    _dtypes.int32: _dtypes.float64, _dtypes.int64: _dtypes.float64, _dtypes.float16: None,
    _dtypes.float32: None, _dtypes.float64: None, _dtypes.complex64: None, _dtypes.complex128: None,
}


def truediv(x, y, name=None):
    """Divides x / y elementwise with Python 3 semantics (op `RealDiv`).

    Integer inputs are first cast to a float type: (u)int8/16 to float32, (u)int32/64 to float64.

    Args:
        x: a Tensor of a numeric type, or a value convertible to one.
        y: a Tensor of the same dtype as `x`, or a value convertible to it.
        name: optional op name (default "truediv").

    Returns:
        A floating (or complex) Tensor of the broadcast shape.

    Raises:
        TypeError: if x and y have different dtypes, or a dtype that cannot be divided.
    """
    with _ops.name_scope(name, "truediv", [x, y]) as name:
        x, y = _convert_pair(x, y)
        if x.dtype.base_dtype != y.dtype.base_dtype:
            raise TypeError(f"`x` and `y` must have the same dtype, got {x.dtype.base_dtype.name} != "
                            f"{y.dtype.base_dtype.name}.")
        try:
            to = _TRUEDIV_TABLE[x.dtype.base_dtype]
        except KeyError:
            raise TypeError(f"Invalid dtype {x.dtype.base_dtype.name} in __truediv__") from None
        if to is not None:
            x, y = cast(x, to), cast(y, to)
        return _out("RealDiv", [x, y], name)


def divide(x, y, name=None):
    """Computes Python-style division x / y (true division; ints become floats).

    Args:
        x: a Tensor, or a value convertible to one.
        y: a Tensor, or a value convertible to x's dtype.
        name: optional op name (default "truediv", as `x / y` gives).

    Returns:
        A Tensor of the broadcast shape.
    """
    if name is not None:
        return truediv(x, y, name=name)
    if not _is_tensorlike(x):
        dtype = y.dtype.base_dtype if _is_tensorlike(y) else None
        x = _ops.convert_to_tensor(x, dtype=dtype)
    return x / y


def div(x, y, name=None):
    """Divides x / y elementwise with Python 2 semantics (TF1 `tf.div`).

    Floating and complex inputs use true division (op `RealDiv`); integers floor-divide (op
    `FloorDiv`).

    Args:
        x: a Tensor, or a value convertible to one.
        y: a Tensor of the same dtype as `x`, or a value convertible to it.
        name: optional op name (default "div").

    Returns:
        A Tensor of x's dtype and the broadcast shape.

    Raises:
        TypeError: if x and y have different dtypes.
    """
    with _ops.name_scope(name, "div", [x, y]) as name:
        x, y = _convert_pair(x, y)
        if x.dtype.base_dtype != y.dtype.base_dtype:
            raise TypeError(f"x and y must have the same dtype, got {x.dtype.base_dtype.name} != "
                            f"{y.dtype.base_dtype.name}")
        if x.dtype.is_floating or x.dtype.is_complex:
            return _out("RealDiv", [x, y], name)
        return _out("FloorDiv", [x, y], name)


def scalar_mul(scalar, x, name=None):
    """Multiplies the tensor `x` by a scalar (op `Mul`).

    Args:
        scalar: a 0-D value, converted to x's dtype.
        x: a Tensor.
        name: optional op name (default "Mul").

    Raises:
        ValueError: if `scalar` is not 0-D.
    """
    x = _ops.convert_to_tensor(x)
    scalar = _ops.convert_to_tensor(scalar, dtype=x.dtype.base_dtype, name="scalar")
    if scalar.shape.rank != 0:
        raise ValueError(f"The input scalar must be a 0-D value. Received shape {scalar.shape}.")
    return _out("Mul", [scalar, x], name)


def add_n(inputs, name=None):
    """Adds a list of tensors of one shape and dtype elementwise (op `AddN`).

    Args:
        inputs: a non-empty list of Tensors (or values convertible to them).
        name: optional op name (default "AddN").

    Returns:
        A Tensor; with a single input, that input itself (an `Identity` of it when `name` is given).

    Raises:
        ValueError: if `inputs` is not a non-empty list, or the shapes differ.
    """
    if not inputs or not isinstance(inputs, (list, tuple)):
        raise ValueError("inputs must be a list of at least one Tensor/IndexedSlices with the same "
                         "dtype and shape")
    inputs = [_ops.convert_to_tensor(t) for t in inputs]
    if len(inputs) == 1:
        if name:
            from kernflow.core.ops import array_ops
            return array_ops.identity(inputs[0], name=name)
        return inputs[0]
    return _out("AddN", [inputs], name)


# ---------------------------------------------------------------------------- unary wrappers
def _unary(op_type, py_name, what, scope=None, out="a Tensor of x's dtype and shape"):
    default = scope or op_type

    def wrapper(x, name=None):
        if scope is None:
            return _out(op_type, [x], name)
        with _ops.name_scope(name, scope, [x]) as name:
            return _out(op_type, [x], name)
    wrapper.__name__ = wrapper.__qualname__ = py_name
    wrapper.__doc__ = f"""Returns {what} elementwise (op `{op_type}`).

    Args:
        x: a Tensor, or a value convertible to one.
        name: optional op name (default "{default}").

    Returns:
        {out[0].upper() + out[1:]}.

    Raises:
        TypeError: if x's dtype is not supported by `{op_type}`.
    """
    return wrapper


negative = _unary("Neg", "negative", "-x")
sign = _unary("Sign", "sign", "the sign of x (-1, 0 or 1; x / |x| for complex)")
square = _unary("Square", "square", "x * x")
sqrt = _unary("Sqrt", "sqrt", "sqrt(x)")
rsqrt = _unary("Rsqrt", "rsqrt", "1 / sqrt(x)")
exp = _unary("Exp", "exp", "e ** x")
expm1 = _unary("Expm1", "expm1", "e ** x - 1")
log = _unary("Log", "log", "the natural logarithm of x")
log1p = _unary("Log1p", "log1p", "log(1 + x)")
sin = _unary("Sin", "sin", "sin(x)")
cos = _unary("Cos", "cos", "cos(x)")
tanh = _unary("Tanh", "tanh", "tanh(x)", scope="Tanh")
sigmoid = _unary("Sigmoid", "sigmoid", "1 / (1 + exp(-x)) (computed without overflow)",
                 scope="Sigmoid")
floor = _unary("Floor", "floor", "floor(x)")
ceil = _unary("Ceil", "ceil", "ceil(x)")
reciprocal = _unary("Reciprocal", "reciprocal", "1 / x")
logical_not = _unary("LogicalNot", "logical_not", "NOT x (bool tensors)", out="a bool Tensor")


def abs(x, name=None):  # noqa: A001 - TF's name
    """Returns |x| elementwise (op `Abs`; `ComplexAbs` for complex x, giving reals).

    Args:
        x: a Tensor of a signed numeric or complex type.
        name: optional op name (default "Abs").

    Returns:
        A Tensor of x's shape; of x's dtype, or its real type for complex x.
    """
    with _ops.name_scope(name, "Abs", [x]) as name:
        x = _ops.convert_to_tensor(x, name="x")
        if x.dtype.is_complex:
            return _out("ComplexAbs", [x], name, {"Tout": x.dtype.real_dtype})
        return _out("Abs", [x], name)


def round(x, name=None):  # noqa: A001 - TF's name
    """Rounds x elementwise to the nearest integer, half to even (op `Round`).

    Args:
        x: a Tensor.
        name: optional op name (default "Round").

    Returns:
        A Tensor of x's dtype and shape; integer tensors are returned as they are.
    """
    x = _ops.convert_to_tensor(x, name="x")
    if x.dtype.is_integer:
        return x
    return _out("Round", [x], name)


def conj(x, name=None):
    """Returns the complex conjugate of x (op `Conj`); real tensors are returned as they are.

    Raises:
        TypeError: if x is neither numeric nor complex.
    """
    x = _ops.convert_to_tensor(x, name="x")
    if x.dtype.is_complex or x.dtype.base_dtype == _dtypes.variant:
        return _out("Conj", [x], name)
    if x.dtype.is_floating or x.dtype.is_integer:
        return x
    raise TypeError(f"Expected numeric or variant tensor, got dtype {x.dtype.name}")


def logical_xor(x, y, name="LogicalXor"):
    """Returns x XOR y elementwise for bool tensors, as (x OR y) AND NOT (x AND y).

    Args:
        x: a bool Tensor.
        y: a bool Tensor.
        name: the name of the final `LogicalAnd` op.
    """
    return logical_and(logical_or(x, y), logical_not(logical_and(x, y)), name=name)


# ---------------------------------------------------------------------------- selection
def where(condition, x=None, y=None, name=None):
    """TF1 `tf.where`: selects from x and y, or returns the coordinates of true elements.

    With x and y (op `Select`), they must have the same shape and `condition` is a scalar, a
    vector matching their first dimension, or of their shape. Without them (op `Where`), returns
    an int64 tensor [num_true, rank] of the coordinates where `condition` is true.

    Args:
        condition: a bool Tensor.
        x: a Tensor, or None.
        y: a Tensor of x's dtype and shape, or None.
        name: optional op name (default "Select" or "Where").

    Raises:
        ValueError: if only one of x and y is given, or the shapes do not fit.
    """
    if x is None and y is None:
        return _where_indices(condition, name)
    if x is None or y is None:
        raise ValueError("x and y must both be non-None or both be None.")
    return _out("Select", [condition, x, y], name)


def where_v2(condition, x=None, y=None, name=None):
    """TF2 `tf.where`: like `where`, but condition, x and y broadcast (op `SelectV2`).

    Args:
        condition: a bool Tensor.
        x: a Tensor, or None.
        y: a Tensor of x's dtype, or None.
        name: optional op name (default "SelectV2" or "Where").

    Raises:
        ValueError: if only one of x and y is given, or the shapes do not broadcast.
    """
    if x is None and y is None:
        return _where_indices(condition, name)
    if x is None or y is None:
        raise ValueError("x and y must both be non-None or both be None.")
    return _out("SelectV2", [condition, x, y], name)


def _where_indices(condition, name):
    with _ops.name_scope(name, "Where", [condition]) as name:
        condition = _ops.convert_to_tensor(condition, preferred_dtype=_dtypes.bool, name="condition")
        return _out("Where", [condition], name)


# ---------------------------------------------------------------------------- casts, clipping
def cast(x, dtype, name=None):
    """Casts x to `dtype` (op `Cast`); x itself is returned when it already has that dtype.

    Complex values cast to real types keep their real part; floats cast to integers truncate.

    Args:
        x: a Tensor, or a value convertible to one.
        dtype: the destination type.
        name: optional op name (default "Cast").
    """
    base = _dtypes.as_dtype(dtype).base_dtype
    with _ops.name_scope(name, "Cast", [x]) as name:
        x = _ops.convert_to_tensor(x, name="x")
        if x.dtype.base_dtype != base:
            x = _out("Cast", [x], name, {"DstT": base})
        return x


def saturate_cast(value, dtype, name=None):
    """Casts `value` to `dtype`, first clamping it to the range `dtype` can hold.

    Args:
        value: a numeric Tensor.
        dtype: the destination type.
        name: optional name scope (default "saturate_cast").
    """
    dtype = _dtypes.as_dtype(dtype).base_dtype
    with _ops.name_scope(name, "saturate_cast", [value]) as name:
        value = _ops.convert_to_tensor(value, name="value")
        if value.dtype.is_complex and not dtype.is_complex:
            value = _out("Cast", [value], None, {"DstT": value.dtype.real_dtype})
        src = value.dtype.base_dtype
        if not dtype.is_complex and not dtype.is_bool and not src.is_bool:
            lo, hi = _saturation_bounds(src, dtype)
            if lo is not None:
                value = maximum(value, lo)
            if hi is not None:
                value = minimum(value, hi)
        return cast(value, dtype, name=name)


def _saturation_bounds(src, dst):
    """The clamp bounds, in src's type, that keep a cast to dst in range (None: no clamp needed)."""
    np_src = src.as_numpy_dtype
    lo = hi = None
    if float(src.min) < float(dst.min):
        lo = np.array(dst.min).astype(np_src)
    if float(src.max) > float(dst.max):
        v = np.array(dst.max).astype(np_src)
        if src.is_floating and dst.is_integer and float(v) > float(dst.max):
            v = np.nextafter(v, np_src(0))  # the largest src value below dst.max
        hi = v
    return lo, hi


def _cast_fn(dtype, py_name, default_name):
    def fn(x, name=default_name):
        return cast(x, dtype, name=name)
    fn.__name__ = fn.__qualname__ = py_name
    fn.__doc__ = f"""Casts x to {dtype.name} (TF1, deprecated in favour of `cast`).

    Args:
        x: a Tensor.
        name: optional op name (default "{default_name}").
    """
    return fn


to_float = _cast_fn(_dtypes.float32, "to_float", "ToFloat")
to_double = _cast_fn(_dtypes.float64, "to_double", "ToDouble")
to_int32 = _cast_fn(_dtypes.int32, "to_int32", "ToInt32")
to_int64 = _cast_fn(_dtypes.int64, "to_int64", "ToInt64")


def clip_by_value(t, clip_value_min, clip_value_max, name=None):
    """Clips `t` elementwise to [clip_value_min, clip_value_max] (op `ClipByValue`).

    Args:
        t: a Tensor.
        clip_value_min: the lower bound: a scalar, or a tensor that broadcasts to t's shape.
        clip_value_max: the upper bound, likewise.
        name: optional op name (default "clip_by_value").

    Returns:
        A Tensor of t's dtype and shape.

    Raises:
        ValueError: if a bound would broadcast t to a bigger shape.
    """
    with _ops.name_scope(name, "clip_by_value", [t, clip_value_min, clip_value_max]) as name:
        t = _ops.convert_to_tensor(t, name="t")
        return _out("ClipByValue", [t, clip_value_min, clip_value_max], name)
