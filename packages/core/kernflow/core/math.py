"""`kf.math`: TF1's `tf.math` namespace, gathered from the op families that implement each name, and its
`special` submodule (kernflow.core.math_special_ns).

Not available (a TF2-only helper kernflow lacks): sobol_sample.
"""

from kernflow.core import math_special_ns as special
from kernflow.core.ops.array_ops_extra import invert_permutation
from kernflow.core.ops.math_ops_composite import (accumulate_n, angle, bincount, confusion_matrix,
                                                  cumulative_logsumexp, imag, is_non_decreasing,
                                                  is_strictly_increasing, multiply_no_nan, polyval,
                                                  real, reciprocal_no_nan, reduce_euclidean_norm,
                                                  reduce_std, reduce_variance, unsorted_segment_mean,
                                                  unsorted_segment_sqrt_n, xlog1py)
from kernflow.core.ops.math_ops_elementwise import (abs, add, add_n, ceil, conj, cos, divide, equal,
                                                    exp, expm1, floor, floordiv, floormod, greater,
                                                    greater_equal, less, less_equal, log, log1p,
                                                    logical_and, logical_not, logical_or,
                                                    logical_xor, maximum, minimum, mod, multiply,
                                                    negative, not_equal, pow, reciprocal, round,
                                                    rsqrt, scalar_mul, sigmoid, sign, sin, sqrt,
                                                    square, squared_difference, subtract, tanh,
                                                    truediv)
from kernflow.core.ops.math_ops_reduce import (argmax, argmin, count_nonzero, cumprod, cumsum,
                                               reduce_all, reduce_any, reduce_logsumexp, reduce_max,
                                               reduce_mean, reduce_min, reduce_prod, reduce_sum)
from kernflow.core.ops.math_ops_special import (acos, acosh, asin, asinh, atan, atan2, atanh, cosh,
                                                digamma, erf, erfc, is_finite, is_inf, is_nan,
                                                lbeta, lgamma, log_sigmoid, rint, sinh, tan,
                                                truncatediv, truncatemod, xdivy, xlogy)
from kernflow.core.ops.math_ops_special import div_no_nan as divide_no_nan
from kernflow.core.ops.math_ops_more import (bessel_i0, bessel_i0e, bessel_i1, bessel_i1e, betainc, erfcinv,
                                             erfinv, igamma, igammac, ndtri, nextafter, polygamma, zeta)
from kernflow.core.ops.misc_ops_tf2 import approx_max_k, approx_min_k
from kernflow.core.ops.nn_ops import in_top_k, log_softmax, softmax, softplus, softsign, top_k
from kernflow.core.ops.nn_ops_impl import l2_normalize, zero_fraction
from kernflow.core.ops.segment_ops import (segment_max, segment_mean, segment_min, segment_prod,
                                           segment_sum, unsorted_segment_max, unsorted_segment_min,
                                           unsorted_segment_prod, unsorted_segment_sum)

__all__ = ["abs", "accumulate_n", "acos", "acosh", "add", "add_n", "angle", "argmax", "argmin", "asin",
           "asinh", "atan", "atan2", "atanh", "bincount", "ceil", "confusion_matrix", "conj", "cos", "cosh",
           "count_nonzero", "cumprod", "cumsum", "cumulative_logsumexp", "digamma", "divide",
           "divide_no_nan", "equal", "erf", "erfc", "exp", "expm1", "floor", "floordiv", "floormod",
           "greater", "greater_equal", "imag", "in_top_k", "invert_permutation", "is_finite", "is_inf",
           "is_nan", "is_non_decreasing", "is_strictly_increasing", "l2_normalize", "lbeta", "less",
           "less_equal", "lgamma", "log", "log1p", "log_sigmoid", "log_softmax", "logical_and",
           "logical_not", "logical_or", "logical_xor", "maximum", "minimum", "mod", "multiply",
           "multiply_no_nan", "negative", "not_equal", "polyval", "pow", "real", "reciprocal",
           "reciprocal_no_nan", "reduce_all", "reduce_any", "reduce_euclidean_norm", "reduce_logsumexp",
           "reduce_max", "reduce_mean", "reduce_min", "reduce_prod", "reduce_std", "reduce_sum",
           "reduce_variance", "rint", "round", "rsqrt", "scalar_mul", "segment_max", "segment_mean",
           "segment_min", "segment_prod", "segment_sum", "sigmoid", "sign", "sin", "sinh", "softmax",
           "softplus", "softsign", "sqrt", "square", "squared_difference", "subtract", "tan", "tanh",
           "top_k", "truediv", "truncatediv", "truncatemod", "unsorted_segment_max",
           "unsorted_segment_mean", "unsorted_segment_min", "unsorted_segment_prod",
           "unsorted_segment_sqrt_n", "unsorted_segment_sum", "xdivy", "xlog1py", "xlogy", "zero_fraction"]
__all__ += ["approx_max_k", "approx_min_k"]
__all__ += ["bessel_i0", "bessel_i0e", "bessel_i1", "bessel_i1e", "betainc", "erfcinv", "erfinv", "igamma",
            "igammac", "ndtri", "nextafter", "polygamma", "zeta"]
