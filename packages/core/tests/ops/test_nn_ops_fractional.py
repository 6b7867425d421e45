"""kf.nn.fractional_max_pool / fractional_avg_pool: regions, seeding, errors and gradients."""

import numpy as np
import pytest

import kernflow.core as kf
from kernflow.core.framework import errors
from kernflow.core.testing.op_cases.nn_fractional import fractional_pool_ref

_X = (np.random.RandomState(5).permutation(2 * 11 * 9 * 3).reshape(2, 11, 9, 3) / 30.0).astype(np.float32)
_RATIO = [1.0, 1.6, 1.3, 1.0]


def _run(fn, x=_X, **kw):
    with kf.Graph().as_default():
        outs = fn(kf.constant(x), _RATIO, **kw)
        with kf.Session() as sess:
            return sess.run(list(outs))


def _check_sequence(seq, length, n):
    k = length // n
    assert seq.dtype == np.int64 and len(seq) == n + 1 and seq[0] == 0 and seq[-1] == length
    assert set(np.diff(seq)) <= {k, k + 1}, seq


@pytest.mark.parametrize("pseudo_random", [False, True])
@pytest.mark.parametrize("overlapping", [False, True])
@pytest.mark.parametrize("fn,reduce", [(kf.nn.fractional_max_pool, np.max),
                                       (kf.nn.fractional_avg_pool, np.mean)])
def test_pools_the_regions_of_the_sequences_it_returns(fn, reduce, overlapping, pseudo_random):
    out, rows, cols = _run(fn, overlapping=overlapping, pseudo_random=pseudo_random)
    assert out.shape == (2, 6, 6, 3) and out.dtype == np.float32   # floor(11 / 1.6), floor(9 / 1.3)
    _check_sequence(rows, 11, 6)
    _check_sequence(cols, 9, 6)
    np.testing.assert_allclose(out, fractional_pool_ref(_X, rows, cols, overlapping, reduce), rtol=1e-6)


def test_static_shapes():
    with kf.Graph().as_default():
        out, rows, cols = kf.nn.fractional_max_pool(kf.placeholder(kf.float32, [None, 11, 9, 3]), _RATIO)
        assert out.shape.as_list() == [None, 6, 6, 3]
        assert rows.shape.as_list() == [7] and cols.shape.as_list() == [7]


def test_deterministic_seeds_repeat_the_regions_across_runs_and_sessions():
    def draw():
        with kf.Graph().as_default():
            outs = kf.nn.fractional_max_pool(kf.constant(_X), _RATIO, deterministic=True, seed=4, seed2=9)
            with kf.Session() as sess:
                return [sess.run(outs[1:]) for _ in range(2)]
    first, second = draw(), draw()
    for a, b in zip(first[0] + first[1], second[0] + second[1]):
        np.testing.assert_array_equal(a, b)


def test_nondeterministic_regions_vary_between_runs():
    with kf.Graph().as_default():
        rows = kf.nn.fractional_avg_pool(kf.constant(np.zeros((1, 97, 2, 1), np.float32)),
                                         [1.0, 1.9, 1.0, 1.0])[1]
        with kf.Session() as sess:
            seen = {tuple(sess.run(rows)) for _ in range(5)}
    assert len(seen) > 1


def test_integer_average_truncates():
    x = np.arange(2 * 4 * 4).reshape(1, 4, 4, 2).astype(np.int32)
    out, rows, cols = _run(kf.nn.fractional_avg_pool, x)
    assert out.dtype == np.int32
    expect = fractional_pool_ref(x.astype(np.int64), rows, cols, False, np.sum)
    counts = np.outer(np.diff(rows), np.diff(cols))[None, :, :, None]
    np.testing.assert_array_equal(out, expect // counts)


def test_seeds_without_deterministic_are_an_error():
    with pytest.raises(errors.InvalidArgumentError, match="FractionalMaxPool.*seed and seed2 should be 0"):
        _run(kf.nn.fractional_max_pool, seed=3)


@pytest.mark.parametrize("ratio,match", [([1.0, 1.5, 1.5], "4 elements"),
                                         ([1.0, 0.5, 1.5, 1.0], "smaller than 1"),
                                         ([2.0, 1.5, 1.5, 1.0], "batch and depth")])
def test_bad_pooling_ratio_is_a_value_error(ratio, match):
    with kf.Graph().as_default(), pytest.raises(ValueError, match=f"FractionalAvgPool: .*{match}"):
        kf.nn.fractional_avg_pool(kf.constant(_X), ratio)


def test_too_small_input_is_an_error():
    with kf.Graph().as_default():
        p = kf.placeholder(kf.float32, [1, None, None, 1])
        out = kf.nn.fractional_max_pool(p, [1.0, 3.0, 1.0, 1.0])[0]
        with kf.Session() as sess, pytest.raises(errors.InvalidArgumentError,
                                                 match=r"FractionalMaxPool.*\[1, 0, 2, 1\]"):
            sess.run(out, {p: np.zeros((1, 2, 2, 1), np.float32)})


@pytest.mark.parametrize("fn", [kf.nn.fractional_max_pool, kf.nn.fractional_avg_pool])
@pytest.mark.parametrize("overlapping", [False, True])
def test_gradients_match_finite_differences(fn, overlapping):
    x = _X[:1, :7, :6, :2].astype(np.float64)
    with kf.Graph().as_default():
        xt = kf.constant(x)
        out = fn(xt, _RATIO, pseudo_random=True, overlapping=overlapping, deterministic=True, seed=1)[0]
        err = kf.test.compute_gradient_error(xt, x.shape, out, out.shape.as_list(), x_init_value=x)
    assert err < 1e-6
