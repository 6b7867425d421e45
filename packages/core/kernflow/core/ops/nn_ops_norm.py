"""Fused batch normalization of `kf.nn`: FusedBatchNormV3 and its backprop.

Re-exported by `kernflow.core.ops.nn_ops`; CPU kernels are in kernflow.kernels.cpu.nn.
"""

from __future__ import annotations

from kernflow.core.framework import ops as _ops
from kernflow.core.framework import tensor_shape as _ts
from kernflow.core.framework.op_def_library import apply_op
from kernflow.core.framework.op_def_registry import register_op

__all__ = ["fused_batch_norm"]

_ATTRS = ["T: {half, float}", "U: {float}", "epsilon: float = 0.0001",
          "data_format: {'NHWC', 'NCHW'} = 'NHWC'", "is_training: bool = true"]


def _channels(op, x):
    if x.rank is None:
        return None
    return x.dim_values[1] if op.get_attr("data_format") == "NCHW" else x.dim_values[3]


def _vector_merge(op, dims, names):
    c = _ts.TensorShape([dims])
    for i, n in names:
        s = op.inputs[i].shape
        if s.rank is None:
            continue
        s = s.with_rank(1)
        if s.dim_values[0] == 0:
            continue  # empty mean/variance are allowed in training mode
        try:
            c = c.merge_with(s)
        except ValueError:
            raise ValueError(f"{n} must have the size of the channel dimension ({c.dim_values[0]}), "
                             f"got shape {s}") from None
    return c


def _fused_bn_shape(op):
    x = op.inputs[0].shape
    x = _ts.unknown_shape(4) if x.rank is None else x.with_rank(4)
    c = _vector_merge(op, _channels(op, x), [(1, "scale"), (2, "offset"), (3, "mean"),
                                             (4, "variance")])
    dims = list(x.dim_values)
    ch = 1 if op.get_attr("data_format") == "NCHW" else 3
    dims[ch] = c.dim_values[0]
    return [dims, c, c, c, c, _ts.TensorShape(None)]


def _fused_bn_grad_shape(op):
    dy = op.inputs[0].shape
    x = op.inputs[1].shape
    x = _ts.unknown_shape(4) if x.rank is None else x.with_rank(4)
    dy = _ts.unknown_shape(4) if dy.rank is None else dy.with_rank(4)
    x = x.merge_with(dy)
    c = _vector_merge(op, _channels(op, x), [(2, "scale"), (3, "reserve_space_1"),
                                             (4, "reserve_space_2")])
    return [x, c, c, [0], [0]]


register_op("FusedBatchNormV3",
            inputs=["x: T", "scale: U", "offset: U", "mean: U", "variance: U"],
            outputs=["y: T", "batch_mean: U", "batch_variance: U", "reserve_space_1: U",
                     "reserve_space_2: U", "reserve_space_3: U"],
            attrs=_ATTRS + ["exponential_avg_factor: float = 1.0"], shape_fn=_fused_bn_shape,
            doc="Batch normalization of a 4-D input over its batch and spatial dimensions. In "
                "training the batch statistics are used (batch_variance is the unbiased one, "
                "blended into `mean`/`variance` by exponential_avg_factor); otherwise the given "
                "mean and variance.")
register_op("FusedBatchNormGradV3",
            inputs=["y_backprop: T", "x: T", "scale: float", "reserve_space_1: U",
                    "reserve_space_2: U", "reserve_space_3: U"],
            outputs=["x_backprop: T", "scale_backprop: U", "offset_backprop: U",
                     "reserve_space_4: U", "reserve_space_5: U"],
            attrs=_ATTRS, shape_fn=_fused_bn_grad_shape,
            doc="FusedBatchNormV3 backprop, from the mean and (biased) variance it saved in "
                "reserve_space_1 and reserve_space_2.")


def fused_batch_norm(x, scale, offset, mean=None, variance=None, epsilon=0.001,
                     data_format="NHWC", is_training=True, name=None, exponential_avg_factor=1.0):
    """Batch normalization of a 4-D tensor in one op (FusedBatchNormV3).

    Args:
        x: 4-D float16 or float32 Tensor.
        scale, offset: 1-D float32 Tensors of the channel size (gamma and beta).
        mean, variance: 1-D float32 population statistics; required for inference or when
            exponential_avg_factor != 1.
        epsilon: added to the variance (raised to at least 1.001e-5, as in TF).
        data_format: "NHWC" or "NCHW".
        is_training: normalize with the batch statistics (True) or the given ones.
        name: op name (default "FusedBatchNormV3").
        exponential_avg_factor: weight of the batch statistics in the returned running ones.

    Returns:
        (y, mean, variance): the normalized tensor and the batch (training) or given statistics.

    Raises:
        ValueError: if mean/variance are missing where they are needed.
    """
    if (not is_training or exponential_avg_factor != 1.0) and (mean is None or variance is None):
        raise ValueError("Both 'mean' and 'variance' must be a 1-D tensor when is_training is "
                         "False or exponential_avg_factor != 1.0.")
    x = _ops.convert_to_tensor(x, name="input")
    scale = _ops.convert_to_tensor(scale, name="scale")
    offset = _ops.convert_to_tensor(offset, name="offset")
    from kernflow.core.ops import array_ops
    u = scale.dtype.base_dtype
    mean = array_ops.constant([], dtype=u) if mean is None else mean
    variance = array_ops.constant([], dtype=u) if variance is None else variance
    epsilon = max(float(epsilon), 1.001e-5)
    op = apply_op("FusedBatchNormV3", [x, scale, offset, mean, variance],
                  {"epsilon": epsilon, "exponential_avg_factor": float(exponential_avg_factor),
                   "data_format": data_format, "is_training": bool(is_training)}, name=name)
    return op.outputs[0], op.outputs[1], op.outputs[2]


def fused_batch_norm_grad(y_backprop, x, scale, reserve_space_1, reserve_space_2,
                          reserve_space_3, epsilon=0.0001, data_format="NHWC", is_training=True,
                          name=None):
    """Builds a `FusedBatchNormGradV3` op; returns (x_backprop, scale_backprop, offset_backprop)."""
    op = apply_op("FusedBatchNormGradV3",
                  [y_backprop, x, scale, reserve_space_1, reserve_space_2, reserve_space_3],
                  {"epsilon": epsilon, "data_format": data_format, "is_training": is_training},
                  name=name)
    return op.outputs[0], op.outputs[1], op.outputs[2]
