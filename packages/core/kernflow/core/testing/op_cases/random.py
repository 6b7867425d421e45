"""Contract cases of the random ops: outputs are checked by statistics, not values."""

import math

import numpy as np

import kernflow.core as kf
from kernflow.core.framework.op_def_library import apply_op
from kernflow.core.testing.kernel_contract import OpCase

_N = 100_000
_SHAPE32 = np.array([200, 500], np.int32)
_SHAPE64 = np.array([100, 10, 100], np.int64)
# Standard deviation of a standard normal truncated to [-2, 2].
_TRUNC_STD = math.sqrt(1 - 4 * math.exp(-2) / math.sqrt(2 * math.pi) / math.erf(2 / math.sqrt(2)))


def _raw(op_type, dtype, seed=1, seed2=2):
    def build(shape):
        return apply_op(op_type, [shape], {"dtype": dtype, "seed": seed, "seed2": seed2}).outputs[0]
    return build


def _moments(mean, std, mtol, stol, lo=None, hi=None, hi_open=False):
    def compare(actual, _expected):
        a = actual.astype(np.float64)
        assert a.size >= _N, f"expected at least {_N} samples, got {a.size}"
        if lo is not None:
            assert a.min() >= lo, f"sample {a.min()} below {lo}"
        if hi is not None:
            assert (a.max() < hi) if hi_open else (a.max() <= hi), f"sample {a.max()} above {hi}"
        assert abs(a.mean() - mean) < mtol, f"mean {a.mean()} != {mean}"
        assert abs(a.std() - std) < stol, f"std {a.std()} != {std}"
    return compare


def _empty(actual, _expected):
    assert actual.size == 0


def _uniform_ints(lo, hi):
    def compare(actual, _expected):
        assert actual.min() >= lo and actual.max() < hi, (actual.min(), actual.max())
        assert set(np.unique(actual).tolist()) == set(range(lo, hi)), "not every value drawn"
        assert abs(actual.mean() - (lo + hi - 1) / 2) < 0.02 * (hi - lo)
    return compare


def _permutation_of_rows(actual, expected):
    assert actual.shape == expected.shape
    if expected.ndim == 0 or expected.shape[0] <= 1:
        np.testing.assert_array_equal(actual, expected)
        return
    flat_a = actual.reshape(actual.shape[0], -1)
    flat_e = expected.reshape(expected.shape[0], -1)
    # Row i of `expected` starts with a unique key: map each output row back to its source.
    src = np.searchsorted(flat_e[:, 0], flat_a[:, 0])
    np.testing.assert_array_equal(np.sort(src), np.arange(expected.shape[0]))
    np.testing.assert_array_equal(flat_a, flat_e[src])
    if expected.shape[0] >= 50:
        assert not np.array_equal(src, np.arange(expected.shape[0])), "rows were not shuffled"


def _frequencies(probs, samples):
    def compare(actual, _expected):
        assert actual.shape == (len(probs), samples), actual.shape
        for row, p in zip(actual, probs):
            freq = np.bincount(row, minlength=len(p)) / samples
            np.testing.assert_allclose(freq, p, atol=0.01)
    return compare


_PROBS = np.array([[0.2, 0.3, 0.5, 0.0], [0.7, 0.1, 0.1, 0.1]])
with np.errstate(divide="ignore"):
    _LOGITS = np.log(_PROBS) + 3.0

CASES = [
    OpCase("RandomStandardNormal", _raw("RandomStandardNormal", kf.float32), [_SHAPE32],
           compare=_moments(0.0, 1.0, 0.02, 0.02), name="float32"),
    OpCase("RandomStandardNormal", _raw("RandomStandardNormal", kf.float64), [_SHAPE64],
           compare=_moments(0.0, 1.0, 0.02, 0.02), name="float64_int64shape"),
    OpCase("RandomStandardNormal", _raw("RandomStandardNormal", kf.float16), [_SHAPE32],
           compare=_moments(0.0, 1.0, 0.02, 0.02), name="float16"),
    OpCase("RandomStandardNormal", _raw("RandomStandardNormal", kf.float32, 0, 0),
           [np.array([0, 7], np.int32)], compare=_empty, name="empty_nondeterministic"),
    OpCase("RandomUniform", _raw("RandomUniform", kf.float32), [_SHAPE32],
           compare=_moments(0.5, math.sqrt(1 / 12), 0.01, 0.01, 0.0, 1.0, hi_open=True),
           name="float32"),
    OpCase("RandomUniform", _raw("RandomUniform", kf.float64), [_SHAPE64],
           compare=_moments(0.5, math.sqrt(1 / 12), 0.01, 0.01, 0.0, 1.0, hi_open=True),
           name="float64_int64shape"),
    OpCase("RandomUniform", _raw("RandomUniform", kf.float16), [_SHAPE32],
           compare=_moments(0.5, math.sqrt(1 / 12), 0.01, 0.01, 0.0, 1.0, hi_open=True),
           name="float16"),
    OpCase("RandomUniform", lambda s: kf.random_uniform(s, seed=5), [_SHAPE32],
           compare=_moments(0.5, math.sqrt(1 / 12), 0.01, 0.01, 0.0, 1.0, hi_open=True),
           name="wrapper"),
    OpCase("TruncatedNormal", _raw("TruncatedNormal", kf.float32), [_SHAPE32],
           compare=_moments(0.0, _TRUNC_STD, 0.02, 0.02, -2.0, 2.0), name="float32"),
    OpCase("TruncatedNormal", _raw("TruncatedNormal", kf.float64), [_SHAPE64],
           compare=_moments(0.0, _TRUNC_STD, 0.02, 0.02, -2.0, 2.0), name="float64_int64shape"),
    OpCase("TruncatedNormal", _raw("TruncatedNormal", kf.float16), [_SHAPE32],
           compare=_moments(0.0, _TRUNC_STD, 0.02, 0.02, -2.0, 2.0), name="float16"),
    OpCase("RandomUniformInt",
           lambda s, lo, hi: kf.random_uniform(s, lo, hi, dtype=kf.int32, seed=7),
           [_SHAPE32, np.int32(-3), np.int32(5)], compare=_uniform_ints(-3, 5), name="int32"),
    OpCase("RandomUniformInt",
           lambda s, lo, hi: kf.random_uniform(s, lo, hi, dtype=kf.int64, seed=7),
           [_SHAPE64, np.int64(10), np.int64(20)], compare=_uniform_ints(10, 20), name="int64"),
    OpCase("RandomShuffle", lambda x: kf.random_shuffle(x, seed=3),
           [np.arange(3000, dtype=np.float32).reshape(1000, 3)], lambda x: x,
           compare=_permutation_of_rows, name="matrix"),
    OpCase("RandomShuffle", lambda x: kf.random_shuffle(x, seed=3),
           [np.arange(200, dtype=np.int64)], lambda x: x, compare=_permutation_of_rows,
           name="vector_int64"),
    OpCase("RandomShuffle", lambda x: kf.random_shuffle(x, seed=3),
           [np.arange(24, dtype=np.int32).reshape(2, 3, 4)], lambda x: x,
           compare=_permutation_of_rows, name="rank3"),
    OpCase("RandomShuffle", lambda x: kf.random_shuffle(x), [np.float64(4.0)], lambda x: x,
           compare=_permutation_of_rows, name="scalar"),
    OpCase("RandomShuffle", lambda x: kf.random_shuffle(x), [np.zeros((0, 2), np.float32)],
           lambda x: x, compare=_permutation_of_rows, name="empty"),
    OpCase("Multinomial", lambda lg: kf.multinomial(lg, 20000, seed=11),
           [_LOGITS.astype(np.float32)], compare=_frequencies(_PROBS, 20000), name="float32"),
    OpCase("Multinomial", lambda lg: kf.multinomial(lg, 20000, seed=11, output_dtype=kf.int32),
           [_LOGITS], compare=_frequencies(_PROBS, 20000), name="float64_int32"),
]
