"""TF1's `assert_*` family, `check_numerics` and `is_numeric_tensor` (`tf.debugging` in TF1).

Each `assert_*` returns an op to run (or to make other ops depend on): an `Assert` whose error is
an InvalidArgumentError listing the message and the offending values. As in TF1, a condition that
can be decided while the graph is built is decided then: a false one raises at once (the value
comparisons InvalidArgumentError, the rank checks ValueError, the dtype checks TypeError), a true
one returns a no-op.

Example::

    with kf.control_dependencies([kf.assert_positive(x), kf.assert_rank(x, 2)]):
        y = kf.log(x)
"""

from __future__ import annotations

import numpy as np

from kernflow.core.framework import dtypes as _dtypes
from kernflow.core.framework import errors
from kernflow.core.framework import ops as _ops
from kernflow.core.framework import tensor_util

__all__ = ["assert_equal", "assert_none_equal", "assert_less", "assert_less_equal", "assert_greater",
           "assert_greater_equal", "assert_positive", "assert_negative", "assert_non_negative",
           "assert_non_positive", "assert_near", "assert_rank", "assert_rank_at_least",
           "assert_rank_in", "assert_integer", "assert_type", "assert_scalar", "assert_same_float_dtype",
           "assert_proper_iterable", "is_numeric_tensor", "check_numerics"]


def _m():
    from kernflow.core.ops import math_ops
    return math_ops


def _cf():
    from kernflow.core.ops import control_flow_ops
    return control_flow_ops


def _static(t):
    try:
        return tensor_util.constant_value(t)
    except Exception:  # noqa: BLE001 - not statically known
        return None


def _compare(x, y, op, np_op, what, data, summarize, message, name, default_name):
    """The Assert of ``all(op(x, y))``, or a no-op / an immediate error when it is static."""
    with _ops.name_scope(name, default_name, [x, y]) as scope:
        x = _ops.convert_to_tensor(x, name="x")
        y = _ops.convert_to_tensor(y, name="y", preferred_dtype=x.dtype.base_dtype)
        prefix = f"{message} " if message else ""
        if data is None:
            data = [f"{prefix}Condition x {what} y did not hold element-wise:",
                    f"x (name = {x.name}) = ", x, f"y (name = {y.name}) = ", y]
        xv, yv = _static(x), _static(y)
        if xv is not None and yv is not None:
            if not np.all(np_op(xv, yv)):
                raise errors.InvalidArgumentError(
                    None, None, f"{prefix}Condition x {what} y did not hold element-wise: x = {xv}, "
                    f"y = {yv}")
            return _cf().no_op(name=scope.rstrip("/") if scope else None)
        return _cf().Assert(_m().reduce_all(op(x, y)), data, summarize=summarize, name=scope)


def _binary_assert(what, op_name, np_op, default_name):
    def fn(x, y, data=None, summarize=None, message=None, name=None):
        return _compare(x, y, getattr(_m(), op_name), np_op, what, data, summarize, message, name,
                        default_name)
    fn.__name__ = fn.__qualname__ = default_name
    fn.__doc__ = f"""An op asserting ``x {what} y`` element-wise (TF1 `tf.{default_name}`).

    Args:
        x, y: Tensors (broadcast against each other).
        data: Tensors printed when the assertion fails (default: the message, x and y).
        summarize: how many entries of each tensor to print.
        message: a prefix for the error message.
        name: the op's name scope.

    Returns:
        The Assert op (a no-op when the condition is known to hold while building).

    Raises:
        InvalidArgumentError: both values are known while building and the condition is false.
    """
    return fn


assert_equal = _binary_assert("==", "equal", np.equal, "assert_equal")
assert_none_equal = _binary_assert("!=", "not_equal", np.not_equal, "assert_none_equal")
assert_less = _binary_assert("<", "less", np.less, "assert_less")
assert_less_equal = _binary_assert("<=", "less_equal", np.less_equal, "assert_less_equal")
assert_greater = _binary_assert(">", "greater", np.greater, "assert_greater")
assert_greater_equal = _binary_assert(">=", "greater_equal", np.greater_equal, "assert_greater_equal")


def _sign_assert(what, op_name, np_op, default_name):
    def fn(x, data=None, summarize=None, message=None, name=None):
        with _ops.name_scope(name, default_name, [x]) as scope:
            x = _ops.convert_to_tensor(x, name="x")
            zero = _ops.convert_to_tensor(0, dtype=x.dtype.base_dtype)
            if data is None:
                prefix = f"{message} " if message else ""
                data = [f"{prefix}Condition x {what} 0 did not hold element-wise:",
                        f"x (name = {x.name}) = ", x]
            return _compare(x, zero, getattr(_m(), op_name), np_op, f"{what} 0".split()[0], data,
                            summarize, message, scope, default_name)
    fn.__name__ = fn.__qualname__ = default_name
    fn.__doc__ = f"""An op asserting ``x {what} 0`` element-wise (TF1 `tf.{default_name}`).

    Returns:
        The Assert op (a no-op when it is known to hold while building).

    Raises:
        InvalidArgumentError: x is known while building and the condition is false.
    """
    return fn


assert_positive = _sign_assert(">", "greater", np.greater, "assert_positive")
assert_negative = _sign_assert("<", "less", np.less, "assert_negative")
assert_non_negative = _sign_assert(">=", "greater_equal", np.greater_equal, "assert_non_negative")
assert_non_positive = _sign_assert("<=", "less_equal", np.less_equal, "assert_non_positive")


def assert_near(x, y, rtol=None, atol=None, data=None, summarize=None, message=None, name=None):
    """An op asserting ``|x - y| <= atol + rtol * |y|`` element-wise (TF1 `tf.assert_near`).

    `rtol` and `atol` default to 10 times the float dtype's machine epsilon, as TF1.
    """
    m = _m()
    with _ops.name_scope(name, "assert_near", [x, y]) as scope:
        x = _ops.convert_to_tensor(x, name="x")
        y = _ops.convert_to_tensor(y, name="y", dtype=x.dtype.base_dtype)
        eps = float(np.finfo(x.dtype.base_dtype.as_numpy_dtype).eps) if x.dtype.is_floating else 0.0
        rtol = _ops.convert_to_tensor(10 * eps if rtol is None else rtol, dtype=x.dtype.base_dtype)
        atol = _ops.convert_to_tensor(10 * eps if atol is None else atol, dtype=x.dtype.base_dtype)
        tol = atol + rtol * m.abs(y)
        diff = m.abs(x - y)
        if data is None:
            prefix = f"{message} " if message else ""
            data = [f"{prefix}x and y not equal to tolerance rtol = ", rtol, ", atol = ", atol,
                    f"x (name = {x.name}) = ", x, f"y (name = {y.name}) = ", y]
        return _cf().Assert(m.reduce_all(m.less_equal(diff, tol)), data, summarize=summarize,
                            name=scope)


def _rank_check(x, ok, describe, data, summarize, message, name, default_name):
    """Static rank: ValueError or a no-op; unknown rank: an Assert on `kf.rank(x)`."""
    from kernflow.core.ops import array_ops
    with _ops.name_scope(name, default_name, [x]) as scope:
        x = _ops.convert_to_tensor(x, name="x")
        prefix = f"{message} " if message else ""
        if x.shape.rank is not None:
            if not ok(np.int32(x.shape.rank)):
                raise ValueError(f"{prefix}Tensor {x.name} must have {describe}. Received rank "
                                 f"{x.shape.rank}, shape {x.shape}")
            return _cf().no_op(name=scope.rstrip("/") if scope else None)
        r = array_ops.rank(x)
        if data is None:
            data = [f"{prefix}Tensor {x.name} must have {describe}. Received shape: ", array_ops.shape(x)]
        return _cf().Assert(ok(r), data, summarize=summarize, name=scope)


def assert_rank(x, rank, message=None, name=None):
    """An op asserting that `x` has rank `rank` (ValueError at once when the rank is static)."""
    m = _m()
    rank = int(rank)
    return _rank_check(x, lambda r: (r == rank) if isinstance(r, np.integer) else m.equal(r, rank),
                       f"rank {rank}", None, None, message, name, "assert_rank")


def assert_rank_at_least(x, rank, message=None, name=None):
    """An op asserting that `x` has rank `rank` or more."""
    m = _m()
    rank = int(rank)
    return _rank_check(x, lambda r: (r >= rank) if isinstance(r, np.integer) else m.greater_equal(r, rank),
                       f"rank at least {rank}", None, None, message, name, "assert_rank_at_least")


def assert_rank_in(x, ranks, message=None, name=None):
    """An op asserting that the rank of `x` is one of `ranks`."""
    m = _m()
    ranks = [int(r) for r in ranks]

    def ok(r):
        if isinstance(r, np.integer):
            return int(r) in ranks
        return m.reduce_any(m.equal(r, _ops.convert_to_tensor(ranks, dtype=_dtypes.int32)))
    return _rank_check(x, ok, f"rank in {ranks}", None, None, message, name, "assert_rank_in")


def assert_integer(x, message=None, name=None):
    """Raises TypeError unless `x` has an integer dtype; returns a no-op (TF1 `tf.assert_integer`)."""
    with _ops.name_scope(name, "assert_integer", [x]) as scope:
        x = _ops.convert_to_tensor(x, name="x")
        if not x.dtype.is_integer:
            prefix = f"{message} " if message else ""
            raise TypeError(f"{prefix}Expected integer type for {x.name}, got {x.dtype.name}")
        return _cf().no_op(name=scope.rstrip("/") if scope else None)


def assert_type(tensor, tf_type, message=None, name=None):
    """Raises TypeError unless `tensor`'s dtype is `tf_type`; returns a no-op."""
    with _ops.name_scope(name, "assert_type", [tensor]) as scope:
        tensor = _ops.convert_to_tensor(tensor, name="tensor")
        want = _dtypes.as_dtype(tf_type)
        if tensor.dtype.base_dtype != want.base_dtype:
            prefix = f"{message} " if message else ""
            raise TypeError(f"{prefix}{tensor.name} must be of type {want.name}; got "
                            f"{tensor.dtype.base_dtype.name}")
        return _cf().no_op(name=scope.rstrip("/") if scope else None)


def assert_scalar(tensor, name=None, message=None):
    """Returns `tensor` after checking that its static rank is 0 (ValueError otherwise)."""
    with _ops.name_scope(name, "assert_scalar", [tensor]):
        tensor = _ops.convert_to_tensor(tensor, name="tensor")
        if tensor.shape.rank != 0:
            prefix = f"{message} " if message else ""
            raise ValueError(f"{prefix}Expected scalar shape for {tensor.name}, saw shape: {tensor.shape}.")
        return tensor


def assert_same_float_dtype(tensors=None, dtype=None):
    """The common float dtype of `tensors` (and `dtype`), float32 when there is none.

    Raises:
        ValueError: the dtypes differ, or are not floating point.
    """
    result = _dtypes.as_dtype(dtype).base_dtype if dtype is not None else None
    for t in tensors or ():
        d = t.dtype.base_dtype
        if result is None:
            result = d
        elif d != result:
            raise ValueError(f"{t.name}, type={d.name}: expected type {result.name}")
    if result is None:
        return _dtypes.float32
    if not result.is_floating:
        raise ValueError(f"Expected floating point type, got {result.name}.")
    return result


def assert_proper_iterable(values):
    """Raises TypeError when `values` is a Tensor, an ndarray or a string (not a proper iterable)."""
    if isinstance(values, (_ops.Tensor, np.ndarray, str, bytes)) or hasattr(values, "_as_graph_element"):
        raise TypeError(f"Expected argument 'values' to be a 'proper' iterable.  Found: {type(values)}")
    if not hasattr(values, "__iter__"):
        raise TypeError(f"Expected argument 'values' to be iterable.  Found: {type(values)}")


def is_numeric_tensor(tensor):
    """True for a Tensor of a numeric dtype (not bool, string or resource)."""
    if not isinstance(tensor, _ops.Tensor):
        return False
    d = tensor.dtype.base_dtype
    return bool(d.is_floating or d.is_integer or d.is_complex)


def check_numerics(tensor, message, name=None):
    """`tensor`, after checking at run time that it holds no NaN or Inf (TF1 `tf.check_numerics`).

    Raises (at run time):
        InvalidArgumentError: the tensor has a NaN or an Inf; the error carries `message`.
    """
    from kernflow.core.ops import array_ops, math_ops_special
    m = _m()
    with _ops.name_scope(name, "CheckNumerics", [tensor]) as scope:
        tensor = _ops.convert_to_tensor(tensor, name="tensor")
        finite = m.reduce_all(math_ops_special.is_finite(tensor))
        check = _cf().Assert(finite, [f"{message} : Tensor had NaN or Inf values"], name="check")
        with _ops.control_dependencies([check]):
            return array_ops.identity(tensor, name=scope.rstrip("/") if scope else None)
