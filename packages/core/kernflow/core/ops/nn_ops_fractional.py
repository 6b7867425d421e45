"""Fractional pooling (Graham, "Fractional Max-Pooling", 2014): FractionalMaxPool, FractionalAvgPool.

OpDefs, shape functions and TF1's v1 wrappers; CPU kernels are in kernflow.kernels.cpu.nn_fractional
and gradients in kernflow.core.grads.nn_fractional_grad. The pooling regions along rows and columns
come from two boundary sequences a[0] = 0 < a[1] < ... < a[n] = length whose steps are K or K + 1
(K = floor(length / n), n = floor(length / ratio)); the ops return them beside the pooled values, and
the grad ops take them back.
"""

from __future__ import annotations

import math

from kernflow.core.framework import tensor_shape as _ts
from kernflow.core.framework.op_def_library import apply_op
from kernflow.core.framework.op_def_registry import register_op

__all__ = ["fractional_max_pool", "fractional_avg_pool"]

# Op types of this module: host only (no GPU kernels), like the other newer nn ops.
FRACTIONAL_POOL_OPS = ("FractionalMaxPool", "FractionalAvgPool", "FractionalMaxPoolGrad",
                       "FractionalAvgPoolGrad")

_S = _ts.TensorShape
_T = "T: {float, double, int32, int64}"


def check_pooling_ratio(op_type, ratio):
    """The pooling ratio as floats; ValueError unless it has 4 entries >= 1 with batch and depth 1."""
    ratio = [float(r) for r in ratio]
    if len(ratio) != 4:
        raise ValueError(f"{op_type}: pooling_ratio must have 4 elements (one per dimension of NHWC), "
                         f"got {ratio}")
    if any(r < 1 for r in ratio):
        raise ValueError(f"{op_type}: pooling_ratio cannot be smaller than 1, got {ratio}")
    if ratio[0] != 1 or ratio[3] != 1:
        raise ValueError(f"{op_type}: pooling on the batch and depth dimensions is not supported: "
                         f"pooling_ratio[0] and pooling_ratio[3] must be 1, got {ratio}")
    return ratio


def pooled_size(length, ratio):
    """floor(length / ratio), as TF computes the output size."""
    return int(math.floor(length / ratio))


def _fractional_pool_shape(op):
    x = op.inputs[0].shape.with_rank(4).dim_values
    ratio = check_pooling_ratio(op.type, op.get_attr("pooling_ratio"))
    out = [None if d is None else pooled_size(d, r) for d, r in zip(x, ratio)]
    for d, o in zip(x, out):
        if o is not None and o <= 0:
            raise ValueError(f"{op.type}: input {op.inputs[0].shape} pooled by {ratio} has an empty "
                             f"dimension {out}")
    seq = [_S([None if o is None else o + 1]) for o in out[1:3]]
    return [_S(out)] + seq


def _max_pool_grad_shape(op):
    op.inputs[1].shape.with_rank(4)
    op.inputs[2].shape.with_rank(4)
    return [op.inputs[0].shape.with_rank(4)]


def _avg_pool_grad_shape(op):
    from kernflow.core.framework import tensor_util
    op.inputs[0].shape.with_rank(1).merge_with(_S([4]))
    op.inputs[1].shape.with_rank(4)
    return [tensor_util.constant_value_as_shape(op.inputs[0]).with_rank(4)]


_POOL_ATTRS = ["pooling_ratio: list(float)", "pseudo_random: bool = false", "overlapping: bool = false",
               "deterministic: bool = false", "seed: int = 0", "seed2: int = 0", _T]
_POOL_DOC = ("{what} of value [batch, height, width, depth] over regions whose row and column boundaries "
             "are row_pooling_sequence and col_pooling_sequence (int64, one longer than the pooled "
             "dimension, starting at 0 and ending at its length, steps of K or K + 1 with "
             "K = floor(alpha), alpha = length / floor(length / ratio)). The steps are a random "
             "permutation (pseudo_random false) or ceil(alpha * (i + u)) - ceil(alpha * u) for one "
             "uniform u (pseudo_random true). A region spans [a[i], a[i+1]), with overlapping its end "
             "row a[i+1] as well. pooling_ratio is [1, row ratio, col ratio, 1], each >= 1. The "
             "sequences are drawn anew each run from the node's generator (seed, seed2); with "
             "deterministic the same ones every run (seeds both 0 then pick a fixed random key), and "
             "without it the seeds must be 0.")
register_op("FractionalMaxPool", inputs=["value: T"],
            outputs=["output: T", "row_pooling_sequence: int64", "col_pooling_sequence: int64"],
            attrs=_POOL_ATTRS, shape_fn=_fractional_pool_shape, stateful=True,
            doc=_POOL_DOC.format(what="Max pooling"))
register_op("FractionalAvgPool", inputs=["value: T"],
            outputs=["output: T", "row_pooling_sequence: int64", "col_pooling_sequence: int64"],
            attrs=_POOL_ATTRS, shape_fn=_fractional_pool_shape, stateful=True,
            doc=_POOL_DOC.format(what="Average pooling"))
register_op("FractionalMaxPoolGrad",
            inputs=["orig_input: T", "orig_output: T", "out_backprop: T", "row_pooling_sequence: int64",
                    "col_pooling_sequence: int64"],
            outputs=["output: T"], attrs=["overlapping: bool = false", _T], shape_fn=_max_pool_grad_shape,
            doc="The gradient of FractionalMaxPool: each out_backprop value goes to the first maximum "
                "(in row-major order) of its pooling region of orig_input.")
register_op("FractionalAvgPoolGrad",
            inputs=["orig_input_tensor_shape: int64", "out_backprop: T", "row_pooling_sequence: int64",
                    "col_pooling_sequence: int64"],
            outputs=["output: T"], attrs=["overlapping: bool = false", _T], shape_fn=_avg_pool_grad_shape,
            doc="The gradient of FractionalAvgPool: each out_backprop value is spread evenly over its "
                "pooling region of an input of shape orig_input_tensor_shape.")


def _fractional_pool(op_type, value, pooling_ratio, pseudo_random, overlapping, deterministic, seed, seed2,
                     name):
    ratio = check_pooling_ratio(op_type, pooling_ratio)
    attrs = {"pooling_ratio": ratio, "pseudo_random": bool(pseudo_random), "overlapping": bool(overlapping),
             "deterministic": bool(deterministic), "seed": int(seed or 0), "seed2": int(seed2 or 0)}
    return tuple(apply_op(op_type, [value], attrs, name=name).outputs)


def fractional_max_pool(value, pooling_ratio, pseudo_random=False, overlapping=False, deterministic=False,
                        seed=0, seed2=0, name=None):
    """Fractional max pooling over rows and columns (TF1's v1 `tf.nn.fractional_max_pool`).

    Args:
        value: 4-D Tensor [batch, height, width, channels] of float32, float64, int32 or int64.
        pooling_ratio: 4 floats [1.0, row ratio, col ratio, 1.0], each >= 1: the output has
            floor(height / row ratio) rows and floor(width / col ratio) columns.
        pseudo_random: draw the region boundaries pseudo-randomly (one uniform offset) instead of
            as a random permutation of region sizes.
        overlapping: regions share their boundary row and column.
        deterministic: the same regions every run (for tests); without it seed and seed2 must be 0.
        seed, seed2: the generator's seeds (both 0: nondeterministic).
        name: op name.

    Returns:
        (output, row_pooling_sequence, col_pooling_sequence): the pooled Tensor of value's dtype and
        the int64 region boundaries along rows and columns.

    Raises:
        ValueError: a bad pooling_ratio or input rank.
        InvalidArgumentError (at run time): non-zero seeds without deterministic, or an input too small
            for the ratio.
    """
    return _fractional_pool("FractionalMaxPool", value, pooling_ratio, pseudo_random, overlapping,
                            deterministic, seed, seed2, name)


def fractional_avg_pool(value, pooling_ratio, pseudo_random=False, overlapping=False, deterministic=False,
                        seed=0, seed2=0, name=None):
    """Fractional average pooling over rows and columns (TF1's v1 `tf.nn.fractional_avg_pool`).

    Args and Returns as `fractional_max_pool`, the regions averaged instead of maximised.
    """
    return _fractional_pool("FractionalAvgPool", value, pooling_ratio, pseudo_random, overlapping,
                            deterministic, seed, seed2, name)
