"""Numpy kernels of kernflow.core.ops.math_ops_more: special functions, FFTs and the newer random
ops (its linear algebra ops: kernflow.kernels.cpu.linalg_more).

The special functions are vectorised numpy in float64 (then cast to the op's dtype), with the
classic algorithms named where they are used: Lanczos' lgamma, the series and continued fraction of
the incomplete gamma function and of the incomplete beta function (Numerical Recipes, modified
Lentz), Euler-Maclaurin for the Hurwitz zeta function (as Cephes), power series and the Hankel
asymptotic expansion for the modified Bessel functions, and Newton-refined rational guesses for
the inverse error functions. Edge cases (poles, domain errors) follow TF's (Eigen's) values.
"""

from __future__ import annotations

import numpy as np

from kernflow.core.framework import errors

DEVICE = "CPU"
_EPS = np.finfo(np.float64).eps
_TINY = 1e-300


def _f64(*xs):
    return np.broadcast_arrays(*[np.asarray(x, np.float64) for x in xs])


def _like(out, x):
    return np.asarray(out).astype(np.asarray(x).dtype, copy=False)


def _invalid(ctx, msg):
    return errors.InvalidArgumentError(None, None, f"{ctx.op_type} node {ctx.name}: {msg}")


# ---------------------------------------------------------------------------- gamma family
def lgamma(x):
    """log|Gamma(x)|: the recurrence up to 10, then Stirling's series (reflection below 1/2)."""
    x = np.asarray(x, np.float64)
    refl = x < 0.5
    v = np.where(refl, 1.0 - x, x)
    with np.errstate(all="ignore"):
        acc = np.zeros_like(v)
        for _ in range(10):
            small = v < 10
            acc += np.where(small, np.log(np.where(small, v, 1.0)), 0.0)
            v = np.where(small, v + 1.0, v)
        f = 1.0 / (v * v)
        series = np.polyval([-691 / 360360, 1 / 1188, -1 / 1680, 1 / 1260, -1 / 360, 1 / 12], f) / v
        lg = (v - 0.5) * np.log(v) - v + 0.5 * np.log(2 * np.pi) + series - acc
        return np.where(refl, np.log(np.pi / np.abs(np.sin(np.pi * x))) - lg, lg)


def digamma(x):
    """psi(x): reflection for x < 0, the recurrence up to 10, then the asymptotic series."""
    x = np.asarray(x, np.float64)
    with np.errstate(all="ignore"):
        neg = x < 0
        acc = np.where(neg, -np.pi / np.tan(np.pi * x), 0.0)
        v = np.where(neg, 1.0 - x, x)
        for _ in range(10):
            small = v < 10
            acc = acc - np.where(small, 1.0 / v, 0.0)
            v = np.where(small, v + 1.0, v)
        f = 1.0 / (v * v)
        series = f * np.polyval([-691 / 32760, 1 / 132, -1 / 240, 1 / 252, -1 / 120, 1 / 12], f)
        out = acc + np.log(v) - 0.5 / v - series
    pole = (x <= 0) & (x == np.floor(x))
    return np.where(pole | np.isnan(x) | (x == -np.inf), np.nan, out)


def _igamma_pq(a, x, max_iter=5000):
    """(P(a, x), Q(a, x)): the series where x < a + 1, else Lentz's continued fraction for Q."""
    a, x = _f64(a, x)
    p, q = np.full(a.shape, np.nan), np.full(a.shape, np.nan)
    ok = (a > 0) & (x >= 0)
    p[ok & (x == 0)], q[ok & (x == 0)] = 0.0, 1.0
    p[ok & np.isposinf(x)], q[ok & np.isposinf(x)] = 1.0, 0.0
    inner = ok & (x > 0) & np.isfinite(x) & np.isfinite(a)
    ser, cf = inner & (x < a + 1), inner & ~(x < a + 1)
    with np.errstate(all="ignore"):
        if ser.any():
            aa, xx = a[ser], x[ser]
            ap, term = aa.copy(), 1.0 / aa
            total = term.copy()
            for _ in range(max_iter):
                ap += 1
                term = term * xx / ap
                total += term
                if np.all(np.abs(term) < np.abs(total) * _EPS):
                    break
            v = total * np.exp(aa * np.log(xx) - xx - lgamma(aa))
            p[ser], q[ser] = v, 1.0 - v
        if cf.any():
            aa, xx = a[cf], x[cf]
            b = xx + 1.0 - aa
            c = np.full(aa.shape, 1.0 / _TINY)
            d = 1.0 / b
            h = d.copy()
            for i in range(1, max_iter):
                an = -i * (i - aa)
                b = b + 2.0
                d = an * d + b
                d = np.where(np.abs(d) < _TINY, _TINY, d)
                c = b + an / c
                c = np.where(np.abs(c) < _TINY, _TINY, c)
                d = 1.0 / d
                delta = d * c
                h = h * delta
                if np.all(np.abs(delta - 1.0) < _EPS):
                    break
            v = np.exp(aa * np.log(xx) - xx - lgamma(aa)) * h
            p[cf], q[cf] = 1.0 - v, v
    return p, q


def _igamma(a, x):
    return _like(_igamma_pq(a, x)[0], a)


def _igammac(a, x):
    return _like(_igamma_pq(a, x)[1], a)


def _igamma_grad_a(a, x):
    """dP/da by central differences of the double-precision P (relative step 1e-5: error ~1e-10)."""
    a64, x64 = _f64(a, x)
    h = 1e-5 * np.maximum(1.0, np.abs(a64))
    lo = np.maximum(a64 - h, a64 / 2)
    hi = a64 + h
    d = (_igamma_pq(hi, x64)[0] - _igamma_pq(lo, x64)[0]) / (hi - lo)
    return _like(np.where(x64 == 0, 0.0, d), a)


def _random_gamma_grad(alpha, sample):
    """d sample / d alpha for Gamma(alpha, 1): -(dP/dalpha) / pdf(sample) (implicit reparameterization)."""
    a, x = _f64(alpha, sample)
    with np.errstate(all="ignore"):
        log_pdf = (a - 1) * np.log(x) - x - lgamma(a)
        d = -_igamma_grad_a(a, x).astype(np.float64) / np.exp(log_pdf)
    return _like(np.where(x > 0, d, 0.0), alpha)


def _betainc(a, b, x, max_iter=3000):
    """I_x(a, b): the continued fraction of Numerical Recipes' betacf, on the side where it converges."""
    dtype = np.asarray(a).dtype
    a, b, x = _f64(a, b, x)
    out = np.full(a.shape, np.nan)
    ok = (a > 0) & (b > 0) & (x >= 0) & (x <= 1)
    out[ok & (x == 0)], out[ok & (x == 1)] = 0.0, 1.0
    inner = ok & (x > 0) & (x < 1)
    if inner.any():
        aa, bb, xx = a[inner], b[inner], x[inner]
        swap = xx >= (aa + 1) / (aa + bb + 2)
        a2, b2, x2 = np.where(swap, bb, aa), np.where(swap, aa, bb), np.where(swap, 1 - xx, xx)
        with np.errstate(all="ignore"):
            log_front = (lgamma(a2 + b2) - lgamma(a2) - lgamma(b2) + a2 * np.log(x2) + b2 * np.log1p(-x2))
            v = np.exp(log_front) * _betacf(a2, b2, x2, max_iter) / a2
        out[inner] = np.where(swap, 1.0 - v, v)
    return out.astype(dtype, copy=False)


def _betacf(a, b, x, max_iter):
    def fix(v):
        return np.where(np.abs(v) < _TINY, _TINY, v)
    qab, qap, qam = a + b, a + 1, a - 1
    c = np.ones_like(a)
    d = 1.0 / fix(1 - qab * x / qap)
    h = d.copy()
    for m in range(1, max_iter):
        m2 = 2 * m
        aa = m * (b - m) * x / ((qam + m2) * (a + m2))
        d = 1.0 / fix(1 + aa * d)
        c = fix(1 + aa / c)
        h = h * d * c
        aa = -(a + m) * (qab + m) * x / ((a + m2) * (qap + m2))
        d = 1.0 / fix(1 + aa * d)
        c = fix(1 + aa / c)
        delta = d * c
        h = h * delta
        if np.all(np.abs(delta - 1) < _EPS):
            break
    return h


# (2k)! / B_2k for k = 1..12, the Euler-Maclaurin coefficients of Cephes' zeta.
_ZETA_A = (12.0, -720.0, 30240.0, -1209600.0, 47900160.0, -1.8924375803183791606e9, 7.47242496e10,
           -2.950130727918164224e12, 1.1646782814350067249e14, -4.5979787224074726105e15,
           1.8152105401943546773e17, -7.1661652561756670113e18)


def _zeta64(x, q):
    x, q = _f64(x, q)
    out = np.full(x.shape, np.nan)
    int_q = (q <= 0) & (q == np.floor(q))
    out[x == 1] = np.inf
    even_x = (x == np.floor(x)) & (np.fmod(x, 2) == 0)
    out[(x > 1) & int_q & even_x] = np.inf
    valid = (x > 1) & ~int_q & ((q > 0) | (x == np.floor(x)))
    big = valid & (q > 1e8)
    with np.errstate(all="ignore"):
        out[big] = (1 / (x[big] - 1) + 1 / (2 * q[big])) * np.power(q[big], 1 - x[big])
        em = valid & ~big
        if em.any():
            xx, qq = x[em], q[em]
            n = max(9, int(np.ceil(9 - qq.min())) + 1)
            s = np.zeros_like(xx)
            for i in range(n + 1):
                s += np.power(qq + i, -xx)
            w = qq + n
            b = np.power(w, -xx)
            s += b * w / (xx - 1) - 0.5 * b
            fac, k = np.ones_like(xx), 0.0
            for coef in _ZETA_A:
                fac = fac * (xx + k)
                b = b / w
                s += fac * b / coef
                k += 1
                fac = fac * (xx + k)
                b = b / w
                k += 1
            out[em] = s
    return out


def _zeta(x, q):
    return _like(_zeta64(x, q), x)


def _polygamma(n, x):
    n64, x64 = _f64(n, x)
    with np.errstate(all="ignore"):
        k = n64 + 1
        sign = np.where(np.fmod(k, 2) == 0, 1.0, -1.0)
        high = sign * np.exp(lgamma(k)) * _zeta64(k, x64)
    out = np.where(n64 == 0, digamma(x64), high)
    out = np.where((n64 != np.floor(n64)) | (n64 < 0) | np.isnan(n64), np.nan, out)
    return _like(out, x)


# ---------------------------------------------------------------------------- Bessel I0, I1
def _bessel_series(ax, order):
    """sum_k (x^2/4)^k / (k! (k + order)!) * (x/2)^order: all terms positive, no cancellation."""
    y = ax * ax / 4
    term = np.ones_like(ax) if order == 0 else ax / 2
    total = term.copy()
    for k in range(1, 200):
        term = term * y / (k * (k + order))
        total += term
        if np.all(term <= total * _EPS):
            break
    return total


def _bessel_asym(ax, order):
    """exp(-x) I_order(x) ~ 1/sqrt(2 pi x) sum_k (-1)^k prod_j (mu - (2j-1)^2) / (k! (8x)^k)."""
    mu = 4.0 * order * order
    term = np.ones_like(ax)
    total = term.copy()
    for k in range(1, 30):
        term = -term * (mu - (2 * k - 1) ** 2) / (k * 8 * ax)
        total += term
    return total / np.sqrt(2 * np.pi * ax)


def _bessel_e(x, order):
    """exp(-|x|) I_order(x) in float64."""
    x = np.asarray(x, np.float64)
    ax = np.abs(x)
    out = np.empty_like(ax)
    small = ax <= 40
    with np.errstate(all="ignore"):
        out[small] = _bessel_series(ax[small], order) * np.exp(-ax[small])
        out[~small] = _bessel_asym(ax[~small], order)
    out[np.isnan(x)] = np.nan
    return np.where(x < 0, -out, out) if order == 1 else out


def _bessel(order, scaled):
    def compute(x):
        e = _bessel_e(x, order)
        with np.errstate(all="ignore"):
            v = e if scaled else e * np.exp(np.abs(np.asarray(x, np.float64)))
        return _like(v, x)
    return compute


# ---------------------------------------------------------------------------- inverse error functions
def _phi_lower(x):
    """The standard normal CDF for x <= 0, accurate in the tail: Q(1/2, x^2/2) / 2."""
    return 0.5 * _igamma_pq(0.5, 0.5 * x * x)[1]


def _ndtri64(p):
    """Acklam's rational approximation for the lower half, then Newton steps on Phi."""
    p = np.asarray(p, np.float64)
    q = np.minimum(p, 1.0 - p)
    out = np.full(p.shape, np.nan)
    inner = (q > 0) & (q <= 0.5)
    qq = q[inner]
    with np.errstate(all="ignore"):
        t = np.sqrt(-2 * np.log(qq))
        tail = (((((-7.784894002430293e-03 * t - 3.223964580411365e-01) * t - 2.400758277161838) * t
                   - 2.549732539343734) * t + 4.374664141464968) * t + 2.938163982698783) \
            / ((((7.784695709041462e-03 * t + 3.224671290700398e-01) * t + 2.445134137142996) * t
                + 3.754408661907416) * t + 1)
        r = qq - 0.5
        s = r * r
        central = (((((-3.969683028665376e+01 * s + 2.209460984245205e+02) * s - 2.759285104469687e+02) * s
                     + 1.383577518672690e+02) * s - 3.066479806614716e+01) * s + 2.506628277459239) * r \
            / (((((-5.447609879822406e+01 * s + 1.615858368580409e+02) * s - 1.556989798598866e+02) * s
                 + 6.680131188771972e+01) * s - 1.328068155288572e+01) * s + 1)
        x = np.where(qq < 0.02425, tail, central)
        for _ in range(3):
            err = _phi_lower(x) - qq
            x = x - err * np.sqrt(2 * np.pi) * np.exp(0.5 * x * x)
        x = np.where(qq == 0.5, 0.0, x)
    out[inner] = x
    out[q == 0] = -np.inf
    return np.where(p > 0.5, -out, out)


def _ndtri(p):
    return _like(_ndtri64(p), p)


def _erfinv(y):
    """|y| <= 1/2: a series guess refined by Newton on erf = sign * P(1/2, x^2); else via ndtri."""
    y64 = np.asarray(y, np.float64)
    ay = np.abs(y64)
    out = -_ndtri64((1.0 - ay) / 2) / np.sqrt(2.0)
    small = ay <= 0.5
    ys = ay[small]
    c = np.sqrt(np.pi) / 2
    x = c * (ys + np.pi / 12 * ys ** 3 + 7 * np.pi ** 2 / 480 * ys ** 5)
    with np.errstate(all="ignore"):
        for _ in range(3):  # below 1e-6 the series is exact to rounding (and x * x may underflow)
            err = _igamma_pq(0.5, x * x)[0] - ys
            x = np.where(ys < 1e-6, x, x - err * c * np.exp(x * x))
    out[small] = x
    out = np.where(ay > 1, np.nan, np.where(y64 < 0, -out, out))
    return _like(out, y)


# ---------------------------------------------------------------------------- FFTs
def _check_rank(ctx, x, k):
    if np.ndim(x) < k:
        raise _invalid(ctx, f"input must have rank >= {k}, got shape {list(np.shape(x))}")


def _fft_factory(k, inverse):
    def factory(ctx):
        def compute(x):
            x = np.asarray(x)
            _check_rank(ctx, x, k)
            axes = tuple(range(-k, 0))
            if x.size == 0:
                return np.zeros(x.shape, x.dtype)
            fn = np.fft.ifftn if inverse else np.fft.fftn
            return fn(x, axes=axes).astype(x.dtype, copy=False)
        return compute
    return factory


def _lengths(ctx, n, k):
    n = np.asarray(n)
    if n.shape != (k,):
        raise _invalid(ctx, f"fft_length must have shape [{k}], got {list(n.shape)}")
    if np.any(n < 0):
        raise _invalid(ctx, f"fft_length must be non-negative, got {n.tolist()}")
    return [int(v) for v in n]


def _real_transform(x, n, axes, inverse, out_dtype):
    out_shape = list(x.shape)
    for a, length in zip(axes, n):
        out_shape[a] = length
    if inverse:
        if 0 in n or x.size == 0:
            return np.zeros(out_shape, out_dtype)
        return np.fft.irfftn(x, s=n, axes=axes).astype(out_dtype, copy=False)
    out_shape[axes[-1]] = n[-1] // 2 + 1
    if 0 in n or x.size == 0:
        return np.zeros(out_shape, out_dtype)
    return np.fft.rfftn(x, s=n, axes=axes).astype(out_dtype, copy=False)


def _rfft_factory(k, inverse):
    def factory(ctx):
        out_dtype = ctx.output_dtypes[0].as_numpy_dtype

        def compute(x, fft_length):
            x = np.asarray(x)
            _check_rank(ctx, x, k)
            n = _lengths(ctx, fft_length, k)
            return _real_transform(x, n, [x.ndim - k + i for i in range(k)], inverse, out_dtype)
        return compute
    return factory


def _fftnd_factory(ctx):
    out_dtype = ctx.output_dtypes[0].as_numpy_dtype
    kind = ctx.op_type

    def compute(x, fft_length, axes):
        x = np.asarray(x)
        axes = np.asarray(axes).reshape(-1)
        n = _lengths(ctx, fft_length, axes.size)
        if np.any((axes < -x.ndim) | (axes >= x.ndim)):
            raise _invalid(ctx, f"axes {axes.tolist()} out of range for input of rank {x.ndim}")
        axes = [int(a) % x.ndim for a in axes]
        if len(set(axes)) != len(axes):
            raise _invalid(ctx, f"axes must be distinct, got {axes}")
        if kind in ("RFFTND", "IRFFTND"):
            return _real_transform(x, n, axes, kind == "IRFFTND", out_dtype)
        shape = list(x.shape)
        for a, length in zip(axes, n):
            shape[a] = length
        if x.size == 0 or 0 in n or not axes:
            return np.zeros(shape, out_dtype) if (x.size == 0 or 0 in n) else x.copy()
        fn = np.fft.ifftn if kind == "IFFTND" else np.fft.fftn
        return fn(x, s=n, axes=axes).astype(out_dtype, copy=False)
    return compute


# ---------------------------------------------------------------------------- random
def _out_np(ctx):
    return ctx.output_dtypes[0].as_numpy_dtype


def _cast_draw(v, npdt):
    return np.asarray(v).astype(npdt, copy=False)


def _random_gamma_factory(ctx):
    from kernflow.kernels.cpu.random import _parse_shape, _Stream
    st, npdt = _Stream(ctx), _out_np(ctx)

    def compute(shape, alpha):
        shape = _parse_shape(ctx, shape) + np.shape(alpha)
        a = np.broadcast_to(np.asarray(alpha, np.float64), shape)
        with st.lock:
            draw = st.gen.standard_gamma(np.where(a > 0, a, 1.0), size=shape)
        return _cast_draw(np.where(a > 0, draw, np.nan), npdt)
    return compute


def _poisson_draw(ctx, gen, lam, shape, npdt):
    lam = np.broadcast_to(np.asarray(lam, np.float64), shape)
    if np.any(lam < 0) or np.any(np.isnan(lam)):
        raise _invalid(ctx, "the rate must be non-negative and not NaN")
    return _cast_draw(gen.poisson(lam, size=shape), npdt)


def _random_poisson_factory(ctx):
    from kernflow.kernels.cpu.random import _parse_shape, _Stream
    st, npdt = _Stream(ctx), _out_np(ctx)

    def compute(shape, rate):
        shape = _parse_shape(ctx, shape) + np.shape(rate)
        with st.lock:
            return _poisson_draw(ctx, st.gen, rate, shape, npdt)
    return compute


def _seed_generator(ctx, seed):
    s = np.asarray(seed)
    if s.shape != (2,):
        raise _invalid(ctx, f"seed must have shape [2], not {list(s.shape)}")
    key = (int(s[0]) % 2**64) | ((int(s[1]) % 2**64) << 64)
    return np.random.Generator(np.random.Philox(key=key))


def _stateless(draw):
    """A stateless kernel: draw(ctx, gen, shape, npdt, *rest) with a fresh generator per run."""
    def factory(ctx):
        from kernflow.kernels.cpu.random import _parse_shape
        npdt = _out_np(ctx)

        def compute(shape, seed, *rest):
            return draw(ctx, _seed_generator(ctx, seed), _parse_shape(ctx, shape), npdt, *rest)
        return compute
    return factory


def _uniform(ctx, gen, shape, npdt):
    if npdt == np.float16:
        return (gen.integers(0, 2048, shape, dtype=np.int32) * np.float32(1.0 / 2048)).astype(np.float16)
    return gen.random(shape, dtype=np.float64 if npdt == np.float64 else np.float32).astype(npdt, copy=False)


def _normal(ctx, gen, shape, npdt):
    return gen.standard_normal(shape).astype(npdt, copy=False)


def _truncated(ctx, gen, shape, npdt):
    out = gen.standard_normal(shape)
    flat = out.reshape(-1)
    bad = np.flatnonzero(np.abs(flat) > 2.0)
    while bad.size:
        redraw = gen.standard_normal(bad.size)
        flat[bad] = redraw
        bad = bad[np.abs(redraw) > 2.0]
    return out.astype(npdt, copy=False)


def _uniform_int(ctx, gen, shape, npdt, minval, maxval):
    for what, v in (("minval", minval), ("maxval", maxval)):
        if np.ndim(v) != 0:
            raise _invalid(ctx, f"{what} must be 0-D, got shape {list(np.shape(v))}")
    lo, hi = int(minval), int(maxval)
    if int(np.prod(shape, dtype=np.int64)) == 0:
        return np.zeros(shape, npdt)
    if lo >= hi:
        raise _invalid(ctx, f"Need minval < maxval: {lo} >= {hi}")
    return gen.integers(lo, hi, shape, dtype=npdt)


def _full_int(ctx, gen, shape, npdt):
    info = np.iinfo(npdt)
    return gen.integers(info.min, info.max, shape, dtype=npdt, endpoint=True)


def _gamma_v2(ctx, gen, shape, npdt, alpha):
    try:
        a = np.broadcast_to(np.asarray(alpha, np.float64), shape)
    except ValueError:
        raise _invalid(ctx, f"alpha {list(np.shape(alpha))} does not broadcast to {list(shape)}") from None
    draw = gen.standard_gamma(np.where(a > 0, a, 1.0), size=shape)
    return _cast_draw(np.where(a > 0, draw, np.nan), npdt)


def _poisson_v2(ctx, gen, shape, npdt, lam):
    try:
        return _poisson_draw(ctx, gen, lam, shape, npdt)
    except ValueError:
        raise _invalid(ctx, f"lam {list(np.shape(lam))} does not broadcast to {list(shape)}") from None


def _binomial(ctx, gen, shape, npdt, counts, probs):
    try:
        n = np.broadcast_to(np.asarray(counts, np.float64), shape)
        p = np.broadcast_to(np.asarray(probs, np.float64), shape)
    except ValueError:
        raise _invalid(ctx, f"counts {list(np.shape(counts))} and probs {list(np.shape(probs))} do not "
                            f"broadcast to {list(shape)}") from None
    if np.any(n < 0) or np.any((p < 0) | (p > 1)) or np.any(np.isnan(p)):
        raise _invalid(ctx, "counts must be >= 0 and probs in [0, 1]")
    return _cast_draw(gen.binomial(n.astype(np.int64), p, size=shape), npdt)


def _truncated_standard(gen, a, b):
    """Standard normal draws truncated to [a, b] (arrays, a < b, infinities allowed), by rejection
    from a proposal suited to each interval: the normal itself when [a, b] holds much of its mass,
    a shifted exponential (Robert, 1995) far in a tail, else a uniform one on the (short) interval.
    Intervals left of 0 are mirrored to the right first."""
    flip = (b <= 0).reshape(-1)
    lo = np.where(flip, -b.reshape(-1), a.reshape(-1))
    hi = np.where(flip, -a.reshape(-1), b.reshape(-1))
    out = np.empty(lo.shape)
    todo = np.arange(lo.size)
    while todo.size:
        l, h = lo[todo], hi[todo]
        normal = (l < 0.5) & (h - l >= 2.5)
        expo = ~normal & (l >= 0.5) & ((l * (h - l) > 2) | np.isinf(h))
        tail = np.where(expo, l, 1.0)
        lam = (tail + np.sqrt(tail * tail + 4)) / 2
        width = np.where(normal | expo, 0.0, h - l)   # finite (< 4) wherever the uniform is used
        n = todo.size
        z = np.where(normal, gen.standard_normal(n),
                     np.where(expo, l + gen.exponential(size=n) / lam, l + width * gen.random(n)))
        peak = np.maximum(l, 0)
        ratio = np.where(normal, 1.0,
                         np.where(expo, np.exp(-(z - lam) ** 2 / 2), np.exp((peak ** 2 - z ** 2) / 2)))
        ok = (z >= l) & (z <= h) & (gen.random(n) <= ratio)
        out[todo[ok]] = z[ok]
        todo = todo[~ok]
    return np.where(flip, -out, out).reshape(a.shape)


def _parameterized_truncated(ctx, gen, shape, npdt, means, stddevs, minvals, maxvals):
    try:
        mu, sd, lo, hi = (np.broadcast_to(np.asarray(v, np.float64), shape)
                          for v in (means, stddevs, minvals, maxvals))
    except ValueError:
        raise _invalid(ctx, f"means {list(np.shape(means))}, stddevs {list(np.shape(stddevs))}, minvals "
                            f"{list(np.shape(minvals))} and maxvals {list(np.shape(maxvals))} do not "
                            f"broadcast to shape {list(shape)}") from None
    if not (sd > 0).all():
        raise _invalid(ctx, f"Invalid parameters: stddevs must be positive, got {sd[~(sd > 0)][:4].tolist()}")
    if not (lo < hi).all():
        bad = ~(lo < hi)
        raise _invalid(ctx, f"Invalid parameters: minvals must be less than maxvals, got minvals "
                            f"{lo[bad][:4].tolist()} and maxvals {hi[bad][:4].tolist()}")
    z = _truncated_standard(gen, (lo - mu) / sd, (hi - mu) / sd)
    return _cast_draw(np.clip(mu + sd * z, lo, hi), npdt)

def _stateless_multinomial_factory(ctx):
    npdt = _out_np(ctx)

    def compute(logits, num_samples, seed):
        gen = _seed_generator(ctx, seed)
        logits = np.asarray(logits, np.float64)
        if logits.ndim != 2:
            raise _invalid(ctx, f"logits should be a matrix, got shape {list(logits.shape)}")
        ns = int(num_samples)
        batch, classes = logits.shape
        if ns < 0:
            raise _invalid(ctx, f"num_samples should be nonnegative, got {ns}")
        if batch == 0 or ns == 0:
            return np.zeros((batch, ns), npdt)
        if classes == 0:
            raise _invalid(ctx, "num_classes should be positive, got 0")
        p = np.exp(logits - logits.max(axis=1, keepdims=True))
        cdf = np.cumsum(p, axis=1)
        cdf /= cdf[:, -1:]
        u = gen.random((batch, ns))
        idx = (u[:, :, None] >= cdf[:, None, :]).sum(-1)
        last = classes - 1 - np.argmax(p[:, ::-1] > 0, axis=1)[:, None]
        return np.minimum(idx, last).astype(npdt)
    return compute


# ---------------------------------------------------------------------------- registration
def _quiet(fn):
    def compute(*xs):
        with np.errstate(all="ignore"):
            return fn(*xs)
    return compute


ELEMENTWISE = {
    "Betainc": _betainc, "Igamma": _igamma, "Igammac": _igammac, "IgammaGradA": _igamma_grad_a,
    "Zeta": _zeta, "Polygamma": _polygamma, "RandomGammaGrad": _random_gamma_grad,
    "NextAfter": lambda a, b: np.nextafter(np.asarray(a), np.asarray(b, np.asarray(a).dtype)),
    "BesselI0": _bessel(0, False), "BesselI0e": _bessel(0, True), "BesselI1": _bessel(1, False),
    "BesselI1e": _bessel(1, True), "Erfinv": _erfinv, "Ndtri": _ndtri,
}

FACTORIES = {
    "RandomGamma": _random_gamma_factory, "RandomPoissonV2": _random_poisson_factory,
    "StatelessRandomUniform": _stateless(_uniform), "StatelessRandomNormal": _stateless(_normal),
    "StatelessTruncatedNormal": _stateless(_truncated), "StatelessRandomUniformInt": _stateless(_uniform_int),
    "StatelessRandomUniformFullInt": _stateless(_full_int), "StatelessRandomGammaV2": _stateless(_gamma_v2),
    "StatelessRandomPoisson": _stateless(_poisson_v2), "StatelessRandomBinomial": _stateless(_binomial),
    "StatelessMultinomial": _stateless_multinomial_factory,
    "StatelessParameterizedTruncatedNormal": _stateless(_parameterized_truncated),
    "FFTND": _fftnd_factory, "IFFTND": _fftnd_factory, "RFFTND": _fftnd_factory, "IRFFTND": _fftnd_factory,
}
for _k, _sfx in ((1, ""), (2, "2D"), (3, "3D")):
    FACTORIES.update({f"FFT{_sfx}": _fft_factory(_k, False), f"IFFT{_sfx}": _fft_factory(_k, True),
                      f"RFFT{_sfx}": _rfft_factory(_k, False), f"IRFFT{_sfx}": _rfft_factory(_k, True)})


def register(registry, device=DEVICE):
    """Registers this family's CPU kernels."""
    for op, fn in ELEMENTWISE.items():
        registry.register_simple(op, device, _quiet(fn), fresh=True)
    for op, factory in FACTORIES.items():
        registry.register(op, device, factory)
