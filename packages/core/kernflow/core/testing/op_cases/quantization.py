"""Contract cases of the quantization ops (kernflow.core.ops.quantization_ops).

References are values computed by hand from TF's documented formulas (see
packages/core/tests/test_quantization.py for the arithmetic). Quantized arrays are numpy
structured arrays, compared field for field. The straight-through gradients of
QuantizeAndDequantize are not finite differences of a step function: the tests check them.
"""

import numpy as np

import kernflow.core as kf
from kernflow.core.testing.kernel_contract import OpCase

_X = np.array([-1.0, 0.0, 0.5, 1.0, 2.0], np.float32)


def _q(dtype, values):
    return np.array(values, dtype=dtype.as_numpy_dtype[0]).view(dtype.as_numpy_dtype)


def _f32(*v):
    return np.array(v, np.float32)


CASES = [
    OpCase("QuantizeV2", lambda x, lo, hi: list(kf.quantize(x, lo, hi, kf.quint8)),
           [_X, np.float32(-1), np.float32(2)],
           lambda *a: [_q(kf.quint8, [0, 85, 128, 170, 255]), np.float32(-1), np.float32(2)],
           name="min_combined"),
    OpCase("QuantizeV2", lambda x, lo, hi: list(kf.quantize(x, lo, hi, kf.qint8, mode="SCALED")),
           [_X, np.float32(-1), np.float32(2)],
           lambda *a: [_q(kf.qint8, [-64, 0, 32, 64, 127]), np.float32(-128 / 63.5), np.float32(2)],
           name="scaled"),
    OpCase("Dequantize", lambda q, lo, hi: kf.dequantize(q, lo, hi),
           [_q(kf.quint8, [0, 85, 128, 255]), np.float32(-1), np.float32(2)],
           lambda *a: _f32(-1, 0, 128 * 3 / 255 - 1, 2), name="min_combined"),
    OpCase("QuantizedConcat", lambda a, b, lo1, lo2, hi: list(kf.quantized_concat(0, [a, b], [lo1, lo2], [hi, hi])),
           [_q(kf.quint8, [0, 255]), _q(kf.quint8, [7]), np.float32(-1), np.float32(-3), np.float32(2)],
           lambda *a: [_q(kf.quint8, [102, 255, 7]), np.float32(-3), np.float32(2)], dynamic_shapes=False),
    OpCase("QuantizeAndDequantizeV2", lambda x: kf.quantization.quantize_and_dequantize(x, 0., 0.), [_X],
           lambda x: _f32(-64, 0, 32, 64, 127) * np.float32(2 / 127)),
    OpCase("QuantizeAndDequantizeV3",
           lambda x, lo, hi, n: kf.quantize_and_dequantize_v3(x, lo, hi, n, signed_input=False),
           [_X, np.float32(0), np.float32(3), np.int32(2)],
           lambda *a: _f32(0, 0, 0, 1, 2)),
]
