"""kf.unique and kf.unique_with_counts: first-occurrence order, index dtype, empty input, errors."""

import numpy as np
import pytest

import kernflow.core as kf
from kernflow.core.framework import errors


def test_unique_keeps_the_order_of_first_occurrence():
    x = np.array([7, 1, 7, 3, 1, 1, 9], np.int64)
    y, idx = kf.unique(kf.constant(x))
    y2, idx2, count = kf.unique_with_counts(kf.constant(x), out_idx=kf.int64)
    with kf.Session() as sess:
        got = sess.run([y, idx, y2, idx2, count])
    np.testing.assert_array_equal(got[0], [7, 1, 3, 9])
    np.testing.assert_array_equal(got[0][got[1]], x)
    assert got[1].dtype == np.int32 and got[3].dtype == np.int64
    np.testing.assert_array_equal(got[4], [2, 3, 1, 1])
    assert y.shape.as_list() == [None] and idx.shape.as_list() == [7]


def test_unique_of_floats_strings_and_nothing():
    p = kf.placeholder(kf.float32, [None])
    s = kf.constant([b"b", b"a", b"b"])
    y, idx = kf.unique(p)
    sy, sidx = kf.unique(s)
    with kf.Session() as sess:
        assert sess.run(y, {p: np.zeros(0, np.float32)}).shape == (0,)
        np.testing.assert_array_equal(sess.run(y, {p: [0.5, -1.0, 0.5]}), [0.5, -1.0])
        assert list(sess.run(sy)) == [b"b", b"a"] and list(sess.run(sidx)) == [0, 1, 0]


def test_unique_wants_a_vector():
    with pytest.raises(ValueError):
        kf.unique(kf.constant([[1, 2]]))
    p = kf.placeholder(kf.int32)
    y, _ = kf.unique(p)
    with kf.Session() as sess, pytest.raises(errors.InvalidArgumentError, match="1D vector"):
        sess.run(y, {p: [[1, 2]]})
