"""Numpy kernels of kernflow.core.ops.math_ops_special_functions (tf.math.special): the Bessel
functions J, Y and K of orders 0 and 1, Dawson's integral, the exponential integral Ei, the Fresnel
integrals and Spence's function.

Everything is evaluated in float64 and cast to the op's dtype (kernflow-kernels-cpu depends on
numpy only, so no scipy). The methods, each chosen where it needs no cancellation-prone terms:

* J, Y: the ascending series (A&S 9.1.10, 9.1.11) for x <= 12, Hankel's asymptotic expansion
  (A&S 9.2.5-9.2.10) beyond, each summed to its smallest term;
* K: the ascending series with I (A&S 9.6.11) for x <= 2; for 2 < x <= 25 the trapezoidal rule on
  exp(x) K_n(x) = int_0^inf exp(-x (cosh t - 1)) cosh(n t) dt, which converges geometrically for this
  analytic, doubly-exponentially decaying integrand; the asymptotic expansion (A&S 9.7.2) beyond;
* Dawson: exp(-x^2) sum x^(2k+1) / (k! (2k+1)) (positive terms) for |x| <= 6, its asymptotic series
  beyond;
* Ei: gamma + log x + sum x^k / (k k!) for x <= 40, the asymptotic series beyond;
* Fresnel: the power series for |x| < 1.5; beyond, the continued fraction of erfc at
  z = (1 - i) sqrt(pi) x / 2, evaluated by the modified Lentz method;
* Spence(x) = Li2(1 - x): sum u^k / k^2 with |u| <= 1/2 after Euler's reflection and Landen's
  identity.

Domains follow TF (Eigen, a port of Cephes): Y and K are -inf / +inf at 0 and NaN below it; Ei is
-inf at 0 and NaN below it; Spence is NaN below 0. At +-inf, J, Y and Spence are NaN (Cephes' phase and
log terms are undefined there), K, Dawson are 0, Ei(inf) is inf and the Fresnel integrals are +-1/2.
"""

from __future__ import annotations

import numpy as np

from kernflow.kernels.cpu.math_more import _like, _quiet

DEVICE = "CPU"
_EPS = np.finfo(np.float64).eps
_GAMMA = 0.57721566490153286061    # Euler-Mascheroni
_PI2_6 = np.pi ** 2 / 6
_JY_SPLIT = 12.0


def _f64(x):
    return np.asarray(x, np.float64)


def _on(mask, fn, x):
    """fn(x[mask]) scattered into an array of x's shape, NaN elsewhere."""
    out = np.full(x.shape, np.nan)
    if np.any(mask):
        out[mask] = fn(x[mask])
    return out


def _done(term, total):
    return bool(np.all(np.abs(term) <= _EPS * np.abs(total)))


# ---------------------------------------------------------------------------- Bessel series
def _ascending(x, n, sign, kmax=200):
    """(sum t_k, sum (H_k + H_{k+n}) t_k) with t_k = sign^k (x/2)^(2k+n) / (k! (k+n)!), H the harmonic
    numbers: J_n (sign -1) or I_n (sign +1) and the log-series part of Y_n or K_n (A&S 9.1.11, 9.6.11)."""
    q = sign * x * x / 4
    term = np.ones_like(x) if n == 0 else x / 2
    plain, weighted = term.copy(), term * n   # H_0 + H_n = n for n in (0, 1)
    h_k, h_kn = 0.0, float(n)
    for k in range(1, kmax):
        term = term * q / (k * (k + n))
        h_k, h_kn = h_k + 1.0 / k, h_kn + 1.0 / (k + n)
        plain += term
        weighted += (h_k + h_kn) * term
        if _done(term, plain) and _done((h_k + h_kn) * term, weighted):
            break
    return plain, weighted


def _asymptotic(x, n, kmax=60):
    """The terms a_k = prod_{j<=k} (4 n^2 - (2j-1)^2) / (k! (8x)^k) of the Hankel expansions, each
    zeroed from the first that is not smaller than its predecessor (the series is divergent)."""
    mu = 4.0 * n * n
    a = np.ones_like(x)
    live = np.ones(x.shape, bool)
    terms = [a]
    for k in range(1, kmax):
        nxt = a * (mu - (2 * k - 1) ** 2) / (8 * k * x)
        live &= np.abs(nxt) < np.abs(a)
        a = np.where(live, nxt, 0.0)
        terms.append(a)
        if np.all(np.abs(a) <= _EPS):
            break
    return terms


def _hankel(x, n):
    """(J_n(x), Y_n(x)) for large x > 0: sqrt(2/(pi x)) (P cos chi -/+ Q sin chi ...)."""
    a = _asymptotic(x, n)
    p = sum(((-1) ** (k // 2)) * t for k, t in enumerate(a) if k % 2 == 0)
    q = sum(((-1) ** (k // 2)) * t for k, t in enumerate(a) if k % 2 == 1)
    chi = x - (n / 2 + 0.25) * np.pi
    amp = np.sqrt(2 / (np.pi * x))
    c, s = np.cos(chi), np.sin(chi)
    return amp * (p * c - q * s), amp * (p * s + q * c)


def _jy_small(x, n):
    """(J_n(x), Y_n(x)) for 0 < x <= 12 from the ascending series."""
    j, w = _ascending(x, n, -1.0)
    y = 2 / np.pi * (np.log(x / 2) + _GAMMA) * j - w / np.pi - (2 * n / (np.pi * x) if n else 0.0)
    return j, y


def _jy(x, n):
    """(J_n(|x|), Y_n(|x|)) for finite nonzero |x|."""
    ax = np.abs(x)
    j, y = np.empty_like(ax), np.empty_like(ax)
    small = ax <= _JY_SPLIT
    j[small], y[small] = _jy_small(ax[small], n)
    j[~small], y[~small] = _hankel(ax[~small], n)
    return j, y


def _bessel_j(n):
    def compute(x):
        x64 = _f64(x)
        finite = np.isfinite(x64) & (x64 != 0)
        j = _on(finite, lambda v: _jy(v, n)[0], x64)
        j = np.where(x64 < 0, -j, j) if n == 1 else j
        return _like(np.where(x64 == 0, 1.0 - n, j), x)
    return compute


def _bessel_y(n):
    def compute(x):
        x64 = _f64(x)
        inside = np.isfinite(x64) & (x64 > 0)
        y = _on(inside, lambda v: _jy(v, n)[1], x64)
        return _like(np.where(x64 == 0, -np.inf, y), x)
    return compute


def _k_series(x, n):
    """exp(x) K_n(x) for 0 < x <= 2 (A&S 9.6.11; the I_n of its log term is exact to rounding)."""
    i_n, w = _ascending(x, n, 1.0)
    log_part = (np.log(x / 2) + _GAMMA) * i_n
    k = (n / x + log_part - w / 2) if n else (w / 2 - log_part)
    return k * np.exp(x)


_K_STEP = 0.1
_K_NODES = np.arange(0, 41) * _K_STEP     # exp(-2 (cosh 4 - 1)) < 1e-22: the tail is negligible


def _k_quadrature(x, n):
    """exp(x) K_n(x) for 2 < x <= 25 by the trapezoidal rule (see the module docstring)."""
    t = _K_NODES
    f = np.exp(-np.multiply.outer(x, np.cosh(t) - 1)) * np.cosh(n * t)
    return _K_STEP * (f.sum(axis=-1) - f[..., 0] / 2)


def _k_asymptotic(x, n):
    return np.sqrt(np.pi / (2 * x)) * sum(_asymptotic(x, n))


def _k_scaled(x, n):
    """exp(x) K_n(x) for x > 0 (+inf at 0 and NaN below, as TF)."""
    out = np.full(x.shape, np.nan)
    for lo, hi, fn in ((0, 2, _k_series), (2, 25, _k_quadrature), (25, np.inf, _k_asymptotic)):
        band = (x > lo) & (x <= hi)
        if np.any(band):
            out[band] = fn(x[band], n)
    out[x == np.inf] = 0.0
    out[x == 0] = np.inf
    return out


def _bessel_k(n, scaled):
    def compute(x):
        x64 = _f64(x)
        k = _k_scaled(x64, n)
        if not scaled:
            k = np.where(x64 > 0, k * np.exp(-np.where(x64 > 0, x64, 0)), k)
        return _like(k, x)
    return compute


# ---------------------------------------------------------------------------- Dawson, Ei
def _dawson_series(ax):
    """exp(-x^2) sum_k x^(2k+1) / (k! (2k+1)): all terms positive."""
    x2 = ax * ax
    term, total = ax.copy(), ax.copy()
    for k in range(1, 400):
        term = term * x2 * (2 * k - 1) / (k * (2 * k + 1))
        total += term
        if _done(term, total):
            break
    return total * np.exp(-x2)


def _dawson_asymptotic(ax):
    """1/(2x) sum_k (2k-1)!! / (2x^2)^k, summed to its smallest term."""
    inv = 1 / (2 * ax * ax)
    term, total = np.ones_like(ax), np.ones_like(ax)
    live = np.ones(ax.shape, bool)
    for k in range(1, 60):
        nxt = term * (2 * k - 1) * inv
        live &= nxt < term
        term = np.where(live, nxt, 0.0)
        total += term
        if _done(term, total):
            break
    return total / (2 * ax)


def _dawsn(x):
    x64 = _f64(x)
    ax = np.abs(x64)
    small = ax <= 6
    out = _on(small, _dawson_series, ax)
    big = ~small & np.isfinite(ax)
    out[big] = _dawson_asymptotic(ax[big])
    out[ax == np.inf] = 0.0
    return _like(np.where(x64 < 0, -out, out), x)


def _ei_series(x):
    """gamma + log x + sum_k x^k / (k k!) for 0 < x <= 40."""
    term, total = x.copy(), x.copy()
    for k in range(2, 300):
        term = term * x * (k - 1) / (k * k)
        total += term
        if _done(term, total):
            break
    return _GAMMA + np.log(x) + total


def _ei_asymptotic(x):
    """exp(x)/x sum_k k!/x^k, summed to its smallest term (x > 40: error below exp(-40))."""
    term, total = np.ones_like(x), np.ones_like(x)
    live = np.ones(x.shape, bool)
    for k in range(1, 80):
        nxt = term * k / x
        live &= nxt < term
        term = np.where(live, nxt, 0.0)
        total += term
        if _done(term, total):
            break
    return np.exp(x - np.log(x)) * total


def _expint(x):
    x64 = _f64(x)
    out = _on((x64 > 0) & (x64 <= 40), _ei_series, x64)
    big = x64 > 40
    out[big] = _ei_asymptotic(x64[big])
    out[x64 == 0] = -np.inf
    out[x64 == np.inf] = np.inf
    return _like(out, x)


# ---------------------------------------------------------------------------- Fresnel
def _fresnel_series(ax):
    """(C, S) by their power series, for |x| < 1.5 (terms cancel at most by a factor exp(pi x^2/2))."""
    z = np.pi / 2 * ax * ax
    term = ax.copy()                      # (pi/2)^m x^(2m+1) (-1)^(m//2) / m!, m = 0, 1, ...
    c, s = ax.copy(), np.zeros_like(ax)
    for m in range(1, 200):
        term = term * z / m * (-1 if m % 2 == 0 else 1)
        part = term / (2 * m + 1)
        if m % 2:
            s += part
        else:
            c += part
        if _done(part, c + s):
            break
    return c, s


def _fresnel_fraction(ax):
    """(C, S) for x >= 1.5: C + iS = (1+i)/2 (1 - (1-i) x exp(i pi x^2/2) F) where F is the continued
    fraction 1/(b - 1*2/(b + 4 - 3*4/(b + 8 - ...))), b = 1 - i pi x^2 (erfc's, at (1-i) sqrt(pi) x / 2)."""
    px2 = np.pi * ax * ax
    b = 1 - 1j * px2
    d = 1 / b
    c = np.full(ax.shape, 1e300, complex)
    h = d.copy()
    for k in range(1, 500):
        a = -(2 * k - 1) * (2 * k)
        b = b + 4
        d = 1 / (a * d + b)
        c = b + a / c
        h = h * (c * d)
        if np.all(np.abs(c * d - 1) <= _EPS):
            break
    cs = (0.5 + 0.5j) * (1 - (1 - 1j) * ax * np.exp(0.5j * px2) * h)
    return cs.real, cs.imag


def _fresnel_pair(ax):
    """(C(|x|), S(|x|)); beyond 1e9 both are 1/2 to within 1/(pi x) < 4e-10 relative."""
    c, s = np.full(ax.shape, np.nan), np.full(ax.shape, np.nan)
    for band, fn in ((ax < 1.5, _fresnel_series), ((ax >= 1.5) & (ax <= 1e9), _fresnel_fraction)):
        if np.any(band):
            c[band], s[band] = fn(ax[band])
    far = ax > 1e9
    c[far], s[far] = 0.5, 0.5
    return c, s


def _fresnel(which):
    def compute(x):
        x64 = _f64(x)
        v = _fresnel_pair(np.abs(x64))[which]
        return _like(np.where(x64 < 0, -v, v), x)
    return compute


# ---------------------------------------------------------------------------- Spence
def _li2_series(u):
    """Li2(u) = sum_k u^k / k^2 for |u| <= 1/2."""
    power, total = u.copy(), u.copy()
    for k in range(2, 80):
        power = power * u
        part = power / (k * k)
        total += part
        if _done(part, total):
            break
    return total


def _spence_near_zero(x):
    """0 < x < 1/2: Euler's reflection Li2(1-x) = pi^2/6 - log(x) log(1-x) - Li2(x)."""
    return _PI2_6 - np.log(x) * np.log1p(-x) - _li2_series(x)


def _spence_above(x):
    """x > 3/2: Landen, Li2(1-x) = -Li2(1 - 1/x) - log(x)^2 / 2; for x > 2 reflect Li2(1 - 1/x)."""
    v = 1 - 1 / x
    li2_v = np.where(x <= 2, _li2_series(np.where(x <= 2, v, 0.0)),
                     _PI2_6 - np.log(v) * np.log(1 / x) - _li2_series(1 / x))
    return -li2_v - np.log(x) ** 2 / 2


def _spence(x):
    x64 = _f64(x)
    out = np.full(x64.shape, np.nan)
    for band, fn in (((x64 > 0) & (x64 < 0.5), _spence_near_zero),
                     ((x64 >= 0.5) & (x64 <= 1.5), lambda v: _li2_series(1 - v)),
                     ((x64 > 1.5) & np.isfinite(x64), _spence_above)):
        if np.any(band):
            out[band] = fn(x64[band])
    out[x64 == 0] = _PI2_6
    return _like(out, x)


# ---------------------------------------------------------------------------- registration
ELEMENTWISE = {
    "BesselJ0": _bessel_j(0), "BesselJ1": _bessel_j(1), "BesselY0": _bessel_y(0), "BesselY1": _bessel_y(1),
    "BesselK0": _bessel_k(0, False), "BesselK0e": _bessel_k(0, True),
    "BesselK1": _bessel_k(1, False), "BesselK1e": _bessel_k(1, True),
    "Dawsn": _dawsn, "Expint": _expint, "FresnelCos": _fresnel(0), "FresnelSin": _fresnel(1),
    "Spence": _spence,
}


def register(registry, device=DEVICE):
    """Registers this family's CPU kernels."""
    for op, fn in ELEMENTWISE.items():
        registry.register_simple(op, device, _quiet(fn), fresh=True)
