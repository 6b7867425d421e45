"""Quantized dtypes and the quantization ops (kernflow.core.ops.quantization_ops), against values
computed by hand from TF's documented formulas."""

import os

import numpy as np
import pytest

import kernflow.core as kf
from kernflow.core.framework import errors, tensor_util

QTYPES = [(kf.qint8, 11, np.int8), (kf.quint8, 12, np.uint8), (kf.qint32, 13, np.int32),
          (kf.qint16, 15, np.int16), (kf.quint16, 16, np.uint16)]


def _q(dtype, values):
    return np.array(values, dtype=dtype.as_numpy_dtype[0]).view(dtype.as_numpy_dtype)


def _ints(a):
    return a[a.dtype.names[0]].tolist()


def _run(fetches, feed=None):
    with kf.Session() as s:
        return s.run(fetches, feed)


@pytest.fixture(autouse=True)
def _graph():
    kf.reset_default_graph()


# ---------------------------------------------------------------------------- dtypes
@pytest.mark.parametrize("dt,enum,storage", QTYPES)
def test_quantized_dtype_properties(dt, enum, storage):
    assert dt.as_datatype_enum == enum and kf.as_dtype(enum) is dt and kf.as_dtype(dt.name) is dt
    assert dt.is_quantized and not dt.is_integer and not dt.is_floating and not dt.is_unsigned
    assert dt.as_numpy_dtype == np.dtype([(dt.name, storage)])
    assert kf.as_dtype(dt.as_numpy_dtype) is dt
    assert dt.size == np.dtype(storage).itemsize
    assert dt.as_ref().base_dtype is dt and dt.as_ref().name == dt.name + "_ref"
    assert dt in kf.QUANTIZED_DTYPES and dt.as_ref() in kf.QUANTIZED_DTYPES
    for prop in ("min", "max", "limits"):   # TF raises for quantized types too
        with pytest.raises(TypeError):
            getattr(dt, prop)
    assert not kf.int8.is_quantized and kf.as_dtype(np.int8) is kf.int8


@pytest.mark.parametrize("dt,enum,storage", QTYPES)
def test_tensor_proto_round_trip(dt, enum, storage):
    proto = tensor_util.make_tensor_proto([[1, 2], [3, 4]], dt)
    assert proto.dtype == enum
    back = tensor_util.make_ndarray(proto)
    assert back.dtype == dt.as_numpy_dtype and _ints(back) == [[1, 2], [3, 4]]
    assert tensor_util.make_tensor_proto(back).dtype == enum   # the array keeps its type


def test_constant_feed_fetch_and_generic_ops():
    c = kf.constant([[1, -2], [3, 4]], dtype=kf.qint8)
    ph = kf.placeholder(kf.quint16, [None])
    cat = kf.concat([kf.reshape(c, [4]), kf.reshape(c, [4])], 0)
    got_c, got_cat, got_ph = _run([c, cat, kf.identity(ph)], {ph: [7, 65535]})
    assert got_c.dtype == kf.qint8.as_numpy_dtype and _ints(got_c) == [[1, -2], [3, 4]]
    assert _ints(got_cat) == [1, -2, 3, 4] * 2
    assert got_ph.dtype == kf.quint16.as_numpy_dtype and _ints(got_ph) == [7, 65535]
    with pytest.raises(TypeError, match="Expected qint8"):
        kf.constant(1.5, dtype=kf.qint8)


def test_checkpoint_save_restore_of_quantized_variable(tmp_path):
    v = kf.Variable(kf.constant([5, -6, 7], dtype=kf.qint16), name="qv")
    saver = kf.train.Saver([v])
    with kf.Session() as s:
        s.run(kf.global_variables_initializer())
        path = saver.save(s, os.path.join(str(tmp_path), "model"))
        s.run(v.assign(kf.constant([0, 0, 0], dtype=kf.qint16)))
        saver.restore(s, path)
        got = s.run(v)
    assert got.dtype == kf.qint16.as_numpy_dtype and _ints(got) == [5, -6, 7]
    assert kf.train.load_checkpoint(path).get_variable_to_dtype_map() == {"qv": kf.qint16}


# ---------------------------------------------------------------------------- QuantizeV2
X = [-1.0, 0.0, 0.5, 1.0, 2.0]


def test_quantize_min_combined():
    # quint8 over [-1, 2]: (x + 1) * 255 / 3 = (x + 1) * 85; 127.5 rounds away from zero.
    out, lo, hi = _run(kf.quantize(X, -1.0, 2.0, kf.quint8))
    assert _ints(out) == [0, 85, 128, 170, 255] and (lo, hi) == (-1.0, 2.0)
    # qint8: the same steps minus 128.
    out, _, _ = _run(kf.quantize(X, -1.0, 2.0, kf.qint8))
    assert _ints(out) == [-128, -43, 0, 42, 127]


def test_quantize_clamps_and_widens_the_range_to_hold_zero():
    # [1, 3] becomes [0, 3]: 255 / 3 = 85 per unit; -1 clamps to 0, 5 to 3.
    out, lo, hi = _run(kf.quantize([-1.0, 1.0, 5.0], 1.0, 3.0, kf.quint8))
    assert _ints(out) == [0, 85, 255] and (lo, hi) == (0.0, 3.0)
    # A negative range [-4, -2] becomes [-4, 0]; the eps check leaves it.
    out, lo, hi = _run(kf.quantize([-4.0, -2.0, 1.0], -4.0, -2.0, kf.quint8))
    assert _ints(out) == [0, 128, 255] and (lo, hi) == (-4.0, 0.0)


def test_quantize_min_equal_max_gets_the_minimum_range():
    # [0, 0] widens to [0, 0.01] (ensure_minimum_range * max(1, |min|, |max|)).
    out, lo, hi = _run(kf.quantize([0.0, 0.005, 1.0], 0.0, 0.0, kf.quint8))
    assert (lo, hi) == (0.0, np.float32(0.01)) and _ints(out) == [0, 128, 255]
    # [5, 5] widens to [0, 5] (0 is always inside): 51 per unit.
    out, lo, hi = _run(kf.quantize([2.5, 5.0], 5.0, 5.0, kf.quint8))
    assert (lo, hi) == (0.0, 5.0) and _ints(out) == [128, 255]


def test_quantize_min_first():
    # quint8 over [-1, 2]: n = 256, scale = 256 / (3 * 256 / 255) = 85;
    # round(85 x) - round(-85) + 0.
    out, lo, hi = _run(kf.quantize(X, -1.0, 2.0, kf.quint8, mode="MIN_FIRST"))
    assert _ints(out) == [0, 85, 128, 170, 255] and (lo, hi) == (-1.0, 2.0)
    # qint8 over [-1, 1]: scale = 256 / (2 * 256 / 255) = 127.5; round(127.5 x) - round(-127.5) - 128
    # = round(127.5 x), half away from zero: -127.5 -> -128, 63.75 -> 64, 127.5 -> 128 clamps to 127.
    out, _, _ = _run(kf.quantize([-1.0, 0.0, 0.5, 1.0], -1.0, 1.0, kf.qint8, mode="MIN_FIRST"))
    assert _ints(out) == [-128, 0, 64, 127]


def test_quantize_scaled_and_narrow_range():
    # qint8 over [-1, 2]: scale = min(-128 / -1, 127 / 2) = 63.5; range [-128 / 63.5, 2].
    out, lo, hi = _run(kf.quantize(X, -1.0, 2.0, kf.qint8, mode="SCALED"))
    assert _ints(out) == [-64, 0, 32, 64, 127]
    assert lo == np.float32(-128 / 63.5) and hi == 2.0
    # narrow_range: [-127, 127]; over [-10, 10]: scale = 12.7, range [-10, 10].
    out, lo, hi = _run(kf.quantize([-10.0, -0.1, 10.0], -10.0, 10.0, kf.qint8, mode="SCALED",
                                   narrow_range=True))
    assert _ints(out) == [-127, -1, 127] and (lo, hi) == (-10.0, 10.0)
    # Without narrow_range, [-10, 10] scales by 12.7 from the max side, -10 -> -127, the
    # range's low end is -128 / 12.7.
    out, lo, _ = _run(kf.quantize([-10.0], -10.0, 10.0, kf.qint8, mode="SCALED"))
    assert _ints(out) == [-127] and lo == np.float32(-128 / np.float32(12.7))
    # Unsigned: scale from the max side only; negatives clamp to 0.
    out, lo, hi = _run(kf.quantize([-1.0, 1.0, 2.0], -1.0, 2.0, kf.quint8, mode="SCALED"))
    assert _ints(out) == [0, 128, 255] and (lo, hi) == (0.0, 2.0)


def test_quantize_round_modes():
    # SCALED qint8 over [-127, 127]: scale 1. Half away from zero vs half to even.
    x = [-2.5, -0.5, 0.5, 1.5, 2.5]
    away, _, _ = _run(kf.quantize(x, -127.0, 127.0, kf.qint8, mode="SCALED"))
    even, _, _ = _run(kf.quantize(x, -127.0, 127.0, kf.qint8, mode="SCALED", round_mode="HALF_TO_EVEN"))
    assert _ints(away) == [-3, -1, 1, 2, 3] and _ints(even) == [-2, 0, 0, 2, 2]
    with pytest.raises(errors.InvalidArgumentError, match="QuantizeV2.*HALF_TO_EVEN.*MIN_COMBINED"):
        _run(kf.quantize(x, -1.0, 1.0, kf.qint8, round_mode="HALF_TO_EVEN"))


def test_quantize_per_channel_axis():
    x = np.array([[1.0, 10.0], [-1.0, 5.0]], np.float32)
    out, lo, hi = _run(kf.quantize(x, [-1.0, 0.0], [1.0, 10.0], kf.qint8, mode="SCALED", axis=1))
    # column 0: scale min(128, 127) = 127; column 1: 12.7.
    assert _ints(out) == [[127, 127], [-127, 64]]
    np.testing.assert_allclose(lo, [-128 / 127, -128 / 12.7], rtol=1e-6)
    np.testing.assert_allclose(hi, [1.0, 10.0], rtol=1e-6)


def test_quantize_errors():
    with pytest.raises(TypeError):
        kf.quantize(X, -1.0, 1.0, kf.int8)
    with pytest.raises(errors.InvalidArgumentError, match=r"QuantizeV2.*min_range must be <= max_range"):
        _run(kf.quantize(X, 2.0, 1.0, kf.quint8))
    with pytest.raises(ValueError, match="QuantizeV2: min_range must have shape"):
        kf.quantize(X, [-1.0, 0.0], 1.0, kf.quint8)
    ph = kf.placeholder(kf.float32)
    with pytest.raises(errors.InvalidArgumentError, match=r"QuantizeV2.*min_range must have shape \[2\]"):
        _run(kf.quantize(np.zeros((3, 2), np.float32), ph, ph, kf.qint8, axis=1), {ph: [1.0, 2.0, 3.0]})


# ---------------------------------------------------------------------------- Dequantize
def test_dequantize_modes():
    q8 = kf.constant([0, 85, 128, 255], dtype=kf.quint8)
    # MIN_COMBINED: -1 + q * 3 / 255.
    np.testing.assert_allclose(_run(kf.dequantize(q8, -1.0, 2.0)), [-1, 0, 128 * 3 / 255 - 1, 2], rtol=1e-6)
    # MIN_FIRST: -1 + q * (3 * 256 / 255) / 256 = -1 + q / 85.
    np.testing.assert_allclose(_run(kf.dequantize(q8, -1.0, 2.0, mode="MIN_FIRST")),
                               [-1, 0, 128 / 85 - 1, 2], rtol=1e-6)
    # qint8 MIN_COMBINED: (q + 128) * 2 / 255 - 1.
    qs = kf.constant([-128, 0, 127], dtype=kf.qint8)
    np.testing.assert_allclose(_run(kf.dequantize(qs, -1.0, 1.0)), [-1, 128 * 2 / 255 - 1, 1], atol=1e-6)
    # SCALED: max(-10 / -128, 10 / 127) = 10 / 127 per step; narrow: max(10 / 127, 10 / 127).
    np.testing.assert_allclose(_run(kf.dequantize(qs, -10.0, 10.0, mode="SCALED")),
                               [-1280 / 127, 0, 10], rtol=1e-6)
    np.testing.assert_allclose(_run(kf.dequantize(q8, -1.0, 2.0, mode="SCALED")),
                               [0, 170 / 255, 256 / 255, 2], rtol=1e-6)


def test_dequantize_min_equal_max_and_round_trip():
    q = kf.constant([0, 7, 255], dtype=kf.quint8)
    np.testing.assert_array_equal(_run(kf.dequantize(q, 3.0, 3.0, mode="MIN_FIRST")), [3, 3, 3])
    x = np.linspace(-3, 5, 17).astype(np.float32)
    for mode in ("MIN_COMBINED", "MIN_FIRST", "SCALED"):
        kf.reset_default_graph()
        out, lo, hi = kf.quantize(x, -3.0, 5.0, kf.qint16, mode=mode)
        back = _run(kf.dequantize(out, lo, hi, mode=mode))
        np.testing.assert_allclose(back, x, atol=8 / 65535 * 1.01, err_msg=mode)


def test_dequantize_per_channel():
    q = kf.constant([[127, -127], [64, 0]], dtype=kf.qint8)
    got = _run(kf.dequantize(q, [-1.0, -10.0], [1.0, 10.0], mode="SCALED", axis=1, narrow_range=True))
    np.testing.assert_allclose(got, [[1, -10], [64 / 127, 0]], rtol=1e-6)


# ---------------------------------------------------------------------------- QuantizedConcat
def test_quantized_concat_same_and_different_ranges():
    a = kf.constant([[0, 255]], dtype=kf.quint8)
    b = kf.constant([[7, 9]], dtype=kf.quint8)
    out, lo, hi = _run(kf.quantized_concat(0, [a, b], [0.0, 0.0], [2.0, 2.0]))
    assert _ints(out) == [[0, 255], [7, 9]] and (lo, hi) == (0.0, 2.0)
    # a over [-1, 2] moves into [-3, 2]: -1 -> round(-51) + 153 = 102, 2 -> 255.
    out, lo, hi = _run(kf.quantized_concat(1, [a, b], [-1.0, -3.0], [2.0, 2.0]))
    assert _ints(out) == [[102, 255, 7, 9]] and (lo, hi) == (-3.0, 2.0)


def test_quantized_concat_signed_range_is_symmetric():
    a = kf.constant([-128, 127], dtype=kf.qint8)
    b = kf.constant([0], dtype=kf.qint8)
    out, lo, hi = _run(kf.quantized_concat(0, [a, b], [-1.0, -2.0], [1.0, 1.0]))
    assert (lo, hi) == (-2.0, 2.0)
    # MIN_FIRST into [-2, 2]: scale 256 / (4 * 256 / 255) = 63.75, q = round(63.75 f) - round(-127.5) - 128
    # = round(63.75 f). a's -128 / 127 are -1 / 1 -> -64 / 64; b's 0 (over [-2, 1]) is
    # -2 + 128 * 3 / 255 = -0.4941..., * 63.75 = -31.5 -> -32 (half away from zero).
    assert _ints(out) == [-64, 64, -32]


def test_quantized_concat_errors():
    a = kf.constant([1, 2], dtype=kf.quint8)
    with pytest.raises(ValueError, match="QuantizedConcat: needs N >= 2"):
        kf.quantized_concat(0, [a], [0.0], [1.0])
    with pytest.raises(ValueError, match="QuantizedConcat: concat_dim 1 is out of range"):
        kf.quantized_concat(1, [a, a], [0.0, 0.0], [1.0, 1.0])
    with pytest.raises(TypeError):
        kf.quantized_concat(0, [a, kf.constant([1], dtype=kf.qint8)], [0.0, 0.0], [1.0, 1.0])
    with pytest.raises(errors.InvalidArgumentError, match="QuantizedConcat.*T must be a quantized type"):
        _run(kf.quantized_concat(0, [[1], [2]], [0.0, 0.0], [1.0, 1.0]))


# ---------------------------------------------------------------------------- QuantizeAndDequantize
def test_quantize_and_dequantize_v2():
    qad = kf.quantization.quantize_and_dequantize
    # Range from the data [-1, 2]: scale 63.5 from the max side, steps of 2 / 127.
    got = _run(qad(X, 0.0, 0.0))
    np.testing.assert_allclose(got, np.array([-64, 0, 32, 64, 127]) * 2 / 127, rtol=1e-6)
    # Given range [-10, 5]: scale -128 / -10 = 12.8, max widened to 127 / 12.8; 12 clamps there.
    got = _run(qad([-10.0, 0.2, 12.0], -10.0, 5.0, range_given=True))
    np.testing.assert_allclose(got, [-10, 3 / 12.8, 127 / 12.8], rtol=1e-6)
    # Unsigned 2 bits over [0, 3]: levels 0..3, half to even vs half up.
    x = [-1.0, 0.5, 1.5, 2.5, 4.0]
    np.testing.assert_array_equal(_run(qad(x, 0.0, 3.0, signed_input=False, num_bits=2, range_given=True)),
                                  [0, 0, 2, 2, 3])
    np.testing.assert_array_equal(_run(qad(x, 0.0, 3.0, signed_input=False, num_bits=2, range_given=True,
                                           round_mode="HALF_UP")), [0, 1, 2, 3, 3])
    # narrow_range, 3 bits over [-3, 3]: levels -3..3, scale 1.
    np.testing.assert_array_equal(_run(qad([-5.0, -2.4, 3.0], -3.0, 3.0, num_bits=3, range_given=True,
                                           narrow_range=True)), [-3, -2, 3])
    np.testing.assert_array_equal(_run(qad(np.zeros(3, np.float32), 0.0, 0.0)), [0, 0, 0])


def test_quantize_and_dequantize_v3_and_per_channel():
    x = np.array([[-1.0, 0.3], [1.0, 0.6]], np.float32)
    got = _run(kf.quantize_and_dequantize_v3(x, [-1.0, -1.0], [1.0, 1.0], 2, axis=0))
    # signed 2 bits: levels -2..1; row 0 [-1, 1] scales by 1 (max side): 0.3 -> 0;
    # row 1 likewise: 0.6 -> 1.
    np.testing.assert_array_equal(got, [[-1, 0], [1, 1]])
    got = _run(kf.quantization.quantize_and_dequantize(x, [0.0, 0.0], [0.0, 0.0], num_bits=2, axis=1))
    # Column ranges from data: [-1, 1] -> scale 1; [0.3, 0.6] -> scale 1 / 0.6: 0.3 * 1/0.6 = 0.5
    # rounds to 0 (half to even).
    np.testing.assert_allclose(got, [[-1, 0], [1, 0.6]], rtol=1e-6)


def test_quantize_and_dequantize_gradient_is_straight_through():
    x = kf.constant(X)
    for y in (kf.quantization.quantize_and_dequantize(x, -1.0, 1.0, range_given=True),
              kf.quantize_and_dequantize_v3(x, -1.0, 1.0, 4)):
        g = kf.gradients(kf.reduce_sum(y * kf.constant([1.0, 2.0, 3.0, 4.0, 5.0])), x)[0]
        np.testing.assert_array_equal(_run(g), [1, 2, 3, 4, 5])


def test_quantize_and_dequantize_errors():
    qad = kf.quantization.quantize_and_dequantize
    with pytest.raises(errors.InvalidArgumentError, match="QuantizeAndDequantizeV2.*Invalid range"):
        _run(qad(X, 2.0, 1.0, range_given=True))
    with pytest.raises(errors.InvalidArgumentError, match="QuantizeAndDequantizeV2.*num_bits is out of range: 0"):
        _run(qad(X, 0.0, 1.0, num_bits=0))
    with pytest.raises(TypeError):
        qad(kf.constant([1, 2]), 0, 1)


# ---------------------------------------------------------------------------- namespaces
def test_namespaces():
    assert kf.quantization.fake_quant_with_min_max_vars is kf.fake_quant_with_min_max_vars
    assert kf.quantization.quantize is kf.quantize and kf.quantization.dequantize is kf.dequantize
    assert kf.quantization.quantized_concat is kf.quantized_concat
    out, _, _ = _run(kf.quantize_v2([1.0], 0.0, 1.0, kf.quint8))
    assert _ints(out) == [255]
