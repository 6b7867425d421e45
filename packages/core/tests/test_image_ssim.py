"""kf.image.ssim_multiscale against a numpy reference (kernflow/core/image_ssim.py)."""

import numpy as np
import pytest

import kernflow.core as kf

_WEIGHTS = (0.0448, 0.2856, 0.3001, 0.2363, 0.1333)


def _window(size, sigma):
    c = np.arange(size) - (size - 1) / 2.0
    g = np.exp(-(c[:, None] ** 2 + c[None, :] ** 2) / (2 * sigma ** 2))
    return g / g.sum()


def _blur(x, g):
    """VALID correlation of [b, h, w, c] with the window g, per channel."""
    win = np.lib.stride_tricks.sliding_window_view(x, g.shape, axis=(1, 2))
    return np.einsum("bhwcij,ij->bhwc", win, g)


def _ssim_terms(a, b, max_val, size, sigma, k1=0.01, k2=0.03):
    g = _window(size, sigma)
    c1, c2 = (k1 * max_val) ** 2, (k2 * max_val) ** 2
    ma, mb = _blur(a, g), _blur(b, g)
    va, vb = _blur(a * a, g) - ma ** 2, _blur(b * b, g) - mb ** 2
    cov = _blur(a * b, g) - ma * mb
    lum = (2 * ma * mb + c1) / (ma ** 2 + mb ** 2 + c1)
    cs = (2 * cov + c2) / (va + vb + c2)
    return (lum * cs).mean(axis=(1, 2)), cs.mean(axis=(1, 2))


def _halve(x):
    """Pad odd h / w by repeating the last row / column, then 2x2 means."""
    x = np.pad(x, [(0, 0), (0, x.shape[1] % 2), (0, x.shape[2] % 2), (0, 0)], mode="symmetric")
    return (x[:, 0::2, 0::2] + x[:, 1::2, 0::2] + x[:, 0::2, 1::2] + x[:, 1::2, 1::2]) / 4


def ms_ssim_ref(a, b, max_val, weights=_WEIGHTS, size=11, sigma=1.5):
    terms = []
    for k in range(len(weights)):
        if k:
            a, b = _halve(a), _halve(b)
        s, cs = _ssim_terms(a, b, max_val, size, sigma)
        terms.append(cs)
    terms[-1] = s
    t = np.maximum(np.stack(terms, -1), 0)
    return np.prod(t ** np.asarray(weights), -1).mean(-1)


_R = np.random.RandomState(3)
_A = _R.rand(2, 37, 45, 3)
_B = np.clip(_A + _R.randn(*_A.shape) * 0.1, 0, 1)


def _run(fetch, feed=None):
    with kf.Session() as sess:
        return sess.run(fetch, feed)


def test_matches_the_numpy_reference_with_odd_sizes():
    weights = (0.2, 0.3, 0.5)
    with kf.Graph().as_default():
        got = _run(kf.image.ssim_multiscale(_A.astype(np.float32), _B.astype(np.float32), 1.0, weights,
                                            filter_size=7))
    np.testing.assert_allclose(got, ms_ssim_ref(_A, _B, 1.0, weights, size=7), rtol=1e-4)
    assert got.shape == (2,) and got.dtype == np.float32


def test_default_five_scales_uint8_and_dynamic_shapes():
    a = (_R.rand(1, 180, 177, 1) * 255).astype(np.uint8)
    b = np.clip(a.astype(np.int32) + _R.randint(-30, 30, a.shape), 0, 255).astype(np.uint8)
    with kf.Graph().as_default():
        p1, p2 = kf.placeholder(kf.uint8, [None, None, None, 1]), kf.placeholder(kf.uint8, None)
        score = kf.image.ssim_multiscale(p1, p2, 255)
        got, same = _run([score, kf.image.ssim_multiscale(p1, p1, 255)], {p1: a, p2: b})
    np.testing.assert_allclose(got, ms_ssim_ref(a / 255.0, b / 255.0, 1.0), rtol=1e-4)
    np.testing.assert_allclose(same, [1.0], rtol=1e-5)


def test_batch_dimensions_and_gradient():
    a, b = _A[:, :24, :24, :1].astype(np.float64), _B[:, :24, :24, :1].astype(np.float64)
    with kf.Graph().as_default():
        x = kf.constant(a.astype(np.float32))
        score = kf.image.ssim_multiscale(kf.reshape(x, [1, 2, 24, 24, 1]), b[None].astype(np.float32), 1.0,
                                         (0.5, 0.5), filter_size=5)
        assert score.shape.as_list() == [1, 2]
        got = _run(score)
        err = kf.test.compute_gradient_error(x, list(a.shape), score, [1, 2],
                                             x_init_value=a.astype(np.float32))
    np.testing.assert_allclose(got[0], ms_ssim_ref(a, b, 1.0, (0.5, 0.5), size=5), rtol=1e-4)
    assert err < 5e-3


def test_too_small_for_the_scales_is_a_value_error():
    with kf.Graph().as_default(), pytest.raises(ValueError, match="ssim_multiscale: .*filter_size = 11"):
        kf.image.ssim_multiscale(kf.constant(_A, kf.float32), kf.constant(_B, kf.float32), 1.0)
