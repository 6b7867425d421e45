"""Reductions (Sum, Mean, Max, ...), ArgMax/ArgMin and scans (Cumsum, Cumprod).

OpDefs and wrappers (re-exported by `kernflow.core.ops.math_ops`); CPU kernels are in
kernflow.kernels.cpu.math.
"""

from __future__ import annotations

import numpy as np

from kernflow.core.framework import dtypes as _dtypes
from kernflow.core.framework import op_def_registry
from kernflow.core.framework import ops as _ops
from kernflow.core.framework import tensor_shape as _ts
from kernflow.core.framework import tensor_util
from kernflow.core.framework.op_def_library import apply_op
from kernflow.core.framework.op_def_registry import register_op
from kernflow.core.ops import math_ops_elementwise as _ew

__all__ = ["reduce_sum", "reduce_mean", "reduce_max", "reduce_min", "reduce_prod", "reduce_any",
           "reduce_all", "reduce_logsumexp", "count_nonzero", "argmax", "argmin", "arg_max",
           "arg_min", "cumsum", "cumprod"]


def _check_axis_rank(op, i, max_rank, what):
    r = op.inputs[i].shape.rank
    if r is not None and r > max_rank:
        raise ValueError(f"Shape must be at most rank {max_rank} but is rank {r}" if max_rank else
                         f"Shape must be rank 0 but is rank {r}: '{what}' must be a scalar")


def _reduction_shape(op):
    _check_axis_rank(op, 1, 1, "reduction_indices")
    x = op.inputs[0].shape
    keep = op.get_attr("keep_dims")
    if x.rank is None:
        return [_ts.TensorShape(None)]
    axes = tensor_util.constant_value(op.inputs[1])
    if axes is None:
        if keep:
            return [_ts.TensorShape([None] * x.rank)]
        return [_ts.TensorShape([] if x.rank == 0 else None)]
    rank, dims = x.rank, set()
    for a in np.reshape(axes, -1).tolist():
        if not -rank <= a < rank:
            raise ValueError(f"Invalid reduction dimension {a} for input with {rank} dimensions")
        dims.add(a % rank)
    if keep:
        return [_ts.TensorShape([1 if i in dims else d for i, d in enumerate(x.dim_values)])]
    return [_ts.TensorShape([d for i, d in enumerate(x.dim_values) if i not in dims])]


def _arg_shape(op):
    _check_axis_rank(op, 1, 0, "dimension")
    x = op.inputs[0].shape
    if x.rank is None:
        return [_ts.TensorShape(None)]
    ax = tensor_util.constant_value(op.inputs[1])
    if ax is None:
        return [_ts.TensorShape([None] * (x.rank - 1)) if x.rank else _ts.TensorShape(None)]
    ax = int(ax)
    if not -x.rank <= ax < x.rank:
        raise ValueError(f"Expected dimension in the range [{-x.rank}, {x.rank}), but got {ax}")
    ax %= x.rank
    return [_ts.TensorShape(x.dim_values[:ax] + x.dim_values[ax + 1:])]


def _scan_shape(op):
    _check_axis_rank(op, 1, 0, "axis")
    x = op.inputs[0].shape
    ax = tensor_util.constant_value(op.inputs[1])
    if x.rank is not None and ax is not None and not -x.rank <= int(ax) < x.rank:
        raise ValueError(f"Expected scan axis in the range [{-x.rank}, {x.rank}), but got {int(ax)}")
    return [x]


_REDUCTIONS = [  # (op type, input type spec, what is reduced)
    ("Sum", "T: numbertype", "the sum"),
    ("Mean", "T: numbertype", "the mean (integer tensors divide truncating toward zero)"),
    ("Prod", "T: numbertype", "the product"),
    ("Max", "T: realnumbertype", "the maximum (the lowest value of T for empty reductions)"),
    ("Min", "T: realnumbertype", "the minimum (the highest value of T for empty reductions)"),
]
for _name, _t, _what in _REDUCTIONS:
    register_op(_name, inputs=["input: T", "reduction_indices: Tidx"], outputs=["output: T"],
                attrs=["keep_dims: bool = false", _t, "Tidx: {int32, int64} = int32"],
                shape_fn=_reduction_shape,
                doc=f"Computes {_what} of input along the axes in reduction_indices; those axes are "
                    f"dropped unless keep_dims keeps them with size 1.")
for _name, _what in (("Any", "logical OR"), ("All", "logical AND")):
    register_op(_name, inputs=["input: bool", "reduction_indices: Tidx"], outputs=["output: bool"],
                attrs=["keep_dims: bool = false", "Tidx: {int32, int64} = int32"],
                shape_fn=_reduction_shape,
                doc=f"Computes the {_what} of input along the axes in reduction_indices; those axes "
                    f"are dropped unless keep_dims keeps them with size 1.")
for _name, _what in (("ArgMax", "largest"), ("ArgMin", "smallest")):
    register_op(_name, inputs=["input: T", "dimension: Tidx"], outputs=["output: output_type"],
                attrs=["T: {numbertype, bool}", "Tidx: {int32, int64} = int32",
                       "output_type: {int32, int64} = int64"],
                shape_fn=_arg_shape,
                doc=f"Returns the index of the {_what} value along axis `dimension` (the first on "
                    f"ties); that axis is dropped.")
for _name, _what in (("Cumsum", "sum"), ("Cumprod", "product")):
    register_op(_name, inputs=["x: T", "axis: Tidx"], outputs=["out: T"],
                attrs=["exclusive: bool = false", "reverse: bool = false", "T: numbertype",
                       "Tidx: {int32, int64} = int32"],
                shape_fn=_scan_shape,
                doc=f"Cumulative {_what} of x along `axis`; `exclusive` leaves out the element "
                    f"itself, `reverse` accumulates from the end.")


# ---------------------------------------------------------------------------- wrappers
def _deprecated_lookup(new_name, new_value, old_name, old_value):
    if new_value is not None and old_value is not None:
        raise ValueError(f"Cannot specify both '{new_name}' and '{old_name}'")
    return new_value if new_value is not None else old_value


def _reduction_dims(x, axis):
    """The axis tensor of a reduction: `axis` itself, or every axis of x when None."""
    if axis is not None:
        if not _ew._is_tensorlike(axis) and np.size(axis) == 0:
            return np.zeros([0], np.int32)  # an empty list would otherwise become float32
        return axis
    if x.shape.rank is not None:
        from kernflow.core.ops import array_ops
        return array_ops.constant(np.arange(x.shape.rank, dtype=np.int32))
    rank = apply_op("Rank", [x]).outputs[0]
    return apply_op("Range", [0, rank, 1], name="range").outputs[0]


def _may_reduce_to_scalar(keepdims, axis, output):
    if not keepdims and axis is None and not output.shape.is_fully_defined():
        output.set_shape([])
    return output


def _reducer(op_type, py_name, what):
    def wrapper(input_tensor, axis=None, keepdims=None, name=None, reduction_indices=None,
                keep_dims=None):
        axis = _deprecated_lookup("axis", axis, "reduction_indices", reduction_indices)
        keepdims = _deprecated_lookup("keepdims", keepdims, "keep_dims", keep_dims)
        keepdims = bool(keepdims) if keepdims is not None else False
        x = _ops.convert_to_tensor(input_tensor)
        out = apply_op(op_type, [x, _reduction_dims(x, axis)], {"keep_dims": keepdims},
                       name=name).outputs[0]
        return _may_reduce_to_scalar(keepdims, axis, out)
    wrapper.__name__ = wrapper.__qualname__ = py_name
    wrapper.__doc__ = f"""Computes {what} of elements across dimensions of a tensor (op `{op_type}`).

    Args:
        input_tensor: the tensor to reduce.
        axis: the dimensions to reduce (an int, a list, or an int32/int64 tensor; negative values
            count from the end). None reduces all dimensions.
        keepdims: keep reduced dimensions with length 1.
        name: optional op name (default "{op_type}").
        reduction_indices: deprecated alias of `axis`.
        keep_dims: deprecated alias of `keepdims`.

    Returns:
        The reduced Tensor, of input_tensor's dtype.

    Raises:
        ValueError: if both an argument and its deprecated alias are given, or an axis is out of
            range.
    """
    return wrapper


reduce_sum = _reducer("Sum", "reduce_sum", "the sum")
reduce_mean = _reducer("Mean", "reduce_mean", "the mean (truncated for integer tensors)")
reduce_max = _reducer("Max", "reduce_max", "the maximum")
reduce_min = _reducer("Min", "reduce_min", "the minimum")
reduce_prod = _reducer("Prod", "reduce_prod", "the product")
reduce_any = _reducer("Any", "reduce_any", "the logical OR")
reduce_all = _reducer("All", "reduce_all", "the logical AND")


def reduce_logsumexp(input_tensor, axis=None, keepdims=None, name=None, reduction_indices=None,
                     keep_dims=None):
    """Computes log(sum(exp(input_tensor))) across dimensions, without overflow.

    The largest element is subtracted before exponentiating (when it is finite).

    Args:
        input_tensor: a floating Tensor.
        axis: the dimensions to reduce; None reduces all.
        keepdims: keep reduced dimensions with length 1.
        name: optional name scope (default "ReduceLogSumExp").
        reduction_indices: deprecated alias of `axis`.
        keep_dims: deprecated alias of `keepdims`.

    Returns:
        The reduced Tensor.
    """
    axis = _deprecated_lookup("axis", axis, "reduction_indices", reduction_indices)
    keepdims = _deprecated_lookup("keepdims", keepdims, "keep_dims", keep_dims)
    keepdims = bool(keepdims) if keepdims is not None else False
    with _ops.name_scope(name, "ReduceLogSumExp", [input_tensor]) as name:
        x = _ops.convert_to_tensor(input_tensor, name="input_tensor")

        def finite_max(keep):
            raw = reduce_max(x, axis, keepdims=keep)
            # |max| < inf is false for +-inf and nan: shift by 0 then.
            m = _ew.where_v2(_ew.less(_ew.abs(raw), np.inf), raw, 0)
            if op_def_registry.lookup("StopGradient") is not None:
                m = apply_op("StopGradient", [m]).outputs[0]
            return m
        shift = finite_max(True)
        total = reduce_sum(_ew.exp(_ew.subtract(x, shift)), axis, keepdims=keepdims)
        result = _ew.add(_ew.log(total), shift if keepdims else finite_max(False), name=name)
        return _may_reduce_to_scalar(keepdims, axis, result)


def count_nonzero(input_tensor=None, axis=None, keepdims=None, dtype=_dtypes.int64, name=None,
                  reduction_indices=None, keep_dims=None, input=None):  # noqa: A002 - TF's name
    """Counts the nonzero (true, non-empty) elements across dimensions of a tensor.

    Args:
        input_tensor: the tensor (numeric, bool or string).
        axis: the dimensions to reduce; None reduces all.
        keepdims: keep reduced dimensions with length 1.
        dtype: the output type (default int64).
        name: optional name scope (default "count_nonzero").
        reduction_indices: deprecated alias of `axis`.
        keep_dims: deprecated alias of `keepdims`.
        input: deprecated alias of `input_tensor`.

    Returns:
        A Tensor of `dtype` with the counts.
    """
    input_tensor = _deprecated_lookup("input", input, "input_tensor", input_tensor)
    axis = _deprecated_lookup("axis", axis, "reduction_indices", reduction_indices)
    keepdims = _deprecated_lookup("keepdims", keepdims, "keep_dims", keep_dims)
    with _ops.name_scope(name, "count_nonzero", [input_tensor]):
        x = _ops.convert_to_tensor(input_tensor, name="input_tensor")
        zero = np.zeros([], dtype=x.dtype.base_dtype.as_numpy_dtype)
        if x.dtype.base_dtype == _dtypes.string:
            zero = b""
        nonzero = _ew.cast(_ew.not_equal(x, _ops.convert_to_tensor(zero, dtype=x.dtype.base_dtype,
                                                                   name="zeros")), _dtypes.int64)
        return _ew.cast(reduce_sum(nonzero, axis=axis, keepdims=keepdims), dtype=dtype)


def _arg(op_type, py_name, what):
    def wrapper(input, axis=None, name=None, dimension=None,  # noqa: A002 - TF's name
                output_type=_dtypes.int64):
        axis = _deprecated_lookup("axis", axis, "dimension", dimension)
        if axis is None:
            axis = 0
        return apply_op(op_type, [input, axis], {"output_type": output_type}, name=name).outputs[0]
    wrapper.__name__ = wrapper.__qualname__ = py_name
    wrapper.__doc__ = f"""Returns the index of the {what} value across an axis (op `{op_type}`).

    Ties give the first index.

    Args:
        input: a numeric Tensor.
        axis: the axis to reduce (default 0); negative values count from the end.
        name: optional op name (default "{op_type}").
        dimension: deprecated alias of `axis`.
        output_type: int32 or int64 (default).

    Returns:
        A Tensor of `output_type` with that axis removed.
    """
    return wrapper


argmax = _arg("ArgMax", "argmax", "largest")
argmin = _arg("ArgMin", "argmin", "smallest")


def arg_max(input, dimension, output_type=_dtypes.int64, name=None):  # noqa: A002
    """Deprecated TF1 spelling of `argmax(input, dimension)`."""
    return argmax(input, dimension, name=name, output_type=output_type)


def arg_min(input, dimension, output_type=_dtypes.int64, name=None):  # noqa: A002
    """Deprecated TF1 spelling of `argmin(input, dimension)`."""
    return argmin(input, dimension, name=name, output_type=output_type)


def _scan(op_type, py_name, what):
    def wrapper(x, axis=0, exclusive=False, reverse=False, name=None):
        with _ops.name_scope(name, op_type, [x]) as name:
            x = _ops.convert_to_tensor(x, name="x")
            return apply_op(op_type, [x, axis], {"exclusive": exclusive, "reverse": reverse},
                            name=name).outputs[0]
    wrapper.__name__ = wrapper.__qualname__ = py_name
    wrapper.__doc__ = f"""Computes the cumulative {what} of x along `axis` (op `{op_type}`).

    Args:
        x: a numeric Tensor.
        axis: a scalar axis (default 0); negative values count from the end.
        exclusive: leave each element out of its own result ([a, b, c] -> [id, a, a.b]).
        reverse: accumulate from the end of the axis.
        name: optional op name (default "{op_type}").

    Returns:
        A Tensor of x's dtype and shape.
    """
    return wrapper


cumsum = _scan("Cumsum", "cumsum", "sum")
cumprod = _scan("Cumprod", "cumprod", "product")
