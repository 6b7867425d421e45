"""Contract cases of kernflow.core.ops.math_ops_more: special functions (against TF-observed values
and closed forms), FFTs (against numpy.fft, gradients through real inputs), the newer random ops
(statistics and determinism) and the remaining linear algebra."""

import math

import numpy as np

from kernflow.core import random as kr
from kernflow.core import signal as ks
from kernflow.core.ops import array_ops, math_ops, math_ops_composite
from kernflow.core.ops import math_ops_more as mm
from kernflow.core.ops import math_ops_special as sp
from kernflow.core.testing.kernel_contract import OpCase

_r = np.random.RandomState(23)


def _f(*shape, lo=-2.0, hi=2.0, dtype=np.float64):
    return _r.uniform(lo, hi, size=shape).astype(dtype)


def _mapped(fn):
    return lambda *xs: np.vectorize(fn, otypes=[np.float64])(*xs)


def _cplx(re, im):
    c = math_ops.cast(re, "complex128")
    return c + math_ops.cast(im, "complex128") * array_ops.constant(1j, dtype="complex128")


def _parts(z):
    return [math_ops_composite.real(z), math_ops_composite.imag(z)]


def _np_parts(z):
    return [z.real, z.imag]


def _fft_case(op_type, fn, np_fn, shape):
    return OpCase(op_type, lambda re, im: _parts(fn(_cplx(re, im))), [_f(*shape), _f(*shape)],
                  lambda re, im: _np_parts(np_fn(re + 1j * im)), rtol=1e-10, atol=1e-10, grad=True)


def _igammac_np(a, x):
    # Q(a, x) for integer a: exp(-x) sum_{k < a} x^k / k!
    return np.exp(-x) * sum(x ** k / math.factorial(k) for k in range(int(a)))


def _stats(mean, std, tol=0.1):
    def compare(actual, _):
        assert abs(actual.mean() - mean) < tol * max(1.0, abs(mean)), actual.mean()
        assert abs(actual.std() - std) < tol * max(1.0, std), actual.std()
    return compare


def _seeded(fn):
    """Builds fn(seed) and checks that the same seed twice gives the same values."""
    def build(*_):
        return [fn([7, 11]), fn([7, 11])]
    return build


def _same_and(stat):
    def compare(actual, _):
        stat(actual)
    return compare


_SEED_ONLY = [np.zeros(1)]  # an unused input: the stateless cases need a placeholder to build
_m = _f(3, 3)
_spd = _m @ _m.T + 3 * np.eye(3)
_gen = _f(2, 3, 3) + 3 * np.eye(3)
_tri = np.stack([_f(5), _f(5, lo=4, hi=5), _f(5)])

CASES = [
    OpCase("Igamma", mm.igamma, [np.array([1.0, 2, 3, 5]), np.array([0.5, 2.0, 4.0, 1.5])],
           lambda a, x: np.array([1 - _igammac_np(u, v) for u, v in zip(a, x)]), rtol=1e-12),
    OpCase("Igamma", mm.igamma, [_f(2, 3, lo=0.5, hi=3), _f(3, lo=0.3, hi=4)], None, grad=True, name="grad"),
    OpCase("Igammac", mm.igammac, [np.array([1.0, 2, 3]), np.array([0.5, 2.0, 40.0])],
           lambda a, x: np.array([_igammac_np(u, v) for u, v in zip(a, x)]), rtol=1e-10, atol=1e-300),
    OpCase("Igammac", mm.igammac, [_f(4, lo=0.5, hi=3), _f(4, lo=0.3, hi=4)], None, grad=True, name="grad"),
    OpCase("IgammaGradA", lambda a, x: mm._out("IgammaGradA", [a, x]),
           [np.array([1.0, 2.0]), np.array([1.0, 3.0])],
           lambda a, x: np.array([-0.43172971063489896, -0.19742541957920223]), rtol=1e-8),  # TF's values
    OpCase("Betainc", mm.betainc,
           [np.array([1.0, 2.0, 0.5]), np.array([1.0, 3.0, 0.5]), np.array([0.3, 0.4, 0.5])],
           lambda a, b, x: np.array([0.3, 1 - (1 - 0.4) ** 4 - 4 * 0.4 * (1 - 0.4) ** 3, 0.5]), rtol=1e-12),
    OpCase("Betainc", mm.betainc, [_f(3, lo=0.5, hi=3), _f(3, lo=0.5, hi=3), _f(3, lo=0.1, hi=0.9)], None,
           grad=True, grad_inputs=[2], name="grad"),
    OpCase("Zeta", mm.zeta, [np.array([2.0, 4.0, 3.0]), np.array([1.0, 1.0, 2.0])],
           lambda x, q: np.array([np.pi ** 2 / 6, np.pi ** 4 / 90, 1.2020569031595942 - 1]), rtol=1e-12),
    OpCase("Zeta", mm.zeta, [np.array([2.5, 3.0]), _f(2, lo=0.5, hi=3)], None, grad=True, grad_inputs=[1],
           name="grad"),
    OpCase("Polygamma", mm.polygamma, [np.array([0.0, 1.0, 2.0]), np.array([1.0, 1.0, 1.0])],
           lambda n, x: np.array([-0.5772156649015329, np.pi ** 2 / 6, -2 * 1.2020569031595942]), rtol=1e-12),
    OpCase("Polygamma", mm.polygamma, [np.array([1.0, 2.0]), _f(2, lo=0.5, hi=3)], None, grad=True,
           grad_inputs=[1], name="grad"),
    OpCase("NextAfter", mm.nextafter, [np.array([1.0, 1.0, 0.0]), np.array([2.0, 0.0, -1.0])],
           lambda a, b: np.nextafter(a, b)),
    OpCase("NextAfter", mm.nextafter, [np.array([1.0], np.float32), np.array([2.0], np.float32)],
           lambda a, b: np.nextafter(a, b), name="float32"),
    OpCase("BesselI0", mm.bessel_i0, [np.array([0.0, 1.0, -2.5, 30.0])],
           lambda x: np.array([1.0, 1.2660658777520082, 3.2898391440501231, 7.8167229782397742e11]),
           rtol=1e-12),
    OpCase("BesselI0", mm.bessel_i0, [_f(5)], np.i0, rtol=1e-12, grad=True, name="grad"),
    OpCase("BesselI0e", mm.bessel_i0e, [np.array([0.0, 1.0, -2.5, 100.0, 1e5])],
           lambda x: np.array([1.0, 0.46575960759364043, 0.27004644161220276, 0.03994437929909669,
                               0.00126156783797678]), rtol=1e-12, grad=False),
    OpCase("BesselI0e", mm.bessel_i0e, [_f(5)], lambda x: np.i0(x) * np.exp(-abs(x)), rtol=1e-12, grad=True,
           name="grad"),
    OpCase("BesselI1", mm.bessel_i1, [np.array([0.0, 1.0, -2.5, 100.0])],
           lambda x: np.array([0.0, 0.56515910399248503, -2.5167162452886984, 1.0683693903381627e42]),
           rtol=1e-12, grad=False),
    OpCase("BesselI1", mm.bessel_i1, [np.array([0.0, 0.7, -1.3, 2.2])], None, grad=True, name="grad"),
    OpCase("BesselI1e", mm.bessel_i1e, [np.array([0.0, 1.0, -2.5, 30.0, 1e5])],
           lambda x: np.array([0.0, 0.20791041534970844, -0.20658464953126654, 0.07191633059864753,
                               0.00126156153012182]), rtol=1e-12),
    OpCase("BesselI1e", mm.bessel_i1e, [np.array([0.0, 0.7, -1.3, 2.2])], None, grad=True, name="grad"),
    OpCase("Erfinv", mm.erfinv, [np.array([0.0, 0.5, -0.9, 1.0, -1.0, 1.5, 0.999999])],
           lambda x: np.array([0.0, 0.47693627620446988, -1.1630871536766743, np.inf, -np.inf, np.nan,
                               3.4589107372600512]), rtol=1e-12),
    OpCase("Erfinv", mm.erfinv, [_f(5, lo=-0.9, hi=0.9)], None, grad=True, name="grad"),
    OpCase("Erfinv", lambda y: sp.erf(mm.erfinv(y)), [_f(5, lo=-0.9, hi=0.9, dtype=np.float32)], lambda y: y,
           rtol=1e-5, atol=1e-6, name="float32_roundtrip"),
    OpCase("Ndtri", mm.ndtri, [np.array([0.0, 0.5, 0.025, 1.0, 1e-300, 1.5, 0.999])],
           lambda x: np.array([-np.inf, 0.0, -1.9599639845400545, np.inf, -37.0470962993612, np.nan,
                               3.090232306167813]), rtol=1e-12),
    OpCase("Ndtri", mm.ndtri, [_f(5, lo=0.05, hi=0.95)], None, grad=True, name="grad"),
    # FFTs: complex inputs are built from two real placeholders so that gradients can be checked.
    _fft_case("FFT", ks.fft, np.fft.fft, (2, 5)),
    _fft_case("IFFT", ks.ifft, np.fft.ifft, (2, 5)),
    _fft_case("FFT2D", ks.fft2d, np.fft.fft2, (2, 3, 4)),
    _fft_case("IFFT2D", ks.ifft2d, np.fft.ifft2, (3, 4)),
    _fft_case("FFT3D", ks.fft3d, lambda z: np.fft.fftn(z, axes=(-3, -2, -1)), (2, 2, 3)),
    _fft_case("IFFT3D", ks.ifft3d, lambda z: np.fft.ifftn(z, axes=(-3, -2, -1)), (2, 3, 2)),
    _fft_case("FFTND", lambda z: ks.fftnd(z, fft_length=[3, 4], axes=[0, 2]),
              lambda z: np.fft.fftn(z, s=[3, 4], axes=[0, 2]), (2, 2, 5)),
    _fft_case("IFFTND", lambda z: ks.ifftnd(z, fft_length=[5], axes=[1]),
              lambda z: np.fft.ifftn(z, s=[5], axes=[1]), (2, 3)),
    OpCase("RFFT", lambda x: _parts(ks.rfft(x)), [_f(2, 6)], lambda x: _np_parts(np.fft.rfft(x)),
           rtol=1e-10, atol=1e-10, grad=True),
    OpCase("RFFT", lambda x: _parts(ks.rfft(x, [5])), [_f(2, 7)], lambda x: _np_parts(np.fft.rfft(x, 5)),
           rtol=1e-10, atol=1e-10, grad=True, name="cropped_odd"),
    OpCase("RFFT", lambda x: _parts(ks.rfft(x, [8])), [_f(6).astype(np.float32)],
           lambda x: [v.astype(np.float32) for v in _np_parts(np.fft.rfft(x, 8))], rtol=1e-5, atol=1e-5,
           name="padded_float32"),
    OpCase("RFFT2D", lambda x: _parts(ks.rfft2d(x, [4, 4])), [_f(3, 5)],
           lambda x: _np_parts(np.fft.rfft2(x, s=[4, 4])), rtol=1e-10, atol=1e-10, grad=True),
    OpCase("RFFT3D", lambda x: _parts(ks.rfft3d(x)), [_f(2, 3, 4)], lambda x: _np_parts(np.fft.rfftn(x)),
           rtol=1e-10, atol=1e-10, grad=True),
    OpCase("RFFTND", lambda x: _parts(ks.rfftnd(x, axes=[0])), [_f(5, 2)],
           lambda x: _np_parts(np.fft.rfftn(x, axes=[0])), rtol=1e-10, atol=1e-10, grad=True),
    OpCase("IRFFT", lambda re, im: ks.irfft(_cplx(re, im)), [_f(2, 4), _f(2, 4)],
           lambda re, im: np.fft.irfft(re + 1j * im), rtol=1e-10, atol=1e-10, grad=True),
    OpCase("IRFFT", lambda re, im: ks.irfft(_cplx(re, im), [7]), [_f(5), _f(5)],
           lambda re, im: np.fft.irfft(re + 1j * im, 7), rtol=1e-10, atol=1e-10, grad=True, name="odd"),
    OpCase("IRFFT2D", lambda re, im: ks.irfft2d(_cplx(re, im), [3, 6]), [_f(3, 3), _f(3, 3)],
           lambda re, im: np.fft.irfft2(re + 1j * im, s=[3, 6]), rtol=1e-10, atol=1e-10, grad=True),
    OpCase("IRFFT3D", lambda re, im: ks.irfft3d(_cplx(re, im)), [_f(2, 2, 3), _f(2, 2, 3)],
           lambda re, im: np.fft.irfftn(re + 1j * im, axes=(-3, -2, -1)), rtol=1e-10, atol=1e-10, grad=True),
    OpCase("IRFFTND", lambda re, im: ks.irfftnd(_cplx(re, im), fft_length=[4, 5], axes=[0, 1]),
           [_f(3, 3), _f(3, 3)], lambda re, im: np.fft.irfftn(re + 1j * im, s=[4, 5], axes=[0, 1]),
           rtol=1e-10, atol=1e-10, grad=True),
    # Random ops: statistics, and for stateless ones the same values from the same seed.
    OpCase("RandomGamma", lambda a: kr.gamma([4000], a, dtype="float64", seed=3), [np.array([2.0, 9.0])],
           compare=lambda v, _: np.testing.assert_allclose(v.mean(0), [2.0, 9.0], rtol=0.1),
           dynamic_shapes=False),
    OpCase("RandomPoissonV2", lambda lam: kr.poisson(lam, [4000], seed=3), [np.array([3.0, 0.5])],
           compare=lambda v, _: np.testing.assert_allclose(v.mean(0), [3.0, 0.5], rtol=0.1),
           dynamic_shapes=False),
    OpCase("StatelessRandomUniform", _seeded(lambda s: kr.stateless_uniform([3000], s)), _SEED_ONLY,
           compare=_stats(0.5, math.sqrt(1 / 12), 0.05), dynamic_shapes=False),
    OpCase("StatelessRandomNormal", _seeded(lambda s: kr.stateless_normal([3000], s, mean=1.0)), _SEED_ONLY,
           compare=_stats(1.0, 1.0), dynamic_shapes=False),
    OpCase("StatelessTruncatedNormal", _seeded(lambda s: kr.stateless_truncated_normal([3000], s)),
           _SEED_ONLY,
           compare=_stats(0.0, 0.88), dynamic_shapes=False),
    # 1 + 2 Z with Z >= -0.5: mean 1 + 2 pdf(.5) / cdf(.5), std 2 sqrt(1 - .5 r - r^2), r = pdf(.5) / cdf(.5)
    OpCase("StatelessParameterizedTruncatedNormal",
           _seeded(lambda s: kr.stateless_parameterized_truncated_normal([4000], s, 1.0, 2.0, 0.0,
                                                                         float("inf"))),
           _SEED_ONLY, compare=_stats(2.0183, 1.3945, 0.05), dynamic_shapes=False),
    OpCase("StatelessRandomUniformInt",
           _seeded(lambda s: kr.stateless_uniform([3000], s, minval=2, maxval=6, dtype="int32")), _SEED_ONLY,
           compare=_stats(3.5, math.sqrt(15 / 12)), dynamic_shapes=False),
    OpCase("StatelessRandomUniformFullInt",
           _seeded(lambda s: kr.stateless_uniform([3000], s, minval=None, maxval=None, dtype="int64")),
           _SEED_ONLY, compare=lambda v, _: np.testing.assert_array_less(0.9 * 2.0 ** 62, np.abs(v).max()),
           dynamic_shapes=False),
    OpCase("StatelessMultinomial",
           _seeded(lambda s: kr.stateless_categorical(np.log([[0.2, 0.8]]), 3000, s)), _SEED_ONLY,
           compare=_stats(0.8, 0.4, 0.05), dynamic_shapes=False),
    OpCase("StatelessRandomBinomial",
           _seeded(lambda s: kr.stateless_binomial([3000], s, counts=10.0, probs=0.3)), _SEED_ONLY,
           compare=_stats(3.0, math.sqrt(2.1)), dynamic_shapes=False),
    OpCase("StatelessRandomGammaV2", _seeded(lambda s: kr.stateless_gamma([3000], s, alpha=4.0)), _SEED_ONLY,
           compare=_stats(4.0, 2.0), dynamic_shapes=False),
    OpCase("StatelessRandomPoisson", _seeded(lambda s: kr.stateless_poisson([3000], s, lam=4.0)), _SEED_ONLY,
           compare=_stats(4.0, 2.0), dynamic_shapes=False),
    OpCase("RandomGammaGrad", lambda a, x: mm._out("RandomGammaGrad", [a, x]),
           [np.array([1.0, 3.0]), np.array([0.5, 2.0])],
           lambda a, x: np.array([0.806979116825318, 0.856571422097807]), rtol=1e-8),  # TF's values
    # Linear algebra.
    OpCase("Lu", lambda a: mm.lu_reconstruct(*mm.lu(a)), [_gen], lambda a: a, rtol=1e-10, atol=1e-12),
    OpCase("Lu", lambda a: mm.lu(a)[0], [_gen], None, grad=True, name="grad"),
    OpCase("MatrixSquareRoot", lambda a: math_ops.matmul(*[mm.sqrtm(a)] * 2), [_spd], lambda a: a,
           rtol=1e-10),
    OpCase("MatrixSquareRoot", mm.sqrtm, [_spd], None, grad=True, name="grad"),
    OpCase("MatrixExponential", mm.expm, [np.array([[0.0, 1.0], [-1.0, 0.0]])],
           lambda a: np.array([[math.cos(1), math.sin(1)], [-math.sin(1), math.cos(1)]]), rtol=1e-12),
    OpCase("MatrixExponential", mm.expm, [_f(2, 3, 3)], None, grad=True, name="grad"),
    OpCase("MatrixLogarithm", lambda re: math_ops_composite.real(mm.logm(math_ops.cast(re, "complex128"))),
           [np.array([[math.e, 0.0], [1.0, math.e ** 2]])],
           lambda a: np.array([[1.0, 0.0], [(2 - 1) / (math.e ** 2 - math.e), 2.0]]), rtol=1e-10),
    OpCase("TridiagonalMatMul", lambda d, r: mm.tridiagonal_matmul(d, r), [_tri, _f(5, 2)],
           lambda d, r: (np.diag(d[1]) + np.diag(d[0][:-1], 1) + np.diag(d[2][1:], -1)) @ r, rtol=1e-12,
           grad=True),
    OpCase("TridiagonalSolve", lambda d, r: mm.tridiagonal_solve(d, r), [_tri, _f(5, 2)],
           lambda d, r: np.linalg.solve(np.diag(d[1]) + np.diag(d[0][:-1], 1) + np.diag(d[2][1:], -1), r),
           rtol=1e-10, grad=True),
]
