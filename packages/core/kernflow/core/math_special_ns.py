"""`kf.math.special` (tf.compat.v1.math.special): the special functions, as TF gathers them.

Named ``math_special_ns`` because `kf.math` is a module, not a package; kernflow.core.math attaches it as
``special``. The Bessel I functions are the ops of kf.math (kernflow.core.ops.math_ops_more); the rest
are kernflow.core.ops.math_ops_special_functions.
"""

from kernflow.core.ops.math_ops_more import bessel_i0, bessel_i0e, bessel_i1, bessel_i1e
from kernflow.core.ops.math_ops_special_functions import (bessel_j0, bessel_j1, bessel_k0, bessel_k0e,
                                                          bessel_k1, bessel_k1e, bessel_y0, bessel_y1,
                                                          dawsn, expint, fresnel_cos, fresnel_sin, spence)

__all__ = ["bessel_i0", "bessel_i0e", "bessel_i1", "bessel_i1e", "bessel_j0", "bessel_j1", "bessel_k0",
           "bessel_k0e", "bessel_k1", "bessel_k1e", "bessel_y0", "bessel_y1", "dawsn", "expint",
           "fresnel_cos", "fresnel_sin", "spence"]
