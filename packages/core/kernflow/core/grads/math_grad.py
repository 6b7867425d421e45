"""Gradients of the math ops (kernflow.core.ops.math_ops), with TF1's formulas.

Binary elementwise ops broadcast, so the gradient of each input is the incoming gradient summed
over the axes that input was broadcast along. When the shapes make those axes known at graph
construction (fully defined shapes, or e.g. `[None, 3] + [3]`), the sums use constant axes and an
input of the output's shape gets the gradient itself, with no op at all; otherwise the axes come
from a `BroadcastGradientArgs` op at run time.
"""

from __future__ import annotations

import numpy as np

from kernflow.core.framework import dtypes as _dtypes
from kernflow.core.framework import ops as _ops
from kernflow.core.framework import tensor_shape as _ts
from kernflow.core.framework import tensor_util
from kernflow.core.framework.gradient_registry import NotDifferentiable, RegisterGradient
from kernflow.core.framework.indexed_slices import IndexedSlices
from kernflow.core.framework.op_def_library import apply_op
from kernflow.core.ops import array_ops
from kernflow.core.ops import math_ops

_FLOAT_TYPES = (_dtypes.float16, _dtypes.float32, _dtypes.float64, _dtypes.complex64,
                _dtypes.complex128)


def _dense(grad):
    return _ops.convert_to_tensor(grad) if isinstance(grad, IndexedSlices) else grad


# ---------------------------------------------------------------------------- broadcasting
def _static_axes(t_shape, other_shapes):
    """The axes to sum a broadcast gradient over to get back to `t_shape`, when known statically.

    Args:
        t_shape: the TensorShape of the input receiving the gradient.
        other_shapes: the TensorShapes of the op's other broadcast inputs.

    Returns:
        (axes, lead): sorted axes of the broadcast shape and the number of leading axes `t` lacks,
        or None when some axis depends on run-time sizes (a dim of t that is unknown while
        another input's is not known to be 1).
    """
    if t_shape.rank is None or any(s.rank is None for s in other_shapes):
        return None
    n = max([t_shape.rank] + [s.rank for s in other_shapes])
    lead = n - t_shape.rank
    axes = list(range(lead))
    for i, a in enumerate(t_shape.dim_values):
        k = lead + i
        others = [s.dim_values[k - (n - s.rank)] for s in other_shapes if k >= n - s.rank]
        if a == 1:
            # Summing over an axis of length 1 is harmless, so an unknown dim elsewhere is fine.
            if any(b != 1 for b in others):
                axes.append(k)
        elif a is None and any(b != 1 for b in others):
            return None
    return axes, lead


def _sum_static(g, t, axes_lead):
    """Sums g over the static axes of `_static_axes` so that it has t's shape."""
    axes, lead = axes_lead
    if not axes:
        return g
    if all(a < lead for a in axes):
        return math_ops.reduce_sum(g, axes)
    if lead == 0:
        return math_ops.reduce_sum(g, axes, keepdims=True)
    return array_ops.reshape(math_ops.reduce_sum(g, axes), array_ops.shape(t))


def _sum_dynamic(g, axes, shape):
    return array_ops.reshape(math_ops.reduce_sum(g, axes), shape)


def _reduce_pair(x, y, gx, gy, batch_shapes=None):
    """Sums gx and gy (of the broadcast shape of x and y) back to the shapes of x and y.

    `batch_shapes`, the static batch shapes of x and y, makes only those dims broadcast
    (BatchMatMulV2). Either gradient may be None (left None).
    """
    x_shape, y_shape = batch_shapes if batch_shapes is not None else (x.shape, y.shape)
    ax = _static_axes(x_shape, [y_shape]) if gx is not None else None
    ay = _static_axes(y_shape, [x_shape]) if gy is not None else None
    if (gx is not None and ax is None) or (gy is not None and ay is None):
        sx, sy = array_ops.shape(x), array_ops.shape(y)
        if batch_shapes is not None:
            bx, by = sx[:-2], sy[:-2]
        else:
            bx, by = sx, sy
        rx, ry = array_ops.broadcast_gradient_args(bx, by)
        if gx is not None and ax is None:
            gx = _sum_dynamic(gx, rx, sx)
        if gy is not None and ay is None:
            gy = _sum_dynamic(gy, ry, sy)
    if ax is not None:
        gx = _sum_static(gx, x, ax)
    if ay is not None:
        gy = _sum_static(gy, y, ay)
    return gx, gy


def _reduce_to(g, t, others):
    """Sums g (of the broadcast shape of t and `others`) back to t's shape."""
    axes = _static_axes(t.shape, [o.shape for o in others])
    if axes is not None:
        return _sum_static(g, t, axes)
    st = array_ops.shape(t)
    rt, _ = array_ops.broadcast_gradient_args(st, array_ops.shape(g))
    return _sum_dynamic(g, rt, st)


def _fully_equal(x, y):
    return x.shape.is_fully_defined() and y.shape.is_fully_defined() and \
        x.shape.as_list() == y.shape.as_list()


# ---------------------------------------------------------------------------- binary arithmetic
@RegisterGradient("AddV2")
@RegisterGradient("Add")
def _add_grad(op, grad):
    x, y = op.inputs
    if isinstance(grad, IndexedSlices) and _fully_equal(x, y):
        return [grad, grad]
    grad = _dense(grad)
    return list(_reduce_pair(x, y, grad, grad))


@RegisterGradient("Sub")
def _sub_grad(op, grad):
    x, y = op.inputs
    if isinstance(grad, IndexedSlices) and _fully_equal(x, y):
        return [grad, -grad]
    grad = _dense(grad)
    gx, gy = _reduce_pair(x, y, grad, grad)
    return [gx, math_ops.negative(gy)]  # negated after the sum: on the smaller tensor


@RegisterGradient("Mul")
def _mul_grad(op, grad):
    grad = _dense(grad)
    x, y = op.inputs
    return list(_reduce_pair(x, y, grad * math_ops.conj(y), math_ops.conj(x) * grad))


def _div_grad(op, grad):
    grad = _dense(grad)
    x, y = op.inputs
    cx, cy = math_ops.conj(x), math_ops.conj(y)
    gx = math_ops.realdiv(grad, cy)
    gy = grad * math_ops.realdiv(math_ops.realdiv(-cx, cy), cy)
    return list(_reduce_pair(x, y, gx, gy))


RegisterGradient("RealDiv")(_div_grad)
RegisterGradient("Div")(_div_grad)


@RegisterGradient("FloorDiv")
def _floor_div_grad(op, grad):
    return [None, None]


@RegisterGradient("FloorMod")
def _floor_mod_grad(op, grad):
    grad = _dense(grad)
    x, y = op.inputs
    floor_xy = math_ops.floor_div(math_ops.conj(x), math_ops.conj(y))
    return list(_reduce_pair(x, y, grad, grad * math_ops.negative(floor_xy)))


@RegisterGradient("Pow")
def _pow_grad(op, grad):
    """dx = grad * y * x^(y - 1); dy = grad * z * log(x), taken as 0 where x <= 0."""
    grad = _dense(grad)
    x, y = op.inputs
    z = math_ops.conj(op.outputs[0])
    cx, cy = math_ops.conj(x), math_ops.conj(y)
    gx = grad * (cy * math_ops.pow(cx, cy - 1))
    mask = math_ops.not_equal(cx, 0) if x.dtype.is_complex else math_ops.greater(cx, 0)
    safe_x = math_ops.where_v2(mask, cx, array_ops.ones([], cx.dtype.base_dtype))
    log_x = math_ops.where_v2(mask, math_ops.log(safe_x), array_ops.zeros([], cx.dtype.base_dtype))
    return list(_reduce_pair(x, y, gx, grad * z * log_x))


def _maximum_minimum_grad(op, grad, selector):
    """The gradient goes to x where selector(x, y) (ties included), else to y."""
    grad = _dense(grad)
    x, y = op.inputs
    zero = array_ops.zeros([], grad.dtype.base_dtype)
    xmask = selector(x, y)
    return list(_reduce_pair(x, y, math_ops.where_v2(xmask, grad, zero),
                             math_ops.where_v2(xmask, zero, grad)))


@RegisterGradient("Maximum")
def _maximum_grad(op, grad):
    return _maximum_minimum_grad(op, grad, math_ops.greater_equal)


@RegisterGradient("Minimum")
def _minimum_grad(op, grad):
    return _maximum_minimum_grad(op, grad, math_ops.less_equal)


@RegisterGradient("SquaredDifference")
def _squared_difference_grad(op, grad):
    grad = _dense(grad)
    x, y = op.inputs
    x_grad = math_ops.scalar_mul(2.0, grad) * (x - y)
    gx, gy = _reduce_pair(x, y, x_grad, x_grad)
    return [gx, math_ops.negative(gy)]


@RegisterGradient("AddN")
def _add_n_grad(op, grad):
    return [grad] * len(op.inputs)


# ---------------------------------------------------------------------------- unary
def _unary_grad_op(op_type, y, dy):
    return apply_op(op_type, [y, dy]).outputs[0]


@RegisterGradient("Neg")
def _neg_grad(op, grad):
    return [-grad]


@RegisterGradient("Abs")
def _abs_grad(op, grad):
    return [_dense(grad) * math_ops.sign(op.inputs[0])]


@RegisterGradient("ComplexAbs")
def _complex_abs_grad(op, grad):
    """grad * x / |x| (0 where x == 0), as a complex gradient."""
    x, y = op.inputs[0], op.outputs[0]
    safe_y = math_ops.where_v2(math_ops.equal(y, 0), array_ops.ones([], y.dtype.base_dtype), y)
    return [math_ops.cast(math_ops.realdiv(_dense(grad), safe_y), x.dtype.base_dtype) * x]


@RegisterGradient("Square")
def _square_grad(op, grad):
    x = math_ops.conj(op.inputs[0])
    return [math_ops.multiply(_dense(grad), math_ops.multiply(x, array_ops.constant(
        2, dtype=x.dtype.base_dtype)))]


@RegisterGradient("Sqrt")
def _sqrt_grad(op, grad):
    return [_unary_grad_op("SqrtGrad", op.outputs[0], grad)]


@RegisterGradient("Rsqrt")
def _rsqrt_grad(op, grad):
    return [_unary_grad_op("RsqrtGrad", op.outputs[0], grad)]


@RegisterGradient("Reciprocal")
def _reciprocal_grad(op, grad):
    return [_unary_grad_op("ReciprocalGrad", op.outputs[0], grad)]


@RegisterGradient("Tanh")
def _tanh_grad(op, grad):
    return [_unary_grad_op("TanhGrad", op.outputs[0], grad)]


@RegisterGradient("Sigmoid")
def _sigmoid_grad(op, grad):
    return [_unary_grad_op("SigmoidGrad", op.outputs[0], grad)]


@RegisterGradient("Exp")
def _exp_grad(op, grad):
    return [_dense(grad) * math_ops.conj(op.outputs[0])]


@RegisterGradient("Expm1")
def _expm1_grad(op, grad):
    return [_dense(grad) * math_ops.exp(math_ops.conj(op.inputs[0]))]


@RegisterGradient("Log")
def _log_grad(op, grad):
    return [_dense(grad) * math_ops.reciprocal(math_ops.conj(op.inputs[0]))]


@RegisterGradient("Log1p")
def _log1p_grad(op, grad):
    return [_dense(grad) * math_ops.reciprocal(1 + math_ops.conj(op.inputs[0]))]


@RegisterGradient("Sin")
def _sin_grad(op, grad):
    return [_dense(grad) * math_ops.cos(math_ops.conj(op.inputs[0]))]


@RegisterGradient("Cos")
def _cos_grad(op, grad):
    return [-_dense(grad) * math_ops.sin(math_ops.conj(op.inputs[0]))]


@RegisterGradient("Sign")
def _sign_grad(op, grad):
    return [array_ops.zeros_like(op.inputs[0])]


@RegisterGradient("Floor")
@RegisterGradient("Ceil")
@RegisterGradient("Round")
def _piecewise_constant_grad(op, grad):
    return [None]


@RegisterGradient("Conj")
def _conj_grad(op, grad):
    if isinstance(grad, IndexedSlices):
        return [IndexedSlices(math_ops.conj(grad.values), grad.indices, grad.dense_shape)]
    return [math_ops.conj(grad)]


@RegisterGradient("Cast")
def _cast_grad(op, grad):
    src = op.inputs[0].dtype.base_dtype
    if src not in _FLOAT_TYPES or grad.dtype.base_dtype not in _FLOAT_TYPES:
        return [None]
    if isinstance(grad, IndexedSlices):
        return [IndexedSlices(math_ops.cast(grad.values, src), grad.indices, grad.dense_shape)]
    return [math_ops.cast(grad, src)]


# The gradients of the gradient ops (second derivatives), in terms of their inputs (y, dy).
@RegisterGradient("TanhGrad")
def _tanh_grad_grad(op, grad):
    a, b = math_ops.conj(op.inputs[0]), math_ops.conj(op.inputs[1])
    return [grad * -2.0 * b * a, _unary_grad_op("TanhGrad", a, grad)]


@RegisterGradient("SigmoidGrad")
def _sigmoid_grad_grad(op, grad):
    a, b = math_ops.conj(op.inputs[0]), math_ops.conj(op.inputs[1])
    gb = grad * b
    return [gb - 2.0 * gb * a, _unary_grad_op("SigmoidGrad", a, grad)]


@RegisterGradient("SqrtGrad")
def _sqrt_grad_grad(op, grad):
    a, y = op.inputs[0], op.outputs[0]  # y = 0.5 * b / conj(a)
    ga = grad / a
    return [-math_ops.conj(ga) * y, 0.5 * ga]


@RegisterGradient("RsqrtGrad")
def _rsqrt_grad_grad(op, grad):
    a, b = op.inputs  # a = x^(-1/2); b: the gradient of a
    ca, cg = math_ops.conj(a), math_ops.conj(grad)
    return [-1.5 * cg * b * math_ops.square(ca), _unary_grad_op("RsqrtGrad", ca, grad)]


@RegisterGradient("ReciprocalGrad")
def _reciprocal_grad_grad(op, grad):
    a, b = op.inputs
    ca, cg = math_ops.conj(a), math_ops.conj(grad)
    return [cg * -2.0 * b * ca, _unary_grad_op("ReciprocalGrad", ca, grad)]


# ---------------------------------------------------------------------------- selection, clipping
@RegisterGradient("Select")
def _select_grad(op, grad):
    c, x = op.inputs[0], op.inputs[1]
    zeros = array_ops.zeros_like(x)
    return [None, math_ops.where(c, grad, zeros), math_ops.where(c, zeros, grad)]


@RegisterGradient("SelectV2")
def _select_v2_grad(op, grad):
    grad = _dense(grad)
    c, x, y = op.inputs
    zero = array_ops.zeros([], grad.dtype.base_dtype)
    gx = _reduce_to(math_ops.where_v2(c, grad, zero), x, [c, y])
    gy = _reduce_to(math_ops.where_v2(c, zero, grad), y, [c, x])
    return [None, gx, gy]


@RegisterGradient("ClipByValue")
def _clip_by_value_grad(op, grad):
    grad = _dense(grad)
    x, lo, hi = op.inputs
    zero = array_ops.zeros([], grad.dtype.base_dtype)
    below, above = math_ops.less(x, lo), math_ops.greater(x, hi)
    gx = math_ops.where_v2(math_ops.logical_or(below, above), zero, grad)
    glo = _reduce_to(math_ops.where_v2(below, grad, zero), lo, [x])
    ghi = _reduce_to(math_ops.where_v2(above, grad, zero), hi, [x])
    return [gx, glo, ghi]


# ---------------------------------------------------------------------------- matmul
@RegisterGradient("MatMul")
def _matmul_grad(op, grad):
    grad = _dense(grad)
    t_a, t_b = op.get_attr("transpose_a"), op.get_attr("transpose_b")
    a, b = math_ops.conj(op.inputs[0]), math_ops.conj(op.inputs[1])
    mm = math_ops.matmul
    if not t_a and not t_b:
        return [mm(grad, b, transpose_b=True), mm(a, grad, transpose_a=True)]
    if not t_a:
        return [mm(grad, b), mm(grad, a, transpose_a=True)]
    if not t_b:
        return [mm(b, grad, transpose_b=True), mm(a, grad)]
    return [mm(b, grad, transpose_a=True, transpose_b=True),
            mm(grad, a, transpose_a=True, transpose_b=True)]


@RegisterGradient("BatchMatMulV2")
def _batch_matmul_grad(op, grad):
    grad = _dense(grad)
    x, y = op.inputs
    adj_x, adj_y = op.get_attr("adj_x"), op.get_attr("adj_y")
    mm = math_ops.matmul
    if not adj_x:
        if not adj_y:
            gx, gy = mm(grad, y, adjoint_b=True), mm(x, grad, adjoint_a=True)
        else:
            gx, gy = mm(grad, y), mm(grad, x, adjoint_a=True)
    elif not adj_y:
        gx, gy = mm(y, grad, adjoint_b=True), mm(x, grad)
    else:
        gx, gy = mm(y, grad, adjoint_a=True, adjoint_b=True), mm(grad, x, adjoint_a=True, adjoint_b=True)
    sx, sy = x.shape, y.shape
    if sx.rank is not None and sy.rank is not None:
        if sx.rank <= 2 and sy.rank <= 2:
            return [gx, gy]
        bx, by = _ts.TensorShape(sx.dim_values[:-2]), _ts.TensorShape(sy.dim_values[:-2])
    else:
        bx = by = _ts.TensorShape(None)
    return list(_reduce_pair(x, y, gx, gy, batch_shapes=(bx, by)))


# ---------------------------------------------------------------------------- reductions
def _static_reduction_axes(op):
    """The sorted, non-negative reduced axes of a reduction op, or None if not known statically."""
    rank = op.inputs[0].shape.rank
    axes = tensor_util.constant_value(op.inputs[1])
    if rank is None or axes is None:
        return None
    return sorted({int(a) % rank for a in np.reshape(axes, -1).tolist()}) if rank else []


def _reduced_shape(input_shape, axes):
    """Dynamic: input_shape with 1 at `axes` (the keep_dims shape of a reduction)."""
    input_shape = math_ops.cast(input_shape, _dtypes.int32)
    axes = array_ops.reshape(math_ops.cast(axes, _dtypes.int32), [-1])
    rank = array_ops.size(input_shape)
    axes = math_ops.floormod(axes + rank, math_ops.maximum(rank, 1))
    return array_ops.dynamic_stitch([array_ops.range(rank), axes],
                                    [input_shape, array_ops.ones_like(axes)])


def _keep_dims(t, x, axes):
    """t, a reduction of x over static `axes` without keep_dims, shaped to broadcast against x."""
    if axes == list(range(len(axes))):  # leading axes: broadcasting aligns the rest already
        return t
    kept = [1 if i in axes else d for i, d in enumerate(x.shape.dim_values)]
    unknown = kept.count(None)
    if unknown <= 1:
        return array_ops.reshape(t, [-1 if d is None else d for d in kept])
    for a in axes:
        t = array_ops.expand_dims(t, a)
    return t


def _broadcast_to_input(op, grad):
    """The gradient of a Sum: grad copied along the reduced axes to the input's shape."""
    grad = _dense(grad)
    x = op.inputs[0]
    keep = op.get_attr("keep_dims")
    axes = _static_reduction_axes(op)
    if axes is not None:
        if not axes:
            return grad
        g = grad if keep else _keep_dims(grad, x, axes)
        if x.shape.is_fully_defined():
            if g.shape.is_fully_defined() and g.shape.as_list() == x.shape.as_list():
                return g
            return array_ops.broadcast_to(g, x.shape.as_list())
        return array_ops.broadcast_to(g, array_ops.shape(x))
    input_shape = array_ops.shape(x)
    if not keep:
        grad = array_ops.reshape(grad, _reduced_shape(input_shape, op.inputs[1]))
    return array_ops.broadcast_to(grad, input_shape)


@RegisterGradient("Sum")
def _sum_grad(op, grad):
    return [_broadcast_to_input(op, grad), None]


@RegisterGradient("Mean")
def _mean_grad(op, grad):
    grad = _dense(grad)
    x, y = op.inputs[0], op.outputs[0]
    factor = None
    if x.shape.is_fully_defined() and y.shape.is_fully_defined():
        factor = x.shape.num_elements() // max(y.shape.num_elements(), 1)
    else:
        axes = _static_reduction_axes(op)
        if axes is not None and all(x.shape.dim_values[a] is not None for a in axes):
            factor = _static_prod([x.shape.dim_values[a] for a in axes])  # e.g. axis 1 of [None, 10]
    if factor is None:
        n_y = y.shape.num_elements() if y.shape.is_fully_defined() else None
        if n_y is not None and n_y <= 1:   # a full reduction: the factor is size(x)
            factor = array_ops.size(x)
        elif n_y is not None:
            factor = math_ops.floordiv(array_ops.size(x), n_y)
        else:
            factor = math_ops.floordiv(array_ops.size(x), math_ops.maximum(array_ops.size(y), 1))
        grad = math_ops.realdiv(grad, math_ops.cast(factor, grad.dtype.base_dtype))
    elif factor != 1:
        grad = math_ops.realdiv(grad, array_ops.constant(factor, dtype=grad.dtype.base_dtype))
    # Scaling before the copy along the reduced axes touches fewer elements.
    return [_broadcast_to_input(op, grad), None]


def _min_or_max_grad(op, grad):
    """The gradient goes to the elements equal to the result, split evenly among ties."""
    grad = _dense(grad)
    x, y = op.inputs[0], op.outputs[0]
    keep = op.get_attr("keep_dims")
    axes = _static_reduction_axes(op)
    if axes is not None:
        if not keep:
            y, grad = _keep_dims(y, x, axes), _keep_dims(grad, x, axes)
        indicators = math_ops.cast(math_ops.equal(y, x), grad.dtype.base_dtype)
        num_selected = math_ops.reduce_sum(indicators, axes, keepdims=True)
    else:
        if not keep:
            kept = _reduced_shape(array_ops.shape(x), op.inputs[1])
            y, grad = array_ops.reshape(y, kept), array_ops.reshape(grad, kept)
        else:
            kept = array_ops.shape(y)
        indicators = math_ops.cast(math_ops.equal(y, x), grad.dtype.base_dtype)
        num_selected = array_ops.reshape(math_ops.reduce_sum(indicators, op.inputs[1]), kept)
    return [math_ops.realdiv(indicators, num_selected) * grad, None]


RegisterGradient("Max")(_min_or_max_grad)
RegisterGradient("Min")(_min_or_max_grad)


@RegisterGradient("Prod")
def _prod_grad(op, grad):
    """The product of all other entries, as exclusive cumprods from both ends (zeros are fine)."""
    x = op.inputs[0]
    grad = _broadcast_to_input(op, grad)
    axes = _static_reduction_axes(op)
    if axes is None:
        return [_prod_grad_dynamic(op, x, grad), None]
    rank = x.shape.rank
    other = [i for i in range(rank) if i not in axes]
    dims = x.shape.dim_values
    if axes == list(range(len(axes))):  # reduced axes first: no transpose
        perm, scan_axis = None, 0
    elif axes == list(range(rank - len(axes), rank)):  # reduced axes last: no transpose
        perm, scan_axis = None, 1
    else:
        perm, scan_axis = axes + other, 0
    permuted = x if perm is None else array_ops.transpose(x, perm)
    reduced_n = _static_prod([dims[i] for i in axes])
    other_n = _static_prod([dims[i] for i in other])
    sizes = [reduced_n, other_n] if scan_axis == 0 else [other_n, reduced_n]
    if None in sizes:
        if sizes.count(None) == 1 and 0 not in sizes:
            sizes = [-1 if s is None else s for s in sizes]
        else:
            shape = array_ops.shape(x)
            rn = math_ops.reduce_prod(array_ops.gather(shape, axes))
            on = math_ops.reduce_prod(array_ops.gather(shape, other))
            sizes = array_ops.stack([rn, on] if scan_axis == 0 else [on, rn])
    flat = array_ops.reshape(permuted, sizes)
    left = math_ops.cumprod(flat, axis=scan_axis, exclusive=True)
    right = math_ops.cumprod(flat, axis=scan_axis, exclusive=True, reverse=True)
    others = math_ops.conj(left) * math_ops.conj(right)
    pshape = permuted.shape.as_list() if permuted.shape.is_fully_defined() else \
        array_ops.shape(permuted)
    others = array_ops.reshape(others, pshape)
    if perm is not None:
        others = array_ops.transpose(others, list(np.argsort(perm)))
    return [grad * others, None]


def _static_prod(dims):
    return None if None in dims else int(np.prod(dims, dtype=np.int64))


def _prod_grad_dynamic(op, x, grad):
    input_shape = array_ops.shape(x)
    rank = array_ops.rank(x)
    reduced = array_ops.reshape(math_ops.cast(op.inputs[1], _dtypes.int32), [-1])
    reduced = math_ops.floormod(reduced + rank, math_ops.maximum(rank, 1))
    idx = array_ops.range(0, rank)
    is_reduced = math_ops.reduce_any(
        math_ops.equal(array_ops.expand_dims(idx, 1), array_ops.expand_dims(reduced, 0)), axis=1)
    other, reduced = array_ops.dynamic_partition(idx, math_ops.cast(is_reduced, _dtypes.int32), 2)
    perm = array_ops.concat([reduced, other], 0)
    reduced_n = math_ops.reduce_prod(array_ops.gather(input_shape, reduced))
    other_n = math_ops.reduce_prod(array_ops.gather(input_shape, other))
    permuted = array_ops.transpose(x, perm)
    flat = array_ops.reshape(permuted, array_ops.stack([reduced_n, other_n]))
    left = math_ops.cumprod(flat, axis=0, exclusive=True)
    right = math_ops.cumprod(flat, axis=0, exclusive=True, reverse=True)
    others = array_ops.reshape(math_ops.conj(left) * math_ops.conj(right), array_ops.shape(permuted))
    out = grad * array_ops.transpose(others, array_ops.invert_permutation(perm))
    return array_ops.reshape(out, input_shape)


@RegisterGradient("Cumsum")
def _cumsum_grad(op, grad):
    return [math_ops.cumsum(_dense(grad), op.inputs[1], exclusive=op.get_attr("exclusive"),
                            reverse=not op.get_attr("reverse")), None]


@RegisterGradient("Cumprod")
def _cumprod_grad(op, grad):
    x, prod = op.inputs[0], op.outputs[0]
    out = math_ops.cumsum(prod * _dense(grad), op.inputs[1], exclusive=op.get_attr("exclusive"),
                          reverse=not op.get_attr("reverse"))
    return [math_ops.realdiv(out, x), None]


@RegisterGradient("ArgMax")
@RegisterGradient("ArgMin")
def _arg_grad(op, grad):
    return [None, None]


# Comparisons, logic and index-valued ops have no gradient.
for _op_type in ("Less", "LessEqual", "Greater", "GreaterEqual", "Equal", "NotEqual",
                 "LogicalAnd", "LogicalOr", "LogicalNot", "Any", "All", "Where"):
    NotDifferentiable(_op_type)
