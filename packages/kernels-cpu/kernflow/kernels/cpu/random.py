"""Numpy kernels of the random ops (kernflow.core.ops.random_ops).

Each kernel instance owns a `numpy.random.Generator` over Philox, keyed by the node's
(seed, seed2) attrs, or by OS entropy when both are 0. The runtime builds stateful kernels once
per session, so the stream advances across runs and restarts with a new session.
"""

from __future__ import annotations

import threading

import numpy as np

from kernflow.core.framework import errors

DEVICE = "CPU"

_U64 = 2**64


def make_generator(seed: int, seed2: int) -> np.random.Generator:
    """Returns a Philox generator keyed by (seed, seed2); both 0 draws the key from OS entropy."""
    if seed == 0 and seed2 == 0:
        return np.random.Generator(np.random.Philox())
    return np.random.Generator(np.random.Philox(key=(seed % _U64) | ((seed2 % _U64) << 64)))


def _invalid(ctx, msg: str):
    return errors.InvalidArgumentError(None, None, f"{ctx.op_type} node {ctx.name}: {msg}")


def _parse_shape(ctx, shape) -> tuple:
    s = np.asarray(shape)
    if s.ndim != 1:
        raise _invalid(ctx, f"shape must be a vector of {{int32,int64}}, got shape {list(s.shape)}")
    if s.size and s.min() < 0:
        raise _invalid(ctx, f"shape {s.tolist()} has a negative dimension")
    return tuple(int(d) for d in s)


class _Stream:
    """A node's generator and the lock that serializes draws from concurrent runs."""

    __slots__ = ("gen", "lock")

    def __init__(self, ctx):
        self.gen = make_generator(int(ctx.get_attr("seed")), int(ctx.get_attr("seed2")))
        self.lock = threading.Lock()


def _standard_normal(gen, shape, npdt):
    if npdt == np.float64:
        return gen.standard_normal(shape, dtype=np.float64)
    return gen.standard_normal(shape, dtype=np.float32).astype(npdt, copy=False)


def _normal_factory(ctx):
    st, npdt = _Stream(ctx), ctx.output_dtypes[0].as_numpy_dtype

    def compute(shape):
        shape = _parse_shape(ctx, shape)
        with st.lock:
            return _standard_normal(st.gen, shape, npdt)
    return compute


def _truncated_normal_factory(ctx):
    st, npdt = _Stream(ctx), ctx.output_dtypes[0].as_numpy_dtype
    work = np.float64 if npdt == np.float64 else np.float32

    def compute(shape):
        shape = _parse_shape(ctx, shape)
        with st.lock:
            out = st.gen.standard_normal(shape, dtype=work)
            bad = np.flatnonzero(np.abs(out) > 2.0)
            flat = out.reshape(-1)
            # Each pass re-draws only the rejected entries (~4.6% of the previous pass).
            while bad.size:
                redraw = st.gen.standard_normal(bad.size, dtype=work)
                flat[bad] = redraw
                bad = bad[np.abs(redraw) > 2.0]
        return out.astype(npdt, copy=False)
    return compute


def _uniform_factory(ctx):
    st, npdt = _Stream(ctx), ctx.output_dtypes[0].as_numpy_dtype

    def compute(shape):
        shape = _parse_shape(ctx, shape)
        with st.lock:
            if npdt == np.float16:
                # k / 2048 is exact in half precision and stays below 1 (a float32 draw may round up).
                k = st.gen.integers(0, 2048, shape, dtype=np.int32)
                return (k * np.float32(1.0 / 2048)).astype(np.float16)
            return st.gen.random(shape, dtype=npdt)
    return compute


def _uniform_int_factory(ctx):
    st, npdt = _Stream(ctx), ctx.output_dtypes[0].as_numpy_dtype

    def compute(shape, minval, maxval):
        shape = _parse_shape(ctx, shape)
        for what, v in (("minval", minval), ("maxval", maxval)):
            if np.ndim(v) != 0:
                raise _invalid(ctx, f"{what} must be 0-D, got shape {list(np.shape(v))}")
        lo, hi = int(minval), int(maxval)
        n = int(np.prod(shape, dtype=np.int64))
        if n == 0:
            return np.zeros(shape, npdt)
        if lo >= hi:
            raise _invalid(ctx, f"Need minval < maxval: {lo} >= {hi}")
        with st.lock:
            return st.gen.integers(lo, hi, shape, dtype=npdt)
    return compute


def _shuffle_factory(ctx):
    st = _Stream(ctx)

    def compute(value):
        value = np.asarray(value)
        if value.ndim == 0 or value.shape[0] <= 1:
            return value.copy()
        with st.lock:
            perm = st.gen.permutation(value.shape[0])
        return value[perm]
    return compute


def _multinomial_factory(ctx):
    st, npdt = _Stream(ctx), ctx.output_dtypes[0].as_numpy_dtype

    def compute(logits, num_samples):
        logits = np.asarray(logits)
        if logits.ndim != 2:
            raise _invalid(ctx, f"logits should be a matrix, got shape {list(logits.shape)}")
        if np.ndim(num_samples) != 0:
            raise _invalid(ctx, f"num_samples should be a scalar, got shape "
                                f"{list(np.shape(num_samples))}")
        batch, classes = logits.shape
        ns = int(num_samples)
        if ns < 0:
            raise _invalid(ctx, f"num_samples should be nonnegative, got {ns}")
        if batch == 0 or ns == 0:
            return np.zeros((batch, ns), npdt)
        if classes == 0:
            raise _invalid(ctx, "num_classes should be positive, got 0")
        x = logits.astype(np.float64)
        x = x - np.max(x, axis=1, keepdims=True)
        p = np.exp(x)
        cdf = np.cumsum(p, axis=1)
        cdf /= cdf[:, -1:]
        # Rounding may push a draw past a row's end: clamp to the row's last possible class.
        last = classes - 1 - np.argmax(p[:, ::-1] > 0, axis=1)[:, None]
        with st.lock:
            u = st.gen.random((batch, ns))
        # One searchsorted over all rows: row r's cdf and draws are shifted by r.
        row = np.arange(batch, dtype=np.float64)[:, None]
        idx = np.searchsorted((cdf + row).reshape(-1), (u + row).reshape(-1), side="right")
        idx = idx.reshape(batch, ns) - np.arange(batch)[:, None] * classes
        return np.minimum(idx, last).astype(npdt)
    return compute


def register(registry, device=DEVICE):
    """Registers this family's CPU kernels."""
    floats = ["float16", "float32", "float64"]
    registry.register("RandomStandardNormal", device, _normal_factory, constraints={"dtype": floats})
    registry.register("RandomUniform", device, _uniform_factory, constraints={"dtype": floats})
    registry.register("TruncatedNormal", device, _truncated_normal_factory,
                      constraints={"dtype": floats})
    registry.register("RandomUniformInt", device, _uniform_int_factory,
                      constraints={"Tout": ["int32", "int64"]})
    registry.register("RandomShuffle", device, _shuffle_factory)
    registry.register("Multinomial", device, _multinomial_factory)
