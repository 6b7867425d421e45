"""kf.math (kernflow/core/math.py): TF1 names, the special ops and the composed functions."""

import json
import math
import os

import numpy as np
import pytest

import kernflow.core as kf
from kernflow.core import math as km
from kernflow.core.testing.gradient_checker import compute_gradient_error

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))

# TF1 tf.math names kernflow does not provide (Sobol sequences).
NOT_PROVIDED = {"sobol_sample"}


def _run(t, feed=None):
    with kf.Session() as s:
        return s.run(t, feed)


def test_every_tf1_math_name_is_provided_or_listed():
    with open(os.path.join(ROOT, "tools", "tf1_api_names.json")) as f:
        names = json.load(f)["math"]
    missing = sorted(n for n in names if not hasattr(km, n))
    assert missing == sorted(NOT_PROVIDED & set(names))


def test_reexports_are_the_kf_functions():
    assert km.add is kf.add and km.reduce_sum is kf.reduce_sum and km.top_k is kf.nn.top_k
    assert km.erf is kf.erf and km.bincount is kf.bincount and km.log_sigmoid is kf.log_sigmoid


def test_top_level_aliases():
    for n in ("rint", "truncatediv", "truncatemod", "div_no_nan", "lgamma", "atan2", "is_nan",
              "unsorted_segment_mean", "confusion_matrix", "accumulate_n"):
        assert hasattr(kf, n), n


@pytest.mark.parametrize("shape", [[2, 3], [4]])
def test_unary_special_values_and_gradients(shape):
    kf.reset_default_graph()
    xv = np.random.RandomState(0).uniform(0.2, 0.9, shape)
    x = kf.placeholder(kf.float64, shape)
    fns = [(km.erf, np.vectorize(math.erf)), (km.erfc, np.vectorize(math.erfc)),
           (km.lgamma, np.vectorize(math.lgamma)), (km.atanh, np.arctanh), (km.tan, np.tan),
           (km.log_sigmoid, lambda v: -np.log1p(np.exp(-v)))]
    for fn, ref in fns:
        y = fn(x)
        np.testing.assert_allclose(_run(y, {x: xv}), ref(xv), rtol=1e-10)
        with kf.Session():
            err = compute_gradient_error(x, shape, y, shape, x_init_value=xv, delta=1e-6)
        assert err < 1e-6, fn.__name__


def test_log_sigmoid_does_not_overflow():
    v = _run(km.log_sigmoid(kf.constant([-1000.0, 0.0, 1000.0])))
    np.testing.assert_allclose(v, [-1000.0, -math.log(2), 0.0])


def test_truncating_division_and_errors():
    x, y = [7, -7, 7, -7], [2, 2, -2, -2]
    assert _run(km.truncatediv(x, y)).tolist() == [3, -3, -3, 3]
    assert _run(km.truncatemod(x, y)).tolist() == [1, -1, 1, -1]
    with pytest.raises(kf.errors.InvalidArgumentError, match="TruncateDiv.*division by zero"):
        _run(km.truncatediv([1, 2], [1, 0]))


def test_safe_divisions_and_products():
    np.testing.assert_array_equal(_run(km.divide_no_nan([1.0, 2.0], [0.0, 4.0])), [0.0, 0.5])
    np.testing.assert_array_equal(_run(km.reciprocal_no_nan([0.0, 4.0])), [0.0, 0.25])
    np.testing.assert_array_equal(_run(km.multiply_no_nan([np.inf, 2.0], [0.0, 3.0])), [0.0, 6.0])
    np.testing.assert_array_equal(_run(km.xlogy([0.0, 2.0], [0.0, 1.0])), [0.0, 0.0])
    np.testing.assert_array_equal(_run(km.xdivy([0.0, 2.0], [0.0, 4.0])), [0.0, 0.5])
    np.testing.assert_allclose(_run(km.xlog1py([0.0, 2.0], [-1.0, 1.0])), [0.0, 2 * math.log(2)])


def test_float_classification():
    v = np.array([1.0, np.inf, -np.inf, np.nan], np.float32)
    assert _run(km.is_finite(v)).tolist() == [True, False, False, False]
    assert _run(km.is_inf(v)).tolist() == [False, True, True, False]
    assert _run(km.is_nan(v)).tolist() == [False, False, False, True]


def test_moments_and_norms():
    xv = np.random.RandomState(1).randn(3, 4)
    np.testing.assert_allclose(_run(km.reduce_variance(xv, 1)), np.var(xv, 1))
    np.testing.assert_allclose(_run(km.reduce_std(xv, 0, keepdims=True)), np.std(xv, 0, keepdims=True))
    np.testing.assert_allclose(_run(km.reduce_euclidean_norm(xv)), np.linalg.norm(xv))
    assert _run(km.reduce_euclidean_norm([[3, 4], [1, 1]], 1)).tolist() == [5, 1]
    np.testing.assert_allclose(_run(km.cumulative_logsumexp(xv, 1)),
                               np.log(np.cumsum(np.exp(xv), 1)))
    with pytest.raises(TypeError, match="real or complex"):
        km.reduce_variance([1, 2])


def test_reduce_std_gradient():
    kf.reset_default_graph()
    xv = np.random.RandomState(2).randn(3, 4)
    x = kf.placeholder(kf.float64, [3, 4])
    with kf.Session():
        err = compute_gradient_error(x, [3, 4], km.reduce_std(x, 1), [3], x_init_value=xv)
    assert err < 1e-6


def test_bincount_and_confusion_matrix():
    arr = np.array([1, 1, 3, 0, 3, 3], np.int32)
    assert _run(km.bincount(arr)).tolist() == [1, 2, 0, 3]
    assert _run(km.bincount(arr, minlength=6)).tolist() == [1, 2, 0, 3, 0, 0]
    assert _run(km.bincount(arr, maxlength=2)).tolist() == [1, 2]
    np.testing.assert_allclose(_run(km.bincount(arr, weights=np.arange(6.0))), [3.0, 1.0, 0.0, 11.0])
    assert _run(km.bincount(np.zeros([0], np.int32))).tolist() == []
    cm = _run(km.confusion_matrix([1, 2, 4], [2, 2, 4]))
    expected = np.zeros([5, 5], np.int32)
    expected[1, 2] = expected[2, 2] = expected[4, 4] = 1
    np.testing.assert_array_equal(cm, expected)
    assert _run(km.confusion_matrix([0, 1], [1, 1], num_classes=3)).shape == (3, 3)


def test_unsorted_segment_mean_and_sqrt_n():
    data = np.arange(12.0).reshape(4, 3)
    ids = np.array([0, 2, 0, -1], np.int32)
    mean = _run(km.unsorted_segment_mean(data, ids, 3))
    np.testing.assert_allclose(mean, [(data[0] + data[2]) / 2, np.zeros(3), data[1]])
    sqrt_n = _run(km.unsorted_segment_sqrt_n(data, ids, 3))
    np.testing.assert_allclose(sqrt_n, [(data[0] + data[2]) / math.sqrt(2), np.zeros(3), data[1]])


def test_monotonicity_polyval_lbeta_accumulate_n():
    assert _run(km.is_non_decreasing([1, 1, 2])) and not _run(km.is_strictly_increasing([1, 1, 2]))
    assert _run(km.is_strictly_increasing([[1, 2], [3, 4]])) and _run(km.is_non_decreasing([5]))
    np.testing.assert_allclose(_run(km.polyval([1.0, -2.0, 3.0], np.array([0.0, 2.0]))), [3.0, 3.0])
    np.testing.assert_allclose(_run(km.lbeta([[1.0, 2.0], [0.5, 0.5]])),
                               [math.log(0.5), math.log(math.pi)])
    assert _run(km.accumulate_n([[1, 2], [3, 4], [5, 6]])).tolist() == [9, 12]


def test_complex_parts():
    z = np.array([1 + 2j, -3 - 0.5j], np.complex64)
    np.testing.assert_allclose(_run(km.real(z)), z.real)
    np.testing.assert_allclose(_run(km.imag(z)), z.imag)
    np.testing.assert_allclose(_run(km.angle(z)), np.angle(z), rtol=1e-6)
    assert _run(km.imag([1.0, 2.0])).tolist() == [0.0, 0.0]
    np.testing.assert_allclose(_run(km.angle([-1.0, 2.0])), [math.pi, 0.0])
