"""The quantized nn ops (kernflow.core.ops.nn_ops_quantized) against numpy references computed in
the float domain: dequantize the inputs (MIN_FIRST), apply the float op, compare with the
dequantized output within the quantization error."""

import numpy as np
import pytest

import kernflow.core as kf
from kernflow.core.framework import errors

RNG = np.random.default_rng(7)


def _q(dtype, values):
    return np.array(values, dtype=dtype.as_numpy_dtype[0]).view(dtype.as_numpy_dtype)


def _ints(a):
    return a[a.dtype.names[0]].astype(np.int64)


def _limits(dtype):
    info = np.iinfo(dtype.as_numpy_dtype[0])
    return int(info.min), int(info.max)


def _step(dtype, lo, hi):
    lowest, highest = _limits(dtype)
    return (hi - lo) / (highest - lowest)


def _deq(dtype, q, lo, hi):
    """MIN_FIRST dequantization in float64: lo + (level - lowest) * step."""
    return lo + (_ints(q) - _limits(dtype)[0]) * _step(dtype, lo, hi)


def _random(dtype, shape):
    lowest, highest = _limits(dtype)
    return _q(dtype, RNG.integers(lowest, highest + 1, size=shape))


def _run(fetches):
    with kf.Session() as s:
        return s.run(fetches)


@pytest.fixture(autouse=True)
def _graph():
    kf.reset_default_graph()


def _windows_ref(x, ksize, strides, padding, reduce):
    """Float NHWC pooling over the windows' elements inside x (SAME padding not counted)."""
    n, h, w, c = x.shape
    out, starts = [], []
    for d, k, s in ((h, ksize[1], strides[1]), (w, ksize[2], strides[2])):
        o = -(-d // s) if padding == "SAME" else (d - k) // s + 1
        before = max((o - 1) * s + k - d, 0) // 2 if padding == "SAME" else 0
        out.append(o)
        starts.append([i * s - before for i in range(o)])
    y = np.zeros((n, out[0], out[1], c))
    for i, r in enumerate(starts[0]):
        for j, col in enumerate(starts[1]):
            win = x[:, max(r, 0):r + ksize[1], max(col, 0):col + ksize[2], :]
            y[:, i, j, :] = reduce(win, axis=(1, 2))
    return y


# ---------------------------------------------------------------------------- QuantizedReluX
@pytest.mark.parametrize("in_t,out_t", [(kf.quint8, kf.quint8), (kf.qint8, kf.qint8), (kf.quint8, kf.qint16),
                                        (kf.quint16, kf.quint8)])
def test_relu_x_against_float_clamp(in_t, out_t):
    x, lo, hi, cap = _random(in_t, (3, 50)), -2.0, 6.0, 3.5
    y, y_lo, y_hi = _run(list(kf.nn.quantized_relu_x(x, cap, lo, hi, out_type=out_t)))
    assert y.dtype == out_t.as_numpy_dtype and y.shape == x.shape and (y_lo, y_hi) == (lo, hi)
    ref = np.clip(_deq(in_t, x, lo, hi), 0, cap)
    # MIN_FIRST levels of a float lie within one step of it (the range's own min is rounded too)
    tol = _step(in_t, lo, hi) + _step(out_t, lo, hi) + 1e-6
    np.testing.assert_allclose(_deq(out_t, y, lo, hi), ref, atol=tol)


def test_relu_x_keeps_levels_between_zero_and_max_value_exactly():
    # quint8 over [-1, 2]: 85 levels per unit, 0.0 at level 85, 1.0 at level 170
    x = _q(kf.quint8, [0, 84, 85, 86, 169, 170, 171, 255])
    y, lo, hi = _run(list(kf.nn.quantized_relu_x(x, 1.0, -1.0, 2.0)))
    assert _ints(y).tolist() == [85, 85, 85, 86, 169, 170, 170, 170] and (lo, hi) == (-1, 2)
    assert kf.nn.quantized_relu_x(x, 1.0, -1.0, 2.0).activations.dtype == kf.quint8


def test_relu_x_with_a_range_above_zero_and_a_negative_max_value():
    x = _q(kf.quint8, [0, 100, 255])
    assert _ints(_run(kf.nn.quantized_relu_x(x, 5.0, 1.0, 2.0)[0])).tolist() == [0, 100, 255]
    assert _ints(_run(kf.nn.quantized_relu_x(x, -1.0, -2.0, 2.0)[0])).tolist() == [64, 64, 64]


# ---------------------------------------------------------------------------- pools
POOLS = [([1, 2, 2, 1], [1, 2, 2, 1], "VALID"), ([1, 3, 3, 1], [1, 2, 2, 1], "SAME"),
         ([1, 2, 3, 1], [1, 1, 2, 1], "SAME"), ([1, 3, 2, 1], [1, 3, 1, 1], "VALID"),
         ([1, 1, 1, 1], [1, 1, 1, 1], "VALID")]


def _pool_vs_float(fn, reduce, dtype, ksize, strides, padding):
    """(x, output levels, float reference, output dequantized) after checking type, shape and range."""
    x, lo, hi = _random(dtype, (2, 7, 6, 3)), -3.0, 5.0
    y, y_lo, y_hi = _run(list(fn(x, lo, hi, ksize, strides, padding)))
    ref = _windows_ref(_deq(dtype, x, lo, hi), ksize, strides, padding, reduce)
    assert y.dtype == dtype.as_numpy_dtype and y.shape == ref.shape and (y_lo, y_hi) == (lo, hi)
    return x, y, ref, _deq(dtype, y, lo, hi)


@pytest.mark.parametrize("dtype", [kf.quint8, kf.qint8, kf.qint16])
@pytest.mark.parametrize("ksize,strides,padding", POOLS)
def test_max_pool_equals_float_max_pool(dtype, ksize, strides, padding):
    _, _, ref, got = _pool_vs_float(kf.nn.quantized_max_pool, np.max, dtype, ksize, strides, padding)
    np.testing.assert_allclose(got, ref, atol=1e-9)   # max commutes with the levels


@pytest.mark.parametrize("dtype", [kf.quint8, kf.qint8, kf.quint16])
@pytest.mark.parametrize("ksize,strides,padding", POOLS)
def test_avg_pool_is_the_float_mean_within_one_level(dtype, ksize, strides, padding):
    x, y, ref, got = _pool_vs_float(kf.nn.quantized_avg_pool, np.mean, dtype, ksize, strides, padding)
    np.testing.assert_allclose(got, ref, atol=_step(dtype, -3.0, 5.0) + 1e-9)
    levels = _windows_ref(_ints(x).astype(np.float64), ksize, strides, padding, np.mean)
    assert (_ints(y) == np.trunc(levels)).all()   # the mean of the levels, truncated as integers


def test_avg_pool_truncates_toward_zero_for_signed_levels():
    x = _q(kf.qint8, [[-3, -4], [5, 6]]).reshape(1, 2, 2, 1)
    y = _run(kf.nn.quantized_avg_pool(x, -1.0, 1.0, [1, 1, 2, 1], [1, 1, 1, 1], "VALID")[0])
    assert _ints(y).ravel().tolist() == [-3, 5]   # -3.5 -> -3, 5.5 -> 5


def test_pool_static_shapes():
    x = kf.placeholder(kf.quint8, [2, 7, None, 3])
    out = kf.nn.quantized_avg_pool(x, 0.0, 1.0, [1, 3, 3, 1], [1, 2, 2, 1], "SAME")
    assert out.output.shape.as_list() == [2, 4, None, 3] and out.min_output.shape.as_list() == []


# ---------------------------------------------------------------------------- QuantizedConv2D
CONVS = [([1, 1, 1, 1], "VALID", (3, 3)), ([1, 1, 1, 1], "SAME", (3, 3)), ([1, 2, 2, 1], "SAME", (3, 2)),
         ([1, 2, 1, 1], "VALID", (2, 3)), ([1, 3, 3, 1], "SAME", (1, 1))]


@pytest.mark.parametrize("strides,padding,k", CONVS)
@pytest.mark.parametrize("in_t,f_t,ranges", [(kf.quint8, kf.quint8, (-1.5, 3.0, -0.5, 1.0)),
                                             (kf.qint8, kf.quint8, (-2.0, 2.0, 0.25, 1.0)),
                                             (kf.quint16, kf.qint8, (0.5, 4.0, -1.0, 1.0))])
def test_conv2d_dequantized_equals_float_conv2d(strides, padding, k, in_t, f_t, ranges):
    x_lo, x_hi, f_lo, f_hi = ranges
    x, f = _random(in_t, (2, 7, 8, 3)), _random(f_t, k + (3, 4))
    out = kf.nn.quantized_conv2d(x, f, x_lo, x_hi, f_lo, f_hi, strides, padding)
    xf = kf.dequantize(x, x_lo, x_hi, mode="MIN_FIRST")
    ff = kf.dequantize(f, f_lo, f_hi, mode="MIN_FIRST")
    ref = kf.nn.conv2d(xf, ff, strides, padding)
    y, y_lo, y_hi, ref, xv, fv = _run([*out, ref, xf, ff])
    one = np.float32(np.float32(_step(in_t, x_lo, x_hi)) * np.float32(_step(f_t, f_lo, f_hi)))
    assert y.dtype == kf.qint32.as_numpy_dtype and y.shape == ref.shape
    assert (y_lo, y_hi) == (np.float32(one * np.float32(-2 ** 31)), np.float32(one * np.float32(2 ** 31 - 1)))
    # Each level differs from its float by at most half a step (the zero level is rounded).
    sx, sf = _step(in_t, x_lo, x_hi), _step(f_t, f_lo, f_hi)
    taps = k[0] * k[1] * 3
    tol = taps * (np.abs(xv).max() * sf / 2 + np.abs(fv).max() * sx / 2 + sx * sf / 4) + 1e-4 * np.abs(ref).max()
    np.testing.assert_allclose(_ints(y) * float(one), ref, atol=tol)


def test_conv2d_levels_by_hand():
    # input quint8 over [-1, 2] (0.0 at level 85), filter quint8 over [1, 2] (0.0 at level -255:
    # outside quint8, not clamped); SAME pads with the level of 0.0
    x = _q(kf.quint8, [[85, 95], [105, 115]]).reshape(1, 2, 2, 1)
    f = _q(kf.quint8, [0, 1]).reshape(1, 2, 1, 1)
    y = _run(kf.nn.quantized_conv2d(x, f, -1.0, 2.0, 1.0, 2.0, [1, 1, 1, 1], "SAME").output)
    assert _ints(y).ravel().tolist() == [0 * 255 + 10 * 256, 10 * 255, 20 * 255 + 30 * 256, 30 * 255]


def test_conv2d_out_type_and_static_shape():
    x = kf.placeholder(kf.quint8, [None, 9, 9, 2])
    out = kf.nn.quantized_conv2d(x, kf.placeholder(kf.quint8, [3, 3, 2, 5]), 0., 1., 0., 1., [1, 2, 2, 1],
                                 "VALID", out_type=kf.qint16)
    assert out.output.dtype == kf.qint16 and out.output.shape.as_list() == [None, 4, 4, 5]
    assert out.output.op.type == "QuantizedConv2D" and out.max_output.shape.as_list() == []


# ---------------------------------------------------------------------------- errors
_X4 = _q(kf.quint8, np.zeros((1, 4, 4, 1)))
_F4 = _q(kf.quint8, np.zeros((2, 2, 1, 1)))


def _pool_args(x=_X4, lo=0.0):
    return dict(input=x, min_input=lo, max_input=1.0, ksize=[1, 2, 2, 1], strides=[1, 1, 1, 1], padding="VALID")


@pytest.mark.parametrize("fn,op", [(kf.nn.quantized_max_pool, "QuantizedMaxPool"),
                                   (kf.nn.quantized_avg_pool, "QuantizedAvgPool")])
def test_pool_errors(fn, op):
    with pytest.raises(TypeError, match=f"float32 not in list.*{op}"):
        fn(**_pool_args(np.zeros((1, 4, 4, 1), np.float32)))
    with pytest.raises(ValueError, match="must be rank 4|rank"):
        fn(**_pool_args(_q(kf.quint8, np.zeros((4, 4, 1)))))
    with pytest.raises(ValueError, match=f"{op}: min_input must be a scalar"):
        fn(**_pool_args(lo=[0.0, 0.0]))
    with pytest.raises(ValueError, match=f"{op}.*batch"):
        fn(_X4, 0.0, 1.0, [2, 1, 1, 1], [1, 1, 1, 1], "VALID")
    x = kf.placeholder(kf.quint8)
    lo = kf.placeholder(kf.float32)
    out = fn(**_pool_args(x, lo))
    with kf.Session() as s:
        with pytest.raises(errors.InvalidArgumentError, match=f"{op}.*must be 4-dimensional"):
            s.run(out, {x: _q(kf.quint8, np.zeros((4, 4, 1))), lo: 0.0})
        with pytest.raises(errors.InvalidArgumentError, match=f"{op}.*min_input must be a scalar"):
            s.run(out, {x: _X4, lo: [0.0]})


def test_relu_x_errors():
    with pytest.raises(TypeError, match="QuantizedReluX"):
        kf.nn.quantized_relu_x(np.zeros(3, np.float32), 1.0, 0.0, 1.0)
    with pytest.raises(TypeError):
        kf.nn.quantized_relu_x(_X4, 1.0, 0.0, 1.0, out_type=kf.float32)
    with pytest.raises(ValueError, match="QuantizedReluX: max_value must be a scalar"):
        kf.nn.quantized_relu_x(_X4, [1.0, 2.0], 0.0, 1.0)
    m = kf.placeholder(kf.float32)
    with pytest.raises(errors.InvalidArgumentError, match="QuantizedReluX.*max_value must be a scalar"):
        _run_feed(kf.nn.quantized_relu_x(_X4, m, 0.0, 1.0)[0], {m: [1.0]})


def _run_feed(fetch, feed):
    with kf.Session() as s:
        return s.run(fetch, feed)


def test_conv2d_errors():
    conv = kf.nn.quantized_conv2d
    with pytest.raises(TypeError, match="float32 not in list.*QuantizedConv2D"):
        conv(_X4, np.zeros((2, 2, 1, 1), np.float32), 0., 1., 0., 1., [1, 1, 1, 1], "VALID")
    with pytest.raises(ValueError, match="rank"):
        conv(_X4, _q(kf.quint8, np.zeros((2, 2, 1))), 0., 1., 0., 1., [1, 1, 1, 1], "VALID")
    with pytest.raises(ValueError, match=r"QuantizedConv2D: depth of input \(1\) does not match"):
        conv(_X4, _q(kf.quint8, np.zeros((2, 2, 3, 1))), 0., 1., 0., 1., [1, 1, 1, 1], "VALID")
    with pytest.raises(ValueError, match="QuantizedConv2D: only dilations"):
        conv(_X4, _F4, 0., 1., 0., 1., [1, 1, 1, 1], "VALID", dilations=[1, 2, 2, 1])
    with pytest.raises(ValueError, match="QuantizedConv2D: strides must be 4"):
        conv(_X4, _F4, 0., 1., 0., 1., [2, 1, 1, 1], "VALID")
    with pytest.raises(ValueError, match="QuantizedConv2D: max_filter must be a scalar"):
        conv(_X4, _F4, 0., 1., 0., [1., 2.], [1, 1, 1, 1], "VALID")
    x, f = kf.placeholder(kf.quint8), kf.placeholder(kf.quint8)
    out = conv(x, f, 0., 1., 0., 1., [1, 1, 1, 1], "VALID").output
    with pytest.raises(errors.InvalidArgumentError, match="QuantizedConv2D.*filter must be 4-dimensional"):
        _run_feed(out, {x: _X4, f: _q(kf.quint8, np.zeros((2, 2, 1)))})
    with pytest.raises(errors.InvalidArgumentError, match="QuantizedConv2D.*input depth 1 does not match"):
        _run_feed(out, {x: _X4, f: _q(kf.quint8, np.zeros((2, 2, 2, 1)))})


def test_not_differentiable_and_host_only():
    from kernflow.core.framework.gradient_registry import gradient_status
    from kernflow.core.testing.kernel_contract import HOST_ONLY_OPS
    for op in ("QuantizedReluX", "QuantizedMaxPool", "QuantizedAvgPool", "QuantizedConv2D"):
        assert gradient_status(op) != "missing" and op in HOST_ONLY_OPS
