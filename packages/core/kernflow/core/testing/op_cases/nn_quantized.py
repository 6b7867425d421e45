"""Contract cases of the quantized nn ops (kernflow.core.ops.nn_ops_quantized).

References are levels worked out by hand (packages/core/tests/test_quantized_nn.py checks the
ops against float-domain numpy references). quint8 over [-1, 2] has 85 levels per unit and the
level of 0.0 at 85.
"""

import numpy as np

import kernflow.core as kf
from kernflow.core.testing.kernel_contract import OpCase


def _q(dtype, values):
    return np.array(values, dtype=dtype.as_numpy_dtype[0]).view(dtype.as_numpy_dtype)


_X = _q(kf.quint8, (np.arange(16).reshape(1, 4, 4, 1) * 10))
_LO, _HI = np.float32(-1), np.float32(2)


def _pool(fn, **kw):
    return lambda x, lo, hi: list(fn(x, lo, hi, **kw))


CASES = [
    OpCase("QuantizedReluX", lambda x, m, lo, hi: list(kf.nn.quantized_relu_x(x, m, lo, hi)),
           [_q(kf.quint8, [0, 85, 100, 170, 255]), np.float32(1), _LO, _HI],
           lambda *a: [_q(kf.quint8, [85, 85, 100, 170, 170]), _LO, _HI]),
    OpCase("QuantizedMaxPool", _pool(kf.nn.quantized_max_pool, ksize=[1, 2, 2, 1], strides=[1, 2, 2, 1],
                                     padding="SAME"), [_X, _LO, _HI],
           lambda *a: [_q(kf.quint8, [50, 70, 130, 150]).reshape(1, 2, 2, 1), _LO, _HI]),
    OpCase("QuantizedAvgPool", _pool(kf.nn.quantized_avg_pool, ksize=[1, 3, 3, 1], strides=[1, 2, 2, 1],
                                     padding="SAME"), [_X, _LO, _HI],
           # SAME pads one row and column after: windows of 9, 6, 6 and 4 input elements
           lambda *a: [_q(kf.quint8, [50, 65, 110, 125]).reshape(1, 2, 2, 1), _LO, _HI], name="same"),
    OpCase("QuantizedAvgPool", _pool(kf.nn.quantized_avg_pool, ksize=[1, 2, 2, 1], strides=[1, 2, 2, 1],
                                     padding="VALID"), [_q(kf.qint8, np.arange(16).reshape(1, 4, 4, 1) * 7),
                                                        _LO, _HI],
           # means 17.5, 31.5, 73.5, 87.5: truncated as integers
           lambda *a: [_q(kf.qint8, [17, 31, 73, 87]).reshape(1, 2, 2, 1), _LO, _HI], name="truncates"),
    OpCase("QuantizedConv2D",
           lambda x, f, lo, hi, flo, fhi: list(kf.nn.quantized_conv2d(x, f, lo, hi, flo, fhi, [1, 2, 2, 1],
                                                                       "VALID")),
           [_X, _q(kf.quint8, np.arange(4).reshape(2, 2, 1, 1)), _LO, _HI, np.float32(0), np.float32(3)],
           # (x - 85) . [0, 1, 2, 3] over each 2x2 window; one level is (3 / 255) * (3 / 255)
           lambda *a: [_q(kf.qint32, [-270, -150, 210, 330]).reshape(1, 2, 2, 1),
                       np.float32(9 / 65025 * -2 ** 31), np.float32(9 / 65025 * (2 ** 31 - 1))],
           rtol=1e-5),
]
