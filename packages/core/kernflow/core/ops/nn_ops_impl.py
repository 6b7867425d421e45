"""Composite functions of `kf.nn` built from math, array and random ops.

moments, batch_normalization, dropout, l2_normalize, embedding_lookup, sigmoid and weighted
cross entropy, xw_plus_b, relu_layer. Re-exported by `kernflow.core.ops.nn_ops`.
"""

from __future__ import annotations

import numbers

from kernflow.core.framework import dtypes as _dtypes
from kernflow.core.framework import ops as _ops
from kernflow.core.framework import tensor_shape as _ts

__all__ = ["moments", "batch_normalization", "dropout", "l2_normalize", "embedding_lookup",
           "sigmoid_cross_entropy_with_logits", "weighted_cross_entropy_with_logits",
           "xw_plus_b", "relu_layer", "zero_fraction"]


def _math():
    from kernflow.core.ops import math_ops
    return math_ops


def _array():
    from kernflow.core.ops import array_ops
    return array_ops


def _keep_dims_arg(keepdims, keep_dims):
    if keepdims is not None and keep_dims is not None and bool(keepdims) != bool(keep_dims):
        raise ValueError("Cannot specify both 'keepdims' and 'keep_dims'")
    v = keepdims if keepdims is not None else keep_dims
    return bool(v) if v is not None else False


def moments(x, axes, shift=None, name=None, keep_dims=None, keepdims=None):
    """Calculates the mean and variance of `x` over `axes`.

    Args:
        x: a Tensor (float16 inputs are computed in float32 and cast back).
        axes: list of ints: the axes to reduce over.
        shift: unused (kept for signature compatibility).
        name: name scope (default "moments").
        keep_dims: deprecated alias of `keepdims`.
        keepdims: keep the reduced dimensions with size 1.

    Returns:
        (mean, variance) Tensors.
    """
    m, a = _math(), _array()
    keep = _keep_dims_arg(keepdims, keep_dims)
    with _ops.name_scope(name, "moments", [x, axes]):
        x = _ops.convert_to_tensor(x, name="x")
        y = m.cast(x, _dtypes.float32) if x.dtype.base_dtype == _dtypes.float16 else x
        mean = m.reduce_mean(y, axes, keepdims=True, name="mean")
        variance = m.reduce_mean(m.squared_difference(y, a.stop_gradient(mean)), axes,
                                 keepdims=True, name="variance")
        if not keep:
            mean = a.squeeze(mean, axes)
            variance = a.squeeze(variance, axes)
        if x.dtype.base_dtype == _dtypes.float16:
            return m.cast(mean, _dtypes.float16), m.cast(variance, _dtypes.float16)
        return mean, variance


def batch_normalization(x, mean, variance, offset, scale, variance_epsilon, name=None):
    """Batch normalization: `scale * (x - mean) / sqrt(variance + epsilon) + offset`.

    Args:
        x: input Tensor.
        mean, variance: Tensors broadcastable to `x` (e.g. from `moments`).
        offset: beta, added after normalization (None for none).
        scale: gamma, multiplied after normalization (None for none).
        variance_epsilon: small float added to the variance to avoid dividing by zero.
        name: name scope (default "batchnorm").

    Returns:
        The normalized, scaled, offset Tensor.
    """
    m = _math()
    with _ops.name_scope(name, "batchnorm", [x, mean, variance, scale, offset]):
        x = _ops.convert_to_tensor(x, name="x")
        inv = m.rsqrt(m.add(variance, variance_epsilon))
        if scale is not None:
            inv = m.multiply(inv, scale)
        inv = _cast_to(inv, x.dtype)
        if offset is not None:
            shift = m.subtract(offset, m.multiply(mean, inv))
        else:
            shift = m.negative(m.multiply(mean, inv))
        return m.add(m.multiply(x, inv), _cast_to(shift, x.dtype))


def _cast_to(t, dtype):
    t = _ops.convert_to_tensor(t, dtype=None)
    if t.dtype.base_dtype == dtype.base_dtype:
        return t
    return _math().cast(t, dtype.base_dtype)


def _noise_shape(x, noise_shape):
    if noise_shape is None:
        return _array().shape(x)
    if isinstance(noise_shape, _ops.Tensor):
        return noise_shape
    dims = list(noise_shape)
    xs = x.shape
    if xs.rank is not None and len(dims) == xs.rank:
        dims = [xd if nd is None and xd is not None else nd for nd, xd in zip(dims, xs.dim_values)]
    if any(d is None for d in dims):
        return _array().shape(x)
    return dims


def dropout(x, keep_prob=None, noise_shape=None, seed=None, name=None, rate=None):
    """Randomly zeroes elements of `x`, scaling the kept ones by `1 / keep_prob`.

    Args:
        x: a floating point Tensor.
        keep_prob: deprecated; the probability that each element is kept (use `rate`).
        noise_shape: 1-D int32 shape of the random keep/drop decisions (broadcast against `x`).
        seed: a Python integer seed.
        name: name scope (default "dropout").
        rate: the probability that each element is dropped; `rate = 1 - keep_prob`.

    Returns:
        A Tensor of the shape and type of `x` (`x` itself when nothing can be dropped).

    Raises:
        ValueError: if neither or both of `keep_prob` and `rate` are given, if `rate` is not in
            [0, 1), or if `x` is not floating point.
    """
    if keep_prob is not None and rate is not None:
        raise ValueError("Cannot specify both 'rate' and 'keep_prob'")
    if keep_prob is not None:
        rate = (1 - keep_prob) if isinstance(keep_prob, numbers.Real) else \
            _math().subtract(1.0, keep_prob)
    if rate is None:
        raise ValueError("You must provide a rate to dropout.")
    m = _math()
    with _ops.name_scope(name, "dropout", [x]) as name:
        is_number = isinstance(rate, numbers.Real)
        if is_number and not 0 <= rate < 1:
            raise ValueError(f"rate must be a scalar tensor or a float in the range [0, 1), got "
                             f"{rate:g}")
        x = _ops.convert_to_tensor(x, name="x")
        if not x.dtype.is_floating:
            raise ValueError(f"x has to be a floating point tensor since it's going to be scaled. "
                             f"Got a {x.dtype.name} tensor instead.")
        if is_number and rate == 0:
            return x
        dt = x.dtype.base_dtype
        if is_number:
            ret = m.multiply(x, _ops.convert_to_tensor(1.0 / (1.0 - rate), dtype=dt))
            rate_t = _ops.convert_to_tensor(rate, dtype=dt)
        else:
            rate_t = _ops.convert_to_tensor(rate)
            if rate_t.shape.rank is not None:
                rate_t.shape.with_rank(0)
            if rate_t.dtype.base_dtype != dt:
                rate_t = m.cast(rate_t, dt, name="rate")
            ret = m.divide(x, m.subtract(_ops.convert_to_tensor(1, dtype=dt), rate_t))
        from kernflow.core.ops import random_ops
        noise = random_ops.random_uniform(_noise_shape(x, noise_shape), seed=seed, dtype=dt)
        keep_mask = m.greater_equal(noise, rate_t)
        ret = m.multiply(ret, m.cast(keep_mask, dt))
        ret.set_shape(x.shape)
        return ret


def l2_normalize(x, axis=None, epsilon=1e-12, name=None, dim=None):
    """Normalizes `x` along `axis` by its L2 norm: `x / sqrt(max(sum(x ** 2), epsilon))`.

    Args:
        x: a Tensor.
        axis: dimension(s) to normalize along (None: all).
        epsilon: lower bound of the sum of squares (avoids dividing by zero).
        name: op name (default "l2_normalize").
        dim: deprecated alias of `axis`.
    """
    if axis is not None and dim is not None and axis != dim:
        raise ValueError("Cannot specify both 'axis' and 'dim'")
    axis = axis if axis is not None else dim
    m = _math()
    with _ops.name_scope(name, "l2_normalize", [x]) as name:
        x = _ops.convert_to_tensor(x, name="x")
        square_sum = m.reduce_sum(m.square(x), axis, keepdims=True)
        x_inv_norm = m.rsqrt(m.maximum(square_sum, _ops.convert_to_tensor(
            epsilon, dtype=x.dtype.base_dtype)))
        return m.multiply(x, x_inv_norm, name=name)


def _clip_rows(t, ids, max_norm):
    """Clips the embedding vectors of `t` (dims after those of `ids`) to L2 norm <= max_norm."""
    if max_norm is None:
        return t
    m = _math()
    ids_rank, t_rank = ids.shape.rank, t.shape.rank
    if ids_rank is None or t_rank is None:
        raise ValueError("embedding_lookup with max_norm needs ids and params of known rank")
    axes = list(range(ids_rank, t_rank))
    if not axes:
        return t
    norm2 = m.reduce_sum(m.square(t), axes, keepdims=True)
    norm = m.sqrt(norm2)
    clip = _ops.convert_to_tensor(max_norm, dtype=t.dtype.base_dtype)
    return m.divide(m.multiply(t, clip), m.maximum(norm, clip))


def embedding_lookup(params, ids, partition_strategy="mod", name=None, validate_indices=True,
                     max_norm=None):
    """Looks up `ids` in a list of embedding tensors (TF1 `tf.nn.embedding_lookup`).

    With several shards in `params` (a list, or the parts of a `PartitionedVariable`), each id
    is assigned to one of them by `partition_strategy`: "mod" puts id `i` in shard
    `i % len(params)` at row `i // len(params)`; "div" splits the ids into contiguous ranges,
    the first `num_ids % len(params)` shards holding one extra id (the layout of a
    PartitionedVariable's parts). DynamicPartition routes the ids, each shard's Gather (and
    `max_norm` clipping) runs colocated with its shard, and DynamicStitch puts the rows back in
    order. The gradient for each shard is an `IndexedSlices` of the rows it gave.

    Args:
        params: a Tensor or Variable, a `PartitionedVariable`, or a list of tensors/variables
            sharing all but their first dimension.
        ids: int32 or int64 Tensor of ids to look up.
        partition_strategy: "mod" or "div".
        name: op name (default "embedding_lookup").
        validate_indices: with several shards whose row counts are known, add an Assert that
            every id lies in [0, total rows) (its error lists the offending ids); a shard's
            Gather always rejects a row it does not have.
        max_norm: if given, embeddings whose L2 norm exceeds it are scaled down to it.

    Returns:
        A Tensor of shape `shape(ids) + shape(params[0])[1:]`.

    Raises:
        ValueError: if `params` is empty or the strategy is unknown.
    """
    params = _embedding_params(params)
    a = _array()
    with _ops.name_scope(name, "embedding_lookup", params + [ids]) as name:
        n = len(params)
        ids = _ops.convert_to_tensor(ids, name="ids")
        if n == 1:
            with _ops.colocate_with(_op_of(params[0])):
                result = _clip_rows(a.gather(params[0], ids, name=name), ids, max_norm)
            return a.identity(result)
        if partition_strategy not in ("mod", "div"):
            raise ValueError(f"Unrecognized partition strategy: {partition_strategy}")
        flat_ids = a.reshape(ids, [-1])
        # One shard's Gather rejects a bad id itself; over several, the row it reports would be
        # the shard's, so check the ids against the total first.
        checks = _check_ids(flat_ids, params) if validate_indices and n > 1 else []
        with _ops.control_dependencies(checks):
            p_assignments, new_ids = _assign_shards(flat_ids, params, partition_strategy)
            gather_ids = a.dynamic_partition(new_ids, p_assignments, n)
            pindices = a.dynamic_partition(a.range(a.size(flat_ids)), p_assignments, n)
        partitioned = []
        for p in range(n):
            with _ops.colocate_with(_op_of(params[p])):
                rows = a.gather(params[p], gather_ids[p])
                partitioned.append(_clip_rows(rows, gather_ids[p], max_norm))
        ret = a.dynamic_stitch(pindices, partitioned, name=name)
        return _reshape_lookup(ret, ids, params)


def _embedding_params(params):
    """`params` as a non-empty list of tensors or variables (a PartitionedVariable's parts)."""
    from kernflow.core.ops.partitioned_variables import PartitionedVariable
    if params is None or (isinstance(params, (list, tuple)) and not params):
        raise ValueError("Need at least one param")
    if isinstance(params, PartitionedVariable):
        params = list(params)
    elif not isinstance(params, (list, tuple)):
        params = [params]
    return [p if isinstance(p, _ops.Tensor) or hasattr(p, "_as_graph_element")
            else _ops.convert_to_tensor(p, name="params") for p in params]


def _total_rows(params, idt):
    """The number of rows over all shards: a Python int when static, else a Tensor."""
    m, a = _math(), _array()
    total = 0
    for p in params:
        shape = _static_shape(p)
        d0 = _ts.dimension_value(shape[0]) if shape.rank else None
        if d0 is None:
            return m.add_n([m.cast(a.shape(q)[0], idt) for q in params])
        total += d0
    return total


def _check_ids(flat_ids, params):
    """An Assert that every id is in [0, total rows), listing the bad ids; [] if rows unknown."""
    from kernflow.core.ops import control_flow_ops
    total = _total_rows(params, flat_ids.dtype.base_dtype)
    if isinstance(total, _ops.Tensor):
        return []
    m, a = _math(), _array()
    bad = m.logical_or(m.less(flat_ids, 0), m.greater_equal(flat_ids, total))
    msg = (f"embedding_lookup: ids must be in [0, {total}) for {len(params)} shards of "
           f"{total} rows in all; out-of-range ids:")
    return [control_flow_ops.Assert(m.logical_not(m.reduce_any(bad)),
                                    [msg, a.boolean_mask(flat_ids, bad)], summarize=10,
                                    name="check_ids")]


def _assign_shards(flat_ids, params, strategy):
    """(shard of each id as int32, row of each id within its shard)."""
    m = _math()
    n = len(params)
    if strategy == "mod":
        return m.cast(m.floormod(flat_ids, n), _dtypes.int32), m.floordiv(flat_ids, n)
    idt = flat_ids.dtype.base_dtype
    num_total = _ops.convert_to_tensor(_total_rows(params, idt), dtype=idt)
    per = m.floordiv(num_total, n)
    extras = m.floormod(num_total, n)
    shard = m.maximum(m.floordiv(flat_ids, per + 1), m.floordiv(flat_ids - extras, per))
    in_first = m.less(shard, extras)
    rows = m.where(in_first, m.floormod(flat_ids, per + 1), m.floormod(flat_ids - extras, per))
    return m.cast(shard, _dtypes.int32), rows


def _reshape_lookup(ret, ids, params):
    a = _array()
    elem = _static_shape(params[0])[1:]
    for p in params[1:]:
        elem = elem.merge_with(_static_shape(p)[1:])
    if elem.is_fully_defined():
        ret = a.reshape(ret, a.concat([a.shape(ids), elem.as_list()], 0))
    else:
        ret = a.reshape(ret, a.concat([a.shape(ids), a.slice(a.shape(params[0]), [1], [-1])], 0))
    ret.set_shape(ids.shape.concatenate(elem))
    return ret


def _static_shape(p):
    s = p.shape if hasattr(p, "shape") else p.get_shape()
    return _ts.as_shape(s)


def _op_of(p):
    t = p._as_graph_element() if hasattr(p, "_as_graph_element") else p
    return t.op if isinstance(t, _ops.Tensor) else t


def sigmoid_cross_entropy_with_logits(_sentinel=None, labels=None, logits=None, name=None):
    """Computes sigmoid cross entropy given `logits`, stably.

    `max(x, 0) - x * z + log(1 + exp(-abs(x)))` for logits x and labels z. Arguments must be
    passed by keyword.

    Args:
        _sentinel: guards against positional arguments; leave unset.
        labels: a Tensor of the type and shape of `logits`, values in [0, 1].
        logits: a float Tensor.
        name: op name (default "logistic_loss").

    Returns:
        The elementwise logistic losses, of the shape of `logits`.

    Raises:
        ValueError: if called positionally, or if `logits` and `labels` differ in shape.
    """
    from kernflow.core.ops.nn_ops import _ensure_xent_args, relu
    _ensure_xent_args("sigmoid_cross_entropy_with_logits", _sentinel, labels, logits)
    m = _math()
    with _ops.name_scope(name, "logistic_loss", [logits, labels]) as name:
        logits = _ops.convert_to_tensor(logits, name="logits")
        labels = _ops.convert_to_tensor(labels, dtype=logits.dtype, name="labels")
        try:
            labels.shape.merge_with(logits.shape)
        except ValueError:
            raise ValueError(f"logits and labels must have the same shape ({logits.shape} vs "
                             f"{labels.shape})") from None
        relu_logits = relu(logits)
        neg_abs_logits = m.negative(m.abs(logits))
        return m.add(m.subtract(relu_logits, m.multiply(logits, labels)),
                     m.log1p(m.exp(neg_abs_logits)), name=name)


def weighted_cross_entropy_with_logits(labels=None, logits=None, pos_weight=None, name=None,
                                       targets=None):
    """Sigmoid cross entropy with positive examples weighted by `pos_weight`.

    `(1 - z) * x + (1 + (q - 1) * z) * (log(1 + exp(-abs(x))) + max(-x, 0))` for logits x,
    labels z and pos_weight q.

    Args:
        labels: a Tensor of the type and shape of `logits`.
        logits: a float Tensor.
        pos_weight: coefficient of the positive examples.
        name: op name (default "logistic_loss").
        targets: deprecated alias of `labels`.
    """
    from kernflow.core.ops.nn_ops import relu
    if labels is not None and targets is not None:
        raise ValueError("Cannot specify both 'labels' and 'targets'")
    labels = labels if labels is not None else targets
    m = _math()
    with _ops.name_scope(name, "logistic_loss", [logits, labels]) as name:
        logits = _ops.convert_to_tensor(logits, name="logits")
        labels = _ops.convert_to_tensor(labels, dtype=logits.dtype, name="labels")
        try:
            labels.shape.merge_with(logits.shape)
        except ValueError:
            raise ValueError(f"logits and labels must have the same shape ({logits.shape} vs "
                             f"{labels.shape})") from None
        dt = logits.dtype.base_dtype
        pos_weight = _ops.convert_to_tensor(pos_weight, dtype=dt)
        one = _ops.convert_to_tensor(1, dtype=dt)
        log_weight = m.add(one, m.multiply(m.subtract(pos_weight, one), labels))
        softplus_neg = m.add(m.log1p(m.exp(m.negative(m.abs(logits)))), relu(m.negative(logits)))
        return m.add(m.multiply(m.subtract(one, labels), logits),
                     m.multiply(log_weight, softplus_neg), name=name)


def xw_plus_b(x, weights, biases, name=None):
    """Computes `matmul(x, weights) + biases`.

    Args:
        x: 2-D Tensor [batch, in_units].
        weights: 2-D Tensor [in_units, out_units].
        biases: 1-D Tensor [out_units].
        name: op name (default "xw_plus_b").
    """
    from kernflow.core.ops.nn_ops import bias_add
    with _ops.name_scope(name, "xw_plus_b", [x, weights, biases]) as name:
        x = _ops.convert_to_tensor(x, name="x")
        weights = _ops.convert_to_tensor(weights, name="weights")
        biases = _ops.convert_to_tensor(biases, name="biases")
        return bias_add(_math().matmul(x, weights), biases, name=name)


def relu_layer(x, weights, biases, name=None):
    """Computes `relu(matmul(x, weights) + biases)`.

    Args:
        x: 2-D Tensor [batch, in_units].
        weights: 2-D Tensor [in_units, out_units].
        biases: 1-D Tensor [out_units].
        name: op name (default "relu_layer").
    """
    from kernflow.core.ops.nn_ops import bias_add, relu
    with _ops.name_scope(name, "relu_layer", [x, weights, biases]) as name:
        x = _ops.convert_to_tensor(x, name="x")
        weights = _ops.convert_to_tensor(weights, name="weights")
        biases = _ops.convert_to_tensor(biases, name="biases")
        return relu(bias_add(_math().matmul(x, weights), biases), name=name)


def zero_fraction(value, name=None):
    """Returns the fraction of zeros in `value` as a float32 scalar.

    Args:
        value: a numeric Tensor.
        name: name scope (default "zero_fraction").
    """
    m = _math()
    with _ops.name_scope(name, "zero_fraction", [value]):
        value = _ops.convert_to_tensor(value, name="value")
        zero = _ops.convert_to_tensor(0, dtype=value.dtype.base_dtype)
        return m.reduce_mean(m.cast(m.equal(value, zero), _dtypes.float32))

