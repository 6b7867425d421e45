"""Contract cases of the fused ops the fusion pass makes (kernflow.core.ops.fused_ops) and the
remapper's `_FusedConv2D` (kernflow.core.runtime.remapper)."""

import numpy as np

from kernflow.core.framework.op_def_library import apply_op
from kernflow.core.ops import fused_ops
from kernflow.core.testing.kernel_contract import OpCase
from kernflow.core.testing.op_cases.nn import _ref_conv

_r = np.random.RandomState(11)
_a = _r.uniform(-2, 2, (3, 4))
_b = _r.uniform(-2, 2, (4,))
_h = _r.uniform(-2, 2, (2, 5)).astype(np.float32)


_cx = _r.uniform(-1, 1, (2, 7, 6, 3)).astype(np.float32)
_cw = _r.uniform(-1, 1, (3, 2, 3, 4)).astype(np.float32)
_cb = _r.uniform(-1, 1, (4,)).astype(np.float32)


def _fused_conv(fused_ops_, strides, padding, data_format="NHWC"):
    def build(x, w, b):
        return apply_op("_FusedConv2D", [x, w, [b]],
                        {"strides": strides, "padding": padding, "data_format": data_format,
                         "fused_ops": fused_ops_}).outputs[0]
    return build


def _nchw(a):
    return np.ascontiguousarray(np.transpose(a, (0, 3, 1, 2)))


def _sigmoid(x):
    return 1 / (1 + np.exp(-x))


CASES = [
    OpCase("_FusedElementwise",
           lambda x, y: fused_ops.fused_elementwise(
               [x, y], ["Mul float64 i0 i1", "AddV2 float64 t0 float64:1.5", "Relu float64 t1",
                        "Sigmoid float64 t2"], "float64"),
           [_a, _b], lambda x, y: _sigmoid(np.maximum(x * y + 1.5, 0)), name="chain"),
    OpCase("_FusedElementwise",
           lambda x: fused_ops.fused_elementwise(
               [x], ["Greater bool i0 float32:0.0", "Tanh float32 i0",
                     "Select float32 t0 t1 float32:-1.0", "Cast float64 t2"], "float64"),
           [_h], lambda x: np.where(x > 0, np.tanh(x), -1.0).astype(np.float64), rtol=1e-6,
           name="select_cast"),
    OpCase("_FusedReduction",
           lambda x, y: fused_ops.fused_reduction(
               [x, y], ["SquaredDifference float64 i0 i1"], "float64", "Sum", [1]),
           [_a, _b], lambda x, y: np.sum((x - y) ** 2, axis=1), name="sum"),
    OpCase("_FusedReduction",
           lambda x: fused_ops.fused_reduction(
               [x], ["Exp float32 i0"], "float32", "Mean", [0], keep_dims=True),
           [_h], lambda x: np.mean(np.exp(x), axis=0, keepdims=True), rtol=1e-5, name="mean"),
    OpCase("_FusedConv2D", _fused_conv(["BiasAdd", "Relu"], [1, 1, 1, 1], "SAME"), [_cx, _cw, _cb],
           lambda x, w, b: np.maximum(_ref_conv(x, w, (1, 1), "SAME") + b, 0), rtol=1e-5, atol=1e-5,
           name="bias_relu"),
    OpCase("_FusedConv2D", _fused_conv(["BiasAdd"], [1, 2, 1, 1], "VALID"), [_cx, _cw, _cb],
           lambda x, w, b: _ref_conv(x, w, (2, 1), "VALID") + b, rtol=1e-5, atol=1e-5, name="bias"),
    OpCase("_FusedConv2D", _fused_conv(["BiasAdd", "Relu"], [1, 1, 2, 2], "SAME", "NCHW"),
           [_nchw(_cx), _cw, _cb],
           lambda x, w, b: _nchw(np.maximum(_ref_conv(np.transpose(x, (0, 2, 3, 1)), w, (2, 2), "SAME")
                                            + b, 0)), rtol=1e-5, atol=1e-5, name="nchw"),
]
