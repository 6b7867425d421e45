"""kf.gradients through the segment reductions: ties, zeros, negative ids, run-time shapes."""

import numpy as np
import pytest

import kernflow.core as kf
from kernflow.core.framework.gradient_registry import get_gradient_function

_r = np.random.RandomState(5)


@pytest.fixture(autouse=True)
def _fresh_graph():
    with kf.Graph().as_default() as g:
        yield g


def _run(fetches, feed=None):
    with kf.Session() as sess:
        return sess.run(fetches, feed)


def _grad(fn, data, *args, weights=None, static=True):
    """d sum(fn(x, *args) * weights) / dx at `data`."""
    x = kf.placeholder(kf.as_dtype(data.dtype), data.shape if static else None)
    y = fn(x, *args)
    w = kf.constant(weights, dtype=x.dtype) if weights is not None else 1.0
    g, = kf.gradients(kf.reduce_sum(y * w), [x])
    if static:
        assert g.shape.as_list() == list(data.shape)
    assert g.dtype == x.dtype
    return _run(g, {x: data})


def _fd(fn, data, *args, delta=1e-6):
    """(symbolic, finite-difference) gradients of sum(fn(x, *args) * weights) at `data`."""
    x = kf.placeholder(kf.float64, data.shape)
    y = fn(x, *args)
    w = np.arange(1.0, 1.0 + y.shape.num_elements()).reshape(y.shape.as_list())
    loss = kf.reduce_sum(y * w)
    g, = kf.gradients(loss, [x])
    with kf.Session() as sess:
        sym = sess.run(g, {x: data})
        num = np.zeros_like(data)
        for j in range(data.size):
            vals = []
            for sgn in (1, -1):
                p = data.copy()
                p.reshape(-1)[j] += sgn * delta
                vals.append(sess.run(loss, {x: p}))
            num.reshape(-1)[j] = (vals[0] - vals[1]) / (2 * delta)
    return sym, num


# ---------------------------------------------------------------------------- sums and means
def test_segment_sum_and_mean():
    data = _r.randn(5, 2)
    ids = [0, 0, 1, 3, 3]
    w = np.array([[1., 2.], [3., 4.], [5., 6.], [7., 8.]])
    np.testing.assert_allclose(_grad(kf.segment_sum, data, ids, weights=w), w[ids])
    counts = np.array([2, 1, 1, 2])[ids][:, None]
    np.testing.assert_allclose(_grad(kf.segment_mean, data, ids, weights=w), w[ids] / counts)
    np.testing.assert_allclose(_grad(kf.segment_mean, data, ids, weights=w, static=False),
                               w[ids] / counts)


def test_segment_mean_of_rank_3_data_with_run_time_ids():
    data = _r.randn(4, 2, 3)
    ids = kf.placeholder(kf.int64, None)
    x = kf.placeholder(kf.float64, None)
    g, = kf.gradients(kf.reduce_sum(kf.segment_mean(x, ids)), [x])
    out = _run(g, {x: data, ids: np.array([0, 0, 0, 2], np.int64)})
    np.testing.assert_allclose(out, np.concatenate([np.full((3, 2, 3), 1 / 3), np.ones((1, 2, 3))]))


def test_unsorted_segment_sum_drops_negative_ids():
    data = _r.randn(2, 3, 2)
    ids = np.array([[1, -1, 0], [-1, 1, 1]])
    w = np.array([[1., 2.], [3., 4.]])
    expected = np.where((ids >= 0)[..., None], w[np.maximum(ids, 0)], 0.0)
    for static in (True, False):
        np.testing.assert_allclose(
            _grad(kf.unsorted_segment_sum, data, ids, 2, weights=w, static=static), expected)


# ---------------------------------------------------------------------------- max and min
def test_segment_max_and_min_split_ties_evenly():
    data = np.array([[3., 1.], [3., 5.], [3., 5.], [2., 2.]])
    ids = [0, 0, 0, 1]
    gmax = _grad(kf.segment_max, data, ids)
    np.testing.assert_allclose(gmax, [[1 / 3, 0], [1 / 3, 0.5], [1 / 3, 0.5], [1, 1]])
    gmin = _grad(kf.segment_min, data, ids)
    np.testing.assert_allclose(gmin, [[1 / 3, 1], [1 / 3, 0], [1 / 3, 0], [1, 1]])


def test_unsorted_segment_max_and_min_split_ties_and_drop_negative_ids():
    data = np.array([4., 1., 4., 9., 4., -2.])
    ids = np.array([0, 1, 0, -1, 0, 1])
    w = np.array([3., 5.])
    for static in (True, False):
        gmax = _grad(kf.unsorted_segment_max, data, ids, 2, weights=w, static=static)
        np.testing.assert_allclose(gmax, [1, 5, 1, 0, 1, 0])
        gmin = _grad(kf.unsorted_segment_min, data, ids, 2, weights=w, static=static)
        np.testing.assert_allclose(gmin, [1, 0, 1, 0, 1, 5])


def test_unsorted_segment_max_with_2d_ids_and_fed_num_segments():
    data = np.array([[[1., 2.], [1., 0.]], [[0., 2.], [7., 7.]]])
    ids = np.array([[0, 0], [1, -1]], np.int64)
    x = kf.placeholder(kf.float64, [2, 2, 2])
    n = kf.placeholder(kf.int32, [])
    g, = kf.gradients(kf.reduce_sum(kf.unsorted_segment_max(x, ids, n)), [x])
    out = _run(g, {x: data, n: 3})
    np.testing.assert_allclose(out, [[[0.5, 1.], [0.5, 0.]], [[1., 1.], [0., 0.]]])


# ---------------------------------------------------------------------------- products
def test_segment_prod_with_zeros():
    data = np.array([2., 0., 3., 0., 0., 5., 4.])
    ids = [0, 0, 0, 1, 1, 2, 2]
    # Segment 0 has one zero: only it gets a gradient (the product of the others); segment 1
    # has two zeros: all 0; segment 2 has none: the product of the others.
    expected = [0., 6., 0., 0., 0., 4., 5.]
    np.testing.assert_allclose(_grad(kf.segment_prod, data, ids), expected)
    np.testing.assert_allclose(_grad(kf.segment_prod, data, ids, static=False), expected)


def test_unsorted_segment_prod_with_zeros_and_negative_ids():
    data = np.array([2., 0., 3., 0., 0., 5., 4., 0.])
    ids = np.array([0, 0, 0, 1, 1, 2, 2, -1])
    expected = [0., 6., 0., 0., 0., 4., 5., 0.]
    np.testing.assert_allclose(_grad(kf.unsorted_segment_prod, data, ids, 3), expected)
    data2 = np.array([2., 3., 7.])
    np.testing.assert_allclose(_grad(kf.unsorted_segment_prod, data2, np.array([0, -1, 0]), 1),
                               [7., 0., 2.])


@pytest.mark.parametrize("fn,ids", [
    (kf.segment_prod, [0, 0, 2, 2, 2]),
    (kf.segment_mean, [0, 1, 1, 1, 3]),
    (kf.segment_max, [0, 0, 0, 1, 1]),
    (lambda x, i: kf.unsorted_segment_prod(x, i, 4), [3, -1, 0, 3, 3]),
    (lambda x, i: kf.unsorted_segment_min(x, i, 4), [3, 1, 0, 2, -1]),
    (lambda x, i: kf.unsorted_segment_max(x, i, 2),
     [[1, -1, 0], [1, 1, 0], [0, 0, -1], [1, 0, 0], [1, 1, 1]]),
])
def test_gradients_match_finite_differences(fn, ids):
    data = _r.uniform(0.5, 2.0, size=(5, 3)) * np.where(_r.rand(5, 3) < 0.5, -1, 1)
    sym, num = _fd(fn, data, ids)
    np.testing.assert_allclose(sym, num, rtol=1e-6, atol=1e-6)


# ---------------------------------------------------------------------------- ids and types
def test_ids_and_num_segments_get_no_gradient():
    x = kf.placeholder(kf.float32, [4, 2])
    for y in (kf.segment_sum(x, [0, 0, 1, 1]), kf.segment_max(x, [0, 0, 1, 1]),
              kf.unsorted_segment_sum(x, [0, 2, 1, 1], 3), kf.unsorted_segment_prod(x, [0, 2, 1, 1], 3)):
        grads = get_gradient_function(y.op)(y.op, kf.ones_like(y))
        assert len(grads) == len(y.op.inputs)
        assert grads[0].dtype == kf.float32 and grads[0].shape.as_list() == [4, 2]
        assert all(g is None for g in grads[1:])


def test_float32_and_float16_gradients_keep_their_type():
    for dt in (np.float32, np.float16):
        data = np.array([[1., 2.], [3., 4.], [5., 6.]], dt)
        g = _grad(kf.segment_mean, data, [0, 0, 1])
        assert g.dtype == dt
        np.testing.assert_allclose(g, [[.5, .5], [.5, .5], [1, 1]])
        g = _grad(kf.unsorted_segment_max, data, [1, -1, 0], 2, weights=np.array([[2., 3.], [4., 5.]]))
        assert g.dtype == dt
        np.testing.assert_allclose(g, [[4, 5], [0, 0], [2, 3]])
