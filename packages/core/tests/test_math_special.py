"""kf.math.special (tf.compat.v1.math.special): values over dense grids against scipy.special (Cephes,
which TF's Eigen kernels port), TF's domain edges, float32/float16 outputs, gradients by finite
differences, identities that need no reference library (Wronskians, closed forms) and the names."""

from __future__ import annotations

import math

import numpy as np
import pytest

import kernflow.core as kf

import scipy.special as ss   # (requirements-dev.txt: the reference values)

S = kf.math.special
_NAN, _INF = np.nan, np.inf

# The grid: dense in the middle, geometric out to the ends of float64, both signs, the special points.
_POS = np.concatenate([np.linspace(0, 60, 6001)[1:], np.geomspace(1e-300, 1e-3, 600),
                       np.geomspace(1e3, 1e300, 600)])
GRID = np.concatenate([_POS, -_POS, [0.0, -0.0, _INF, -_INF, _NAN, 0.5, 1.0, 1.5, 2.0, 5.0, 6.0, 12.0, 25.0,
                                     40.0, 0.37250741078136663, 709.0, 720.0, 800.0]])


def _tf_domain(fn, low=0.0):
    """scipy's function, NaN below `low` (TF's Ei and Spence are real-valued on x >= 0 only)."""
    return lambda x: np.where(x < low, np.nan, fn(np.where(x < low, 1.0, x)))


if ss is not None:
    REFERENCES = {
        "bessel_j0": ss.j0, "bessel_j1": ss.j1, "bessel_y0": ss.y0, "bessel_y1": ss.y1,
        "bessel_k0": ss.k0, "bessel_k0e": ss.k0e, "bessel_k1": ss.k1, "bessel_k1e": ss.k1e,
        "bessel_i0": ss.i0, "bessel_i0e": ss.i0e, "bessel_i1": ss.i1, "bessel_i1e": ss.i1e,
        "dawsn": ss.dawsn, "expint": _tf_domain(ss.expi), "spence": _tf_domain(ss.spence),
        "fresnel_cos": lambda x: ss.fresnel(x)[1], "fresnel_sin": lambda x: ss.fresnel(x)[0],
    }
# Absolute slack where a function crosses zero (relative error means nothing there); J and Y also
# carry the absolute rounding of their phase x - pi/4 for large x.
_ATOL = {"bessel_j0": 1e-10, "bessel_j1": 1e-10, "bessel_y0": 1e-10, "bessel_y1": 1e-10, "expint": 1e-13,
         "spence": 1e-15}
NAMES = ["bessel_i0", "bessel_i0e", "bessel_i1", "bessel_i1e", "bessel_j0", "bessel_j1", "bessel_k0",
         "bessel_k0e", "bessel_k1", "bessel_k1e", "bessel_y0", "bessel_y1", "dawsn", "expint", "fresnel_cos",
         "fresnel_sin", "spence"]


def run(name, x, dtype=np.float64):
    with kf.Graph().as_default():
        ph = kf.placeholder(kf.as_dtype(dtype), [None])
        y = getattr(S, name)(ph)
        assert y.dtype == kf.as_dtype(dtype)
        with kf.Session() as sess:
            return sess.run(y, {ph: np.asarray(x, dtype)})


def _reference(name, x):
    with np.errstate(all="ignore"):
        want = np.asarray(REFERENCES[name](x), np.float64)
    if name.startswith("fresnel"):   # scipy's x^2 overflows beyond 1e154; Cephes' limit is +-1/2
        want = np.where(np.abs(x) > 1e150, np.sign(x) * 0.5, want)
    return want


def assert_close(got, want, rtol, atol, what):
    same_special = (np.isnan(got) == np.isnan(want)) & (np.isinf(want) <= (got == want))
    bad = np.flatnonzero(~same_special)
    assert not bad.size, f"{what}: non-finite mismatch at {bad[:5]}: got {got[bad[:5]]}, want {want[bad[:5]]}"
    fin = np.isfinite(want)
    if not fin.any():
        return
    err = np.abs(got[fin] - want[fin]) - (rtol * np.abs(want[fin]) + max(atol, 1e-300))  # 1e-300: subnormals
    worst = np.argmax(err)
    assert err[worst] <= 0, f"{what}: got {got[fin][worst]!r}, want {want[fin][worst]!r}"


# ---------------------------------------------------------------------------- values
@pytest.mark.parametrize("name", NAMES)
def test_float64_matches_scipy_over_the_whole_line(name):
    assert_close(run(name, GRID), _reference(name, GRID), 1e-6, _ATOL.get(name, 0.0), name)


@pytest.mark.parametrize("name", NAMES)
def test_float64_is_accurate_well_beyond_one_in_a_million(name):
    # The kernels are series, quadrature and continued fractions summed to float64 rounding: away
    # from zeros and the far phase of the oscillating functions they agree with Cephes to ~1e-9.
    x = GRID[np.abs(GRID) <= 1e4]
    assert_close(run(name, x), _reference(name, x), 5e-9, _ATOL.get(name, 0.0) / 10, name)


@pytest.mark.parametrize("dtype, rtol, atol", [(np.float32, 1e-6, 1e-38), (np.float16, 1e-3, 1e-7)])
@pytest.mark.parametrize("name", NAMES)
def test_half_and_single_precision_round_the_float64_value(name, dtype, rtol, atol):
    finfo = np.finfo(dtype)
    x = GRID[~(np.abs(GRID) > finfo.max)].astype(dtype)
    got = run(name, x, dtype)
    assert got.dtype == dtype
    want = _reference(name, x.astype(np.float64))
    with np.errstate(over="ignore"):
        assert_close(got.astype(np.float64), want.astype(dtype).astype(np.float64), rtol,
                     max(atol, 4 * _ATOL.get(name, 0.0)), f"{name} {np.dtype(dtype).name}")


_TABLE = {   # values that hold whatever the reference library: domain edges and closed forms
    "bessel_j0": ([0.0, -0.0, _NAN, 1e-300], [1.0, 1.0, _NAN, 1.0]),
    "bessel_j1": ([0.0, -1e-300, _NAN], [0.0, -5e-301, _NAN]),
    "bessel_y0": ([0.0, -1.0, -_INF, _NAN], [-_INF, _NAN, _NAN, _NAN]),
    "bessel_y1": ([0.0, -1e-300, _NAN], [-_INF, _NAN, _NAN]),
    "bessel_k0": ([0.0, -2.0, _INF, 800.0], [_INF, _NAN, 0.0, 0.0]),
    "bessel_k0e": ([0.0, -2.0, _INF], [_INF, _NAN, 0.0]),
    "bessel_k1": ([0.0, -2.0, _INF, 1e-300], [_INF, _NAN, 0.0, 1e300]),
    "bessel_k1e": ([0.0, -2.0, _INF], [_INF, _NAN, 0.0]),
    "dawsn": ([0.0, _INF, -_INF, 1e150, -1e-300], [0.0, 0.0, -0.0, 5e-151, -1e-300]),
    "expint": ([0.0, -1e-300, -5.0, _INF, 800.0], [-_INF, _NAN, _NAN, _INF, _INF]),
    "fresnel_cos": ([0.0, _INF, -_INF, 1e-300], [0.0, 0.5, -0.5, 1e-300]),
    "fresnel_sin": ([0.0, _INF, -_INF, 1e-100], [0.0, 0.5, -0.5, math.pi / 6 * 1e-300]),
    "spence": ([0.0, 1.0, 2.0, 0.5, -1e-300, _NAN],
               [math.pi ** 2 / 6, 0.0, -math.pi ** 2 / 12, math.pi ** 2 / 12 - math.log(2) ** 2 / 2, _NAN,
                _NAN]),
}


@pytest.mark.parametrize("name", sorted(_TABLE))
def test_domain_edges_and_closed_forms(name):
    xs, ys = _TABLE[name]
    assert_close(run(name, xs), np.array(ys), 1e-14, 0.0, name)


def test_the_documented_example():
    got = run("bessel_j0", [0.5, 1.0, 2.0, 4.0], np.float32)
    want = np.array([0.93846981, 0.76519769, 0.22389078, -0.39714981], np.float32)
    np.testing.assert_array_equal(got, want)


# ---------------------------------------------------------------------------- identities, no scipy
def test_wronskians_of_the_bessel_functions():
    x = np.concatenate([np.linspace(0.01, 80, 4000), np.geomspace(80, 1e6, 200)])
    j0, j1, y0, y1 = (run(n, x) for n in ("bessel_j0", "bessel_j1", "bessel_y0", "bessel_y1"))
    np.testing.assert_allclose((j1 * y0 - j0 * y1) * (np.pi * x / 2), 1.0, rtol=1e-9)
    small = x[x < 700]
    i0e, i1e, k0e, k1e = (run(n, small) for n in ("bessel_i0e", "bessel_i1e", "bessel_k0e", "bessel_k1e"))
    np.testing.assert_allclose((i0e * k1e + i1e * k0e) * small, 1.0, rtol=1e-12)


def test_scaled_k_is_k_times_exp():
    x = np.geomspace(1e-5, 700, 500)
    np.testing.assert_allclose(run("bessel_k0", x) * np.exp(x), run("bessel_k0e", x), rtol=1e-13)
    np.testing.assert_allclose(run("bessel_k1", x) * np.exp(x), run("bessel_k1e", x), rtol=1e-13)


def test_integrals_by_their_derivatives():
    # Each function against a Simpson integration of its derivative (the closed-form integrand).
    t = np.linspace(0.0, 4.0, 40001)
    h = t[1] - t[0]
    w = np.ones_like(t)
    w[1:-1:2], w[2:-1:2] = 4, 2
    simpson = lambda f: np.sum(w * f) * h / 3  # noqa: E731
    assert run("fresnel_cos", [4.0])[0] == pytest.approx(simpson(np.cos(np.pi * t * t / 2)), rel=1e-12)
    assert run("fresnel_sin", [4.0])[0] == pytest.approx(simpson(np.sin(np.pi * t * t / 2)), rel=1e-12)
    assert run("dawsn", [4.0])[0] == pytest.approx(np.exp(-16.0) * simpson(np.exp(t * t)), rel=1e-12)
    s = np.linspace(1.0, 5.0, 40001)
    log_ratio = np.where(s == 1, -1.0, np.log(s) / np.where(s == 1, 2.0, 1 - s))
    assert run("spence", [5.0])[0] == pytest.approx(simpson(log_ratio), rel=1e-12)


def test_odd_and_even_symmetry():
    x = np.linspace(0.01, 50, 1000)
    for name in ("bessel_j0", "bessel_i0", "bessel_i0e"):
        np.testing.assert_array_equal(run(name, -x), run(name, x))
    for name in ("bessel_j1", "bessel_i1", "bessel_i1e", "dawsn", "fresnel_cos", "fresnel_sin"):
        np.testing.assert_array_equal(run(name, -x), -run(name, x))


# ---------------------------------------------------------------------------- gradients
_GRAD_POINTS = {
    "bessel_j0": [-7.0, -0.5, 0.0, 0.7, 5.0, 20.0], "bessel_j1": [-7.0, -0.5, 0.0, 0.7, 5.0, 20.0],
    "bessel_y0": [0.2, 1.0, 5.0, 20.0], "bessel_y1": [0.2, 1.0, 5.0, 20.0],
    "bessel_k0": [0.2, 1.0, 3.0, 30.0], "bessel_k0e": [0.2, 1.0, 3.0, 30.0],
    "bessel_k1": [0.2, 1.0, 3.0, 30.0], "bessel_k1e": [0.2, 1.0, 3.0, 30.0],
    "dawsn": [-7.0, -0.5, 0.0, 0.7, 5.0, 20.0], "expint": [0.05, 0.5, 2.0, 8.0],
    "fresnel_cos": [-3.0, -0.5, 0.0, 0.7, 2.0, 4.0], "fresnel_sin": [-3.0, -0.5, 0.0, 0.7, 2.0, 4.0],
    "spence": [0.05, 0.5, 1.0, 2.0, 10.0],
}


@pytest.mark.parametrize("name", sorted(_GRAD_POINTS))
def test_gradient_by_finite_differences(name):
    x0 = np.array(_GRAD_POINTS[name])
    with kf.Graph().as_default():
        x = kf.constant(x0)
        y = getattr(S, name)(x)
        with kf.Session():
            err = kf.test.compute_gradient_error(x, [x0.size], y, [x0.size], x_init_value=x0, delta=1e-6)
    assert err < 1e-6


def _derivative(name, x0, dtype=np.float64):
    with kf.Graph().as_default():
        x = kf.constant(np.asarray(x0, dtype))
        (g,) = kf.gradients(getattr(S, name)(x), [x])
        with kf.Session() as sess:
            return sess.run(g)


def test_gradients_at_removable_singularities_take_the_limit():
    assert _derivative("bessel_j1", [0.0])[0] == 0.5
    assert _derivative("spence", [1.0])[0] == -1.0
    assert _derivative("bessel_j0", [0.0])[0] == 0.0


@pytest.mark.parametrize("name", sorted(_GRAD_POINTS))
def test_gradients_in_float32_and_float16(name):
    x0 = np.array(_GRAD_POINTS[name])
    g64 = _derivative(name, x0)
    for dtype, rtol in ((np.float32, 1e-4), (np.float16, 2e-2)):
        g = _derivative(name, x0, dtype)
        assert g.dtype == dtype
        fits = np.abs(g64) < np.finfo(dtype).max
        np.testing.assert_allclose(g[fits].astype(np.float64), g64[fits], rtol=rtol,
                                   atol=20 * float(np.finfo(dtype).eps), err_msg=name)


# ---------------------------------------------------------------------------- the namespace
def test_namespace_has_tf_names():
    assert sorted(S.__all__) == NAMES
    for name in NAMES:
        assert callable(getattr(S, name)), name
    for name in ("bessel_i0", "bessel_i0e", "bessel_i1", "bessel_i1e"):
        assert getattr(S, name) is getattr(kf.math, name)


def test_op_types_and_default_names():
    ops = {"bessel_j0": "BesselJ0", "bessel_j1": "BesselJ1", "bessel_y0": "BesselY0", "bessel_y1": "BesselY1",
           "bessel_k0": "BesselK0", "bessel_k0e": "BesselK0e", "bessel_k1": "BesselK1",
           "bessel_k1e": "BesselK1e", "dawsn": "Dawsn", "expint": "Expint", "fresnel_cos": "FresnelCos",
           "fresnel_sin": "FresnelSin", "spence": "Spence"}
    with kf.Graph().as_default():
        x = kf.constant([1.0])
        for name, op_type in ops.items():
            y = getattr(S, name)(x, name=f"my_{name}")
            assert y.op.type == op_type and y.op.name == f"my_{name}"
            assert y.shape.as_list() == [1]


@pytest.mark.parametrize("value", [np.array([1, 2], np.int32), np.array([1 + 1j]), np.array([True])])
def test_unsupported_dtypes_are_type_errors(value):
    with kf.Graph().as_default():
        with pytest.raises(TypeError, match="BesselJ0|float"):
            S.bessel_j0(kf.constant(value))
