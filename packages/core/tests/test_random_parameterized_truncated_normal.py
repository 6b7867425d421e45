"""kf.random.stateless_parameterized_truncated_normal: broadcasting, bounds, determinism, moments,
errors, and the implicit-reparameterization gradient."""

import math

import numpy as np
import pytest

import kernflow.core as kf
from kernflow.core.framework import errors

_sample = kf.random.stateless_parameterized_truncated_normal


def _run(fetch):
    with kf.Session() as sess:
        return sess.run(fetch)


def test_tf_docs_example_broadcasts_and_respects_the_bounds():
    stddevs = np.exp(np.random.RandomState(0).rand(2, 3)).astype(np.float32)
    minvals, maxvals = [-1., -2., -1000.], [[10000.], [1.]]
    with kf.Graph().as_default():
        y = _sample([10, 2, 3], [7, 17], 0., stddevs, minvals, maxvals)
        assert y.shape.as_list() == [10, 2, 3] and y.dtype == kf.float32
        a, b = _run([y, y])
    with kf.Graph().as_default():
        c = _run(_sample([10, 2, 3], kf.constant([7, 17], kf.int32), 0., stddevs, minvals, maxvals))
    np.testing.assert_array_equal(a, b)
    np.testing.assert_array_equal(a, c)   # the same seed in another graph and session
    assert (a >= np.array(minvals)).all() and (a <= np.array(maxvals)).all()


def _moments(a, b):
    pa, pb = (math.exp(-t * t / 2) / math.sqrt(2 * math.pi) if math.isfinite(t) else 0.0 for t in (a, b))
    # the mass in [a, b], from the upper tails right of 0 (where cdf(b) - cdf(a) would cancel)
    z = 0.5 * (math.erfc(a / math.sqrt(2)) - math.erfc(b / math.sqrt(2))) if a > 0 else \
        0.5 * (math.erfc(-b / math.sqrt(2)) - math.erfc(-a / math.sqrt(2)))
    ta, tb = (t * p if math.isfinite(t) else 0.0 for t, p in ((a, pa), (b, pb)))
    mean = (pa - pb) / z
    return mean, math.sqrt(1 + (ta - tb) / z - mean ** 2)


@pytest.mark.parametrize("lo,hi", [(-2.0, 2.0), (-0.05, 0.1), (3.0, float("inf")), (-float("inf"), -6.0),
                                   (8.0, 8.4), (0.0, 1000.0)])
def test_moments_match_the_truncated_normal(lo, hi):
    with kf.Graph().as_default():
        x = _run(_sample([20000], [1, 2], 0.5, 2.0, 0.5 + 2 * lo, 0.5 + 2 * hi, name="draw"))
    z = (x.astype(np.float64) - 0.5) / 2
    mean, std = _moments(lo, hi)
    assert z.min() >= lo - 1e-5 and z.max() <= hi + 1e-5
    assert abs(z.mean() - mean) < 0.03 * std + 1e-6 and abs(z.std() - std) < 0.05 * std


def test_float64_and_float16_params():
    with kf.Graph().as_default():
        d = _sample([5], [3, 4], np.float64(0.0))
        h = _sample([5], [3, 4], np.float16(0.0), 1.0, -1.0, 1.0)
        assert d.dtype == kf.float64 and h.dtype == kf.float16
        dv, hv = _run([d, h])
    assert np.abs(dv).max() <= 2 and np.abs(hv).max() <= 1


@pytest.mark.parametrize("kw,match", [({"stddevs": [1.0, -1.0]}, "stddevs must be positive"),
                                      ({"minvals": 3.0, "maxvals": 1.0}, "minvals must be less than maxvals"),
                                      ({"means": [0.0, 1.0, 2.0]}, "do not broadcast to shape \\[4, 2\\]")])
def test_bad_parameters_are_invalid_argument(kw, match):
    with kf.Graph().as_default(), pytest.raises(errors.InvalidArgumentError,
                                                match=f"StatelessParameterizedTruncatedNormal.*{match}"):
        _run(_sample([4, 2], [1, 1], **kw))


def test_bad_seed_and_dtype():
    with kf.Graph().as_default():
        with pytest.raises(ValueError):
            _sample([3], [1, 2, 3])
        with pytest.raises(ValueError, match="float16, float32, float64"):
            _sample([3], [1, 2], means=np.int32(0))


def _cdf(x, m, s, lo, hi):
    phi = lambda t: 0.5 * math.erfc(-t / math.sqrt(2))  # noqa: E731
    return (phi((x - m) / s) - phi((lo - m) / s)) / (phi((hi - m) / s) - phi((lo - m) / s))


def test_gradient_is_the_implicit_reparameterization():
    """d x / d param = -(dF/dparam) / (dF/dx) for the truncated CDF F, checked element by element with
    central differences of F (the sample itself is a rejection sample, not a smooth function)."""
    params = [np.array([0.3, -1.0, 2.0]), np.array([1.5, 0.7, 2.0]), np.array([-1.0, -np.inf, 1.5]),
              np.array([2.0, 0.5, np.inf])]
    with kf.Graph().as_default():
        ts = [kf.constant(p) for p in params]
        x = _sample([3], [5, 9], *ts)
        got = _run([x] + kf.gradients(x, ts))
    x, grads = got[0], got[1:]
    eps = 1e-6
    for i in range(3):
        p = [float(v[i]) for v in params]
        dfdx = (_cdf(x[i] + eps, *p) - _cdf(x[i] - eps, *p)) / (2 * eps)
        for k in range(4):
            if not math.isfinite(p[k]):
                assert grads[k][i] == 0
                continue
            up, down = list(p), list(p)
            up[k] += eps
            down[k] -= eps
            dfdp = (_cdf(x[i], *up) - _cdf(x[i], *down)) / (2 * eps)
            np.testing.assert_allclose(grads[k][i], -dfdp / dfdx, rtol=1e-4, atol=1e-6)


def test_gradient_sums_over_broadcast_dimensions():
    with kf.Graph().as_default():
        m = kf.constant(0.0, kf.float64)
        x = _sample([50], [2, 2], m, 1.0, -1.0, 1.0)
        dm = _run(kf.gradients(kf.reduce_sum(x), m)[0])
    assert dm.shape == () and 0 < dm < 50
