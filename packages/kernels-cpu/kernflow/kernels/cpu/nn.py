"""Numpy kernels of the nn ops (kernflow.core.ops.nn_ops).

Everything computes in the input dtype. Convolutions use im2col (a strided window view copied
into one matrix) and a single matmul per batch chunk; pooling loops over the window taps only,
each step vectorized over the whole output.
"""

from __future__ import annotations

import itertools

import numpy as np

from kernflow.core.framework import errors
from kernflow.core.ops.nn_ops_conv import conv_params, pool_params, window_geometry
from kernflow.kernels.cpu import intra_op, onednn
from kernflow.kernels.cpu.vectorized import add_reduce, arange, relu_into, row_max

DEVICE = "CPU"

_SELU_ALPHA = 1.6732632423543772848170429916717
_SELU_SCALE = 1.0507009873554804934193349852946
# Elements of an im2col matrix built at once; bigger batches are processed in chunks.
_COLS_CHUNK = 1 << 24
# Multiply-adds above which a conv kernel runs on the inter-op pool.
_EXPENSIVE_FLOPS = 1 << 21


def _error(ctx, msg):
    return errors.InvalidArgumentError(None, None, f"{ctx.op_type} {ctx.name}: {msg}")


def _shape_str(shape):
    return "[" + ",".join(str(d) for d in shape) + "]"


# ------------------------------------------------------------------------------- activations
def _relu(x):
    if type(x) is not np.ndarray:
        return np.maximum(x, 0)
    return relu_into(x, np.empty_like(x))


def _relu6(x):
    return np.clip(x, 0, 6)


def _elu(x):
    return np.where(x > 0, x, np.expm1(np.minimum(x, 0)))


def _selu(x):
    s, a = x.dtype.type(_SELU_SCALE), x.dtype.type(_SELU_SCALE * _SELU_ALPHA)
    return np.where(x > 0, s * x, a * np.expm1(np.minimum(x, 0)))


def _softplus(x):
    return np.logaddexp(x.dtype.type(0), x)


def _softsign(x):
    return x / (np.abs(x) + x.dtype.type(1))


def _leaky_relu(ctx):
    alpha = ctx.output_dtypes[0].as_numpy_dtype(ctx.get_attr("alpha"))
    return lambda x: np.where(x > 0, x, x * alpha)


def _relu_grad(g, f):
    if type(g) is np.ndarray and type(f) is np.ndarray:
        dx = onednn.relu_grad(g, f)     # one pass instead of numpy's two (1.25M floats: 0.87 -> 0.54 ms)
        if dx is not None:
            return dx
    return g * (f > 0)


def _relu_inplace(x):
    if type(x) is not np.ndarray or not x.flags.writeable:
        return np.maximum(x, 0)
    return relu_into(x, x)


def _relu_grad_inplace(g, f):
    if type(f) is np.ndarray:
        dx = onednn.relu_grad(g, f)
        if dx is not None:
            return dx
    try:
        return np.multiply(g, f > 0, out=g)
    except (TypeError, ValueError):
        return g * (f > 0)


def _relu6_grad(g, f):
    return g * ((f > 0) & (f < 6))


def _elu_grad(g, y):
    return np.where(y > 0, g, g * (y + y.dtype.type(1)))


def _selu_grad(g, y):
    s, a = y.dtype.type(_SELU_SCALE), y.dtype.type(_SELU_SCALE * _SELU_ALPHA)
    return np.where(y > 0, g * s, g * (y + a))


def _softplus_grad(g, f):
    one = f.dtype.type(1)
    return g / (one + np.exp(-f))


def _softsign_grad(g, f):
    d = np.abs(f) + f.dtype.type(1)
    return g / (d * d)


def _leaky_relu_grad(ctx):
    alpha = ctx.output_dtypes[0].as_numpy_dtype(ctx.get_attr("alpha"))
    return lambda g, f: np.where(f > 0, g, g * alpha)


# ----------------------------------------------------------------------------------- softmax
def _shifted(x):
    """x - max(x, -1) (0 for empty rows)."""
    if x.shape[-1] == 0:
        return x.copy()
    if x.ndim == 2 and x.shape[0]:
        return x - row_max(x)
    return x - np.max(x, axis=-1, keepdims=True)


def _row_sum(x):
    """sum(x, -1, keepdims=True), accumulated in float32 for halves."""
    if x.dtype == np.float16:
        return np.add.reduce(x, axis=-1, keepdims=True, dtype=np.float32).astype(x.dtype)
    return add_reduce(x, -1, True, x.dtype)


def _softmax(x):
    e = np.exp(_shifted(x))
    e /= _row_sum(e)
    return e


def _log_softmax(x):
    s = _shifted(x)
    s -= np.log(_row_sum(np.exp(s)))
    return s


def _xent(ctx):
    def compute(features, labels):
        if features.ndim != 2 or labels.ndim != 2:
            raise _error(ctx, f"logits and labels must be 2-D, but got shapes "
                              f"{_shape_str(features.shape)} and {_shape_str(labels.shape)}")
        try:
            features, labels = np.broadcast_arrays(features, labels)
        except ValueError:
            raise _error(ctx, f"logits and labels must be broadcastable: logits_size="
                              f"{_shape_str(features.shape)} labels_size="
                              f"{_shape_str(labels.shape)}") from None
        s = _shifted(features)
        lse = np.log(np.sum(np.exp(s), axis=-1, keepdims=True))
        loss = np.sum(labels * (lse - s), axis=-1)
        return loss, np.exp(s - lse) - labels
    return compute


_UNSIGNED = {1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}


def _sparse_xent(ctx):
    def compute(features, labels):
        if features.ndim != 2 or labels.ndim != 1 or features.shape[0] != labels.shape[0]:
            raise _error(ctx, f"logits and labels must have the same first dimension, got logits "
                              f"shape {_shape_str(features.shape)} and labels shape "
                              f"{_shape_str(labels.shape)}")
        n, c = features.shape
        if n and c == 0:
            raise _error(ctx, f"Must have at least one class, but got logits shape "
                              f"{_shape_str(features.shape)}")
        if not n:
            return np.zeros(0, features.dtype), features.copy()
        # One range check: as unsigned, negative labels are larger than any class index.
        if np.maximum.reduce(labels.view(_UNSIGNED[labels.dtype.itemsize])) >= c:
            bad = (labels < 0) | (labels >= c)
            v = labels[np.argmax(bad)]
            raise _error(ctx, f"Received a label value of {v} which is outside the valid range of "
                              f"[0, {c}).  Label values: {' '.join(map(str, labels.tolist()))}")
        loss = np.empty(n, features.dtype)
        backprop = np.empty_like(features, order="C")
        parts = max(1, min(intra_op.threads(), features.size >> 18, n))
        intra_op.run_blocks(lambda i, j: _xent_rows(features, labels, loss, backprop, i, j), n, parts)
        return loss, backprop
    return compute


def _xent_rows(features, labels, loss, backprop, i, j):
    """Rows i:j of SparseSoftmaxCrossEntropyWithLogits into `loss` and `backprop` (one exp:
    backprop = softmax - onehot, loss = log(sum(exp(s))) - s[label])."""
    f = features[i:j]
    n, c = f.shape
    s = f - row_max(f)
    bp = backprop[i:j]
    np.exp(s, out=bp)
    total = _row_sum(bp)
    at_label = arange(n) * c + labels[i:j]    # flat positions of the labels' logits
    loss[i:j] = np.log(total.reshape(n)) - s.reshape(-1).take(at_label)
    bp /= total
    bp.reshape(-1)[at_label] -= features.dtype.type(1)


def _l2_loss(x):
    acc = np.float32 if x.dtype == np.float16 else x.dtype.type
    return np.asarray(np.sum(np.square(x, dtype=acc), dtype=acc) * acc(0.5), dtype=x.dtype)


# ---------------------------------------------------------------------------------- bias_add
def _bias_add(ctx):
    nchw = ctx.get_attr("data_format") == "NCHW"

    def compute(x, b):
        if x.ndim < 2:
            raise _error(ctx, f"Input tensor must be at least 2D: {_shape_str(x.shape)}")
        if b.ndim != 1:
            raise _error(ctx, f"Biases must be 1D: {_shape_str(b.shape)}")
        c = 1 if nchw else -1
        if x.shape[c] != b.shape[0]:
            raise _error(ctx, f"Must provide as many biases as the channel dimension of the input "
                              f"tensor: {_shape_str(b.shape)} vs. {_shape_str(x.shape)}")
        if nchw and x.ndim > 2:
            b = b.reshape((-1,) + (1,) * (x.ndim - 2))
        return x + b
    return compute


def _bias_add_grad(ctx):
    nchw = ctx.get_attr("data_format") == "NCHW"

    def compute(g):
        if g.ndim < 2:
            raise _error(ctx, f"Input tensor must be at least 2D: {_shape_str(g.shape)}")
        c = 1 if nchw else g.ndim - 1
        axes = tuple(i for i in range(g.ndim) if i != c)
        if g.dtype == np.float16:
            return np.add.reduce(g, axis=axes, dtype=np.float32).astype(g.dtype)
        return add_reduce(g, axes, False, g.dtype)
    return compute


# ------------------------------------------------------------------------------------- top-k
def _top_k_arg(ctx, x, k) -> int:
    """TopKV2's checks (k >= 0, input at least 1-D with k columns); returns k as an int."""
    k = int(k)
    if k < 0:
        raise _error(ctx, f"Need k >= 0, got {k}")
    if x.ndim < 1:
        raise _error(ctx, f"input must be at least 1-D, got shape {_shape_str(x.shape)}")
    if x.shape[-1] < k:
        raise _error(ctx, f"input must have at least k columns. Had {x.shape[-1]}, needed {k}")
    return k


def _top_k(ctx):
    def compute(x, k):
        k = _top_k_arg(ctx, x, k)
        n = x.shape[-1]
        # A stable ascending sort of the reversed row, read backwards, is descending with
        # equal values in increasing index order.
        order = np.argsort(x[..., ::-1], axis=-1, kind="stable")[..., ::-1][..., :k]
        idx = (n - 1 - order).astype(np.int32)
        return np.take_along_axis(x, idx, axis=-1), idx
    return compute


def _in_top_k(ctx):
    def compute(pred, targets, k):
        if pred.ndim != 2 or targets.ndim != 1 or pred.shape[0] != targets.shape[0]:
            raise _error(ctx, f"predictions must be 2-D and targets 1-D with the same first "
                              f"dimension, got {_shape_str(pred.shape)} and "
                              f"{_shape_str(targets.shape)}")
        n, c = pred.shape
        k = int(k)
        valid = (targets >= 0) & (targets < c)
        t = np.where(valid, targets, 0)
        out = np.zeros(n, dtype=bool)
        if c == 0 or n == 0:
            return out
        tp = pred[np.arange(n), t][:, None]
        more = np.sum(pred > tp, axis=1)
        finite = np.all(np.isfinite(pred), axis=1)
        return valid & finite & (more < k)
    return compute


# ------------------------------------------------------------------------------ convolutions
def _conv_setup(ctx):
    fmt, strides, dil, padding, pads = conv_params(ctx.get_attr)
    return fmt == "NCHW", strides, dil, padding, pads


def _geometry(ctx, h, w, kh, kw, strides, dil, padding, pads):
    try:
        oh, pt, pb = window_geometry(h, kh, strides[0], dil[0], padding, pads[0])
        ow, pl, pr = window_geometry(w, kw, strides[1], dil[1], padding, pads[1])
    except ValueError as e:
        raise _error(ctx, str(e)) from None
    return oh, ow, ((0, 0), (pt, pb), (pl, pr), (0, 0))


def _pad(x, pads, value=0):
    if not any(p for pair in pads for p in pair):
        return x
    return np.pad(x, pads, constant_values=value)


def _windows(xp, kh, kw, oh, ow, strides, dil):
    """[N, OH, OW, KH, KW, C] read-only view of the conv windows of padded NHWC `xp`."""
    sn, sh, sw, sc = xp.strides
    shape = (xp.shape[0], oh, ow, kh, kw, xp.shape[3])
    st = (sn, sh * strides[0], sw * strides[1], sh * dil[0], sw * dil[1], sc)
    return np.lib.stride_tricks.as_strided(xp, shape, st, writeable=False)


def _batch_chunks(n, per_item):
    step = max(1, _COLS_CHUNK // max(per_item, 1))
    return [(i, min(n, i + step)) for i in range(0, n, step)]


def _dnnl(fn, *args):
    """oneDNN's result, or None to use numpy (no library, another dtype, or a geometry it refuses)."""
    try:
        return fn(*args)
    except onednn.OneDNNError as e:
        onednn.log_fallback(fn.__name__, e)
        return None


def _spatial_pads(pad4):
    return [p[0] for p in pad4[1:-1]], [p[1] for p in pad4[1:-1]]


def _check_filter(ctx, c, w):
    if w.ndim != 4:
        raise _error(ctx, f"filter must be 4-dimensional: {_shape_str(w.shape)}")
    if c != w.shape[2]:
        raise _error(ctx, f"input depth must be evenly divisible by filter depth: {c} vs "
                          f"{w.shape[2]} (grouped convolutions are not supported)")


def _conv2d(ctx):
    nchw, strides, dil, padding, pads = _conv_setup(ctx)

    def compute(x, w):
        if x.ndim != 4:
            raise _error(ctx, f"input must be 4-dimensional: {_shape_str(x.shape)}")
        if nchw:
            x = x.transpose(0, 2, 3, 1)
        n, h, wd, c = x.shape
        _check_filter(ctx, c, w)
        kh, kw, _, o = w.shape
        oh, ow, pad4 = _geometry(ctx, h, wd, kh, kw, strides, dil, padding, pads)
        y = _dnnl(onednn.conv_forward, x, w, (n, oh, ow, o), True, strides, dil, *_spatial_pads(pad4))
        if y is None:
            y = _numpy_conv2d(x, w, oh, ow, pad4, strides, dil, padding)
        return y.transpose(0, 3, 1, 2) if nchw else y
    return compute


def _fused_conv2d(ctx):
    """`_FusedConv2D` (made by the remapper pass, kernflow.core.runtime.remapper): Conv2D, then
    BiasAdd, then optionally Relu, as one oneDNN primitive (bias and relu as post-ops) when it can,
    else the three steps in numpy."""
    nchw, strides, dil, padding, pads = _conv_setup(ctx)
    fused = list(ctx.get_attr("fused_ops"))
    if fused not in (["BiasAdd"], ["BiasAdd", "Relu"]):
        raise errors.UnimplementedError(None, None, f"_FusedConv2D {ctx.name}: fused_ops {fused} is not "
                                        f"supported (BiasAdd, optionally followed by Relu)")
    relu = len(fused) == 2

    def compute(x, w, *args):
        if len(args) != 1:
            raise _error(ctx, f"expects 1 argument (the bias) for fused_ops {fused}, got {len(args)}")
        bias = args[0]
        if x.ndim != 4:
            raise _error(ctx, f"input must be 4-dimensional: {_shape_str(x.shape)}")
        if nchw:
            x = x.transpose(0, 2, 3, 1)
        n, h, wd, c = x.shape
        _check_filter(ctx, c, w)
        kh, kw, _, o = w.shape
        if bias.shape != (o,):
            raise _error(ctx, f"bias must be a vector of the filter's {o} output channels, got shape "
                              f"{_shape_str(bias.shape)}")
        oh, ow, pad4 = _geometry(ctx, h, wd, kh, kw, strides, dil, padding, pads)
        y = _dnnl(onednn.conv_forward, x, w, (n, oh, ow, o), True, strides, dil, *_spatial_pads(pad4),
                  bias, relu)
        if y is None:
            y = _numpy_conv2d(x, w, oh, ow, pad4, strides, dil, padding)
            np.add(y, bias, out=y)
            if relu:
                relu_into(y, y)
        return y.transpose(0, 3, 1, 2) if nchw else y
    return compute


def _numpy_conv2d(x, w, oh, ow, pad4, strides, dil, padding):
    """NHWC conv2d in numpy: one matmul for 1x1 filters, else im2col + a matmul per batch chunk."""
    n, _, _, c = x.shape
    kh, kw, _, o = w.shape
    if kh == kw == 1 and strides == (1, 1) and padding != "EXPLICIT":
        return (x.reshape(-1, c) @ w.reshape(c, o)).reshape(n, oh, ow, o)
    xp = _pad(x, pad4)
    wm = w.reshape(kh * kw * c, o)
    y = np.empty((n, oh, ow, o), dtype=x.dtype)
    for a, b in _batch_chunks(n, oh * ow * kh * kw * c):
        cols = _windows(xp[a:b], kh, kw, oh, ow, strides, dil)
        y[a:b] = (cols.reshape(-1, kh * kw * c) @ wm).reshape(b - a, oh, ow, o)
    return y


def _sizes(ctx, v, what):
    v = np.asarray(v).reshape(-1)
    if v.size != 4 or (v < 0).any():
        raise _error(ctx, f"{what} must be a vector of 4 non-negative sizes, got {v.tolist()}")
    return [int(d) for d in v]


def _conv2d_backprop_input(ctx):
    nchw, strides, dil, padding, pads = _conv_setup(ctx)

    def compute(sizes, w, dy):
        sizes = _sizes(ctx, sizes, "input_sizes")
        n, h, wd, c = [sizes[0], sizes[2], sizes[3], sizes[1]] if nchw else sizes
        if dy.ndim != 4:
            raise _error(ctx, f"out_backprop must be 4-dimensional: {_shape_str(dy.shape)}")
        if nchw:
            dy = dy.transpose(0, 2, 3, 1)
        _check_filter(ctx, c, w)
        kh, kw, _, o = w.shape
        oh, ow, pad4 = _geometry(ctx, h, wd, kh, kw, strides, dil, padding, pads)
        if dy.shape != (n, oh, ow, o):
            raise _error(ctx, f"out_backprop has shape {_shape_str(dy.shape)}, but input_sizes "
                              f"and the filter give an output of shape "
                              f"{_shape_str((n, oh, ow, o))}")
        dx = _dnnl(onednn.conv_backward_data, (n, h, wd, c), w, dy, True, strides, dil,
                   *_spatial_pads(pad4))
        if dx is not None:
            return dx.transpose(0, 3, 1, 2) if nchw else dx
        (pt, pb), (pl, pr) = pad4[1], pad4[2]
        dxp = np.zeros((n, h + pt + pb, wd + pl + pr, c), dtype=w.dtype)
        wt = w.reshape(kh * kw * c, o).T
        sh, sw = strides
        for a, b in _batch_chunks(n, oh * ow * kh * kw * c):
            dcols = (dy[a:b].reshape(-1, o) @ wt).reshape(b - a, oh, ow, kh, kw, c)
            for i in range(kh):
                r = i * dil[0]
                for j in range(kw):
                    s = j * dil[1]
                    dxp[a:b, r:r + (oh - 1) * sh + 1:sh, s:s + (ow - 1) * sw + 1:sw] += \
                        dcols[:, :, :, i, j]
        dx = dxp[:, pt:pt + h, pl:pl + wd]
        return dx.transpose(0, 3, 1, 2) if nchw else dx
    return compute


def _conv2d_backprop_filter(ctx):
    nchw, strides, dil, padding, pads = _conv_setup(ctx)

    def compute(x, sizes, dy):
        kh, kw, ci, o = _sizes(ctx, sizes, "filter_sizes")
        if x.ndim != 4 or dy.ndim != 4:
            raise _error(ctx, f"input and out_backprop must be 4-dimensional: "
                              f"{_shape_str(x.shape)} and {_shape_str(dy.shape)}")
        if nchw:
            x, dy = x.transpose(0, 2, 3, 1), dy.transpose(0, 2, 3, 1)
        n, h, wd, c = x.shape
        if c != ci:
            raise _error(ctx, f"input depth {c} does not match filter_sizes depth {ci}")
        oh, ow, pad4 = _geometry(ctx, h, wd, kh, kw, strides, dil, padding, pads)
        if dy.shape != (n, oh, ow, o):
            raise _error(ctx, f"out_backprop has shape {_shape_str(dy.shape)}, but the input and "
                              f"filter_sizes give an output of shape {_shape_str((n, oh, ow, o))}")
        dw = _dnnl(onednn.conv_backward_weights, x, (kh, kw, c, o), dy, True, strides, dil,
                   *_spatial_pads(pad4))
        if dw is not None:
            return dw
        xp = _pad(x, pad4)
        dw = np.zeros((kh * kw * c, o), dtype=x.dtype)
        for a, b in _batch_chunks(n, oh * ow * kh * kw * c):
            cols = _windows(xp[a:b], kh, kw, oh, ow, strides, dil).reshape(-1, kh * kw * c)
            dw += cols.T @ dy[a:b].reshape(-1, o)
        return dw.reshape(kh, kw, c, o)
    return compute


def _big(n):
    return n > _EXPENSIVE_FLOPS


def _conv2d_expensive(inputs):
    x, w = inputs
    return _big(x.size * (w.size // max(w.shape[2], 1) if w.ndim == 4 else 1))


def _fused_conv2d_expensive(inputs):
    return _conv2d_expensive(inputs[:2])


def _conv2d_backprop_input_expensive(inputs):
    _, w, dy = inputs
    return _big(dy.size * (w.size // max(w.shape[3], 1) if w.ndim == 4 else 1))


def _conv2d_backprop_filter_expensive(inputs):
    x, sizes, dy = inputs
    return _big(x.size * int(np.prod(sizes)) // max(x.shape[-1] if x.ndim else 1, 1))


# ----------------------------------------------------------------------------------- pooling
def _pool_setup(ctx):
    ksize, strides = pool_params(ctx.op_type, ctx.get_attr("ksize"), ctx.get_attr("strides"),
                                 ctx.get_attr("padding"))
    return ksize, strides, ctx.get_attr("padding")


def _pool_geometry(ctx, shape, ksize, strides, padding):
    """(output shape, [(pad before, pad after)] * 4)."""
    try:
        geo = [window_geometry(d, k, s, 1, padding) for d, k, s in zip(shape, ksize, strides)]
    except ValueError as e:
        raise _error(ctx, str(e)) from None
    return tuple(g[0] for g in geo), [(g[1], g[2]) for g in geo]


def _taps(ksize, strides, out):
    """(tap index, slices of the padded input read by that tap for every output)."""
    ranges = [range(k) for k in ksize]
    for t, offs in enumerate(itertools.product(*ranges)):
        yield t, tuple(slice(o, o + (n - 1) * s + 1, s) for o, n, s in zip(offs, out, strides))


def _lowest(dtype):
    return -np.inf if dtype.kind == "f" else np.iinfo(dtype).min


def _window_counts(shape, ksize, strides, out, pads, dtype):
    """Per output, the number of its window's elements inside the (unpadded) input."""
    total = np.ones((), dtype=dtype)
    for ax, (d, k, s, o, (pb, _)) in enumerate(zip(shape, ksize, strides, out, pads)):
        start = np.arange(o) * s - pb
        cnt = np.minimum(start + k, d) - np.maximum(start, 0)
        total = total * cnt.astype(dtype).reshape([-1 if i == ax else 1 for i in range(4)])
    return total


def _check_4d(ctx, x, what="input"):
    if x.ndim != 4:
        raise _error(ctx, f"{what} must be 4-dimensional, got shape {_shape_str(x.shape)}")


def _max_pool(ctx):
    ksize, strides, padding = _pool_setup(ctx)

    def compute(x):
        _check_4d(ctx, x)
        out, pads = _pool_geometry(ctx, x.shape, ksize, strides, padding)
        if any(d == 0 for d in out) or x.size == 0:
            return np.zeros(out, dtype=x.dtype)
        y = _dnnl(onednn.max_pool, x, out, ksize, strides, pads)
        if y is not None:
            return y
        # TF's rules: a window's maximum is at least the dtype's lowest finite value (a window of
        # -inf gives it) and NaN never wins (fmax), as both TF's Eigen and oneDNN kernels do.
        xp = _pad(x, pads, _lowest(x.dtype))
        floor = np.finfo(x.dtype).min if x.dtype.kind == "f" else np.iinfo(x.dtype).min
        y = np.full(out, floor, dtype=x.dtype)
        step = np.fmax if x.dtype.kind == "f" else np.maximum
        for _, sl in _taps(ksize, strides, out):
            step(y, xp[sl], out=y)
        return y
    return compute


def _avg_pool(ctx):
    ksize, strides, padding = _pool_setup(ctx)

    def compute(x):
        _check_4d(ctx, x)
        out, pads = _pool_geometry(ctx, x.shape, ksize, strides, padding)
        if any(d == 0 for d in out) or x.size == 0:
            return np.zeros(out, dtype=x.dtype)
        xp = _pad(x, pads)
        y = None
        for _, sl in _taps(ksize, strides, out):
            y = xp[sl].copy() if y is None else np.add(y, xp[sl], out=y)
        y /= _window_counts(x.shape, ksize, strides, out, pads, x.dtype)
        return y
    return compute


def _window_argmax(x, ksize, strides, out, pads):
    """Per output, the tap (row-major window index) of its maximum, or -1 for none.

    Like TF: the first element strictly above the dtype's lowest finite value wins, so windows
    holding only -inf (or padding) select nothing.
    """
    xp = _pad(x, pads, _lowest(x.dtype))
    best = np.full(out, np.finfo(x.dtype).min if x.dtype.kind == "f" else
                   np.iinfo(x.dtype).min, dtype=x.dtype)
    arg = np.full(out, -1, dtype=np.int32)
    for t, sl in _taps(ksize, strides, out):
        v = xp[sl]
        m = v > best
        np.copyto(best, v, where=m)
        arg[m] = t
    return arg


def _pool_grad_geometry(ctx, x, g, ksize, strides, padding):
    """MaxPoolGrad's checks: orig_input 4-D, grad of the pooled shape; returns (out, pads)."""
    _check_4d(ctx, x, "orig_input")
    out, pads = _pool_geometry(ctx, x.shape, ksize, strides, padding)
    if g.shape != out:
        raise _error(ctx, f"grad has shape {_shape_str(g.shape)}, expected the pooled shape "
                          f"{_shape_str(out)} of orig_input {_shape_str(x.shape)}")
    return out, pads


def _pool_grad_grad_geometry(ctx, x, y, g, ksize, strides, padding):
    """MaxPoolGradGrad's checks: grad of orig_input's shape, orig_output of the pooled shape."""
    _check_4d(ctx, x, "orig_input")
    out, pads = _pool_geometry(ctx, x.shape, ksize, strides, padding)
    if g.shape != x.shape:
        raise _error(ctx, f"grad has shape {_shape_str(g.shape)}, expected the shape "
                          f"{_shape_str(x.shape)} of orig_input")
    if y.shape != out:
        raise _error(ctx, f"orig_output has shape {_shape_str(y.shape)}, expected the pooled "
                          f"shape {_shape_str(out)} of orig_input {_shape_str(x.shape)}")
    return out, pads


def _max_pool_grad(ctx):
    ksize, strides, padding = _pool_setup(ctx)

    def compute(x, y, g):
        out, pads = _pool_grad_geometry(ctx, x, g, ksize, strides, padding)
        if any(d == 0 for d in out) or x.size == 0:
            return np.zeros(x.shape, dtype=g.dtype)
        dx = _dnnl(onednn.max_pool_grad, x, y, g, ksize, strides, pads)
        if dx is not None:
            return dx
        arg = _window_argmax(x, ksize, strides, out, pads)
        dxp = np.zeros(tuple(d + pb + pa for d, (pb, pa) in zip(x.shape, pads)), dtype=g.dtype)
        zero = g.dtype.type(0)
        for t, sl in _taps(ksize, strides, out):
            dxp[sl] += np.where(arg == t, g, zero)
        return dxp[tuple(slice(pb, pb + d) for (pb, _), d in zip(pads, x.shape))]
    return compute


def _max_pool_grad_grad(ctx):
    ksize, strides, padding = _pool_setup(ctx)

    def compute(x, y, g):
        out, pads = _pool_grad_grad_geometry(ctx, x, y, g, ksize, strides, padding)
        res = np.zeros(out, dtype=g.dtype)
        if any(d == 0 for d in out) or x.size == 0:
            return res
        arg = _window_argmax(x, ksize, strides, out, pads)
        gp = _pad(g, pads)
        for t, sl in _taps(ksize, strides, out):
            np.copyto(res, gp[sl], where=arg == t)
        return res
    return compute


def _avg_pool_grad(ctx):
    ksize, strides, padding = _pool_setup(ctx)

    def compute(shape, g):
        shape = tuple(_sizes(ctx, shape, "orig_input_shape"))
        out, pads = _pool_geometry(ctx, shape, ksize, strides, padding)
        if g.shape != out:
            raise _error(ctx, f"grad has shape {_shape_str(g.shape)}, expected the pooled shape "
                              f"{_shape_str(out)} of orig_input_shape {_shape_str(shape)}")
        padded = tuple(d + pb + pa for d, (pb, pa) in zip(shape, pads))
        dxp = np.zeros(padded, dtype=g.dtype)
        if g.size:
            gs = g / _window_counts(shape, ksize, strides, out, pads, g.dtype)
            for _, sl in _taps(ksize, strides, out):
                dxp[sl] += gs
        return dxp[tuple(slice(pb, pb + d) for (pb, _), d in zip(pads, shape))]
    return compute


# ------------------------------------------------------------------------ fused batch norm
def _bn_layout(ctx, x, vectors, names):
    """(reduction axes, broadcast shape of a channel vector, channel count); checks shapes."""
    if x.ndim != 4:
        raise _error(ctx, f"x must be 4-dimensional, got shape {_shape_str(x.shape)}")
    nchw = ctx.get_attr("data_format") == "NCHW"
    c = x.shape[1] if nchw else x.shape[3]
    for v, n in zip(vectors, names):
        if v.shape != (c,):
            raise _error(ctx, f"{n} must have shape [{c}] (the channel dimension of x "
                              f"{_shape_str(x.shape)}), got {_shape_str(v.shape)}")
    return ((0, 2, 3), (1, c, 1, 1), c) if nchw else ((0, 1, 2), (c,), c)


def _fused_bn(ctx):
    eps = np.float32(ctx.get_attr("epsilon"))
    factor = np.float32(ctx.get_attr("exponential_avg_factor"))
    training = ctx.get_attr("is_training")
    empty = np.zeros((0,), np.float32)

    def compute(x, scale, offset, mean, var):
        need = [scale, offset] + ([mean, var] if not training or factor != 1 else [])
        axes, bshape, c = _bn_layout(ctx, x, need, ["scale", "offset", "mean", "variance"])
        xf = x.astype(np.float32, copy=False)
        n = x.size // c if c else 0
        if training:
            bm = xf.sum(axis=axes, dtype=np.float32) / np.float32(max(n, 1))
            d = xf - bm.reshape(bshape)
            bv = np.sum(d * d, axis=axes, dtype=np.float32) / np.float32(max(n, 1))
        else:
            bm, bv = mean, var
            d = xf - bm.reshape(bshape)
        inv = np.float32(1) / np.sqrt(bv + eps)
        y = (d * (inv * scale).reshape(bshape) + offset.reshape(bshape)).astype(x.dtype)
        if not training:
            return y, mean.copy(), var.copy(), mean.copy(), var.copy(), empty
        unbiased = bv * np.float32(n / max(n - 1, 1))
        if factor != 1:
            one = np.float32(1)
            out_m, out_v = (one - factor) * mean + factor * bm, (one - factor) * var + factor * unbiased
        else:
            out_m, out_v = bm.copy(), unbiased
        return y, out_m, out_v, bm, bv, empty
    return compute


def _fused_bn_grad(ctx):
    eps = np.float32(ctx.get_attr("epsilon"))
    training = ctx.get_attr("is_training")
    empty = np.zeros((0,), np.float32)

    def compute(dy, x, scale, mean, var, _):
        axes, bshape, c = _bn_layout(ctx, x, [scale, mean, var],
                                     ["scale", "reserve_space_1", "reserve_space_2"])
        if dy.shape != x.shape:
            raise _error(ctx, f"y_backprop and x must have the same shape, got "
                              f"{_shape_str(dy.shape)} and {_shape_str(x.shape)}")
        dyf = dy.astype(np.float32, copy=False)
        inv = np.float32(1) / np.sqrt(var + eps)
        xhat = (x.astype(np.float32, copy=False) - mean.reshape(bshape)) * inv.reshape(bshape)
        offset_bp = dyf.sum(axis=axes, dtype=np.float32)
        scale_bp = np.sum(dyf * xhat, axis=axes, dtype=np.float32)
        k = (scale * inv).reshape(bshape)
        if training:
            n = np.float32(max(x.size // c if c else 0, 1))
            dx = k * (dyf - (offset_bp / n).reshape(bshape) - xhat * (scale_bp / n).reshape(bshape))
        else:
            dx = dyf * k
        return dx.astype(x.dtype), scale_bp, offset_bp, empty, empty
    return compute


def register(registry, device=DEVICE):
    """Registers this family's CPU kernels."""
    simple = {
        "Relu": _relu, "Relu6": _relu6, "Elu": _elu, "Selu": _selu, "Softplus": _softplus,
        "Softsign": _softsign, "ReluGrad": _relu_grad, "Relu6Grad": _relu6_grad,
        "EluGrad": _elu_grad, "SeluGrad": _selu_grad, "SoftplusGrad": _softplus_grad,
        "SoftsignGrad": _softsign_grad, "Softmax": _softmax, "LogSoftmax": _log_softmax,
        "L2Loss": _l2_loss,
    }
    inplace = {"Relu": _relu_inplace, "ReluGrad": _relu_grad_inplace}
    for op, fn in simple.items():
        registry.register_simple(op, device, fn, fresh=True, inplace_fn=inplace.get(op))
    factories = {
        "LeakyRelu": _leaky_relu, "LeakyReluGrad": _leaky_relu_grad, "BiasAdd": _bias_add,
        "BiasAddGrad": _bias_add_grad, "SoftmaxCrossEntropyWithLogits": _xent,
        "TopKV2": _top_k,
        "InTopKV2": _in_top_k, "MaxPool": _max_pool, "AvgPool": _avg_pool,
        "MaxPoolGrad": _max_pool_grad, "MaxPoolGradGrad": _max_pool_grad_grad,
        "AvgPoolGrad": _avg_pool_grad,
        "FusedBatchNormV3": _fused_bn, "FusedBatchNormGradV3": _fused_bn_grad,
    }
    for op, fn in factories.items():
        registry.register(op, device, fn)
    registry.register("SparseSoftmaxCrossEntropyWithLogits", device, _sparse_xent, fresh=True)
    registry.register("Conv2D", device, _conv2d, expensive=_conv2d_expensive)
    registry.register("_FusedConv2D", device, _fused_conv2d, expensive=_fused_conv2d_expensive)
    registry.register("Conv2DBackpropInput", device, _conv2d_backprop_input,
                      expensive=_conv2d_backprop_input_expensive, host_memory=("input_sizes",))
    registry.register("Conv2DBackpropFilter", device, _conv2d_backprop_filter,
                      expensive=_conv2d_backprop_filter_expensive, host_memory=("filter_sizes",))
