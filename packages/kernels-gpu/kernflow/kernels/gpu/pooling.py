"""GPU kernels of MaxPool, MaxPoolGrad and MaxPoolGradGrad.

The CPU kernels' algorithm (``kernels/cpu/nn.py``) on the array module `am` (cupy unless a test
passes numpy): a loop over the window taps only, each step one whole-output operation. Pooling runs
over all four dimensions with 4-element ksize/strides, so NHWC and NCHW need no separate code. Ties
and windows holding only -inf or padding behave as on the CPU (and in TF): the gradient goes to the
first maximum of its window in row-major tap order, and a window with none strictly above the
dtype's lowest finite value passes no gradient.
"""

from __future__ import annotations

import numpy as np

from kernflow.kernels.cpu.nn import (_check_4d, _lowest, _pool_geometry, _pool_grad_geometry,
                                     _pool_grad_grad_geometry, _pool_setup, _taps)
from kernflow.kernels.gpu.array_module import cupy_module, device_dtypes

__all__ = ["register"]


def _pad(xp, x, pads, value=0):
    if not any(p for pair in pads for p in pair):
        return x
    return xp.pad(x, pads, mode="constant", constant_values=value)


def _window_argmax(xp, x, ksize, strides, out, pads):
    """Per output, the tap (row-major window index) of its first maximum, or -1 for none."""
    xpd = _pad(xp, x, pads, _lowest(x.dtype))
    best = xp.full(out, np.finfo(x.dtype).min if x.dtype.kind == "f" else np.iinfo(x.dtype).min,
                   dtype=x.dtype)
    arg = xp.full(out, -1, dtype=np.int32)
    for t, sl in _taps(ksize, strides, out):
        v = xpd[sl]
        m = v > best
        xp.copyto(best, v, where=m)
        arg = xp.where(m, np.int32(t), arg)
    return arg


def _max_pool(ctx, am=None):
    xp = (am or cupy_module()).xp
    ksize, strides, padding = _pool_setup(ctx)

    def compute(x):
        _check_4d(ctx, x)
        out, pads = _pool_geometry(ctx, x.shape, ksize, strides, padding)
        if any(d == 0 for d in out) or x.size == 0:
            return xp.zeros(out, dtype=x.dtype)
        # TF's rules (as the CPU kernel): at least the lowest finite value, NaN never wins.
        xpd = _pad(xp, x, pads, _lowest(x.dtype))
        floor = np.finfo(x.dtype).min if x.dtype.kind == "f" else np.iinfo(x.dtype).min
        y = xp.full(out, floor, dtype=x.dtype)
        step = xp.fmax if x.dtype.kind == "f" else xp.maximum
        for _, sl in _taps(ksize, strides, out):
            step(y, xpd[sl], out=y)
        return y
    return compute


def _max_pool_grad(ctx, am=None):
    xp = (am or cupy_module()).xp
    ksize, strides, padding = _pool_setup(ctx)

    def compute(x, y, g):
        out, pads = _pool_grad_geometry(ctx, x, g, ksize, strides, padding)
        if any(d == 0 for d in out) or x.size == 0:
            return xp.zeros(x.shape, dtype=g.dtype)
        arg = _window_argmax(xp, x, ksize, strides, out, pads)
        dxp = xp.zeros(tuple(d + pb + pa for d, (pb, pa) in zip(x.shape, pads)), dtype=g.dtype)
        zero = xp.zeros((), g.dtype)
        for t, sl in _taps(ksize, strides, out):
            dxp[sl] += xp.where(arg == t, g, zero)
        return dxp[tuple(slice(pb, pb + d) for (pb, _), d in zip(pads, x.shape))]
    return compute


def _max_pool_grad_grad(ctx, am=None):
    xp = (am or cupy_module()).xp
    ksize, strides, padding = _pool_setup(ctx)

    def compute(x, y, g):
        out, pads = _pool_grad_grad_geometry(ctx, x, y, g, ksize, strides, padding)
        res = xp.zeros(out, dtype=g.dtype)
        if any(d == 0 for d in out) or x.size == 0:
            return res
        arg = _window_argmax(xp, x, ksize, strides, out, pads)
        gp = _pad(xp, g, pads)
        for t, sl in _taps(ksize, strides, out):
            res = xp.where(arg == t, gp[sl], res)
        return res
    return compute


def register(registry, device="GPU") -> set:
    """Registers the max-pooling kernels (dtype T int32 excluded: it runs on the host); returns the
    op types they cover."""
    for op, factory in (("MaxPool", _max_pool), ("MaxPoolGrad", _max_pool_grad),
                        ("MaxPoolGradGrad", _max_pool_grad_grad)):
        registry.register(op, device, factory, constraints={"T": device_dtypes(op)},
                          fresh=op != "MaxPoolGrad")
    return {"MaxPool", "MaxPoolGrad", "MaxPoolGradGrad"}
