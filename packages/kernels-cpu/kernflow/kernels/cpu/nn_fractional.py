"""Numpy kernels of fractional pooling (kernflow.core.ops.nn_ops_fractional).

A forward kernel draws the row and column boundary sequences from a Philox generator keyed by the
node's (seed, seed2) (kernflow.kernels.cpu.random), then reduces each region. Regions are
reduced with `np.maximum.reduceat` / `np.add.reduceat` over the region starts, first along rows and
then along columns; overlapping regions (which share their end row) are gathered per region instead.
"""

from __future__ import annotations

import numpy as np

from kernflow.core.framework import errors
from kernflow.core.ops.nn_ops_fractional import check_pooling_ratio, pooled_size
from kernflow.kernels.cpu.random import _Stream, make_generator

DEVICE = "CPU"


def _invalid(ctx, msg):
    return errors.InvalidArgumentError(None, None, f"{ctx.op_type} node {ctx.name}: {msg}")


# ---------------------------------------------------------------------------- pooling sequences
def random_sequence(gen, length, n):
    """Boundaries 0 = a[0] < ... < a[n] = length: n steps of K or K + 1, the longer ones at random."""
    k = length // n
    steps = np.full(n, k, np.int64)
    steps[:length - k * n] += 1
    gen.shuffle(steps)
    return np.concatenate([[0], np.cumsum(steps)]).astype(np.int64)


def pseudo_random_sequence(gen, length, n):
    """Boundaries ceil(alpha (i + u)) - ceil(alpha u) (Graham's pseudo-random form), alpha = length / n,
    with u uniform over the range that keeps every step K or K + 1."""
    alpha, k = length / n, length // n
    u = gen.random() * min((k + 2) / alpha - 1, (length + 1 - k) / alpha - (n - 1))
    i = np.arange(n + 1)
    seq = np.ceil(alpha * (i + u)).astype(np.int64) - int(np.ceil(alpha * u))
    seq[-1] = length
    return seq


def pooling_sequence(gen, length, n, pseudo_random):
    if length % n == 0:
        return np.arange(0, length + 1, length // n, dtype=np.int64)
    return (pseudo_random_sequence if pseudo_random else random_sequence)(gen, length, n)


def _regions(seq, length, overlapping):
    """(start, stop) of each region: [a[i], a[i+1]) or, overlapping, [a[i], a[i+1]] (within length)."""
    starts = np.asarray(seq[:-1], np.int64)
    stops = np.minimum(np.asarray(seq[1:], np.int64) + (1 if overlapping else 0), length)
    return starts, stops


def _reduce_axis(x, seq, axis, ufunc, overlapping):
    starts, stops = _regions(seq, x.shape[axis], overlapping)
    if not overlapping:
        return ufunc.reduceat(x, starts, axis=axis)
    parts = [ufunc.reduce(np.take(x, np.arange(a, b), axis), axis=axis) for a, b in zip(starts, stops)]
    return np.stack(parts, axis)


def _counts(seq, length, overlapping):
    starts, stops = _regions(seq, length, overlapping)
    return stops - starts


# ---------------------------------------------------------------------------- forward kernels
def _seeds(ctx):
    """The node's (seed, seed2); deterministic nodes with both 0 get a fixed random pair (as TF)."""
    seed, seed2 = int(ctx.get_attr("seed")), int(ctx.get_attr("seed2"))
    if not ctx.get_attr("deterministic"):
        if seed or seed2:
            raise _invalid(ctx, f"Both seed and seed2 should be 0 if deterministic is false, got "
                                f"seed={seed}, seed2={seed2}")
        return None
    if seed == 0 and seed2 == 0:
        seed, seed2 = (int(v) for v in np.random.SeedSequence().generate_state(2, np.uint64))
    return seed, seed2


def _fractional_factory(ctx):
    try:
        ratio = check_pooling_ratio(ctx.op_type, ctx.get_attr("pooling_ratio"))
    except ValueError as e:
        raise _invalid(ctx, str(e)) from None
    pseudo, overlapping = ctx.get_attr("pseudo_random"), ctx.get_attr("overlapping")
    seeds = _seeds(ctx)
    stream = None if seeds else _Stream(ctx)
    is_max = ctx.op_type == "FractionalMaxPool"

    def sequences(h, w, oh, ow):
        if seeds:   # deterministic: the same key, so the same regions, every run
            gen = make_generator(*seeds)
            return pooling_sequence(gen, h, oh, pseudo), pooling_sequence(gen, w, ow, pseudo)
        with stream.lock:
            return (pooling_sequence(stream.gen, h, oh, pseudo), pooling_sequence(stream.gen, w, ow, pseudo))

    def compute(value):
        x = np.asarray(value)
        if x.ndim != 4:
            raise _invalid(ctx, f"input must be 4-dimensional [batch, height, width, depth], got shape "
                                f"{list(x.shape)}")
        h, w = x.shape[1:3]
        oh, ow = pooled_size(h, ratio[1]), pooled_size(w, ratio[2])
        if oh <= 0 or ow <= 0 or 0 in x.shape:
            raise _invalid(ctx, f"input {list(x.shape)} pooled by {ratio} gives an empty output "
                                f"[{x.shape[0]}, {oh}, {ow}, {x.shape[3]}]")
        rows, cols = sequences(h, w, oh, ow)
        if is_max:
            out = _reduce_axis(_reduce_axis(x, rows, 1, np.maximum, overlapping), cols, 2, np.maximum,
                               overlapping)
        else:
            s = _reduce_axis(_reduce_axis(x, rows, 1, np.add, overlapping), cols, 2, np.add, overlapping)
            n = np.outer(_counts(rows, h, overlapping), _counts(cols, w, overlapping))[None, :, :, None]
            out = (s // n if x.dtype.kind in "iu" else s / n).astype(x.dtype)
        return out, rows, cols
    return compute


# ---------------------------------------------------------------------------- gradient kernels
def _check_sequences(ctx, rows, cols, shape, out_shape):
    for what, seq, length, n in (("row", rows, shape[1], out_shape[1]),
                                 ("col", cols, shape[2], out_shape[2])):
        seq = np.asarray(seq)
        if seq.shape != (n + 1,) or seq[0] != 0 or seq[-1] != length or (np.diff(seq) <= 0).any():
            raise _invalid(ctx, f"{what}_pooling_sequence must be {n + 1} increasing boundaries from 0 to "
                                f"{length}, got {seq.tolist()}")


def _max_pool_grad(ctx):
    overlapping = ctx.get_attr("overlapping")

    def compute(orig_input, orig_output, out_backprop, rows, cols):
        x, g = np.asarray(orig_input), np.asarray(out_backprop)
        if x.ndim != 4 or g.ndim != 4 or np.shape(orig_output) != g.shape or g.shape[::3] != x.shape[::3]:
            raise _invalid(ctx, f"orig_input {list(x.shape)}, orig_output {list(np.shape(orig_output))} and "
                                f"out_backprop {list(g.shape)} must be 4-D with the same batch and depth, "
                                f"the outputs of one shape")
        _check_sequences(ctx, rows, cols, x.shape, g.shape)
        rs, re = _regions(rows, x.shape[1], overlapping)
        cs, ce = _regions(cols, x.shape[2], overlapping)
        dx = np.zeros_like(x)
        for i, (r0, r1) in enumerate(zip(rs, re)):
            for j, (c0, c1) in enumerate(zip(cs, ce)):
                win = x[:, r0:r1, c0:c1, :]
                flat = win.reshape(win.shape[0], -1, win.shape[3]).argmax(1)   # first maximum, row-major
                b, d = np.meshgrid(np.arange(x.shape[0]), np.arange(x.shape[3]), indexing="ij")
                np.add.at(dx, (b, r0 + flat // win.shape[2], c0 + flat % win.shape[2], d), g[:, i, j, :])
        return dx
    return compute


def _avg_pool_grad(ctx):
    overlapping = ctx.get_attr("overlapping")

    def compute(orig_input_tensor_shape, out_backprop, rows, cols):
        shape, g = [int(v) for v in np.asarray(orig_input_tensor_shape).reshape(-1)], np.asarray(out_backprop)
        if len(shape) != 4 or g.ndim != 4 or [g.shape[0], g.shape[3]] != [shape[0], shape[3]]:
            raise _invalid(ctx, f"orig_input_tensor_shape {shape} and out_backprop {list(g.shape)} must be "
                                f"4-D with the same batch and depth")
        _check_sequences(ctx, rows, cols, shape, g.shape)
        rs, re = _regions(rows, shape[1], overlapping)
        cs, ce = _regions(cols, shape[2], overlapping)
        dx = np.zeros(shape, g.dtype)
        for i, (r0, r1) in enumerate(zip(rs, re)):
            for j, (c0, c1) in enumerate(zip(cs, ce)):
                n = (r1 - r0) * (c1 - c0)
                share = g[:, i, j, :] // n if g.dtype.kind in "iu" else g[:, i, j, :] / n
                dx[:, r0:r1, c0:c1, :] += share[:, None, None, :].astype(g.dtype)
        return dx
    return compute


def register(registry, device=DEVICE):
    """Registers this family's CPU kernels."""
    table = {"FractionalMaxPool": _fractional_factory, "FractionalAvgPool": _fractional_factory,
             "FractionalMaxPoolGrad": _max_pool_grad, "FractionalAvgPoolGrad": _avg_pool_grad}
    for op, factory in table.items():
        registry.register(op, device, factory)
