"""Contract cases of the nn ops (kernflow.core.ops.nn_ops*).

References are written independently of the kernels: convolutions and pooling with explicit
loops over output positions.
"""

import dataclasses
import itertools

import numpy as np

import kernflow.core as kf
from kernflow.core.ops import nn_ops, nn_ops_conv, nn_ops_norm
from kernflow.core.testing.kernel_contract import OpCase

_r = np.random.RandomState(7)


def _away_from(a, points, margin=0.05):
    """Moves entries of `a` within `margin` of any of `points` away from them (for grad checks)."""
    a = np.array(a)
    for p in points:
        near = np.abs(a - p) < margin
        a[near] = p + np.where(a[near] >= p, margin, -margin)
    return a


def _f(*shape, dtype=np.float64, scale=1.0):
    return (_r.randn(*shape) * scale).astype(dtype)


_X64 = _away_from(_f(3, 4, scale=3.0), [0.0, 6.0])
_X32 = _away_from(_f(2, 3, 5, scale=3.0, dtype=np.float32), [0.0, 6.0])
_XI = _r.randint(-8, 9, size=(4, 5)).astype(np.int32)
_EMPTY = np.zeros((0, 3), np.float32)
_SELU_A, _SELU_S = 1.6732632423543772, 1.0507009873554805


def _ref_elu(x):
    return np.where(x > 0, x, np.expm1(np.minimum(x, 0))).astype(x.dtype)


def _ref_selu(x):
    return (_SELU_S * np.where(x > 0, x, _SELU_A * np.expm1(np.minimum(x, 0)))).astype(x.dtype)


def _ref_softplus(x):
    return np.log1p(np.exp(-np.abs(x))).astype(x.dtype) + np.maximum(x, 0)


def _ref_softmax(x):
    e = np.exp(x.astype(np.float64) - x.max(-1, keepdims=True))
    return (e / e.sum(-1, keepdims=True)).astype(x.dtype)


def _ref_log_softmax(x):
    s = x.astype(np.float64) - x.max(-1, keepdims=True)
    return (s - np.log(np.exp(s).sum(-1, keepdims=True))).astype(x.dtype)


def _unary(op_type, fn, ref, inputs, name="", **kw):
    return [OpCase(op_type, fn, [x], ref, name=f"{x.dtype.name}_{name}" if name else x.dtype.name,
                   **kw) for x in inputs]


_ACT_CASES = (
    _unary("Relu", kf.nn.relu, lambda x: np.maximum(x, 0).astype(x.dtype), [_X64], grad=True)
    + _unary("Relu", kf.nn.relu, lambda x: np.maximum(x, 0).astype(x.dtype),
             [_X32, _XI, _EMPTY, _r.randint(0, 9, (3,)).astype(np.uint8)])
    + _unary("Relu6", kf.nn.relu6, lambda x: np.clip(x, 0, 6).astype(x.dtype), [_X64], grad=True)
    + _unary("Relu6", kf.nn.relu6, lambda x: np.clip(x, 0, 6).astype(x.dtype), [_X32, _XI])
    + _unary("Elu", kf.nn.elu, _ref_elu, [_X64], grad=True)
    + _unary("Elu", kf.nn.elu, _ref_elu, [_X32, _EMPTY])
    + _unary("Selu", kf.nn.selu, _ref_selu, [_X64], grad=True)
    + _unary("Selu", kf.nn.selu, _ref_selu, [_X32])
    + _unary("Softplus", kf.nn.softplus, _ref_softplus, [_X64], grad=True)
    + _unary("Softplus", kf.nn.softplus, _ref_softplus,
             [np.array([-100.0, -1.0, 0.0, 30.0, 100.0], np.float32)], name="extremes")
    + _unary("Softplus", kf.nn.softplus, _ref_softplus, [_X32.astype(np.float16)],
             rtol=2e-3, atol=2e-3)
    + _unary("Softsign", kf.nn.softsign, lambda x: x / (1 + np.abs(x)), [_X64], grad=True)
    + _unary("Softsign", kf.nn.softsign, lambda x: x / (1 + np.abs(x)), [_X32])
    + [OpCase("LeakyRelu", lambda x: kf.nn.leaky_relu(x, alpha=0.1), [_X64],
              lambda x: np.where(x > 0, x, 0.1 * x), grad=True),
       OpCase("LeakyRelu", lambda x: kf.nn.leaky_relu(x), [_X32],
              lambda x: np.where(x > 0, x, np.float32(0.2) * x)),
       OpCase("LeakyRelu", lambda x: kf.nn.leaky_relu(x, alpha=0.3), [_X32.astype(np.float16)],
              lambda x: np.where(x > 0, x, np.float16(0.3) * x), rtol=1e-3)]
)

_G64 = _f(3, 4)
_GRAD_CASES = [
    OpCase("ReluGrad", nn_ops.relu_grad, [_G64, _X64], lambda g, f: g * (f > 0)),
    OpCase("ReluGrad", nn_ops.relu_grad, [_XI, _XI[::-1]], lambda g, f: g * (f > 0), name="int"),
    OpCase("Relu6Grad", nn_ops.relu6_grad, [_G64, _X64], lambda g, f: g * ((f > 0) & (f < 6))),
    OpCase("EluGrad", nn_ops.elu_grad, [_G64, _ref_elu(_X64)],
           lambda g, y: np.where(y > 0, g, g * (y + 1))),
    OpCase("SeluGrad", nn_ops.selu_grad, [_G64, _ref_selu(_X64)],
           lambda g, y: np.where(y > 0, g * _SELU_S, g * (y + _SELU_S * _SELU_A))),
    OpCase("SoftplusGrad", nn_ops.softplus_grad, [_G64, _X64],
           lambda g, f: g / (1 + np.exp(-f))),
    OpCase("SoftsignGrad", nn_ops.softsign_grad, [_G64.astype(np.float32), _X32[0, :3, :4]],
           lambda g, f: g / (1 + np.abs(f)) ** 2),
    OpCase("LeakyReluGrad", lambda g, f: nn_ops.leaky_relu_grad(g, f, alpha=0.25), [_G64, _X64],
           lambda g, f: np.where(f > 0, g, 0.25 * g)),
]
_GRAD_CASES = [dataclasses.replace(c, grad=True) if c.inputs[0].dtype == np.float64 else c
               for c in _GRAD_CASES]
_GRAD_CASES += [
    OpCase("SoftsignGrad", nn_ops.softsign_grad, [_G64, _X64], lambda g, f: g / (1 + np.abs(f)) ** 2,
           grad=True, name="float64"),
    # The backprops of the activations' gradients, composed as a second derivative.
    OpCase("EluGrad", lambda x: kf.gradients(kf.reduce_sum(kf.square(kf.nn.elu(x))), x)[0], [_X64],
           lambda x: 2 * _ref_elu(x) * np.where(x > 0, 1, np.exp(np.minimum(x, 0))), grad=True,
           name="second_order"),
]

_L = _f(4, 6, scale=2.0)
_P = _ref_softmax(_f(4, 6))
_SOFTMAX_CASES = [
    OpCase("Softmax", kf.nn.softmax, [_L], _ref_softmax, grad=True),
    OpCase("Softmax", kf.nn.softmax, [_f(2, 3, 5, dtype=np.float32)], _ref_softmax, name="3d"),
    OpCase("Softmax", kf.nn.softmax, [np.array([[1000.0, 0.0, -1000.0]], np.float32)],
           _ref_softmax, name="large"),
    OpCase("Softmax", kf.nn.softmax, [np.zeros((0, 5), np.float32)], _ref_softmax, name="empty"),
    OpCase("Softmax", kf.nn.softmax, [_f(3, 4, dtype=np.float16)], _ref_softmax, rtol=2e-3,
           atol=1e-3),
    OpCase("LogSoftmax", kf.nn.log_softmax, [_L], _ref_log_softmax, grad=True),
    OpCase("LogSoftmax", kf.nn.log_softmax, [np.array([[1000.0, 0.0, -1000.0]], np.float32)],
           _ref_log_softmax, name="large"),
    OpCase("LogSoftmax", kf.nn.log_softmax, [_f(5, dtype=np.float32)], _ref_log_softmax,
           name="1d"),
]


def _ref_xent(f, lab):
    f, lab = np.broadcast_arrays(f, lab)
    lp = _ref_log_softmax(f.astype(np.float64))
    return [(-(lab * lp).sum(-1)).astype(f.dtype), (np.exp(lp) - lab).astype(f.dtype)]


def _ref_sparse(f, lab):
    lp = _ref_log_softmax(f.astype(np.float64))
    rows = np.arange(len(lab))
    bp = np.exp(lp)
    bp[rows, lab] -= 1
    return [(-lp[rows, lab]).astype(f.dtype), bp.astype(f.dtype)]


_XENT_CASES = [
    OpCase("SoftmaxCrossEntropyWithLogits", lambda f, lab: list(nn_ops._xent_op(f, lab)),
           [_L, _P], _ref_xent),
    OpCase("SoftmaxCrossEntropyWithLogits", lambda f, lab: nn_ops._xent_op(f, lab)[0],
           [_L, _P], lambda f, lab: _ref_xent(f, lab)[0], grad=True, name="loss"),
    OpCase("SoftmaxCrossEntropyWithLogits", lambda f, lab: list(nn_ops._xent_op(f, lab)),
           [np.array([[1e4, 0.0, -1e4], [1.0, 2.0, 3.0]], np.float32),
            np.array([[0.0, 1.0, 0.0]], np.float32)], _ref_xent, name="broadcast_large"),
    OpCase("SparseSoftmaxCrossEntropyWithLogits", lambda f, lab: list(nn_ops._sparse_xent_op(
        f, lab)), [_L, np.array([0, 5, 2, 2], np.int64)], _ref_sparse),
    OpCase("SparseSoftmaxCrossEntropyWithLogits", lambda f, lab: nn_ops._sparse_xent_op(
        f, lab)[0], [_L, np.array([1, 3, 0, 5], np.int32)],
        lambda f, lab: _ref_sparse(f, lab)[0], grad=True, name="loss"),
    OpCase("SparseSoftmaxCrossEntropyWithLogits", lambda f, lab: list(nn_ops._sparse_xent_op(
        f, lab)), [_f(3, 4, dtype=np.float32), np.array([3, 0, 1], np.int32)], _ref_sparse,
        name="f32"),
    OpCase("SparseSoftmaxCrossEntropyWithLogits", lambda f, lab: list(nn_ops._sparse_xent_op(
        f, lab)), [np.zeros((0, 4), np.float32), np.zeros((0,), np.int32)], _ref_sparse,
        name="empty"),
    OpCase("SoftmaxCrossEntropyWithLogits", lambda f, lab: list(nn_ops._xent_op(f, lab)),
           [_L, _P], _ref_xent, grad=True, name="both_outputs"),
    OpCase("SoftmaxCrossEntropyWithLogits", lambda f, lab: list(nn_ops._xent_op(f, lab)),
           [_L, _P[:1]], _ref_xent, grad=True, dynamic_shapes=False, name="labels_broadcast"),
    OpCase("SparseSoftmaxCrossEntropyWithLogits", lambda f, lab: list(nn_ops._sparse_xent_op(
        f, lab)), [_L, np.array([2, 0, 5, 1], np.int32)], _ref_sparse, grad=True,
        name="both_outputs"),
    OpCase("L2Loss", kf.nn.l2_loss, [_X64], lambda x: np.sum(x * x) / 2, grad=True),
    OpCase("L2Loss", kf.nn.l2_loss, [_X32], lambda x: np.float32(np.sum(x.astype(np.float64) ** 2)
                                                                 / 2), rtol=1e-5),
    OpCase("L2Loss", kf.nn.l2_loss, [_EMPTY], lambda x: np.float32(0), name="empty"),
]

_V4 = _f(2, 3, 4, 5)
_BIAS_CASES = [
    OpCase("BiasAdd", kf.nn.bias_add, [_V4, _f(5)], lambda v, b: v + b, grad=True),
    OpCase("BiasAdd", lambda v, b: kf.nn.bias_add(v, b, data_format="NCHW"), [_V4, _f(3)],
           lambda v, b: v + b.reshape(3, 1, 1), grad=True, name="nchw"),
    OpCase("BiasAdd", kf.nn.bias_add, [_XI, np.arange(5, dtype=np.int32)], lambda v, b: v + b),
    OpCase("BiasAdd", kf.nn.bias_add, [_f(3, 2, dtype=np.float32), _f(2, dtype=np.float32)],
           lambda v, b: v + b, name="2d"),
    OpCase("BiasAddGrad", nn_ops.bias_add_grad, [_V4], lambda g: g.sum((0, 1, 2)), grad=True),
    OpCase("BiasAddGrad", lambda g: nn_ops.bias_add_grad(g, "NCHW"), [_V4],
           lambda g: g.sum((0, 2, 3)), grad=True, name="nchw"),
    OpCase("BiasAddGrad", lambda g: nn_ops.bias_add_grad(g, "NCHW"), [_f(4, 3)],
           lambda g: g.sum(0), grad=True, name="nchw_2d"),
    OpCase("BiasAddGrad", nn_ops.bias_add_grad, [_XI], lambda g: g.sum(0).astype(np.int32),
           name="int"),
]


def _ref_top_k(x, k):
    n = x.shape[-1]
    flat = x.reshape(-1, n)
    idx = np.array([sorted(range(n), key=lambda i: (-row[i], i))[:k] for row in flat],
                   dtype=np.int32).reshape(x.shape[:-1] + (k,))
    return [np.take_along_axis(x, idx, -1), idx]


_TIES = np.array([[3, 1, 3, 2, 1], [0, 0, 0, 0, 0]], np.int32)
_TOPK_CASES = [
    OpCase("TopKV2", lambda x: list(kf.nn.top_k(x, 3)), [_f(2, 3, 7)], lambda x: _ref_top_k(x, 3),
           grad=True, grad_inputs=[0]),
    OpCase("TopKV2", lambda x: kf.nn.top_k(x, 2)[0],
           [_r.permutation(20).reshape(4, 5) / 4.0], lambda x: _ref_top_k(x, 2)[0],
           grad=True, name="2d"),
    OpCase("TopKV2", lambda x: list(kf.nn.top_k(x, 4)), [_TIES], lambda x: _ref_top_k(x, 4),
           name="ties"),
    OpCase("TopKV2", lambda x: list(kf.nn.top_k(x, 5)), [_TIES.astype(np.float32)],
           lambda x: _ref_top_k(x, 5), name="all"),
    OpCase("TopKV2", lambda x: list(kf.nn.top_k(x, 0)), [_f(3, 4, dtype=np.float32)],
           lambda x: _ref_top_k(x, 0), name="k0"),
    OpCase("TopKV2", lambda x, k: list(kf.nn.top_k(x, k)),
           [np.array([1.0, -np.inf, 5.0, 2.0], np.float32), np.array(2, np.int32)],
           lambda x, k: _ref_top_k(x, int(k)), name="k_tensor"),
]


def _ref_in_top_k(p, t, k):
    out = []
    for row, tt in zip(p, t):
        if not 0 <= tt < len(row) or not np.all(np.isfinite(row)):
            out.append(False)
        else:
            out.append(int(np.sum(row > row[tt])) < k)
    return np.array(out, bool)


_PRED = np.array([[0.1, 0.3, 0.2, 0.4], [0.1, 0.2, 0.3, 0.4], [0.3, 0.3, 0.3, 0.1],
                  [0.1, np.nan, 0.5, 0.2], [0.5, 0.1, 0.2, 0.2], [1.0, 2.0, 3.0, 4.0]], np.float32)
_TOPK_CASES += [
    OpCase("InTopKV2", lambda p, t: kf.nn.in_top_k(p, t, 2), [_PRED, np.array(
        [1, 0, 2, 2, 3, 7], np.int32)], lambda p, t: _ref_in_top_k(p, t, 2)),
    OpCase("InTopKV2", lambda p, t, k: kf.nn.in_top_k(p, t, k), [_PRED, np.array(
        [3, 3, 0, 0, 2, -1], np.int64), np.array(1, np.int64)], _ref_in_top_k, name="int64"),
]


# ------------------------------------------------------------------------------ convolutions
def _geom(n, k, s, d, padding, explicit=(0, 0)):
    eff = (k - 1) * d + 1
    if padding == "SAME":
        out = -(-n // s)
        total = max((out - 1) * s + eff - n, 0)
        return out, total // 2
    if padding == "VALID":
        return (n - eff) // s + 1, 0
    return (n + explicit[0] + explicit[1] - eff) // s + 1, explicit[0]


def _ref_conv_parts(xshape, wshape, strides, padding, dil=(1, 1), explicit=((0, 0), (0, 0))):
    """Yields (output index (b, i, j), list of (input (y, x), filter (p, q)) pairs)."""
    n, h, w, _ = xshape
    kh, kw = wshape[:2]
    oh, pt = _geom(h, kh, strides[0], dil[0], padding, explicit[0])
    ow, pl = _geom(w, kw, strides[1], dil[1], padding, explicit[1])
    for b, i, j in itertools.product(range(n), range(oh), range(ow)):
        taps = []
        for p, q in itertools.product(range(kh), range(kw)):
            y, x = i * strides[0] - pt + p * dil[0], j * strides[1] - pl + q * dil[1]
            if 0 <= y < h and 0 <= x < w:
                taps.append(((y, x), (p, q)))
        yield (b, i, j), taps


def _out_hw(xshape, wshape, strides, padding, dil=(1, 1), explicit=((0, 0), (0, 0))):
    return (_geom(xshape[1], wshape[0], strides[0], dil[0], padding, explicit[0])[0],
            _geom(xshape[2], wshape[1], strides[1], dil[1], padding, explicit[1])[0])


def _ref_conv(x, w, strides, padding, dil=(1, 1), explicit=((0, 0), (0, 0))):
    oh, ow = _out_hw(x.shape, w.shape, strides, padding, dil, explicit)
    out = np.zeros((x.shape[0], oh, ow, w.shape[3]), np.float64)
    for (b, i, j), taps in _ref_conv_parts(x.shape, w.shape, strides, padding, dil, explicit):
        for (y, xx), (p, q) in taps:
            out[b, i, j] += x[b, y, xx].astype(np.float64) @ w[p, q].astype(np.float64)
    return out.astype(x.dtype)


def _ref_conv_input(sizes, w, dy, strides, padding, dil=(1, 1)):
    dx = np.zeros(tuple(sizes), np.float64)
    for (b, i, j), taps in _ref_conv_parts(tuple(sizes), w.shape, strides, padding, dil):
        for (y, xx), (p, q) in taps:
            dx[b, y, xx] += w[p, q].astype(np.float64) @ dy[b, i, j].astype(np.float64)
    return dx.astype(w.dtype)


def _ref_conv_filter(x, sizes, dy, strides, padding, dil=(1, 1)):
    dw = np.zeros(tuple(sizes), np.float64)
    for (b, i, j), taps in _ref_conv_parts(x.shape, tuple(sizes), strides, padding, dil):
        for (y, xx), (p, q) in taps:
            dw[p, q] += np.outer(x[b, y, xx], dy[b, i, j])
    return dw.astype(x.dtype)


def _nchw(a):
    return np.ascontiguousarray(np.transpose(a, (0, 3, 1, 2)))


def _nhwc(a):
    return np.ascontiguousarray(np.transpose(a, (0, 2, 3, 1)))


_CX = _f(2, 7, 6, 3)
_CW = _f(3, 2, 3, 4)
_CONV_CASES = [
    OpCase("Conv2D", lambda x, w: kf.nn.conv2d(x, w, [1, 1, 1, 1], "VALID"), [_CX, _CW],
           lambda x, w: _ref_conv(x, w, (1, 1), "VALID"), grad=True, name="valid"),
    OpCase("Conv2D", lambda x, w: kf.nn.conv2d(x, w, [1, 2, 2, 1], "SAME"), [_CX, _CW],
           lambda x, w: _ref_conv(x, w, (2, 2), "SAME"), grad=True, name="same_stride2"),
    OpCase("Conv2D", lambda x, w: kf.nn.conv2d(x, w, [1, 3, 1, 1], "SAME", dilations=[1, 2, 1, 1]),
           [_CX, _CW], lambda x, w: _ref_conv(x, w, (3, 1), "SAME", (2, 1)), grad=True,
           name="dilated"),
    OpCase("Conv2D", lambda x, w: kf.nn.conv2d(x, w, [1, 2, 1, 1], [[0, 0], [1, 2], [0, 1], [0, 0]]),
           [_CX, _CW], lambda x, w: _ref_conv(x, w, (2, 1), "EXPLICIT", explicit=((1, 2), (0, 1))),
           grad=True, name="explicit_f64"),
    OpCase("Conv2D", lambda x, w: kf.nn.conv2d(x, w, 1, [[0, 0], [1, 2], [0, 1], [0, 0]]),
           [_CX.astype(np.float32), _CW.astype(np.float32)],
           lambda x, w: _ref_conv(x, w, (1, 1), "EXPLICIT", explicit=((1, 2), (0, 1))),
           rtol=1e-5, atol=1e-5, name="explicit"),
    OpCase("Conv2D", lambda x, w: kf.nn.conv2d(x, w, [1, 1, 2, 2], "SAME", data_format="NCHW"),
           [_nchw(_CX), _CW], lambda x, w: _nchw(_ref_conv(_nhwc(x), w, (2, 2), "SAME")),
           grad=True, name="nchw"),
    OpCase("Conv2D", lambda x, w: kf.nn.conv2d(x, w, 1, "SAME"),
           [_r.randint(-3, 4, (1, 4, 4, 2)).astype(np.int32),
            _r.randint(-3, 4, (2, 2, 2, 3)).astype(np.int32)],
           lambda x, w: _ref_conv(x, w, (1, 1), "SAME"), name="int32"),
    OpCase("Conv2D", lambda x, w: kf.nn.conv2d(x, w, 1, "VALID"),
           [_f(2, 3, 3, 5, dtype=np.float32), _f(1, 1, 5, 2, dtype=np.float32)],
           lambda x, w: _ref_conv(x, w, (1, 1), "VALID"), rtol=1e-5, atol=1e-5, name="1x1"),
    OpCase("Conv2D", lambda x, w: kf.nn.conv2d(x, w, 1, "SAME"),
           [np.zeros((0, 4, 4, 3), np.float32), _f(3, 3, 3, 2, dtype=np.float32)],
           lambda x, w: _ref_conv(x, w, (1, 1), "SAME"), name="empty_batch"),
    OpCase("Conv2D", lambda x, w: kf.nn.conv2d(x, w, 1, "SAME"),
           [_f(1, 5, 5, 2, dtype=np.float16), _f(3, 3, 2, 2, dtype=np.float16)],
           lambda x, w: _ref_conv(x, w, (1, 1), "SAME"), rtol=1e-2, atol=1e-2, name="f16"),
]

_DY_SAME2 = _f(2, 4, 3, 4)
_DY_VALID = _f(2, 5, 5, 4)
_CONV_CASES += [
    OpCase("Conv2DBackpropInput", lambda w, dy: kf.nn.conv2d_backprop_input(
        [2, 7, 6, 3], w, dy, [1, 2, 2, 1], "SAME"), [_CW, _DY_SAME2],
        lambda w, dy: _ref_conv_input((2, 7, 6, 3), w, dy, (2, 2), "SAME"), grad=True,
        name="same_stride2"),
    OpCase("Conv2DBackpropInput", lambda s, w, dy: kf.nn.conv2d_backprop_input(
        s, w, dy, [1, 1, 1, 1], "VALID"), [np.array([2, 7, 6, 3], np.int32), _CW, _DY_VALID],
        lambda s, w, dy: _ref_conv_input(s, w, dy, (1, 1), "VALID"), grad=True,
        name="valid_fed_sizes"),
    OpCase("Conv2DBackpropInput", lambda w, dy: kf.nn.conv2d_backprop_input(
        [2, 3, 7, 6], w, dy, [1, 1, 2, 2], "SAME", data_format="NCHW"), [_CW, _nchw(_DY_SAME2)],
        lambda w, dy: _nchw(_ref_conv_input((2, 7, 6, 3), w, _nhwc(dy), (2, 2), "SAME")),
        grad=True, name="nchw"),
    OpCase("Conv2DBackpropInput", lambda w, dy: kf.nn.conv2d_transpose(
        dy, w, [2, 8, 6, 3], [1, 2, 2, 1], "SAME"),
        [_CW.astype(np.float32), _f(2, 4, 3, 4, dtype=np.float32)],
        lambda w, dy: _ref_conv_input((2, 8, 6, 3), w, dy, (2, 2), "SAME"), rtol=1e-5,
        atol=1e-5, name="transpose"),
    OpCase("Conv2DBackpropInput", lambda w, dy: kf.nn.conv2d_backprop_input(
        [1, 7, 6, 3], w, dy, 1, "SAME", dilations=2), [_CW, _f(1, 7, 6, 4)],
        lambda w, dy: _ref_conv_input((1, 7, 6, 3), w, dy, (1, 1), "SAME", (2, 2)),
        grad=True, name="dilated"),
    OpCase("Conv2DBackpropFilter", lambda x, dy: kf.nn.conv2d_backprop_filter(
        x, [3, 2, 3, 4], dy, [1, 2, 2, 1], "SAME"), [_CX, _DY_SAME2],
        lambda x, dy: _ref_conv_filter(x, (3, 2, 3, 4), dy, (2, 2), "SAME"), grad=True,
        name="same_stride2"),
    OpCase("Conv2DBackpropFilter", lambda x, s, dy: kf.nn.conv2d_backprop_filter(
        x, s, dy, [1, 1, 1, 1], "VALID"), [_CX, np.array([3, 2, 3, 4], np.int32), _DY_VALID],
        lambda x, s, dy: _ref_conv_filter(x, s, dy, (1, 1), "VALID"), grad=True,
        name="valid_fed_sizes"),
    OpCase("Conv2DBackpropFilter", lambda x, dy: kf.nn.conv2d_backprop_filter(
        x, [3, 2, 3, 4], dy, [1, 1, 2, 2], "SAME", data_format="NCHW"),
        [_nchw(_CX), _nchw(_DY_SAME2)],
        lambda x, dy: _ref_conv_filter(_nhwc(x), (3, 2, 3, 4), _nhwc(dy), (2, 2), "SAME"),
        grad=True, name="nchw"),
    OpCase("Conv2DBackpropFilter", lambda x, dy: kf.nn.conv2d_backprop_filter(
        x, [3, 2, 3, 4], dy, 1, "SAME", dilations=[1, 2, 1, 1]), [_CX, _f(2, 7, 6, 4)],
        lambda x, dy: _ref_conv_filter(x, (3, 2, 3, 4), dy, (1, 1), "SAME", (2, 1)),
        grad=True, name="dilated"),
]


# ----------------------------------------------------------------------------------- pooling
def _pool_windows(shape, ksize, strides, padding):
    """Yields (output index, list of input indices in the window, row-major)."""
    geo = [_geom(n, k, s, 1, padding) for n, k, s in zip(shape, ksize, strides)]
    for o in itertools.product(*[range(g[0]) for g in geo]):
        idx = []
        for off in itertools.product(*[range(k) for k in ksize]):
            i = tuple(oo * s - g[1] + f for oo, s, g, f in zip(o, strides, geo, off))
            if all(0 <= a < n for a, n in zip(i, shape)):
                idx.append(i)
        yield o, idx


def _pool_out_shape(shape, ksize, strides, padding):
    return tuple(_geom(n, k, s, 1, padding)[0] for n, k, s in zip(shape, ksize, strides))


def _ref_pool(x, ksize, strides, padding, fn):
    out = np.zeros(_pool_out_shape(x.shape, ksize, strides, padding), x.dtype)
    for o, idx in _pool_windows(x.shape, ksize, strides, padding):
        out[o] = fn(np.array([x[i] for i in idx]))
    return out


def _ref_max_pool_grad(x, g, ksize, strides, padding):
    dx = np.zeros(x.shape, g.dtype)
    for o, idx in _pool_windows(x.shape, ksize, strides, padding):
        best = max(idx, key=lambda i: (x[i], -idx.index(i)))
        dx[best] += g[o]
    return dx


def _ref_max_pool_grad_grad(x, g, ksize, strides, padding):
    out = np.zeros(_pool_out_shape(x.shape, ksize, strides, padding), g.dtype)
    for o, idx in _pool_windows(x.shape, ksize, strides, padding):
        out[o] = g[max(idx, key=lambda i: (x[i], -idx.index(i)))]
    return out


def _ref_avg_pool_grad(shape, g, ksize, strides, padding):
    dx = np.zeros(tuple(shape), g.dtype)
    for o, idx in _pool_windows(tuple(shape), ksize, strides, padding):
        for i in idx:
            dx[i] += g[o] / len(idx)
    return dx


_PX = _r.permutation(2 * 7 * 6 * 3).reshape(2, 7, 6, 3).astype(np.float64) / 10.0
_K2 = ([1, 2, 2, 1], [1, 2, 2, 1])
_K3S2 = ([1, 3, 3, 1], [1, 2, 2, 1])
# NaN and infinities in pooling windows (TF 2.21 gave the _tf_max results on this very input).
_NAN_POOL_X = np.random.RandomState(0).randn(2, 6, 6, 3).astype(np.float32)
_NAN_POOL_X[0, 0, 0, 0] = _NAN_POOL_X[0, 1, 1, 1] = _NAN_POOL_X[1, 2, 3, 2] = np.nan
_NAN_POOL_X[0, 3, 2, 2] = np.nan
_NAN_POOL_X[1, 4, 4, 0], _NAN_POOL_X[1, 5, 5, 1] = np.inf, -np.inf


def _tf_max(window):
    """TF's MaxPool of one window: NaN never wins, and the result is at least the lowest finite
    value (observed in TF 2.21: a window of -inf gives -3.4028235e+38)."""
    floor = np.finfo(window.dtype).min if window.dtype.kind == "f" else np.iinfo(window.dtype).min
    return np.fmax.reduce(np.append(window, window.dtype.type(floor)))


def _pool_case(op, fn, x, ksize, strides, padding, **kw):
    ref_fn = _tf_max if op == "MaxPool" else np.mean
    return OpCase(op, lambda v: fn(v, ksize, strides, padding), [x],
                  lambda v: _ref_pool(v, ksize, strides, padding, ref_fn).astype(v.dtype), **kw)


_POOL_CASES = [
    _pool_case("MaxPool", kf.nn.max_pool, _PX, *_K2, "VALID", grad=True, name="valid"),
    _pool_case("MaxPool", kf.nn.max_pool, _PX, *_K3S2, "SAME", grad=True, name="same"),
    _pool_case("MaxPool", kf.nn.max_pool, _PX.astype(np.float32), [1, 2, 3, 1], [1, 1, 2, 1],
               "SAME", name="f32"),
    _pool_case("MaxPool", kf.nn.max_pool, _XI.reshape(1, 4, 5, 1), *_K3S2, "SAME", name="int32"),
    _pool_case("MaxPool", kf.nn.max_pool, -np.ones((1, 3, 3, 2), np.float32) * np.inf, *_K2,
               "SAME", name="neg_inf"),
    _pool_case("MaxPool", kf.nn.max_pool, _NAN_POOL_X, *_K3S2, "SAME", name="nan_inf"),
    _pool_case("MaxPool", kf.nn.max_pool, _NAN_POOL_X.astype(np.float64), *_K2, "SAME",
               name="nan_inf_f64"),
    _pool_case("MaxPool", kf.nn.max_pool, np.zeros((0, 4, 4, 2), np.float32), *_K2, "VALID",
               name="empty"),
    _pool_case("MaxPool", kf.nn.max_pool, _PX, [1, 1, 1, 3], [1, 1, 1, 3], "VALID", grad=True,
               name="depth"),
    OpCase("MaxPool", lambda v: kf.nn.max_pool(v, 2, 2, "SAME", data_format="NCHW"),
           [_nchw(_PX)], lambda v: _nchw(_ref_pool(_nhwc(v), [1, 2, 2, 1], [1, 2, 2, 1],
                                                   "SAME", np.max)), grad=True, name="nchw"),
    _pool_case("AvgPool", kf.nn.avg_pool, _PX, *_K2, "VALID", grad=True, name="valid"),
    _pool_case("AvgPool", kf.nn.avg_pool, _PX, *_K3S2, "SAME", grad=True, name="same"),
    _pool_case("AvgPool", kf.nn.avg_pool, _PX.astype(np.float32), [1, 3, 2, 1], [1, 1, 1, 1],
               "SAME", rtol=1e-5, name="f32_stride1"),
    _pool_case("AvgPool", kf.nn.avg_pool, _PX.astype(np.float16), *_K3S2, "SAME", rtol=2e-3,
               atol=2e-3, name="f16"),
    OpCase("AvgPool", lambda v: kf.nn.avg_pool(v, [3, 3], [2, 2], "SAME", data_format="NCHW"),
           [_nchw(_PX)], lambda v: _nchw(_ref_pool(_nhwc(v), [1, 3, 3, 1], [1, 2, 2, 1], "SAME",
                                                   np.mean)), grad=True, name="nchw"),
]

_T = _PX.copy()
_T[0, 0, 0, 0] = _T[0, 0, 1, 0] = _T[0, 1, 0, 0] = 100.0  # ties: the first one wins
_POOL_CASES += [
    OpCase("MaxPoolGrad", lambda x, g: nn_ops_conv.max_pool_grad(
        x, kf.nn.max_pool(x, *_K3S2, "SAME"), g, *_K3S2, "SAME"), [_T, _f(2, 4, 3, 3)],
        lambda x, g: _ref_max_pool_grad(x, g, *_K3S2, "SAME"), grad=True, grad_inputs=[1],
        name="same_ties"),
    OpCase("MaxPoolGrad", lambda x, g: nn_ops_conv.max_pool_grad(
        x, kf.nn.max_pool(x, *_K2, "VALID"), g, *_K2, "VALID"), [_PX, _f(2, 3, 3, 3)],
        lambda x, g: _ref_max_pool_grad(x, g, *_K2, "VALID"), grad=True, name="valid_f64"),
    OpCase("MaxPoolGrad", lambda x, g: nn_ops_conv.max_pool_grad(
        x, kf.nn.max_pool(x, *_K2, "VALID"), g, *_K2, "VALID"),
        [_PX.astype(np.float32), _f(2, 3, 3, 3, dtype=np.float32)],
        lambda x, g: _ref_max_pool_grad(x, g, *_K2, "VALID"), name="valid"),
    OpCase("MaxPoolGrad", lambda x, g: nn_ops_conv.max_pool_grad(
        x, kf.nn.max_pool(x, [1, 2, 2, 1], 1, "SAME"), g, [1, 2, 2, 1], [1, 1, 1, 1], "SAME"),
        [_XI.reshape(1, 4, 5, 1), _r.randint(0, 5, (1, 4, 5, 1)).astype(np.int32)],
        lambda x, g: _ref_max_pool_grad(x, g, [1, 2, 2, 1], [1, 1, 1, 1], "SAME"),
        name="overlap_int"),
    OpCase("MaxPoolGradGrad", lambda x, g: nn_ops_conv.max_pool_grad_grad(
        x, kf.nn.max_pool(x, *_K3S2, "SAME"), g, *_K3S2, "SAME"), [_T, _f(2, 7, 6, 3)],
        lambda x, g: _ref_max_pool_grad_grad(x, g, *_K3S2, "SAME"), grad=True, grad_inputs=[1],
        name="same_ties"),
    OpCase("MaxPoolGradGrad", lambda x, g: nn_ops_conv.max_pool_grad_grad(
        x, kf.nn.max_pool(x, *_K2, "VALID"), g, *_K2, "VALID"), [_PX, _f(2, 7, 6, 3)],
        lambda x, g: _ref_max_pool_grad_grad(x, g, *_K2, "VALID"), grad=True, name="valid"),
    OpCase("MaxPoolGradGrad", lambda x, g: nn_ops_conv.max_pool_grad_grad(
        x, kf.nn.max_pool(x, 2, 1, "SAME", data_format="NCHW"), g, [1, 1, 2, 2], [1, 1, 1, 1],
        "SAME", data_format="NCHW"), [_nchw(_PX).astype(np.float32), _f(2, 3, 7, 6, dtype=np.float32)],
        lambda x, g: _nchw(_ref_max_pool_grad_grad(_nhwc(x), _nhwc(g), [1, 2, 2, 1],
                                                   [1, 1, 1, 1], "SAME")), name="nchw_f32"),
    OpCase("MaxPoolGradGrad", lambda x, g: nn_ops_conv.max_pool_grad_grad(
        x, kf.nn.max_pool(x, [1, 2, 2, 1], 1, "SAME"), g, [1, 2, 2, 1], [1, 1, 1, 1], "SAME"),
        [_XI.reshape(1, 4, 5, 1), _r.randint(0, 5, (1, 4, 5, 1)).astype(np.int32)],
        lambda x, g: _ref_max_pool_grad_grad(x, g, [1, 2, 2, 1], [1, 1, 1, 1], "SAME"),
        name="overlap_int"),
    OpCase("MaxPoolGradGrad", lambda x, g: nn_ops_conv.max_pool_grad_grad(
        x, kf.nn.max_pool(x, *_K2, "VALID"), g, *_K2, "VALID"),
        [np.zeros((0, 4, 4, 2), np.float32), np.zeros((0, 4, 4, 2), np.float32)],
        lambda x, g: np.zeros((0, 2, 2, 2), np.float32), name="empty"),
    OpCase("AvgPoolGrad", lambda g: nn_ops_conv.avg_pool_grad(
        [2, 7, 6, 3], g, *_K3S2, "SAME"), [_f(2, 4, 3, 3)],
        lambda g: _ref_avg_pool_grad((2, 7, 6, 3), g, *_K3S2, "SAME"), grad=True, name="same"),
    OpCase("AvgPoolGrad", lambda g: nn_ops_conv.avg_pool_grad(
        [2, 3, 7, 6], g, [1, 1, 2, 3], [1, 1, 2, 2], "VALID", data_format="NCHW"),
        [_f(2, 3, 3, 2)], lambda g: _nchw(_ref_avg_pool_grad(
            (2, 7, 6, 3), _nhwc(g), [1, 2, 3, 1], [1, 2, 2, 1], "VALID")), grad=True,
        name="nchw"),
    OpCase("AvgPoolGrad", lambda s, g: nn_ops_conv.avg_pool_grad(
        s, g, *_K2, "VALID"), [np.array([2, 7, 6, 3], np.int32), _f(2, 3, 3, 3, dtype=np.float32)],
        lambda s, g: _ref_avg_pool_grad(s, g, *_K2, "VALID"), name="valid_fed_shape"),
]


# --------------------------------------------------------------------------- fused batch norm
def _ref_bn(x, scale, offset, mean, var, eps, training, factor=1.0, nchw=False):
    """Returns [y, batch_mean, batch_variance, reserve_1, reserve_2] in float64 math."""
    xd = _nhwc(x).astype(np.float64) if nchw else x.astype(np.float64)
    if training:
        bm, bv = xd.mean((0, 1, 2)), xd.var((0, 1, 2))
    else:
        bm, bv = mean.astype(np.float64), var.astype(np.float64)
    y = (xd - bm) / np.sqrt(bv + eps) * scale + offset
    y = (_nchw(y) if nchw else y).astype(x.dtype)
    if not training:
        return [y, mean, var, mean, var]
    n = xd.size // xd.shape[-1]
    unbiased = bv * n / (n - 1)
    if factor != 1:
        out_m, out_v = (1 - factor) * mean + factor * bm, (1 - factor) * var + factor * unbiased
    else:
        out_m, out_v = bm, unbiased
    return [y] + [a.astype(np.float32) for a in (out_m, out_v, bm, bv)]


def _ref_bn_grad(dy, x, scale, mean, var, eps, training):
    """d(sum(dy * y))/d(x, scale, offset) by central differences of `_ref_bn` (float64)."""
    def loss(xx, sc, off):
        if training:
            m, v = xx.mean((0, 1, 2)), xx.var((0, 1, 2))
        else:
            m, v = mean, var
        return np.sum(dy * ((xx - m) / np.sqrt(v + eps) * sc + off))

    args = [x.astype(np.float64), scale.astype(np.float64), np.zeros(scale.shape)]
    grads = []
    for i, a in enumerate(args):
        g = np.zeros_like(a)
        for j in range(a.size):
            hi, lo = [b.copy() for b in args], [b.copy() for b in args]
            hi[i].reshape(-1)[j] += 1e-4
            lo[i].reshape(-1)[j] -= 1e-4
            g.reshape(-1)[j] = (loss(*hi) - loss(*lo)) / 2e-4
        grads.append(g.astype(np.float32))
    return grads


_BX = _f(2, 3, 2, 3, dtype=np.float32, scale=2.0) + 1.0
_BS, _BO = _f(3, dtype=np.float32), _f(3, dtype=np.float32)
_BM, _BV = _f(3, dtype=np.float32), np.abs(_f(3, dtype=np.float32)) + 0.5
_NONE = np.zeros((0,), np.float32)
_BN_CASES = [
    OpCase("FusedBatchNormV3", lambda x, s, o, m, v: list(nn_ops_norm.fused_batch_norm(
        x, s, o, m, v, epsilon=0.01)), [_BX, _BS, _BO, _NONE, _NONE],
        lambda x, s, o, m, v: _ref_bn(x, s, o, m, v, 0.01, True)[:3], rtol=1e-4, atol=1e-5,
        name="training"),
    OpCase("FusedBatchNormV3", lambda x, s, o, m, v: nn_ops_norm.fused_batch_norm(
        x, s, o, m, v, epsilon=0.01)[0], [_BX, _BS, _BO, _NONE, _NONE],
        lambda x, s, o, m, v: _ref_bn(x, s, o, m, v, 0.01, True)[0], rtol=1e-3, atol=1e-3,
        grad=True, grad_inputs=[0, 1, 2], delta=1e-2, grad_tol=5e-3, name="training_grad"),
    OpCase("FusedBatchNormV3", lambda x, s, o, m, v: [
        t for t in kf.nn.fused_batch_norm(x, s, o, m, v, exponential_avg_factor=0.3)],
        [_BX, _BS, _BO, _BM, _BV],
        lambda x, s, o, m, v: _ref_bn(x, s, o, m, v, 0.001, True, 0.3)[:3], rtol=1e-4,
        atol=1e-5, name="avg_factor"),
    OpCase("FusedBatchNormV3", lambda x, s, o, m, v: list(kf.nn.fused_batch_norm(
        x, s, o, m, v, is_training=False, data_format="NCHW")), [_nchw(_BX), _BS, _BO, _BM, _BV],
        lambda x, s, o, m, v: _ref_bn(x, s, o, m, v, 0.001, False, nchw=True)[:3], rtol=1e-4,
        atol=1e-5, name="inference_nchw"),
    OpCase("FusedBatchNormV3", lambda x, s, o, m, v: kf.nn.fused_batch_norm(
        x, s, o, m, v, is_training=False)[0], [_BX, _BS, _BO, _BM, _BV],
        lambda x, s, o, m, v: _ref_bn(x, s, o, m, v, 0.001, False)[0], rtol=1e-4, atol=1e-5,
        grad=True, grad_inputs=[0, 1, 2], delta=1e-2, grad_tol=5e-3, name="inference_grad"),
    OpCase("FusedBatchNormV3", lambda x, s, o: nn_ops_norm.fused_batch_norm(
        x, s, o, epsilon=0.01, data_format="NCHW")[0], [_nchw(_BX), _BS, _BO],
        lambda x, s, o: _ref_bn(x, s, o, None, None, 0.01, True, nchw=True)[0], rtol=1e-3,
        atol=1e-3, grad=True, delta=1e-2, grad_tol=5e-3, name="training_nchw_grad"),
    OpCase("FusedBatchNormV3", lambda x, s, o, m, v: list(kf.nn.fused_batch_norm(
        x, s, o, m, v)), [_BX.astype(np.float16), _BS, _BO, _NONE, _NONE],
        lambda x, s, o, m, v: _ref_bn(x, s, o, m, v, 0.001, True)[:3], rtol=5e-3, atol=5e-3,
        name="f16"),
]

_BDY = _f(2, 3, 2, 3, dtype=np.float32)
_BN_CASES += [
    OpCase("FusedBatchNormGradV3", lambda dy, x, s, m, v: list(nn_ops_norm.fused_batch_norm_grad(
        dy, x, s, m, v, m, epsilon=0.01)),
        [_BDY, _BX, _BS, _BX.mean((0, 1, 2)), _BX.var((0, 1, 2))],
        lambda dy, x, s, m, v: _ref_bn_grad(dy, x, s, m, v, 0.01, True), rtol=1e-3, atol=1e-3,
        name="training"),
    OpCase("FusedBatchNormGradV3", lambda dy, x, s, m, v: list(nn_ops_norm.fused_batch_norm_grad(
        dy, x, s, m, v, m, epsilon=0.01, is_training=False)), [_BDY, _BX, _BS, _BM, _BV],
        lambda dy, x, s, m, v: _ref_bn_grad(dy, x, s, m, v, 0.01, False), rtol=1e-3, atol=1e-3,
        name="inference"),
]


def _bn_grad_of_batch(dy, x, s, fmt="NHWC", outputs=(0, 1, 2)):
    """FusedBatchNormGradV3 fed the reserve spaces FusedBatchNormV3 computes from x (training),
    so that finite differences in x move the batch statistics too."""
    zeros = kf.zeros_like(s)
    fwd = nn_ops_norm.fused_batch_norm(x, s, zeros, epsilon=0.01, data_format=fmt)[0].op
    out = nn_ops_norm.fused_batch_norm_grad(dy, x, s, *fwd.outputs[3:6], epsilon=0.01,
                                            data_format=fmt)
    return [out[i] for i in outputs]


def _ref_bn_grad_of_batch(dy, x, s, nchw=False, outputs=(0, 1, 2)):
    if nchw:
        dy, x = _nhwc(dy), _nhwc(x)
    out = _ref_bn_grad(dy, x, s, None, None, 0.01, True)
    if nchw:
        out[0] = _nchw(out[0])
    return [out[i] for i in outputs]


_BN_CASES += [
    OpCase("FusedBatchNormGradV3", _bn_grad_of_batch, [_BDY, _BX, _BS], _ref_bn_grad_of_batch,
           rtol=1e-3, atol=1e-3, grad=True, delta=1e-2, grad_tol=5e-3, name="training_grad"),
    OpCase("FusedBatchNormGradV3", lambda dy, x, s: _bn_grad_of_batch(dy, x, s, "NCHW", (0,)),
           [_nchw(_BDY), _nchw(_BX), _BS],
           lambda dy, x, s: _ref_bn_grad_of_batch(dy, x, s, True, (0,)), rtol=1e-3, atol=1e-3,
           grad=True, delta=1e-2, grad_tol=5e-3, name="training_nchw_dx_grad"),
    OpCase("FusedBatchNormGradV3", lambda dy, x, s: _bn_grad_of_batch(dy, x, s, outputs=(1, 2)),
           [_BDY, _BX, _BS], lambda dy, x, s: _ref_bn_grad_of_batch(dy, x, s, outputs=(1, 2)),
           rtol=1e-3, atol=1e-3, grad=True, delta=1e-2, grad_tol=5e-3,
           name="training_scale_offset_grad"),
    OpCase("FusedBatchNormGradV3", lambda dy, x, s, m, v: list(nn_ops_norm.fused_batch_norm_grad(
        dy, x, s, m, v, m, epsilon=0.01, is_training=False)), [_BDY, _BX, _BS, _BM, _BV],
        lambda dy, x, s, m, v: _ref_bn_grad(dy, x, s, m, v, 0.01, False), rtol=1e-3, atol=1e-3,
        grad=True, grad_inputs=[0, 1, 2], delta=1e-2, grad_tol=5e-3, name="inference_grad"),
    OpCase("FusedBatchNormGradV3", lambda dy, x, s, m, v: list(nn_ops_norm.fused_batch_norm_grad(
        dy, x, s, m, v, m, epsilon=0.01, is_training=False, data_format="NCHW")),
        [_nchw(_BDY), _nchw(_BX), _BS, _BM, _BV],
        lambda dy, x, s, m, v: [_nchw(g) if i == 0 else g for i, g in enumerate(_ref_bn_grad(
            _nhwc(dy), _nhwc(x), s, m, v, 0.01, False))], rtol=1e-3, atol=1e-3,
        grad=True, grad_inputs=[0, 1, 2], delta=1e-2, grad_tol=5e-3, name="inference_nchw_grad"),
]

CASES = (_ACT_CASES + _GRAD_CASES + _SOFTMAX_CASES + _XENT_CASES + _BIAS_CASES + _TOPK_CASES
         + _CONV_CASES + _POOL_CASES + _BN_CASES)
