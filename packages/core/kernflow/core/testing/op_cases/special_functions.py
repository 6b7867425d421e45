"""Contract cases of kernflow.core.ops.math_ops_special_functions (tf.math.special): each op against
tabulated values (from Cephes via scipy.special, which TF's Eigen kernels port), including its
domain's edges, and its gradient by finite differences.

Zeros of J0 and J1 and of Ei are tabulated too: there only the absolute tolerance means anything.
"""

import numpy as np

from kernflow.core.ops import math_ops_special_functions as sf
from kernflow.core.testing.kernel_contract import OpCase

_NAN, _INF = np.nan, np.inf
_K_X = [1e-10, 0.5, 2.0, 15.0, 100.0, 0.0, -1.0]
_K_GRAD = [0.3, 1.0, 5.0, 30.0]

# op type -> (wrapper, inputs, tabulated outputs, gradient inputs)
_TABLE = {
    "BesselJ0": (sf.bessel_j0, [0.0, 0.5, -2.0, 2.404825557695773, 15.0, 100.0, _NAN],
                 [1.0, 0.938469807240813, 0.22389077914123562, 0.0, -0.014224472826780597,
                  0.01998585030422333, _NAN], [-3.0, -0.5, 0.0, 0.7, 5.0, 20.0]),
    "BesselJ1": (sf.bessel_j1, [0.0, 0.5, -2.0, 3.8317059702075125, 15.0, 100.0],
                 [0.0, 0.24226845767487387, -0.5767248077568734, 0.0, 0.20510403861352278,
                  -0.0771453520141123], [-3.0, -0.5, 0.0, 0.7, 5.0, 20.0]),
    "BesselY0": (sf.bessel_y0, [0.5, 2.0, 15.0, 100.0, 0.0, -1.0],
                 [-0.4445187335067066, 0.5103756726497451, 0.20546429603891825, -0.0772443133650831,
                  -_INF, _NAN], [0.3, 1.0, 5.0, 20.0]),
    "BesselY1": (sf.bessel_y1, [0.5, 2.0, 15.0, 100.0, 0.0, -1.0],
                 [-1.4714723926702433, -0.10703243154093756, 0.021073628036873716, -0.02037231200275932,
                  -_INF, _NAN], [0.3, 1.0, 5.0, 20.0]),
    "BesselK0": (sf.bessel_k0, _K_X, [23.141782445598864, 0.9244190712276656, 0.1138938727495334,
                                      9.819536482396435e-08, 4.6566282291759025e-45, _INF, _NAN], _K_GRAD),
    "BesselK0e": (sf.bessel_k0e, _K_X, [23.14178244791304, 1.5241093857739092, 0.8415682150707712,
                                        0.3210023535057763, 0.1251756216591266, _INF, _NAN], _K_GRAD),
    "BesselK1": (sf.bessel_k1, _K_X, [10000000000.0, 1.6564411200033007, 0.13986588181652246,
                                      1.014172936976209e-07, 4.67985373563691e-45, _INF, _NAN], _K_GRAD),
    "BesselK1e": (sf.bessel_k1e, _K_X, [10000000001.0, 2.7310097082117855, 1.0334768470686888,
                                        0.3315348949666291, 0.12579995047957854, _INF, _NAN], _K_GRAD),
    "Dawsn": (sf.dawsn, [0.0, 0.5, -1.5, 4.0, 30.0, _INF],
              [0.0, 0.4244363835020223, -0.42824907108539867, 0.1293480012360051, 0.016675941401059196, 0.0],
              [-3.0, -0.5, 0.0, 0.7, 5.0, 20.0]),
    "Expint": (sf.expint, [1e-10, 0.5, 0.3725074107813666, 5.0, 60.0, 0.0, -1.0],
               [-22.448635264938925, 0.45421990486317354, 0.0, 40.18527535580317, 1.9361822139292765e+24,
                -_INF, _NAN], [0.1, 0.5, 2.0, 4.0]),
    "FresnelCos": (sf.fresnel_cos, [0.0, 0.5, -1.2, 3.0, 100.0, -_INF],
                   [0.0, 0.4923442258714464, -0.7154377229230735, 0.6057207892976857, 0.4999998986788179,
                    -0.5], [-3.0, -0.5, 0.0, 0.7, 2.0, 5.0]),
    "FresnelSin": (sf.fresnel_sin, [0.0, 0.5, -1.2, 3.0, 100.0, _INF],
                   [0.0, 0.06473243285999929, -0.6234009185462498, 0.496312998967375, 0.49681690114783755,
                    0.5], [-3.0, -0.5, 0.0, 0.7, 2.0, 5.0]),
    "Spence": (sf.spence, [0.0, 0.5, 1.0, 2.0, 50.0, -1.0],
               [1.6449340668482264, 0.5822405264650135, 0.0, -0.8224670334241142, -9.197761709530997, _NAN],
               [0.1, 0.5, 1.0, 2.0, 10.0]),
}


def _cases(op_type, fn, xs, ys, grad_xs):
    table = np.array(ys)
    return [
        OpCase(op_type, fn, [np.array(xs)], lambda x: table, rtol=1e-9, atol=1e-13),
        OpCase(op_type, fn, [np.array(xs, np.float32)], lambda x: table.astype(np.float32), rtol=1e-6,
               atol=1e-6, name="float32"),
        OpCase(op_type, fn, [np.array(grad_xs)], None, grad=True, name="grad"),
    ]


CASES = [c for op_type, row in _TABLE.items() for c in _cases(op_type, *row)]
