"""Neural-network ops (`kf.nn`): activations, softmax, bias_add, losses, top_k.

OpDefs and wrappers; convolutions and pooling live in `nn_ops_conv`, composite functions
(moments, batch_normalization, dropout, embedding_lookup...) in `nn_ops_impl`; both are
re-exported here. CPU kernels are in kernflow.kernels.cpu.nn.
"""

from __future__ import annotations

from kernflow.core.framework import dtypes as _dtypes
from kernflow.core.framework import errors as _errors
from kernflow.core.framework import ops as _ops
from kernflow.core.framework import tensor_shape as _ts
from kernflow.core.framework import tensor_util
from kernflow.core.framework.op_def_library import apply_op
from kernflow.core.framework.op_def_registry import register_op
from kernflow.core.ops import common_shapes

__all__ = [
    "relu", "relu6", "elu", "selu", "softplus", "softsign", "leaky_relu", "swish", "sigmoid",
    "tanh", "softmax", "log_softmax", "bias_add", "l2_loss", "softmax_cross_entropy_with_logits",
    "softmax_cross_entropy_with_logits_v2", "sparse_softmax_cross_entropy_with_logits", "top_k",
    "in_top_k",
]

_REAL = "T: realnumbertype"
_FLOAT = "T: {half, float, double}"


def _merge_inputs(op):
    """One output whose shape is the merge of every input's shape."""
    s = _ts.TensorShape(None)
    for t in op.inputs:
        try:
            s = s.merge_with(t.shape)
        except ValueError:
            raise ValueError(f"Incompatible shapes: {s} vs. {t.shape}") from None
    return [s]


# ------------------------------------------------------------------------------ activations
for _name, _t, _doc in (
        ("Relu", _REAL, "Computes rectified linear: max(features, 0)."),
        ("Relu6", _REAL, "Computes rectified linear 6: min(max(features, 0), 6)."),
        ("Elu", _FLOAT, "Computes exponential linear: features if > 0 else exp(features) - 1."),
        ("Selu", _FLOAT, "Computes scaled exponential linear: scale * elu-like(features, alpha)."),
        ("Softplus", _FLOAT, "Computes softplus: log(exp(features) + 1)."),
        ("Softsign", _FLOAT, "Computes softsign: features / (abs(features) + 1).")):
    register_op(_name, inputs=["features: T"], outputs=["activations: T"], attrs=[_t],
                shape_fn=common_shapes.unchanged, doc=_doc)
register_op("LeakyRelu", inputs=["features: T"], outputs=["activations: T"],
            attrs=["alpha: float = 0.2", _FLOAT], shape_fn=common_shapes.unchanged,
            doc="Computes leaky rectified linear: features if > 0 else alpha * features.")

# Gradients of the activations (used by the gradient functions).
for _name, _in, _t, _doc in (
        ("ReluGrad", "features", _REAL, "Relu backprop: gradients * (features > 0)."),
        ("Relu6Grad", "features", _REAL, "Relu6 backprop: gradients * (0 < features < 6)."),
        ("EluGrad", "outputs", _FLOAT, "Elu backprop from its outputs: gradients * (outputs + 1) "
                                       "where outputs <= 0, else gradients."),
        ("SeluGrad", "outputs", _FLOAT, "Selu backprop from its outputs."),
        ("SoftplusGrad", "features", _FLOAT, "Softplus backprop: gradients * sigmoid(features)."),
        ("SoftsignGrad", "features", _FLOAT,
         "Softsign backprop: gradients / (1 + abs(features)) ** 2.")):
    register_op(_name, inputs=["gradients: T", f"{_in}: T"], outputs=["backprops: T"], attrs=[_t],
                shape_fn=_merge_inputs, doc=_doc)
register_op("LeakyReluGrad", inputs=["gradients: T", "features: T"], outputs=["backprops: T"],
            attrs=["alpha: float = 0.2", _FLOAT], shape_fn=_merge_inputs,
            doc="LeakyRelu backprop: gradients where features > 0, else alpha * gradients.")


def relu(features, name=None):
    """Computes rectified linear: `max(features, 0)`.

    Args:
        features: a real-number Tensor.
        name: op name (default "Relu").

    Returns:
        A Tensor of the same type and shape as `features`.
    """
    return apply_op("Relu", [features], name=name).outputs[0]


def relu6(features, name=None):
    """Computes rectified linear 6: `min(max(features, 0), 6)`.

    Args:
        features: a real-number Tensor.
        name: op name (default "Relu6").
    """
    with _ops.name_scope(name, "Relu6", [features]) as name:
        return apply_op("Relu6", [features], name=name).outputs[0]


def elu(features, name=None):
    """Computes exponential linear: `features` if > 0, else `exp(features) - 1`."""
    return apply_op("Elu", [features], name=name).outputs[0]


def selu(features, name=None):
    """Computes scaled exponential linear: `scale * alpha * (exp(features) - 1)` if < 0, else
    `scale * features` (alpha ~ 1.6733, scale ~ 1.0507)."""
    return apply_op("Selu", [features], name=name).outputs[0]


def softplus(features, name=None):
    """Computes softplus: `log(exp(features) + 1)`, without overflow for large features."""
    return apply_op("Softplus", [features], name=name).outputs[0]


def softsign(features, name=None):
    """Computes softsign: `features / (abs(features) + 1)`."""
    return apply_op("Softsign", [features], name=name).outputs[0]


def leaky_relu(features, alpha=0.2, name=None):
    """Computes leaky rectified linear: `features` if > 0, else `alpha * features`.

    Args:
        features: a Tensor; integer features are cast to float32 first.
        alpha: slope of the activation for features < 0 (a Python number).
        name: op name (default "LeakyRelu").
    """
    with _ops.name_scope(name, "LeakyRelu", [features, alpha]) as name:
        features = _ops.convert_to_tensor(features, name="features")
        if features.dtype.is_integer:
            from kernflow.core.ops import math_ops
            features = math_ops.cast(features, _dtypes.float32)
        return apply_op("LeakyRelu", [features], {"alpha": alpha}, name=name).outputs[0]


def swish(features, name=None):
    """Computes the Swish (SiLU) activation: `features * sigmoid(features)`."""
    from kernflow.core.ops import math_ops
    with _ops.name_scope(name, "swish", [features]) as name:
        features = _ops.convert_to_tensor(features, name="features")
        return math_ops.multiply(features, math_ops.sigmoid(features), name=name)


def sigmoid(x, name=None):
    """Computes `1 / (1 + exp(-x))` elementwise (the same op as `kf.sigmoid`)."""
    from kernflow.core.ops import math_ops
    return math_ops.sigmoid(x, name=name)


def tanh(x, name=None):
    """Computes hyperbolic tangent elementwise (the same op as `kf.tanh`)."""
    from kernflow.core.ops import math_ops
    return math_ops.tanh(x, name=name)


def _grad_op(op_type):
    def fn(gradients, x, name=None, **attrs):
        return apply_op(op_type, [gradients, x], attrs, name=name).outputs[0]
    fn.__name__ = op_type
    fn.__doc__ = f"Builds a `{op_type}` op (backprop of an activation)."
    return fn


relu_grad = _grad_op("ReluGrad")
relu6_grad = _grad_op("Relu6Grad")
elu_grad = _grad_op("EluGrad")
selu_grad = _grad_op("SeluGrad")
softplus_grad = _grad_op("SoftplusGrad")
softsign_grad = _grad_op("SoftsignGrad")
leaky_relu_grad = _grad_op("LeakyReluGrad")


# ---------------------------------------------------------------------------------- softmax
def _rank_at_least_1(op):
    s = op.inputs[0].shape
    if s.rank is not None and s.rank < 1:
        raise ValueError("Shape must be at least rank 1 but is rank 0")
    return [s]


register_op("Softmax", inputs=["logits: T"], outputs=["softmax: T"], attrs=[_FLOAT],
            shape_fn=_rank_at_least_1,
            doc="Computes softmax over the last dimension: exp(logits) / sum(exp(logits), -1).")
register_op("LogSoftmax", inputs=["logits: T"], outputs=["logsoftmax: T"], attrs=[_FLOAT],
            shape_fn=_rank_at_least_1,
            doc="Computes log softmax over the last dimension: logits - log(sum(exp(logits), -1)).")


def _swap_last(x, axis, fn, name):
    """Applies `fn` (an op on the last dimension) along `axis` by transposing around it."""
    rank = x.shape.rank
    if rank is None:
        raise ValueError(f"softmax along axis {axis} needs a known rank; got shape {x.shape}")
    if not -rank <= axis < rank:
        raise _errors.InvalidArgumentError(
            None, None, f"Dimension ({axis}) must be in the range [{-rank}, {rank}) where {rank} "
                        f"is the number of dimensions in the input.")
    axis %= rank
    if axis == rank - 1:
        return fn(x, name=name)
    from kernflow.core.ops import array_ops
    perm = list(range(rank))
    perm[axis], perm[-1] = perm[-1], perm[axis]
    y = fn(array_ops.transpose(x, perm))
    return array_ops.transpose(y, perm, name=name)


def _softmax_op(logits, name=None):
    return apply_op("Softmax", [logits], name=name).outputs[0]


def _log_softmax_op(logits, name=None):
    return apply_op("LogSoftmax", [logits], name=name).outputs[0]


def _softmax_wrapper(logits, axis, dim, name, fn):
    if axis is not None and dim is not None and axis != dim:
        raise ValueError("Cannot specify both 'axis' and 'dim'")
    axis = axis if axis is not None else dim
    axis = -1 if axis is None else int(axis)
    logits = _ops.convert_to_tensor(logits)
    if axis == -1:
        return fn(logits, name=name)
    return _swap_last(logits, axis, fn, name)


def softmax(logits, axis=None, name=None, dim=None):
    """Computes softmax activations: `exp(logits) / reduce_sum(exp(logits), axis)`.

    Args:
        logits: a non-empty float Tensor.
        axis: the dimension softmax is computed over (default -1, the last).
        name: op name (default "Softmax").
        dim: deprecated alias of `axis`.

    Returns:
        A Tensor of the type and shape of `logits`.

    Raises:
        InvalidArgumentError: if `axis` is out of range for the rank of `logits`.
    """
    return _softmax_wrapper(logits, axis, dim, name, _softmax_op)


def log_softmax(logits, axis=None, name=None, dim=None):
    """Computes log softmax activations: `logits - log(reduce_sum(exp(logits), axis))`.

    Args:
        logits: a non-empty float Tensor.
        axis: the dimension computed over (default -1, the last).
        name: op name (default "LogSoftmax").
        dim: deprecated alias of `axis`.
    """
    return _softmax_wrapper(logits, axis, dim, name, _log_softmax_op)


# ---------------------------------------------------------------------------------- bias_add
def _bias_add_shape(op):
    v = op.inputs[0].shape
    b = op.inputs[1].shape.with_rank(1)
    if v.rank is None:
        return [v]
    if v.rank < 2:
        raise ValueError(f"Shape must be at least rank 2 but is rank {v.rank}")
    dims = list(v.dim_values)
    c = 1 if op.get_attr("data_format") == "NCHW" else -1
    bd = b.dim_values[0]
    if dims[c] is not None and bd is not None and dims[c] != bd:
        raise ValueError(f"Dimensions must be equal, but are {dims[c]} and {bd}")
    dims[c] = dims[c] if dims[c] is not None else bd
    return [dims]


def _bias_add_grad_shape(op):
    s = op.inputs[0].shape
    if s.rank is None:
        return [[None]]
    if s.rank < 2:
        raise ValueError(f"Shape must be at least rank 2 but is rank {s.rank}")
    return [[s.dim_values[1] if op.get_attr("data_format") == "NCHW" else s.dim_values[-1]]]


register_op("BiasAdd", inputs=["value: T", "bias: T"], outputs=["output: T"],
            attrs=["T: numbertype", "data_format: {'NHWC', 'NCHW'} = 'NHWC'"],
            shape_fn=_bias_add_shape,
            doc="Adds the 1-D `bias` along the channel dimension of `value` (last for NHWC, "
                "dimension 1 for NCHW).")
register_op("BiasAddGrad", inputs=["out_backprop: T"], outputs=["output: T"],
            attrs=["T: numbertype", "data_format: {'NHWC', 'NCHW'} = 'NHWC'"],
            shape_fn=_bias_add_grad_shape,
            doc="BiasAdd backprop: sums `out_backprop` over every dimension but the channel one.")


def bias_add(value, bias, data_format=None, name=None):
    """Adds `bias` to `value` along its channel dimension.

    Args:
        value: a Tensor of rank >= 2.
        bias: a 1-D Tensor whose size is the channel dimension of `value`; same type.
        data_format: "NHWC" (channels last, the default) or "NCHW" (channels at dimension 1).
        name: op name (default "BiasAdd").

    Raises:
        ValueError: if the bias size does not match the channel dimension.
    """
    with _ops.name_scope(name, "BiasAdd", [value, bias]) as name:
        attrs = {}
        if data_format is not None:
            fmt = data_format.decode() if isinstance(data_format, bytes) else str(data_format)
            if fmt.startswith("NC"):
                fmt = "NCHW"
            elif fmt.startswith("N") and fmt.endswith("C"):
                fmt = "NHWC"
            else:
                raise ValueError("data_format must be of the form `N...C` or `NC...`")
            attrs["data_format"] = fmt
        value = _ops.convert_to_tensor(value, name="input")
        bias = _ops.convert_to_tensor(bias, dtype=value.dtype, name="bias")
        return apply_op("BiasAdd", [value, bias], attrs, name=name).outputs[0]


def bias_add_grad(out_backprop, data_format="NHWC", name=None):
    """Builds a `BiasAddGrad` op (the gradient of bias_add with respect to the bias)."""
    return apply_op("BiasAddGrad", [out_backprop], {"data_format": data_format},
                    name=name).outputs[0]


# ------------------------------------------------------------------------------------ losses
register_op("L2Loss", inputs=["t: T"], outputs=["output: T"], attrs=[_FLOAT],
            shape_fn=common_shapes.scalar, doc="Computes sum(t ** 2) / 2, a scalar.")


def l2_loss(t, name=None):
    """Computes half the L2 norm of a tensor without the sqrt: `sum(t ** 2) / 2`.

    Args:
        t: a float Tensor.
        name: op name (default "L2Loss").

    Returns:
        A scalar Tensor of the type of `t`.
    """
    return apply_op("L2Loss", [t], name=name).outputs[0]


def _xent_shape(op):
    f = op.inputs[0].shape.with_rank(2) if op.inputs[0].shape.rank is not None \
        else _ts.unknown_shape(2)
    lab = op.inputs[1].shape.with_rank(2) if op.inputs[1].shape.rank is not None \
        else _ts.unknown_shape(2)
    try:
        s = _ts.broadcast_shape(f, lab)
    except ValueError:
        raise ValueError(f"logits and labels must be broadcastable: logits_size={f} "
                         f"labels_size={lab}") from None
    return [s.dim_values[:1], s]


def _sparse_xent_shape(op):
    f = op.inputs[0].shape
    f = _ts.unknown_shape(2) if f.rank is None else f.with_rank(2)
    lab = op.inputs[1].shape
    lab = _ts.unknown_shape(1) if lab.rank is None else lab.with_rank(1)
    try:
        batch = _ts.TensorShape(f.dim_values[:1]).merge_with(lab)
    except ValueError:
        raise ValueError(f"logits and labels must have the same first dimension, got logits shape "
                         f"{f} and labels shape {lab}") from None
    return [batch, batch.concatenate(f.dim_values[1:])]


register_op("SoftmaxCrossEntropyWithLogits", inputs=["features: T", "labels: T"],
            outputs=["loss: T", "backprop: T"], attrs=[_FLOAT], shape_fn=_xent_shape,
            doc="Softmax cross entropy of [batch, classes] logits (`features`) against a "
                "probability distribution `labels` (broadcastable): loss [batch] and its gradient "
                "softmax(features) - labels.")
register_op("SparseSoftmaxCrossEntropyWithLogits", inputs=["features: T", "labels: Tlabels"],
            outputs=["loss: T", "backprop: T"],
            attrs=[_FLOAT, "Tlabels: {int32, int64} = int64"], shape_fn=_sparse_xent_shape,
            doc="Softmax cross entropy of [batch, classes] logits against integer class labels "
                "[batch] in [0, classes): loss [batch] and backprop softmax - one_hot(labels).")


def _ensure_xent_args(name, sentinel, labels, logits):
    if sentinel is not None:
        raise ValueError(f"Only call `{name}` with named arguments (labels=..., logits=..., ...)")
    if labels is None or logits is None:
        raise ValueError("Both labels and logits must be provided.")


def _xent_op(features, labels, name=None):
    """Builds a `SoftmaxCrossEntropyWithLogits` op; returns (loss, backprop)."""
    op = apply_op("SoftmaxCrossEntropyWithLogits", [features, labels], name=name)
    return op.outputs[0], op.outputs[1]


def _sparse_xent_op(features, labels, name=None):
    """Builds a `SparseSoftmaxCrossEntropyWithLogits` op; returns (loss, backprop)."""
    op = apply_op("SparseSoftmaxCrossEntropyWithLogits", [features, labels], name=name)
    return op.outputs[0], op.outputs[1]


def _outer_shape(x, rank):
    """The shape of `x` without its last dimension, as a list (static) or a 1-D Tensor."""
    from kernflow.core.ops import array_ops, math_ops
    s = x.shape
    if s.rank is not None and all(d is not None for d in s.dim_values[:-1]):
        return list(s.dim_values[:-1])
    full = array_ops.shape(x)
    if rank is not None:
        return array_ops.slice(full, [0], [rank - 1])
    n = math_ops.subtract(array_ops.rank(x), 1)
    return array_ops.slice(full, [0], array_ops.expand_dims(n, 0))


def softmax_cross_entropy_with_logits_v2(labels, logits, axis=None, name=None, dim=None):
    """Computes softmax cross entropy between `logits` and `labels` (a distribution per row).

    Gradients flow into both `labels` and `logits`.

    Args:
        labels: a Tensor of the shape of `logits`; each slice along `axis` a valid probability
            distribution.
        logits: unscaled log probabilities.
        axis: the class dimension (default -1, the last).
        name: op name (default "softmax_cross_entropy_with_logits").
        dim: deprecated alias of `axis`.

    Returns:
        A Tensor of the shape of `logits` without its class dimension, of the type of `logits`.
    """
    if axis is not None and dim is not None and axis != dim:
        raise ValueError("Cannot specify both 'axis' and 'dim'")
    axis = axis if axis is not None else dim
    axis = -1 if axis is None else int(axis)
    from kernflow.core.ops import array_ops, math_ops
    with _ops.name_scope(name, "softmax_cross_entropy_with_logits", [logits, labels]) as name:
        logits = _ops.convert_to_tensor(logits, name="logits")
        labels = _ops.convert_to_tensor(labels, name="labels")
        if labels.dtype.base_dtype != logits.dtype.base_dtype:
            labels = math_ops.cast(labels, logits.dtype.base_dtype)
        shape = logits.shape
        rank = shape.rank
        if axis != -1 and (rank is None or axis % rank != rank - 1):
            if rank is None:
                raise ValueError(f"softmax_cross_entropy_with_logits along axis {axis} needs "
                                 f"logits of known rank")
            perm = list(range(rank))
            perm[axis % rank], perm[-1] = perm[-1], perm[axis % rank]
            logits = array_ops.transpose(logits, perm)
            labels = array_ops.transpose(labels, perm)
        if rank == 2:
            cost, _ = _xent_op(logits, labels, name=name)
        else:
            outer = _outer_shape(logits, rank)
            flat_logits = array_ops.reshape(logits, [-1, _last_dim(logits)])
            flat_labels = array_ops.reshape(labels, [-1, _last_dim(labels)])
            cost, _ = _xent_op(flat_logits, flat_labels, name=name)
            cost = array_ops.reshape(cost, outer)
        if rank is not None:
            out = list(shape.dim_values)
            del out[axis % rank]
            cost.set_shape(out)
        return cost


def _last_dim(x):
    """The static size of the last dimension of `x`, or a scalar Tensor."""
    from kernflow.core.ops import array_ops
    s = x.shape
    if s.rank is not None and s.dim_values[-1] is not None:
        return s.dim_values[-1]
    return array_ops.shape(x)[-1]


def softmax_cross_entropy_with_logits(_sentinel=None, labels=None, logits=None, dim=-1, name=None,
                                      axis=None):
    """Computes softmax cross entropy between `logits` and `labels` (TF1 version).

    No gradient flows into `labels` (they are wrapped in `stop_gradient`); use the `_v2` version
    to differentiate with respect to labels. Arguments must be passed by keyword.

    Args:
        _sentinel: guards against positional arguments; leave unset.
        labels: a probability distribution along `dim` for each example.
        logits: unscaled log probabilities.
        dim: the class dimension (default -1, the last).
        name: op name (default "softmax_cross_entropy_with_logits_sg").
        axis: alias of `dim`.

    Raises:
        ValueError: if called with positional arguments or without labels and logits.
    """
    _ensure_xent_args("softmax_cross_entropy_with_logits", _sentinel, labels, logits)
    if axis is not None:
        dim = axis
    from kernflow.core.ops import array_ops
    with _ops.name_scope(name, "softmax_cross_entropy_with_logits_sg", [logits, labels]) as name:
        labels = array_ops.stop_gradient(labels, name="labels_stop_gradient")
    return softmax_cross_entropy_with_logits_v2(labels=labels, logits=logits, axis=dim, name=name)


def sparse_softmax_cross_entropy_with_logits(_sentinel=None, labels=None, logits=None, name=None):
    """Computes sparse softmax cross entropy between `logits` and integer class `labels`.

    Arguments must be passed by keyword.

    Args:
        _sentinel: guards against positional arguments; leave unset.
        labels: int32/int64 Tensor of shape [d_0, ..., d_{r-1}] with values in [0, num_classes);
            an out-of-range label raises InvalidArgumentError when run on CPU.
        logits: float Tensor of shape [d_0, ..., d_{r-1}, num_classes].
        name: op name.

    Returns:
        A Tensor of the shape of `labels` and the type of `logits`: the loss per example.

    Raises:
        ValueError: if called with positional arguments, or if the ranks or shapes of `labels`
            and `logits` do not agree.
    """
    _ensure_xent_args("sparse_softmax_cross_entropy_with_logits", _sentinel, labels, logits)
    from kernflow.core.ops import array_ops
    with _ops.name_scope(name, "SparseSoftmaxCrossEntropyWithLogits", [labels, logits]):
        labels = _ops.convert_to_tensor(labels)
        logits = _ops.convert_to_tensor(logits)
        ls, gs = labels.shape, logits.shape
        if gs.rank == 0:
            raise ValueError(f"Logits cannot be scalars - received shape {gs}.")
        if ls.rank is not None and gs.rank is not None and ls.rank != gs.rank - 1:
            raise ValueError(f"Rank mismatch: Rank of labels (received {ls.rank}) should equal "
                             f"rank of logits minus 1 (received {gs.rank}).")
        if ls.rank is not None and gs.rank is not None and \
                not ls.is_compatible_with(_ts.TensorShape(gs.dim_values[:-1])):
            raise ValueError(f"Shape mismatch: The shape of labels (received {ls}) should equal "
                             f"the shape of logits except for the last dimension (received {gs}).")
        if gs.rank == 2:
            cost, _ = _sparse_xent_op(logits, labels, name=name)
            return cost
        labels_shape = array_ops.shape(labels)
        flat_labels = array_ops.reshape(labels, [-1])
        flat_logits = array_ops.reshape(logits, [-1, _last_dim(logits)])
        cost, _ = _sparse_xent_op(flat_logits, flat_labels, name=name)
        cost = array_ops.reshape(cost, labels_shape)
        if gs.rank is not None:
            cost.set_shape(ls.merge_with(_ts.TensorShape(gs.dim_values[:-1])) if ls.rank is not None
                           else gs.dim_values[:-1])
        return cost


# ------------------------------------------------------------------------------------- top-k
def _top_k_shape(op):
    s = op.inputs[0].shape
    if op.inputs[1].shape.rank is not None:
        op.inputs[1].shape.with_rank(0)
    kv = tensor_util.constant_value(op.inputs[1])
    k = None if kv is None else int(kv)
    if k is not None and k < 0:
        raise ValueError(f"Need k >= 0, got {k}")
    if s.rank is None:
        return [None, None]
    if s.rank < 1:
        raise ValueError("Shape must be at least rank 1 but is rank 0")
    last = s.dim_values[-1]
    if k is not None and last is not None and last < k:
        raise ValueError(f"input must have last dimension >= k = {k} but is {last}")
    out = list(s.dim_values[:-1]) + [k]
    return [out, out]


def _in_top_k_shape(op):
    p, t = op.inputs[0].shape, op.inputs[1].shape
    p = _ts.unknown_shape(2) if p.rank is None else p.with_rank(2)
    t = _ts.unknown_shape(1) if t.rank is None else t.with_rank(1)
    if op.inputs[2].shape.rank is not None:
        op.inputs[2].shape.with_rank(0)
    try:
        return [_ts.TensorShape(p.dim_values[:1]).merge_with(t)]
    except ValueError:
        raise ValueError(f"predictions and targets must have the same batch size, got "
                         f"{p} and {t}") from None


register_op("TopKV2", inputs=["input: T", "k: int32"], outputs=["values: T", "indices: int32"],
            attrs=["sorted: bool = true", _REAL], shape_fn=_top_k_shape,
            doc="Finds the k largest entries along the last dimension and their indices; values "
                "are sorted in descending order and equal values keep the lower index first.")
register_op("InTopKV2", inputs=["predictions: float", "targets: T", "k: T"],
            outputs=["precision: bool"], attrs=["T: {int32, int64} = int32"],
            shape_fn=_in_top_k_shape,
            doc="Says whether targets[i] is among the top k predictions of row i (ties count as "
                "in; a non-finite prediction in the row or an out-of-range target gives false).")


def top_k(input, k=1, sorted=True, name=None):  # noqa: A002 - TF's argument names
    """Finds values and indices of the `k` largest entries along the last dimension.

    Args:
        input: a real Tensor of rank >= 1 whose last dimension is at least `k`.
        k: a 0-D int32 Tensor or Python int: the number of top elements.
        sorted: if True, values come in descending order.
        name: op name (default "TopKV2").

    Returns:
        values: the `k` largest elements along each last-dimension slice.
        indices: int32 indices of `values` within the last dimension of `input`.
    """
    op = apply_op("TopKV2", [input, k], {"sorted": sorted}, name=name)
    return op.outputs[0], op.outputs[1]


def in_top_k(predictions, targets, k, name=None):
    """Says whether the targets are in the top `k` predictions.

    Args:
        predictions: float32 Tensor [batch_size, classes].
        targets: int32 or int64 Tensor [batch_size] of class ids.
        k: the number of top elements to look at.
        name: op name (created inside an "in_top_k" name scope, like TF).

    Returns:
        A bool Tensor [batch_size]: True where the target's prediction is among the top k
        (ties count as in; non-finite predictions give False).
    """
    with _ops.name_scope(name, "in_top_k"):
        targets = _ops.convert_to_tensor(targets)
        return apply_op("InTopKV2", [predictions, targets, k], name=name).outputs[0]


from kernflow.core.ops.nn_ops_conv import *  # noqa: E402,F403
from kernflow.core.ops.nn_ops_conv import __all__ as _conv_all  # noqa: E402
from kernflow.core.ops.nn_ops_impl import *  # noqa: E402,F403
from kernflow.core.ops.nn_ops_impl import __all__ as _impl_all  # noqa: E402
from kernflow.core.ops.nn_ops_norm import *  # noqa: E402,F403
from kernflow.core.ops.nn_ops_norm import __all__ as _norm_all  # noqa: E402
from kernflow.core.ops.nn_ops_sampled import *  # noqa: E402,F403
from kernflow.core.ops.nn_ops_sampled import __all__ as _sampled_all  # noqa: E402

__all__ += _conv_all + _impl_all + _norm_all + _sampled_all
