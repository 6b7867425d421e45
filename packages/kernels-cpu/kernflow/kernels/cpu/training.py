"""Numpy kernels of the fused optimizer updates (kernflow.core.ops.training_ops).

Every update works in place on the variable's buffers (no new arrays for var or slots) and takes the
variable's lock when `use_locking` is set. Sparse updates first sum duplicate indices, then touch
only those rows.
"""

from __future__ import annotations

import numpy as np

from kernflow.core.framework import errors
from kernflow.kernels.cpu import intra_op

DEVICE = "CPU"


# ---- dense update rules: f(var, *slots, *hyper, grad) on numpy buffers, in place ----------------
def _gd(var, alpha, delta):
    var -= alpha * delta


def _momentum(nesterov):
    def f(var, accum, lr, grad, momentum):
        accum *= momentum
        accum += grad
        if nesterov:
            var -= lr * (grad + momentum * accum)
        else:
            var -= lr * accum
    return f


def _adagrad(update_slots):
    def f(var, accum, lr, grad):
        if update_slots:
            accum += grad * grad
        var -= lr * grad / np.sqrt(accum)
    return f


def _rmsprop(var, ms, mom, lr, rho, momentum, epsilon, grad):
    ms *= rho
    ms += (1 - rho) * (grad * grad)
    mom *= momentum
    mom += lr * grad / np.sqrt(ms + epsilon)
    var -= mom


def _centered_rmsprop(var, mg, ms, mom, lr, rho, momentum, epsilon, grad):
    mg *= rho
    mg += (1 - rho) * grad
    ms *= rho
    ms += (1 - rho) * (grad * grad)
    mom *= momentum
    mom += lr * grad / np.sqrt(ms - mg * mg + epsilon)
    var -= mom


def _adam(nesterov):
    # TF's form of the update (m += (g - m)(1 - beta1), v += (g^2 - v)(1 - beta2)), one temporary.
    def f(var, m, v, beta1_power, beta2_power, lr, beta1, beta2, epsilon, grad):
        lr_t = lr * np.sqrt(1 - beta2_power) / (1 - beta1_power)
        t = np.subtract(grad, m, out=np.empty_like(m))   # out=: stays an array when 0-d
        t *= 1 - beta1
        m += t
        np.multiply(grad, grad, out=t)
        t -= v
        t *= 1 - beta2
        v += t
        np.sqrt(v, out=t)
        t += epsilon
        if nesterov:
            step = m * beta1
            step += (1 - beta1) * grad
            np.divide(step, t, out=t)
        else:
            np.divide(m, t, out=t)
        t *= lr_t
        var -= t
    return f


# op name -> (number of slot refs, rule factory taking ctx)
RULES = {
    "GradientDescent": (0, lambda ctx: _gd),
    "Momentum": (1, lambda ctx: _momentum(ctx.get_attr("use_nesterov"))),
    "Adagrad": (1, lambda ctx: _adagrad(ctx.get_attr("update_slots"))),
    "RMSProp": (2, lambda ctx: _rmsprop),
    "CenteredRMSProp": (3, lambda ctx: _centered_rmsprop),
    "Adam": (2, lambda ctx: _adam(ctx.get_attr("use_nesterov"))),
}
# Inputs after the gradient (Momentum's `momentum` comes after `grad`).
_AFTER_GRAD = {"Momentum": 1}


def _check_shape(op, name, var, grad):
    if grad.shape != var.shape:
        raise errors.InvalidArgumentError(None, None, f"{op} {name}: var and grad do not have the same "
                                          f"shape: {list(var.shape)} vs {list(grad.shape)}")


def _dense_gd(ctx):
    """ApplyGradientDescent's hot path: var -= alpha * delta, in place."""
    locking, name, op = ctx.get_attr("use_locking"), ctx.name, ctx.op_type
    dtype = ctx.output_dtypes[0].as_numpy_dtype

    last = [None, None]  # alpha is usually the same constant array every step

    def compute(var, alpha, delta):
        buf = var.read()
        if delta.shape != buf.shape:
            _check_shape(op, name, buf, np.asarray(delta))
        if alpha is last[0]:
            a = last[1]
        else:
            a = last[1] = dtype(alpha)
            last[0] = alpha
        step = delta * a
        if locking:
            with var.lock:
                buf -= step
        else:
            buf -= step
        return var
    return compute


def _dense(op_name, nslots, make_rule):
    if op_name == "GradientDescent":
        return _dense_gd

    def factory(ctx):
        rule = make_rule(ctx)
        locking = ctx.get_attr("use_locking")
        name, op = ctx.name, ctx.op_type
        dtype = ctx.output_dtypes[0].as_numpy_dtype

        def compute(var, *args):
            bufs = [var.read()] + [s.read() for s in args[:nslots]]
            rest = [np.asarray(a, dtype=dtype) for a in args[nslots:]]
            grad_pos = len(rest) - 1 - _AFTER_GRAD.get(op_name, 0)
            grad = rest[grad_pos]
            _check_shape(op, name, bufs[0], grad)
            before, after = rest[:grad_pos], rest[grad_pos + 1:]

            def update(*blocks):
                rule(*blocks[:-1], *before, blocks[-1], *after)
            if locking:
                with var.lock:
                    intra_op.elementwise(update, bufs + [grad], grad.size)
            else:
                intra_op.elementwise(update, bufs + [grad], grad.size)
            return var
        return compute
    return factory


def _sparse(op_name, nslots, make_rule):
    def factory(ctx):
        rule = make_rule(ctx)
        locking = ctx.get_attr("use_locking")
        name, op = ctx.name, ctx.op_type
        dtype = ctx.output_dtypes[0].as_numpy_dtype
        after = _AFTER_GRAD.get(op_name, 0)

        def compute(var, *args):
            bufs = [var.read()] + [s.read() for s in args[:nslots]]
            rest = list(args[nslots:])
            gi = len(rest) - 2 - after           # grad, then indices
            grad, indices = np.asarray(rest[gi], dtype=dtype), np.asarray(rest[gi + 1])
            n = bufs[0].shape[0]
            if indices.size and (indices.min() < 0 or indices.max() >= n):
                raise errors.InvalidArgumentError(None, None, f"{op} {name}: indices out of range "
                                                  f"[0, {n}): {indices[(indices < 0) | (indices >= n)][:5]}")
            if grad.shape[1:] != bufs[0].shape[1:] or grad.shape[0] != indices.size:
                raise errors.InvalidArgumentError(None, None, f"{op} {name}: grad shape {list(grad.shape)} "
                                                  f"does not match indices {list(indices.shape)} and var "
                                                  f"{list(bufs[0].shape)}")
            uniq, inv = np.unique(indices.reshape(-1), return_inverse=True)
            if uniq.size != indices.size:
                summed = np.zeros((uniq.size,) + grad.shape[1:], dtype)
                np.add.at(summed, inv, grad)
                grad = summed
            elif np.any(inv != np.arange(inv.size)):
                grad = grad[np.argsort(inv)]  # distinct but unsorted: grad rows in `uniq` order
            hyper = [np.asarray(a, dtype=dtype) for a in rest[:gi]] + \
                [np.asarray(a, dtype=dtype) for a in rest[gi + 2:]]
            rows = [b[uniq] for b in bufs]

            def update():
                rule(*rows, *hyper[:gi], grad, *hyper[gi:])
                for b, r in zip(bufs, rows):
                    b[uniq] = r
            if locking:
                with var.lock:
                    update()
            else:
                update()
            return var
        return compute
    return factory


def register(registry, device=DEVICE):
    for name, (nslots, make_rule) in RULES.items():
        registry.register(f"Apply{name}", device, _dense(name, nslots, make_rule))
        registry.register(f"SparseApply{name}", device, _sparse(name, nslots, make_rule))
