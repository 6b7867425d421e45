"""The assert_* family, check_numerics and is_numeric_tensor: static decisions and run-time Asserts."""

import numpy as np
import pytest

import kernflow.core as kf
from kernflow.core.framework import errors


def _fails(sess, op, feed):
    with pytest.raises(errors.InvalidArgumentError) as e:
        sess.run(op, feed)
    return str(e.value)


def test_value_asserts_at_run_time():
    x = kf.placeholder(kf.float32, [None])
    cases = [(kf.assert_positive(x), [1.0], [0.0]), (kf.assert_negative(x), [-1.0], [0.0]),
             (kf.assert_non_negative(x), [0.0], [-1.0]), (kf.assert_non_positive(x), [0.0], [1.0]),
             (kf.assert_less(x, 3.0), [2.0], [3.0]), (kf.assert_less_equal(x, 3.0), [3.0], [4.0]),
             (kf.assert_greater(x, 1.0), [2.0], [1.0]), (kf.assert_greater_equal(x, 1.0), [1.0], [0.0]),
             (kf.assert_equal(x, 2.0), [2.0, 2.0], [2.0, 1.0]), (kf.assert_none_equal(x, 2.0), [1.0], [2.0]),
             (kf.assert_near(x, x * (1 + 1e-7)), [1.0], None)]
    with kf.Session() as sess:
        for op, good, bad in cases:
            sess.run(op, {x: good})
            if bad is not None:
                assert "did not hold element-wise" in _fails(sess, op, {x: bad})
        far = kf.assert_near(x, x + 1.0, message="too far")
        assert "too far" in _fails(sess, far, {x: [1.0]})


def test_static_conditions_are_decided_while_building():
    assert kf.assert_equal(kf.constant([1, 2]), kf.constant([1, 2])).type == "NoOp"
    with pytest.raises(errors.InvalidArgumentError, match="x == y did not hold"):
        kf.assert_equal(kf.constant(1), kf.constant(2), message="m")
    with pytest.raises(ValueError, match="must have rank 2"):
        kf.assert_rank(kf.constant([1.0]), 2)
    assert kf.assert_rank_at_least(kf.constant([[1.0]]), 1).type == "NoOp"
    with pytest.raises(ValueError, match=r"rank in \[0, 2\]"):
        kf.assert_rank_in(kf.constant([1.0]), [0, 2])
    with pytest.raises(TypeError, match="integer"):
        kf.assert_integer(kf.constant(1.0))
    with pytest.raises(TypeError, match="must be of type int64"):
        kf.assert_type(kf.constant(1), kf.int64)
    with pytest.raises(ValueError, match="scalar"):
        kf.assert_scalar(kf.constant([1]))
    with pytest.raises(ValueError):
        kf.assert_same_float_dtype([kf.constant(1.0), kf.constant(1.0, kf.float64)])
    assert kf.assert_same_float_dtype([kf.constant(1.0, kf.float64)]) == kf.float64
    with pytest.raises(TypeError):
        kf.assert_proper_iterable(np.zeros(3))
    kf.assert_proper_iterable([1, 2])
    assert kf.is_numeric_tensor(kf.constant(1)) and not kf.is_numeric_tensor(kf.constant(True))


def test_unknown_rank_is_checked_at_run_time():
    u = kf.placeholder(kf.float32)
    op = kf.assert_rank(u, 2)
    with kf.Session() as sess:
        sess.run(op, {u: np.zeros((2, 2))})
        assert "must have rank 2" in _fails(sess, op, {u: np.zeros(2)})


def test_check_numerics_passes_values_and_gradients_and_reports_nan_inf():
    x = kf.placeholder(kf.float32, [2])
    y = kf.check_numerics(x * 2.0, "after doubling")
    g = kf.gradients(kf.reduce_sum(y), x)[0]
    with kf.Session() as sess:
        np.testing.assert_allclose(sess.run([y, g], {x: [1.0, 2.0]}), [[2.0, 4.0], [2.0, 2.0]])
        assert "after doubling" in _fails(sess, y, {x: [np.inf, 1.0]})
        assert "after doubling" in _fails(sess, y, {x: [np.nan, 1.0]})
