"""Numpy kernels of the candidate samplers (kernflow.core.ops.candidate_sampling_ops).

A sampler is a distribution over [0, range) (`probability(ids)` and `draw(gen, n)`); the kernel
draws num_sampled classes and computes the expected counts as TF's RangeSampler does:
p * num_sampled, or with `unique` -expm1(num_tries * log1p(-p)), num_tries being the draws it
took to see num_sampled distinct classes (when no draw repeated, p * num_sampled again). Each
kernel owns a Philox generator keyed by (seed, seed2), as the random ops do, so the stream
advances across runs and restarts with a new session; the learned unigram sampler also keeps its
class counts there. FixedUnigramCandidateSampler's `vocab_file` is read at a path confined to the
process's file root (kernflow.core.runtime.file_root) when one is set.
"""

from __future__ import annotations

import threading

import numpy as np

from kernflow.core.framework import errors
from kernflow.core.runtime import file_root
from kernflow.kernels.cpu.random import make_generator

DEVICE = "CPU"


def _invalid(ctx, msg: str):
    return errors.InvalidArgumentError(None, None, f"{ctx.op_type} node {ctx.name}: {msg}")


# ---------------------------------------------------------------------------- distributions
class _Uniform:
    def __init__(self, n):
        self.range = n

    def probability(self, ids):
        return np.full(np.shape(ids), 1.0 / self.range)

    def draw(self, gen, n):
        return gen.integers(0, self.range, n, dtype=np.int64)


class _LogUniform:
    def __init__(self, n):
        self.range, self.log_range = n, np.log1p(n)

    def probability(self, ids):
        ids = np.asarray(ids, np.float64)
        return (np.log(ids + 2.0) - np.log(ids + 1.0)) / self.log_range

    def draw(self, gen, n):
        v = np.exp(gen.random(n) * self.log_range).astype(np.int64) - 1
        return v % self.range


class _Weighted:
    """Draws ids in proportion to `weights` (searchsorted over their cumulative sum)."""

    def __init__(self, weights):
        self.weights = np.asarray(weights, np.float64)
        self.range = self.weights.size
        self._refresh()

    def _refresh(self):
        self.cdf = np.cumsum(self.weights)
        self.total = self.cdf[-1] if self.cdf.size else 0.0

    def probability(self, ids):
        ids = np.asarray(ids, np.int64)
        ok = (ids >= 0) & (ids < self.range)
        out = np.zeros(ids.shape)
        out[ok] = self.weights[ids[ok]] / self.total
        return out

    def draw(self, gen, n):
        idx = np.searchsorted(self.cdf, gen.random(n) * self.total, side="right")
        return np.minimum(idx, self.range - 1).astype(np.int64)

    def update(self, ids):
        ids = np.asarray(ids, np.int64).reshape(-1)
        ids = ids[(ids >= 0) & (ids < self.range)]
        np.add.at(self.weights, ids, 1.0)
        self._refresh()


def _read_vocab(ctx, path):
    path = file_root.check(f"{ctx.op_type} node {ctx.name}", path, write=False)
    weights = []
    try:
        with open(path) as f:
            for line in f:
                line = line.strip()
                if line:
                    weights.append(float(line.split(",")[-1]))
    except (OSError, ValueError) as e:
        raise _invalid(ctx, f"cannot read vocab_file {path!r}: {e}") from e
    return weights


def _fixed_weights(ctx):
    vocab_file, unigrams = ctx.get_attr("vocab_file"), list(ctx.get_attr("unigrams"))
    if bool(vocab_file) == bool(unigrams):
        raise _invalid(ctx, "Must provide either vocab_file or unigrams (exactly one).")
    counts = _read_vocab(ctx, vocab_file) if vocab_file else unigrams
    reserved, shards, shard = (int(ctx.get_attr(a)) for a in ("num_reserved_ids", "num_shards",
                                                              "shard"))
    distortion = float(ctx.get_attr("distortion"))
    ids = np.arange(reserved + len(counts))
    w = np.concatenate([np.zeros(reserved), np.power(np.asarray(counts, np.float64), distortion)])
    w = w[ids % shards == shard]
    if w.size != int(ctx.get_attr("range_max")):
        raise _invalid(ctx, f"range_max ({ctx.get_attr('range_max')}) must equal the number of "
                            f"weights of shard {shard} of {shards} ({w.size}: {reserved} reserved "
                            f"ids and {len(counts)} unigrams)")
    if not np.isfinite(w).all() or (w < 0).any() or w.sum() <= 0:
        raise _invalid(ctx, "unigram weights must be finite, non-negative and not all zero")
    return w


# ---------------------------------------------------------------------------- sampling
def _draw_unique(gen, dist, n):
    """(n distinct ids in the order first drawn, the number of draws it took)."""
    drawn = np.zeros(0, np.int64)
    chunk = max(2 * n, 16)
    while True:
        drawn = np.concatenate([drawn, dist.draw(gen, chunk)])
        _, first = np.unique(drawn, return_index=True)
        if first.size >= n:
            first = np.sort(first)[:n]
            return drawn[first], int(first[-1]) + 1
        chunk *= 2


def _expected(p, n, num_tries, unique):
    if not unique or num_tries == n:
        return (p * n).astype(np.float32)
    return (-np.expm1(num_tries * np.log1p(-p))).astype(np.float32)


def _check_true_classes(ctx, true_classes):
    t = np.asarray(true_classes)
    num_true = int(ctx.get_attr("num_true"))
    if t.ndim != 2:
        raise _invalid(ctx, f"true_classes must be a matrix, got shape {list(t.shape)}")
    if t.shape[1] != num_true:
        raise _invalid(ctx, f"true_classes must have num_true columns, expected: {t.shape[1]} "
                            f"was: {num_true}")
    return t.astype(np.int64, copy=False)


def _sampler_factory(make_dist, learns=False):
    def factory(ctx):
        gen = make_generator(int(ctx.get_attr("seed")), int(ctx.get_attr("seed2")))
        lock = threading.Lock()
        n, unique = int(ctx.get_attr("num_sampled")), bool(ctx.get_attr("unique"))
        dist = make_dist(ctx)
        if unique and n > dist.range:
            raise _invalid(ctx, f"Sampler's range is too small: num_sampled={n} unique candidates "
                                f"from range_max={dist.range}")

        def compute(true_classes):
            t = _check_true_classes(ctx, true_classes)
            with lock:
                if unique:
                    sampled, tries = _draw_unique(gen, dist, n)
                else:
                    sampled, tries = dist.draw(gen, n), n
                true_p, sampled_p = dist.probability(t), dist.probability(sampled)
                if learns:
                    dist.update(t)
            return (sampled, _expected(true_p, n, tries, unique),
                    _expected(sampled_p, n, tries, unique))
        return compute
    return factory


def _all_factory(ctx):
    n = int(ctx.get_attr("num_sampled"))

    def compute(true_classes):
        t = _check_true_classes(ctx, true_classes)
        return (np.arange(n, dtype=np.int64), np.ones(t.shape, np.float32),
                np.ones(n, np.float32))
    return compute


def _accidental_hits_factory(ctx):
    def compute(true_classes, sampled_candidates):
        t = _check_true_classes(ctx, true_classes)
        s = np.asarray(sampled_candidates, np.int64)
        if s.ndim != 1:
            raise _invalid(ctx, f"sampled_candidates must be a vector, got shape {list(s.shape)}")
        # As TF: a class that was sampled several times maps to its last position.
        order = np.argsort(s, kind="stable")
        keys = s[order]
        last = np.searchsorted(keys, t.reshape(-1), side="right") - 1
        hit = (last >= 0) & (keys[np.maximum(last, 0)] == t.reshape(-1)) if s.size else \
            np.zeros(t.size, bool)
        flat = np.flatnonzero(hit)
        rows = (flat // max(t.shape[1], 1)).astype(np.int32)
        ids = order[last[flat]].astype(np.int64)
        return rows, ids, np.full(flat.size, -np.finfo(np.float32).max, np.float32)
    return compute


def register(registry, device=DEVICE):
    """Registers this family's CPU kernels."""
    range_max = lambda ctx: int(ctx.get_attr("range_max"))  # noqa: E731
    table = {
        "UniformCandidateSampler": _sampler_factory(lambda ctx: _Uniform(range_max(ctx))),
        "LogUniformCandidateSampler": _sampler_factory(lambda ctx: _LogUniform(range_max(ctx))),
        "LearnedUnigramCandidateSampler": _sampler_factory(
            lambda ctx: _Weighted(np.ones(range_max(ctx))), learns=True),
        "FixedUnigramCandidateSampler": _sampler_factory(lambda ctx: _Weighted(_fixed_weights(ctx))),
        "AllCandidateSampler": _all_factory,
        "ComputeAccidentalHits": _accidental_hits_factory,
    }
    for op, factory in table.items():
        registry.register(op, device, factory)
