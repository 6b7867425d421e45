"""Hand-written cupy kernels for the ops of a training step's hot path.

The generic kernels (`generic.py`) follow the CPU code statement by statement, which on a GPU
costs one kernel launch (5-20 us of host time in cupy) per numpy call. These replace them with one
generated elementwise or reduction kernel per op where the CPU code needs several: the fused
optimizer updates, ReLU and its gradient, softmax, the sparse softmax cross entropy, reductions with
host axes; matmuls call cuBLAS directly (`blas.py`). Hyperparameters (learning rates, decay rates) arrive as host scalars (host-memory inputs).
"""

from __future__ import annotations

import functools

import cupy as cp
import numpy as np

from kernflow.core.framework import errors
from kernflow.kernels.gpu import blas

__all__ = ["register", "HOST_HYPERS"]


def _error(ctx, msg):
    return errors.InvalidArgumentError(None, None, f"{ctx.op_type} {ctx.name}: {msg}")


def _dims(shape) -> str:
    return "[" + ",".join(str(d) for d in shape) + "]"


def _scalar(dtype, v):
    """A host scalar of `dtype` from a host value (numpy scalar or 0-d array)."""
    return dtype.type(v.item() if hasattr(v, "item") else v)


# ---------------------------------------------------------------------------- activations
_relu_k = cp.ElementwiseKernel("T x", "T y", "y = x > (T)0 ? x : (x != x ? x : (T)0)", "kf_relu")
_relu_grad_k = cp.ElementwiseKernel("T g, T f", "T y", "y = f > (T)0 ? g : (T)0", "kf_relu_grad")


def _relu(x):
    return _relu_k(x)


def _relu_grad(ctx):
    def compute(g, f):
        if g.shape != f.shape:
            raise _error(ctx, f"gradients and features must have the same shape, got "
                              f"{_dims(g.shape)} and {_dims(f.shape)}")
        return _relu_grad_k(g, f)
    return compute


# ---------------------------------------------------------------------------- softmax
_sum_exp_k = cp.ReductionKernel("T x, T m", "T y", "exp(x - m)", "a + b", "y = a", "0", "kf_sum_exp")
_softmax_k = cp.ElementwiseKernel("T x, T m, T z", "T y", "y = exp(x - m) / z", "kf_softmax")
_log_softmax_k = cp.ElementwiseKernel("T x, T m, T z", "T y", "y = x - m - log(z)", "kf_log_softmax")


def _softmax(log):
    """Softmax / LogSoftmax over the last axis: row max, sum of exp, one normalising pass (three
    launches); halves are computed in float32, as the CPU kernel accumulates them."""
    final = _log_softmax_k if log else _softmax_k

    def factory(ctx):
        def compute(x):
            if x.ndim < 1:
                raise _error(ctx, f"logits must have >= 1 dimension, got shape {_dims(x.shape)}")
            if x.size == 0:
                return x.copy()
            xs = x.astype(np.float32) if x.dtype == np.float16 else x
            m = xs.max(axis=-1, keepdims=True)
            z = _sum_exp_k(xs, m, axis=-1, keepdims=True)
            out = final(xs, m, z)
            return out.astype(np.float16) if x.dtype == np.float16 else out
        return compute
    return factory


# ---------------------------------------------------------------------------- matmul
def _matmul(ctx):
    ta, tb = ctx.get_attr("transpose_a"), ctx.get_attr("transpose_b")

    def compute(a, b):
        if a.ndim != 2 or b.ndim != 2:
            raise _error(ctx, f"In[0] and In[1] must be matrices, got shapes {_dims(a.shape)} and "
                              f"{_dims(b.shape)}")
        x = a.T if ta else a
        y = b.T if tb else b
        if x.shape[1] != y.shape[0]:
            raise _error(ctx, f"Matrix size-incompatible: In[0]: {_dims(a.shape)}, In[1]: "
                              f"{_dims(b.shape)}")
        out = blas.gemm(x, y)   # cuBLAS directly: capturable, a few us of host time
        if out is None:
            out = cp.dot(x, y)  # 2-D dot maps transposed views to cuBLAS flags, no copies
        return out
    return compute


def _bias_add(ctx):
    nchw = ctx.get_attr("data_format") == "NCHW"

    def compute(x, b):
        if x.ndim < 2 or b.ndim != 1 or x.shape[1 if nchw else -1] != b.shape[0]:
            raise _error(ctx, f"Must provide as many biases as the channel dimension of the input "
                              f"tensor: {_dims(b.shape)} vs. {_dims(x.shape)} (input at least 2-D)")
        if nchw and x.ndim > 2:
            b = b.reshape((-1,) + (1,) * (x.ndim - 2))
        return cp.add(x, b)
    return compute


def _bias_add_grad(ctx):
    nchw = ctx.get_attr("data_format") == "NCHW"

    def compute(g):
        if g.ndim < 2:
            raise _error(ctx, f"Input tensor must be at least 2D: {_dims(g.shape)}")
        c = 1 if nchw else g.ndim - 1
        axes = tuple(i for i in range(g.ndim) if i != c)
        if g.dtype == np.float16:
            return g.sum(axis=axes, dtype=np.float32).astype(np.float16)
        return g.sum(axis=axes)
    return compute


# ---------------------------------------------------------------------------- cross entropy
# log(sum(exp(x - m))) over rows, m the row maximum (inputs broadcast: m is [n, 1]).
_log_sum_exp_k = cp.ReductionKernel("T x, T m", "T y", "exp(x - m)", "a + b", "y = log(a)", "0",
                                    "kf_log_sum_exp")
_sparse_xent_k = cp.ElementwiseKernel(
    "T x, T m, T ls, L label, int64 ncls", "T backprop",
    "backprop = exp(x - m - ls) - ((i % ncls) == (long long)label ? (T)1 : (T)0)",
    "kf_sparse_xent_backprop")
_pick_k = cp.ElementwiseKernel("raw T x, T m, T ls, L label, int64 ncls", "T loss",
                               "loss = ls + m - x[i * ncls + (long long)label]",
                               "kf_sparse_xent_loss")


# One thread per row, for the common case of few classes: max, log-sum-exp, loss and backprop
# in one launch (the multi-kernel path below costs four).
_sparse_xent_rows_k = cp.ElementwiseKernel(
    "raw T x, L label, int64 ncls", "T loss, raw T backprop",
    '''
    const long long base = i * ncls;
    T m = x[base];
    for (long long j = 1; j < ncls; ++j) { T v = x[base + j]; m = v > m ? v : m; }
    T s = 0;
    for (long long j = 0; j < ncls; ++j) s += exp(x[base + j] - m);
    const T ls = log(s);
    const long long lab = (long long)label;
    loss = ls + m - x[base + lab];
    for (long long j = 0; j < ncls; ++j)
        backprop[base + j] = exp(x[base + j] - m - ls) - (j == lab ? (T)1 : (T)0);
    ''', "kf_sparse_xent_rows")
_ROWS_MAX_CLASSES = 128


def _sparse_xent(ctx):
    def compute(features, labels):
        if features.ndim != 2 or labels.ndim != 1 or features.shape[0] != labels.shape[0]:
            raise _error(ctx, f"logits and labels must have the same first dimension, got logits "
                              f"shape {_dims(features.shape)} and labels shape {_dims(labels.shape)}")
        n, c = features.shape
        if n and c == 0:
            raise _error(ctx, f"Must have at least one class, but got logits shape "
                              f"{_dims(features.shape)}")
        if n == 0:
            return cp.zeros((0,), features.dtype), cp.zeros_like(features)
        # As TF's GPU kernel: labels outside [0, c) give garbage/NaN rather than an error (checking
        # would cost a device-to-host synchronization every step).
        features = cp.ascontiguousarray(features)
        if c <= _ROWS_MAX_CLASSES and features.dtype != np.float16:
            loss = cp.empty((n,), features.dtype)
            backprop = cp.empty_like(features)
            _sparse_xent_rows_k(features, labels, c, loss, backprop)
            return loss, backprop
        m = features.max(axis=1, keepdims=True)
        ls = _log_sum_exp_k(features, m, axis=1, keepdims=True)
        backprop = _sparse_xent_k(features, m, ls, labels[:, None], c)
        loss = _pick_k(features, m[:, 0], ls[:, 0], labels, c)
        return loss, backprop
    return compute


def _xent(ctx):
    def compute(features, labels):
        if features.ndim != 2 or labels.ndim != 2:
            raise _error(ctx, f"logits and labels must be 2-D, but got shapes "
                              f"{_dims(features.shape)} and {_dims(labels.shape)}")
        try:
            shape = np.broadcast_shapes(features.shape, labels.shape)
        except ValueError:
            raise _error(ctx, f"logits and labels must be broadcastable: logits_size="
                              f"{_dims(features.shape)} labels_size={_dims(labels.shape)}") from None
        features = cp.broadcast_to(features, shape)
        labels = cp.broadcast_to(labels, shape)
        m = features.max(axis=1, keepdims=True)
        lse = _log_sum_exp_k(features, m, axis=1, keepdims=True) + m
        loss = ((lse - features) * labels).sum(axis=1)
        return loss, cp.exp(features - lse) - labels
    return compute


# ---------------------------------------------------------------------------- reductions
def _axes(axis, ndim, ctx):
    a = np.asarray(axis).reshape(-1).tolist()
    out = []
    for v in a:
        if not -ndim <= v < max(ndim, 1):
            raise _error(ctx, f"Invalid reduction dimension {v} for input with {ndim} dimensions")
        out.append(v % ndim if ndim else 0)
    return tuple(out) if np.ndim(axis) else (out[0] if ndim else ())


def _reduction(method):
    def factory(ctx):
        kd = ctx.get_attr("keep_dims")
        out_dtype = ctx.output_dtypes[0].as_numpy_dtype
        cache = [None, None, None]  # the axis input is usually the same host constant each step

        def compute(x, axis):
            if axis is cache[0] and x.ndim == cache[2]:
                ax = cache[1]
            else:
                ax = _axes(axis, x.ndim, ctx)
                cache[0], cache[1], cache[2] = axis, ax, x.ndim
            if ax == ():
                return x.copy() if x.dtype == out_dtype else x.astype(out_dtype)
            if method in ("max", "min") and x.size == 0:
                fill = -np.inf if method == "max" else np.inf
                shape = np.sum(np.empty(x.shape, np.bool_), axis=ax, keepdims=kd).shape
                return cp.full(shape, fill, out_dtype)
            if x.dtype == np.float16 and method in ("sum", "mean"):
                return getattr(x, method)(axis=ax, keepdims=kd, dtype=np.float32).astype(np.float16)
            return getattr(x, method)(axis=ax, keepdims=kd)
        return compute
    return factory


# ---------------------------------------------------------------------------- optimizers
@functools.lru_cache(maxsize=None)
def _ek(params_in, params_out, body, name):
    return cp.ElementwiseKernel(params_in, params_out, body, name)


_GD = _ek("T alpha, T delta", "T var", "var -= alpha * delta", "kf_apply_gd")
_MOMENTUM = _ek("T lr, T grad, T momentum", "T var, T accum",
                "accum = accum * momentum + grad; var -= lr * accum", "kf_apply_momentum")
_NESTEROV = _ek("T lr, T grad, T momentum", "T var, T accum",
                "accum = accum * momentum + grad; var -= lr * (grad + momentum * accum)",
                "kf_apply_nesterov")
_ADAGRAD = _ek("T lr, T grad", "T var, T accum",
               "accum += grad * grad; var -= lr * grad / sqrt(accum)", "kf_apply_adagrad")
_ADAGRAD_NOSLOT = _ek("T lr, T grad", "T var, T accum", "var -= lr * grad / sqrt(accum)",
                      "kf_apply_adagrad_noslot")
_RMSPROP = _ek("T lr, T rho, T momentum, T epsilon, T grad", "T var, T ms, T mom",
               "ms = ms * rho + (1 - rho) * (grad * grad); "
               "mom = mom * momentum + lr * grad / sqrt(ms + epsilon); var -= mom", "kf_apply_rmsprop")
_CENTERED = _ek("T lr, T rho, T momentum, T epsilon, T grad", "T var, T mg, T ms, T mom",
                "mg = mg * rho + (1 - rho) * grad; ms = ms * rho + (1 - rho) * (grad * grad); "
                "mom = mom * momentum + lr * grad / sqrt(ms - mg * mg + epsilon); var -= mom",
                "kf_apply_centered_rmsprop")
_ADAM = _ek("T lr_t, T beta1, T beta2, T epsilon, T grad", "T var, T m, T v",
            "m = m * beta1 + (1 - beta1) * grad; v = v * beta2 + (1 - beta2) * (grad * grad); "
            "var -= lr_t * m / (sqrt(v) + epsilon)", "kf_apply_adam")
_ADAM_NESTEROV = _ek("T lr_t, T beta1, T beta2, T epsilon, T grad", "T var, T m, T v",
                     "m = m * beta1 + (1 - beta1) * grad; v = v * beta2 + (1 - beta2) * (grad * grad); "
                     "var -= lr_t * (m * beta1 + (1 - beta1) * grad) / (sqrt(v) + epsilon)",
                     "kf_apply_adam_nesterov")


def _apply(nslots, grad_pos, run):
    """A dense Apply* kernel: checks shapes, takes the lock if asked, runs `run(bufs, hypers, grad)`.

    `grad_pos` is the gradient's index among the non-slot inputs; the others are host scalars.
    """
    def factory(ctx):
        locking = ctx.get_attr("use_locking")
        dtype = np.dtype(ctx.output_dtypes[0].as_numpy_dtype)
        rule = run(ctx)

        def compute(var, *args):
            bufs = [var.read()] + [s.read() for s in args[:nslots]]
            rest = args[nslots:]
            grad = rest[grad_pos]
            if grad.shape != bufs[0].shape:
                raise _error(ctx, f"var and grad do not have the same shape: "
                                  f"{list(bufs[0].shape)} vs {list(grad.shape)}")
            if grad.dtype != dtype:
                grad = grad.astype(dtype)
            hypers = [_scalar(dtype, h) for i, h in enumerate(rest) if i != grad_pos]
            if locking:
                with var.lock:
                    rule(bufs, hypers, grad)
            else:
                rule(bufs, hypers, grad)
            return var
        return compute
    return factory


def _gd_rule(ctx):
    return lambda b, h, g: _GD(h[0], g, b[0])


def _momentum_rule(ctx):
    k = _NESTEROV if ctx.get_attr("use_nesterov") else _MOMENTUM
    return lambda b, h, g: k(h[0], g, h[1], b[0], b[1])


def _adagrad_rule(ctx):
    k = _ADAGRAD if ctx.get_attr("update_slots") else _ADAGRAD_NOSLOT
    return lambda b, h, g: k(h[0], g, b[0], b[1])


def _rmsprop_rule(ctx):
    return lambda b, h, g: _RMSPROP(h[0], h[1], h[2], h[3], g, b[0], b[1], b[2])


def _centered_rule(ctx):
    return lambda b, h, g: _CENTERED(h[0], h[1], h[2], h[3], g, b[0], b[1], b[2], b[3])


def _adam_rule(ctx):
    k = _ADAM_NESTEROV if ctx.get_attr("use_nesterov") else _ADAM

    def run(b, h, g):
        beta1_power, beta2_power, lr, beta1, beta2, eps = h
        t = type(lr)
        lr_t = t(lr * np.sqrt(t(1) - beta2_power) / (t(1) - beta1_power))
        k(lr_t, beta1, beta2, eps, g, b[0], b[1], b[2])
    return run


# op -> (slots, index of grad among the other inputs, rule, host-memory hyperparameter args)
DENSE = {
    "ApplyGradientDescent": (0, 1, _gd_rule, ("alpha",)),
    "ApplyMomentum": (1, 1, _momentum_rule, ("lr", "momentum")),
    "ApplyAdagrad": (1, 1, _adagrad_rule, ("lr",)),
    "ApplyRMSProp": (2, 4, _rmsprop_rule, ("lr", "rho", "momentum", "epsilon")),
    "ApplyCenteredRMSProp": (3, 4, _centered_rule, ("lr", "rho", "momentum", "epsilon")),
    "ApplyAdam": (2, 6, _adam_rule, ("beta1_power", "beta2_power", "lr", "beta1", "beta2",
                                     "epsilon")),
}
# Hyperparameters of the sparse updates stay host scalars too (the generic kernels read them).
HOST_HYPERS = {f"Sparse{op}": hyp for op, (_, _, _, hyp) in DENSE.items()}
HOST_HYPERS["SparseApplyGradientDescent"] = ("alpha",)

_FLOATS = (np.float16, np.float32, np.float64)


def register(registry, device="GPU"):
    """Registers the hand-written kernels; returns the op types they cover."""
    floats = {"T": _FLOATS}
    registry.register_simple("Relu", device, _relu, constraints=floats, fresh=True)
    registry.register("ReluGrad", device, _relu_grad, constraints=floats, fresh=True)
    registry.register("MatMul", device, _matmul, constraints=floats, fresh=True)
    registry.register("BiasAdd", device, _bias_add, constraints=floats, fresh=True)
    registry.register("BiasAddGrad", device, _bias_add_grad, constraints=floats, fresh=True)
    registry.register("SparseSoftmaxCrossEntropyWithLogits", device, _sparse_xent, fresh=True,
                      constraints=floats)
    registry.register("SoftmaxCrossEntropyWithLogits", device, _xent, fresh=True, constraints=floats)
    registry.register("Softmax", device, _softmax(False), fresh=True, constraints=floats)
    registry.register("LogSoftmax", device, _softmax(True), fresh=True, constraints=floats)
    for op, method in (("Sum", "sum"), ("Mean", "mean"), ("Max", "max"), ("Min", "min")):
        registry.register(op, device, _reduction(method), constraints=floats,
                          host_memory=("reduction_indices",))
    for op, (nslots, grad_pos, rule, hyp) in DENSE.items():
        registry.register(op, device, _apply(nslots, grad_pos, rule), constraints=floats,
                          host_memory=hyp)
    return {"Relu", "ReluGrad", "MatMul", "BiasAdd", "BiasAddGrad", "Softmax", "LogSoftmax",
            "SparseSoftmaxCrossEntropyWithLogits", "SoftmaxCrossEntropyWithLogits", "Sum", "Mean",
            "Max", "Min", *DENSE}
