"""The special functions of tf.math.special beyond the modified Bessel I: Bessel J, Y and K of orders
0 and 1 (K also exponentially scaled), Dawson's integral, the exponential integral, the Fresnel
integrals and Spence's function.

OpDefs and wrappers; `kf.math.special` (kernflow.core.math) gathers them with the Bessel I wrappers of
math_ops_more. CPU kernels are in kernflow.kernels.cpu.special_functions (host only: no GPU kernels
yet), gradients in kernflow.core.grads.special_functions_grad.
"""

from __future__ import annotations

from kernflow.core.framework.op_def_registry import register_op
from kernflow.core.ops import common_shapes
from kernflow.core.ops.math_ops_elementwise import _unary

# op type -> (python name, what y is); every one is elementwise over {half, float, double}.
_FUNCTIONS = {
    "BesselJ0": ("bessel_j0", "J0(x), the Bessel function of the 1st kind, order 0"),
    "BesselJ1": ("bessel_j1", "J1(x), the Bessel function of the 1st kind, order 1"),
    "BesselY0": ("bessel_y0", "Y0(x), the Bessel function of the 2nd kind, order 0 (-inf at 0, NaN below)"),
    "BesselY1": ("bessel_y1", "Y1(x), the Bessel function of the 2nd kind, order 1 (-inf at 0, NaN below)"),
    "BesselK0": ("bessel_k0", "K0(x), the modified Bessel function of the 2nd kind, order 0 (inf at 0, "
                              "NaN below)"),
    "BesselK0e": ("bessel_k0e", "exp(x) K0(x), the exponentially scaled K0 (inf at 0, NaN below)"),
    "BesselK1": ("bessel_k1", "K1(x), the modified Bessel function of the 2nd kind, order 1 (inf at 0, "
                              "NaN below)"),
    "BesselK1e": ("bessel_k1e", "exp(x) K1(x), the exponentially scaled K1 (inf at 0, NaN below)"),
    "Dawsn": ("dawsn", "Dawson's integral exp(-x^2) int_0^x exp(t^2) dt"),
    "Expint": ("expint", "the exponential integral Ei(x) = -int_{-x}^inf exp(-t) / t dt "
                         "(-inf at 0, NaN below)"),
    "FresnelCos": ("fresnel_cos", "Fresnel's cosine integral C(x) = int_0^x cos(pi t^2 / 2) dt"),
    "FresnelSin": ("fresnel_sin", "Fresnel's sine integral S(x) = int_0^x sin(pi t^2 / 2) dt"),
    "Spence": ("spence", "Spence's function int_1^x log(t) / (1 - t) dt = Li2(1 - x) (NaN below 0)"),
}
for _op, (_, _what) in _FUNCTIONS.items():
    register_op(_op, inputs=["x: T"], outputs=["y: T"], attrs=["T: {half, float, double}"],
                shape_fn=common_shapes.unchanged, doc=f"Returns {_what}, elementwise.")

__all__ = [py for py, _ in _FUNCTIONS.values()]

# Op types of this module: host only (kernel_contract.HOST_ONLY_OPS) until they get GPU kernels.
SPECIAL_FUNCTION_OPS = tuple(_FUNCTIONS)

(bessel_j0, bessel_j1, bessel_y0, bessel_y1, bessel_k0, bessel_k0e, bessel_k1, bessel_k1e, dawsn, expint,
 fresnel_cos, fresnel_sin, spence) = (_unary(_op, _py, _what) for _op, (_py, _what) in _FUNCTIONS.items())
