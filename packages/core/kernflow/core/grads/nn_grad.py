"""Gradients of the nn ops (kernflow.core.ops.nn_ops*), with TF1's formulas.

First-order gradients use the backprop ops (ReluGrad, BiasAddGrad, Conv2DBackpropInput/Filter,
MaxPoolGrad, AvgPoolGrad, FusedBatchNormGradV3...); the backprop ops have their own gradients
(second derivatives) as in TF. Shapes fed to backprop ops are constants when known statically,
so the gradient graph of a network with static shapes has no Shape ops.

Multi-output ops get zeros for the gradients of their unused outputs (gradients_impl fills them
in); `_is_zero` recognizes those so that no work is spent on them.
"""

from __future__ import annotations

import numpy as np

from kernflow.core.framework import dtypes as _dtypes
from kernflow.core.framework import ops as _ops
from kernflow.core.framework import tensor_util
from kernflow.core.framework.gradient_registry import NotDifferentiable, RegisterGradient
from kernflow.core.framework.indexed_slices import IndexedSlices
from kernflow.core.framework.op_def_library import apply_op
from kernflow.core.ops import array_ops
from kernflow.core.ops import math_ops
from kernflow.core.ops import nn_ops
from kernflow.core.ops import nn_ops_norm


def _dense(grad):
    return _ops.convert_to_tensor(grad) if isinstance(grad, IndexedSlices) else grad


def _is_zero(t) -> bool:
    """Whether `t` is known at graph construction to be all zeros (or is None)."""
    if t is None:
        return True
    if isinstance(t, IndexedSlices):
        return False
    op = t.op
    if op.type == "ZerosLike":
        return True
    if op.type == "Fill":
        v = tensor_util.constant_value(op.inputs[1])
        return v is not None and not np.any(v)
    if op.type == "Const":
        v = tensor_util.constant_value(t)
        return v is not None and not np.any(v)
    return False


def _shape_of(t):
    """The shape of `t` as a constant when fully known, else a Shape op."""
    return array_ops.shape(t)


def _zero_scalar(dtype):
    return array_ops.constant(0, dtype=dtype.base_dtype)


# ------------------------------------------------------------------------------- activations
@RegisterGradient("Relu")
def _relu_grad(op, grad):
    return [nn_ops.relu_grad(_dense(grad), op.outputs[0])]


@RegisterGradient("Relu6")
def _relu6_grad(op, grad):
    return [nn_ops.relu6_grad(_dense(grad), op.outputs[0])]


@RegisterGradient("Elu")
def _elu_grad(op, grad):
    return [nn_ops.elu_grad(_dense(grad), op.outputs[0])]


@RegisterGradient("Selu")
def _selu_grad(op, grad):
    return [nn_ops.selu_grad(_dense(grad), op.outputs[0])]


@RegisterGradient("Softplus")
def _softplus_grad(op, grad):
    return [nn_ops.softplus_grad(_dense(grad), op.inputs[0])]


@RegisterGradient("Softsign")
def _softsign_grad(op, grad):
    return [nn_ops.softsign_grad(_dense(grad), op.inputs[0])]


@RegisterGradient("LeakyRelu")
def _leaky_relu_grad(op, grad):
    return [nn_ops.leaky_relu_grad(_dense(grad), op.inputs[0], alpha=op.get_attr("alpha"))]


# Second derivatives: the backprops are linear in their first input; piecewise-linear ones have
# a zero derivative in the second.
@RegisterGradient("ReluGrad")
def _relu_grad_grad(op, grad):
    x = op.inputs[1]
    return [nn_ops.relu_grad(_dense(grad), x), array_ops.zeros_like(x)]


@RegisterGradient("Relu6Grad")
def _relu6_grad_grad(op, grad):
    x = op.inputs[1]
    return [nn_ops.relu6_grad(_dense(grad), x), array_ops.zeros_like(x)]


@RegisterGradient("LeakyReluGrad")
def _leaky_relu_grad_grad(op, grad):
    x = op.inputs[1]
    return [nn_ops.leaky_relu_grad(_dense(grad), x, alpha=op.get_attr("alpha")),
            array_ops.zeros_like(x)]


def _exp_linear_grad_grad(op, grad, grad_op):
    """EluGrad/SeluGrad(g, y) are g * (y + c) where y < 0: d/dy is g there, 0 elsewhere."""
    grad = _dense(grad)
    g, y = op.inputs
    dy = math_ops.where_v2(math_ops.less(y, _zero_scalar(y.dtype)), grad * g,
                           _zero_scalar(y.dtype))
    return [grad_op(grad, y), dy]


@RegisterGradient("EluGrad")
def _elu_grad_grad(op, grad):
    return _exp_linear_grad_grad(op, grad, nn_ops.elu_grad)


@RegisterGradient("SeluGrad")
def _selu_grad_grad(op, grad):
    return _exp_linear_grad_grad(op, grad, nn_ops.selu_grad)


@RegisterGradient("SoftplusGrad")
def _softplus_grad_grad(op, grad):
    """SoftplusGrad(g, x) = g * sigmoid(x); sigmoid'(x) = 1 / (exp(-x) + 2 + exp(x))."""
    grad = _dense(grad)
    g, x = op.inputs
    two = array_ops.constant(2, dtype=x.dtype.base_dtype)
    d2x = grad * g / (math_ops.exp(-x) + two + math_ops.exp(x))
    return [nn_ops.softplus_grad(grad, x), d2x]


@RegisterGradient("SoftsignGrad")
def _softsign_grad_grad(op, grad):
    """SoftsignGrad(g, x) = g / (1 + |x|)^2; d/dx = -2 g sign(x) / (1 + |x|)^3.

    (TF has no gradient for SoftsignGrad; this one follows from its definition.)
    """
    grad = _dense(grad)
    g, x = op.inputs
    dt = x.dtype.base_dtype
    d = math_ops.abs(x) + array_ops.constant(1, dtype=dt)
    dx = grad * g * math_ops.sign(x) * array_ops.constant(-2, dtype=dt) / (d * d * d)
    return [nn_ops.softsign_grad(grad, x), dx]


# ------------------------------------------------------------------------------------ softmax
@RegisterGradient("Softmax")
def _softmax_grad(op, grad):
    """(grad - sum(grad * softmax, -1)) * softmax."""
    grad = _dense(grad)
    softmax = op.outputs[0]
    return [(grad - math_ops.reduce_sum(grad * softmax, -1, keepdims=True)) * softmax]


@RegisterGradient("LogSoftmax")
def _log_softmax_grad(op, grad):
    """grad - sum(grad, -1) * softmax."""
    grad = _dense(grad)
    softmax = math_ops.exp(op.outputs[0])
    return [grad - math_ops.reduce_sum(grad, -1, keepdims=True) * softmax]


def _broadcast_mul(vec, mat):
    """vec [batch] times each row of mat [batch, classes] (TF's _BroadcastMul).

    When `vec` is itself a scalar broadcast to [batch] (the gradient of a mean loss), the scalar
    multiplies `mat` directly: same values, and the BroadcastTo/ExpandDims pair is never built
    (three fewer kernels per training step).
    """
    if vec.op.type == "BroadcastTo" and vec.op.inputs[0].shape.num_elements() == 1:
        scalar = vec.op.inputs[0]
        if scalar.shape.rank != 0:
            scalar = array_ops.reshape(scalar, [])
        return mat * scalar
    return array_ops.expand_dims(vec, -1) * mat


def _softmax_backprop_grad(logits, grad_grad):
    """The gradient flowing into the logits from the `backprop` output (softmax - labels).

    TF adds it for the dense op only (the sparse one forbids it with PreventGradient); both
    get it here, as the formula is the same: the softmax Jacobian applied to grad_grad.
    """
    softmax = nn_ops.softmax(logits)
    return (grad_grad - math_ops.reduce_sum(grad_grad * softmax, -1, keepdims=True)) * softmax


def _unbroadcast_2d(g, t, other):
    """Sums g over the axes along which rank-2 `t` was statically broadcast against `other`.

    Like TF, dims unknown at graph construction are taken to match (no run-time reduction:
    the common [None, classes] logits and labels then cost nothing).
    """
    if t.shape.rank != 2 or other.shape.rank != 2:
        return g
    axes = [i for i, (a, b) in enumerate(zip(t.shape.dim_values, other.shape.dim_values))
            if a == 1 and b != 1]
    if not axes:
        return g
    return math_ops.reduce_sum(g, axes, keepdims=True)


@RegisterGradient("SoftmaxCrossEntropyWithLogits")
def _softmax_xent_grad(op, grad_loss, grad_grad):
    logits, labels = op.inputs
    grad = _broadcast_mul(grad_loss, op.outputs[1])
    grad_labels = _broadcast_mul(grad_loss, -nn_ops.log_softmax(logits))
    if not _is_zero(grad_grad):
        # backprop = softmax(logits) - labels (TF leaves out the labels' part).
        grad_grad = _dense(grad_grad)
        grad = grad + _softmax_backprop_grad(logits, grad_grad)
        grad_labels = grad_labels - grad_grad
    return [_unbroadcast_2d(grad, logits, labels), _unbroadcast_2d(grad_labels, labels, logits)]


@RegisterGradient("SparseSoftmaxCrossEntropyWithLogits")
def _sparse_softmax_xent_grad(op, grad_loss, grad_grad):
    grad = _broadcast_mul(grad_loss, op.outputs[1])
    if not _is_zero(grad_grad):
        grad = grad + _softmax_backprop_grad(op.inputs[0], _dense(grad_grad))
    return [grad, None]


# ---------------------------------------------------------------------------- losses, bias
@RegisterGradient("L2Loss")
def _l2_loss_grad(op, grad):
    return [op.inputs[0] * grad]


@RegisterGradient("BiasAdd")
def _bias_add_grad(op, grad):
    grad = _dense(grad)
    return [grad, nn_ops.bias_add_grad(grad, data_format=op.get_attr("data_format"))]


@RegisterGradient("BiasAddGrad")
def _bias_add_grad_grad(op, grad):
    """The channel gradient copied to every position of the input (broadcast along the rest)."""
    grad = _dense(grad)
    x = op.inputs[0]
    if op.get_attr("data_format") == "NCHW":
        rank = x.shape.rank
        if rank is not None:
            grad = array_ops.reshape(grad, [-1] + [1] * (rank - 2))
        else:
            ones = array_ops.ones_like(array_ops.shape(x)[2:])
            grad = array_ops.reshape(grad, array_ops.concat([array_ops.shape(grad), ones], 0))
    return [array_ops.broadcast_to(grad, _shape_of(x))]


# ------------------------------------------------------------------------------------- top-k
@RegisterGradient("TopKV2")
def _top_k_grad(op, grad, _):
    """Scatters the values' gradient to the positions the indices name (rows are disjoint)."""
    grad = _dense(grad)
    x, idx = op.inputs[0], op.outputs[1]
    xs, ks = x.shape, idx.shape
    if xs.is_fully_defined() and ks.is_fully_defined():
        n, k = xs.dim_values[-1], ks.dim_values[-1]
        rows = int(np.prod(xs.dim_values[:-1], dtype=np.int64))
        offsets = array_ops.constant((np.arange(rows, dtype=np.int32) * n).reshape(-1, 1))
        flat = array_ops.reshape(array_ops.reshape(idx, [rows, k]) + offsets, [-1, 1])
        out = array_ops.scatter_nd(flat, array_ops.reshape(grad, [-1]), [rows * n])
        return [array_ops.reshape(out, xs.as_list()), None]
    in_shape = array_ops.shape(x)
    n = in_shape[-1]
    k = array_ops.shape(idx)[-1]
    idx2 = array_ops.reshape(idx, array_ops.stack([-1, k]))
    rows = array_ops.shape(idx2)[0]
    offsets = array_ops.expand_dims(array_ops.range(0, rows * n, n), -1)
    flat = array_ops.reshape(idx2 + offsets, [-1, 1])
    out = array_ops.scatter_nd(flat, array_ops.reshape(grad, [-1]),
                               array_ops.expand_dims(rows * n, 0))
    return [array_ops.reshape(out, in_shape), None]


NotDifferentiable("InTopKV2")


# ------------------------------------------------------------------------------ convolutions
_CONV_ATTR_NAMES = ("strides", "padding", "explicit_paddings", "data_format", "dilations",
                    "use_cudnn_on_gpu")


def _conv_attrs(op):
    return {k: op.get_attr(k) for k in _CONV_ATTR_NAMES}


def _conv2d(x, w, attrs):
    return apply_op("Conv2D", [x, w], attrs).outputs[0]


def _conv2d_backprop_input(sizes, w, dy, attrs):
    return apply_op("Conv2DBackpropInput", [sizes, w, dy], attrs).outputs[0]


def _conv2d_backprop_filter(x, sizes, dy, attrs):
    return apply_op("Conv2DBackpropFilter", [x, sizes, dy], attrs).outputs[0]


@RegisterGradient("Conv2D")
def _conv2d_grad(op, grad):
    grad = _dense(grad)
    x, w = op.inputs
    attrs = _conv_attrs(op)
    return [_conv2d_backprop_input(_shape_of(x), w, grad, attrs),
            _conv2d_backprop_filter(x, _shape_of(w), grad, attrs)]


@RegisterGradient("Conv2DBackpropInput")
def _conv2d_backprop_input_grad(op, grad):
    """Conv2DBackpropInput(sizes, w, dy) is linear in w and in dy."""
    grad = _dense(grad)
    _, w, dy = op.inputs
    attrs = _conv_attrs(op)
    return [None, _conv2d_backprop_filter(grad, _shape_of(w), dy, attrs),
            _conv2d(grad, w, attrs)]


@RegisterGradient("Conv2DBackpropFilter")
def _conv2d_backprop_filter_grad(op, grad):
    """Conv2DBackpropFilter(x, sizes, dy) is linear in x and in dy."""
    grad = _dense(grad)
    x, _, dy = op.inputs
    attrs = _conv_attrs(op)
    return [_conv2d_backprop_input(_shape_of(x), grad, dy, attrs), None,
            _conv2d(x, grad, attrs)]


# ----------------------------------------------------------------------------------- pooling
def _pool_attrs(op):
    return {k: op.get_attr(k) for k in ("ksize", "strides", "padding", "data_format")}


@RegisterGradient("MaxPool")
def _max_pool_grad(op, grad):
    return [apply_op("MaxPoolGrad", [op.inputs[0], op.outputs[0], _dense(grad)],
                     _pool_attrs(op)).outputs[0]]


@RegisterGradient("MaxPoolGrad")
def _max_pool_grad_grad(op, grad):
    """Linear in its grad input (routing by the window maxima); zero derivative elsewhere."""
    x, y, _ = op.inputs
    gg = apply_op("MaxPoolGradGrad", [x, y, _dense(grad)], _pool_attrs(op)).outputs[0]
    return [array_ops.zeros_like(x), array_ops.zeros_like(y), gg]


@RegisterGradient("MaxPoolGradGrad")
def _max_pool_grad_grad_grad(op, grad):
    x, y, _ = op.inputs
    g = apply_op("MaxPoolGrad", [x, y, _dense(grad)], _pool_attrs(op)).outputs[0]
    return [array_ops.zeros_like(x), array_ops.zeros_like(y), g]


@RegisterGradient("AvgPool")
def _avg_pool_grad(op, grad):
    return [apply_op("AvgPoolGrad", [_shape_of(op.inputs[0]), _dense(grad)],
                     _pool_attrs(op)).outputs[0]]


@RegisterGradient("AvgPoolGrad")
def _avg_pool_grad_grad(op, grad):
    return [None, apply_op("AvgPool", [_dense(grad)], _pool_attrs(op)).outputs[0]]


# --------------------------------------------------------------------------- fused batch norm
@RegisterGradient("FusedBatchNormV3")
def _fused_batch_norm_grad(op, grad_y, *_):
    """Backprop through y only (as TF: the statistics outputs pass no gradient back).

    In training the batch statistics saved in reserve_space_1/2 are used; in inference the
    population statistics, which get no gradient.
    """
    x, scale = op.inputs[0], op.inputs[1]
    training = op.get_attr("is_training")
    if training:
        mean, var = op.outputs[3], op.outputs[4]
    else:
        mean, var = op.inputs[3], op.inputs[4]
    dx, dscale, doffset = nn_ops_norm.fused_batch_norm_grad(
        _dense(grad_y), x, scale, mean, var, op.outputs[5], epsilon=op.get_attr("epsilon"),
        data_format=op.get_attr("data_format"), is_training=training)
    return [dx, dscale, doffset, None, None]


@RegisterGradient("FusedBatchNormGradV3")
def _fused_batch_norm_grad_grad(op, grad_dx, grad_dscale, grad_doffset, *_):
    """Second derivatives of batch norm, with respect to y_backprop, x and scale.

    As TF does, in training the statistics are those of x (recomputed here), so the gradient of
    x includes their dependence on x and reserve_space_1/2 get none; in inference the given
    statistics are constants.
    """
    dy, x, scale, pop_mean, pop_var = op.inputs[:5]
    eps = op.get_attr("epsilon")
    nchw = op.get_attr("data_format") == "NCHW"
    training = op.get_attr("is_training")
    t = x.dtype.base_dtype
    f32 = _dtypes.float32

    def cast(v):
        return math_ops.cast(v, f32) if v.dtype.base_dtype != f32 else v

    def chan(v):  # a [C] vector shaped to broadcast against x
        return array_ops.reshape(v, [1, -1, 1, 1]) if nchw else v

    axes = [0, 2, 3] if nchw else [0, 1, 2]
    dy, x, gdx = cast(dy), cast(x), cast(_dense(grad_dx))
    zero_gdx = _is_zero(grad_dx)
    gds = None if _is_zero(grad_dscale) else chan(_dense(grad_dscale))
    gdo = None if _is_zero(grad_doffset) else chan(_dense(grad_doffset))
    gamma = chan(scale)

    def mean_(v):
        return math_ops.reduce_mean(v, axes, keepdims=True)

    def add(a, b):
        return b if a is None else a + b

    if not training:
        r = math_ops.rsqrt(chan(pop_var) + eps)
        xc = x - chan(pop_mean)
        g_dy = g_x = None
        if not zero_gdx:
            g_dy = gdx * (gamma * r)
        if gds is not None:
            g_dy = add(g_dy, gds * xc * r)
            g_x = gds * r * dy
        if gdo is not None:
            g_dy = add(g_dy, array_ops.broadcast_to(gdo, _shape_of(dy)))
        g_scale = None
        if not zero_gdx:
            g_scale = math_ops.reduce_sum(gdx * dy * r, axes)
    else:
        mu = mean_(x)
        r = math_ops.rsqrt(mean_(math_ops.squared_difference(x, mu)) + eps)
        xhat = (x - mu) * r
        m_dyx = mean_(dy * xhat)
        dx_over_gamma = r * (dy - mean_(dy) - xhat * m_dyx)
        g_dy = g_x = g_scale = None
        # u = d(loss)/d(xhat); then d(loss)/dx = r * (u - mean(u) - xhat * (mean(u * xhat) + w))
        u = w = None
        if not zero_gdx:
            m_gx = mean_(gdx * xhat)
            g_dy = gamma * r * (gdx - mean_(gdx) - xhat * m_gx)
            g_scale = math_ops.reduce_sum(gdx * dx_over_gamma, axes)
            u = -(gamma * r) * (dy * m_gx + gdx * m_dyx)
            w = mean_(gdx * gamma * dx_over_gamma)
        if gds is not None:
            g_dy = add(g_dy, gds * xhat)
            u = add(u, gds * dy)
        if gdo is not None:
            g_dy = add(g_dy, array_ops.broadcast_to(gdo, _shape_of(dy)))
        if u is not None:
            v = mean_(u * xhat) if w is None else mean_(u * xhat) + w
            g_x = r * (u - mean_(u) - xhat * v)
    if g_dy is not None and t != f32:
        g_dy = math_ops.cast(g_dy, t)
    if g_x is not None and t != f32:
        g_x = math_ops.cast(g_x, t)
    return [g_dy, g_x, g_scale, None, None, None]
