"""Sparse embedding lookups and sampled losses of `kf.nn`, built from other ops.

embedding_lookup_sparse, safe_embedding_lookup_sparse, nce_loss and sampled_softmax_loss, plus
the candidate samplers (kernflow.core.ops.candidate_sampling_ops) re-exported under `kf.nn`.
Every lookup goes through `embedding_lookup`, so a list of shards or a PartitionedVariable works
and the gradient for each shard is an `IndexedSlices` of the rows looked up. Re-exported by
`kernflow.core.ops.nn_ops`.
"""

from __future__ import annotations

from kernflow.core.framework import dtypes as _dtypes
from kernflow.core.framework import ops as _ops
from kernflow.core.framework import tensor_shape as _ts
from kernflow.core.framework.sparse_tensor import SparseTensor
from kernflow.core.ops import candidate_sampling_ops as _cs
from kernflow.core.ops.candidate_sampling_ops import *  # noqa: F401,F403

__all__ = ["embedding_lookup_sparse", "safe_embedding_lookup_sparse", "nce_loss",
           "sampled_softmax_loss"] + _cs.__all__

_COMBINERS = ("mean", "sqrtn", "sum")


def _m():
    from kernflow.core.ops import math_ops
    return math_ops


def _a():
    from kernflow.core.ops import array_ops
    return array_ops


def _lookup(params, ids, partition_strategy, max_norm=None):
    # Resolved at call time: nn_ops_impl.embedding_lookup handles shards and PartitionedVariables.
    from kernflow.core.ops import nn_ops_impl
    return nn_ops_impl.embedding_lookup(params, ids, partition_strategy=partition_strategy,
                                        max_norm=max_norm)


def _shard_list(params):
    from kernflow.core.ops.partitioned_variables import PartitionedVariable
    if isinstance(params, PartitionedVariable):
        return list(params)
    return list(params) if isinstance(params, (list, tuple)) else [params]


# ---------------------------------------------------------------------------- sparse lookups
def embedding_lookup_sparse(params, sp_ids, sp_weights, partition_strategy="mod", name=None,
                            combiner="mean", max_norm=None):
    """Combines the embeddings of each row's ids (TF1 `tf.nn.embedding_lookup_sparse`).

    The distinct ids are looked up once (`unique` + `embedding_lookup`); each row's embeddings
    are then summed, averaged or divided by sqrt(n) (weighted when `sp_weights` is given).

    Args:
        params: a Tensor or Variable, a list of shards, or a `PartitionedVariable`.
        sp_ids: a 2-D SparseTensor [batch, max_ids] of int64 ids, indices in canonical order.
        sp_weights: None (every weight 1) or a SparseTensor of float weights with the indices of
            sp_ids.
        partition_strategy: "mod" or "div" (see `embedding_lookup`).
        name: name scope (default "embedding_lookup_sparse").
        combiner: "sum", "mean" (weighted mean) or "sqrtn" (weighted sum / sqrt(sum of squared
            weights)).
        max_norm: clip each embedding to this L2 norm before combining.

    Returns:
        A dense Tensor [last row with an id + 1, embedding dims...]; rows without ids (before the
        last such row) are zeros.

    Raises:
        TypeError: sp_ids or sp_weights is not a SparseTensor.
        ValueError: an unknown combiner, or sp_weights shaped unlike sp_ids.
    """
    if combiner is None:
        combiner = "mean"
    if combiner not in _COMBINERS:
        raise ValueError(f"combiner must be one of 'mean', 'sqrtn' or 'sum', got {combiner!r}")
    params = _shard_list(params)
    if not isinstance(sp_ids, SparseTensor):
        raise TypeError(f"sp_ids must be SparseTensor, got {type(sp_ids).__name__}")
    if sp_weights is not None:
        if not isinstance(sp_weights, SparseTensor):
            raise TypeError(f"sp_weights must be either None or SparseTensor, got "
                            f"{type(sp_weights).__name__}")
        sp_ids.values.shape.assert_is_compatible_with(sp_weights.values.shape)
        sp_ids.indices.shape.assert_is_compatible_with(sp_weights.indices.shape)
        sp_ids.dense_shape.shape.assert_is_compatible_with(sp_weights.dense_shape.shape)
    m, a = _m(), _a()
    with _ops.name_scope(name, "embedding_lookup_sparse", params + [sp_ids]) as name:
        segment_ids = m.cast(sp_ids.indices[:, 0], _dtypes.int32)
        ids, idx = a.unique(sp_ids.values)
        emb = _lookup(params, ids, partition_strategy, max_norm)
        if emb.dtype.base_dtype == _dtypes.float16:
            emb = m.cast(emb, _dtypes.float32)
        if sp_weights is None:
            seg = {"sum": _sparse_segment("sum"), "mean": _sparse_segment("mean"),
                   "sqrtn": _sparse_segment("sqrt_n")}[combiner]
            return seg(emb, idx, segment_ids, name=name)
        return _weighted_combine(emb, idx, segment_ids, sp_weights.values, combiner, name)


def _sparse_segment(kind):
    from kernflow.core.ops import sparse_ops
    return getattr(sparse_ops, f"sparse_segment_{kind}")


def _weighted_combine(emb, idx, segment_ids, weights, combiner, name):
    from kernflow.core.ops import segment_ops
    m, a = _m(), _a()
    if weights.dtype.base_dtype != emb.dtype.base_dtype:
        weights = m.cast(weights, emb.dtype.base_dtype)
    emb = a.gather(emb, idx)
    # weights [n] -> [n, 1, ..., 1] to broadcast over the embedding dims.
    ones = a.fill(a.expand_dims(a.rank(emb) - 1, 0), 1)
    orig = weights.shape
    weights = a.reshape(weights, a.concat([a.shape(weights), ones], 0))
    if emb.shape.rank is not None:
        weights.set_shape(orig.concatenate([1] * (emb.shape.rank - 1)))
    emb = m.multiply(emb, weights)
    if combiner == "sum":
        return segment_ops.segment_sum(emb, segment_ids, name=name)
    emb = segment_ops.segment_sum(emb, segment_ids)
    if combiner == "mean":
        return m.div(emb, segment_ops.segment_sum(weights, segment_ids), name=name)
    wsum = segment_ops.segment_sum(m.pow(weights, 2), segment_ids)
    return m.div(emb, m.sqrt(wsum), name=name)


def safe_embedding_lookup_sparse(embedding_weights, sparse_ids, sparse_weights=None,
                                 combiner="mean", default_id=None, name=None,
                                 partition_strategy="div", max_norm=None):
    """`embedding_lookup_sparse` that drops invalid ids and fills empty rows (TF1 v1 version).

    Ids < 0 are dropped (and, unless combiner is "sum", entries with weight <= 0). A row left
    without ids gets the embedding of `default_id`, or zeros when default_id is None. Sparse ids
    of rank R > 2 are looked up as [prod(dense_shape[:-1]), dense_shape[-1]] and the result is
    reshaped to dense_shape[:-1] + embedding dims.

    Args:
        embedding_weights: a Tensor or Variable, a list of shards, or a `PartitionedVariable`.
        sparse_ids: a SparseTensor [d0, ..., dn-1] of int64 ids (canonical order).
        sparse_weights: None or a SparseTensor of float weights with the indices of sparse_ids.
        combiner: "sum", "mean" or "sqrtn".
        default_id: the id whose embedding empty rows get (None: zeros).
        name: name scope (default "embedding_lookup").
        partition_strategy: "div" (the default here, as TF) or "mod".
        max_norm: clip each embedding to this L2 norm before combining.

    Returns:
        A dense Tensor [d0, ..., dn-2, embedding dims...].

    Raises:
        ValueError: embedding_weights is None or empty.
    """
    if embedding_weights is None:
        raise ValueError(f"Missing embedding_weights {embedding_weights}.")
    shards = _shard_list(embedding_weights)
    if not shards:
        raise ValueError(f"Missing embedding_weights {shards}.")
    dtype = sparse_weights.dtype if sparse_weights is not None else None
    shards = [w if hasattr(w, "_as_graph_element") and not isinstance(w, _ops.Tensor)
              and dtype in (None, w.dtype.base_dtype) else _ops.convert_to_tensor(w, dtype=dtype)
              for w in shards]
    m, a = _m(), _a()
    from kernflow.core.ops import sparse_ops
    with _ops.name_scope(name, "embedding_lookup",
                         shards + [sparse_ids, sparse_weights]) as scope:
        original_shape = sparse_ids.dense_shape
        rank_dim = _ts.dimension_value(original_shape.shape[0])
        rank = a.size(original_shape) if rank_dim is None else rank_dim
        sparse_ids = sparse_ops.sparse_reshape(sparse_ids, a.stack([
            m.reduce_prod(a.slice(original_shape, [0], a.reshape(rank - 1, [1]))),
            a.gather(original_shape, rank - 1)]))
        if sparse_weights is not None:
            sparse_weights = SparseTensor(sparse_ids.indices, sparse_weights.values,
                                          sparse_ids.dense_shape)
        sparse_ids, sparse_weights = _prune_invalid_ids(sparse_ids, sparse_weights)
        if combiner != "sum":
            sparse_ids, sparse_weights = _prune_invalid_weights(sparse_ids, sparse_weights)
        sparse_ids, is_row_empty = sparse_ops.sparse_fill_empty_rows(sparse_ids, default_id or 0)
        if sparse_weights is not None:
            sparse_weights, _ = sparse_ops.sparse_fill_empty_rows(sparse_weights, 1.0)
        result = embedding_lookup_sparse(shards, sparse_ids, sparse_weights, combiner=combiner,
                                         partition_strategy=partition_strategy,
                                         name=None if default_id is None else scope,
                                         max_norm=max_norm)
        if default_id is None:
            empty = a.tile(a.reshape(is_row_empty, [-1, 1]), a.stack([1, a.shape(result)[1]]))
            result = m.where(empty, a.zeros_like(result), result, name=scope)
        final = a.reshape(result, a.concat([
            a.slice(m.cast(original_shape, _dtypes.int32), [0], a.reshape(rank - 1, [1])),
            a.slice(a.shape(result), [1], [-1])], 0))
        lead = _ts.TensorShape(None) if rank_dim is None else _ts.TensorShape([None] * (rank_dim - 1))
        final.set_shape(lead.concatenate(result.shape[1:]))
        return final


def _prune_invalid_ids(sparse_ids, sparse_weights):
    from kernflow.core.ops import sparse_ops
    valid = _m().greater_equal(sparse_ids.values, 0)
    sparse_ids = sparse_ops.sparse_retain(sparse_ids, valid)
    if sparse_weights is not None:
        sparse_weights = sparse_ops.sparse_retain(sparse_weights, valid)
    return sparse_ids, sparse_weights


def _prune_invalid_weights(sparse_ids, sparse_weights):
    from kernflow.core.ops import sparse_ops
    if sparse_weights is None:
        return sparse_ids, sparse_weights
    valid = _m().greater(sparse_weights.values, 0)
    return sparse_ops.sparse_retain(sparse_ids, valid), sparse_ops.sparse_retain(sparse_weights, valid)


# ---------------------------------------------------------------------------- sampled losses
def _compute_sampled_logits(weights, biases, labels, inputs, num_sampled, num_classes, num_true,
                            sampled_values, subtract_log_q, remove_accidental_hits,
                            partition_strategy, name, seed=None):
    """(logits [batch, num_true + num_sampled], labels of the same shape), as TF's helper."""
    m, a = _m(), _a()
    weights = _shard_list(weights)
    with _ops.name_scope(name, "compute_sampled_logits", weights + [biases, inputs, labels]):
        labels = _ops.convert_to_tensor(labels, name="labels")
        if labels.dtype.base_dtype != _dtypes.int64:
            labels = m.cast(labels, _dtypes.int64)
        inputs = _ops.convert_to_tensor(inputs, name="inputs")
        _check_sampled_shapes(labels, inputs, num_true)
        labels_flat = a.reshape(labels, [-1])
        if sampled_values is None:
            sampled_values = _cs.log_uniform_candidate_sampler(
                true_classes=labels, num_true=num_true, num_sampled=num_sampled, unique=True,
                range_max=num_classes, seed=seed)
        sampled, true_expected, sampled_expected = (a.stop_gradient(s) for s in sampled_values)
        sampled = m.cast(sampled, _dtypes.int64)
        all_ids = a.concat([labels_flat, sampled], 0)
        n_true = a.shape(labels_flat)[0]
        all_w = _cast_like(_lookup(weights, all_ids, partition_strategy), inputs)
        true_w = a.slice(all_w, [0, 0], a.stack([n_true, -1]))
        sampled_w = a.slice(all_w, a.stack([n_true, 0]), [-1, -1])
        sampled_logits = m.matmul(inputs, sampled_w, transpose_b=True)
        all_b = _cast_like(_lookup(biases, all_ids, partition_strategy), inputs)
        true_b = a.slice(all_b, [0], a.reshape(n_true, [1]))
        sampled_b = a.slice(all_b, a.reshape(n_true, [1]), [-1])
        dim = a.shape(true_w)[1:2]
        true_w = a.reshape(true_w, a.concat([[-1, num_true], dim], 0))
        true_logits = m.reduce_sum(m.multiply(a.expand_dims(inputs, 1), true_w), [2])
        true_logits = m.add(true_logits, a.reshape(true_b, [-1, num_true]))
        sampled_logits = m.add(sampled_logits, sampled_b)
        if remove_accidental_hits:
            sampled_logits = _remove_hits(labels, sampled, num_true, num_sampled, sampled_logits)
        if subtract_log_q:
            true_logits = m.subtract(true_logits, m.log(_cast_like(true_expected, inputs)))
            sampled_logits = m.subtract(sampled_logits, m.log(_cast_like(sampled_expected, inputs)))
        out_logits = a.concat([true_logits, sampled_logits], 1)
        n = _ops.convert_to_tensor(float(num_true), dtype=true_logits.dtype.base_dtype)
        out_labels = a.concat([m.div(a.ones_like(true_logits), n),
                               a.zeros_like(sampled_logits)], 1)
        return out_logits, out_labels


def _cast_like(t, like):
    return t if t.dtype.base_dtype == like.dtype.base_dtype else _m().cast(t, like.dtype.base_dtype)


def _check_sampled_shapes(labels, inputs, num_true):
    ls, xs = labels.shape, inputs.shape
    if ls.rank is not None and ls.rank != 2:
        raise ValueError(f"labels must be a [batch_size, num_true] matrix, got shape {ls}")
    if ls.rank == 2 and ls.dim_values[1] is not None and ls.dim_values[1] != num_true:
        raise ValueError(f"labels has shape {ls} but num_true is {num_true}")
    if xs.rank is not None and xs.rank != 2:
        raise ValueError(f"inputs must be a [batch_size, dim] matrix, got shape {xs}")
    if not inputs.dtype.base_dtype.is_floating:
        raise ValueError(f"inputs must be floating point, got {inputs.dtype.name}")


def _remove_hits(labels, sampled, num_true, num_sampled, sampled_logits):
    """Adds -FLT_MAX to the sampled logits of classes that are one of the row's true classes."""
    from kernflow.core.ops import sparse_ops
    m, a = _m(), _a()
    rows, ids, hit_weights = _cs.compute_accidental_hits(labels, sampled, num_true=num_true)
    sparse_indices = a.concat([a.reshape(rows, [-1, 1]),
                               a.reshape(m.cast(ids, _dtypes.int32), [-1, 1])], 1,
                              name="sparse_indices")
    shape = a.concat([a.shape(labels)[:1], a.expand_dims(num_sampled, 0)], 0)
    hit_weights = _cast_like(hit_weights, sampled_logits)
    return m.add(sampled_logits, sparse_ops.sparse_to_dense(
        sparse_indices, shape, hit_weights, default_value=0.0, validate_indices=False))


def nce_loss(weights, biases, labels, inputs, num_sampled, num_classes, num_true=1,
             sampled_values=None, remove_accidental_hits=False, partition_strategy="mod",
             name="nce_loss"):
    """The noise-contrastive estimation loss per example (TF1 `tf.nn.nce_loss`).

    Logits of the true and sampled classes, less log(expected count), go through a sigmoid
    cross-entropy with labels 1/num_true (true) and 0 (sampled), summed per example.

    Args:
        weights: [num_classes, dim] Tensor or Variable, list of shards or PartitionedVariable.
        biases: [num_classes] Tensor or Variable (sharded alike).
        labels: int64 [batch_size, num_true] target classes.
        inputs: float [batch_size, dim] activations.
        num_sampled: the number of classes to sample per batch.
        num_classes: the number of possible classes.
        num_true: the number of target classes per example.
        sampled_values: a sampler's (sampled, true_expected, sampled_expected) triple; default
            `log_uniform_candidate_sampler(unique=True)`.
        remove_accidental_hits: drop sampled classes that equal a target (-FLT_MAX logits).
        partition_strategy: "mod" or "div" for sharded weights and biases.
        name: name scope.

    Returns:
        A float Tensor [batch_size] of per-example losses.

    Raises:
        ValueError: labels or inputs shaped badly.
    """
    from kernflow.core.ops import nn_ops_impl
    logits, labels = _compute_sampled_logits(
        weights, biases, labels, inputs, num_sampled, num_classes, num_true, sampled_values,
        True, remove_accidental_hits, partition_strategy, name)
    losses = nn_ops_impl.sigmoid_cross_entropy_with_logits(labels=labels, logits=logits,
                                                           name="sampled_losses")
    return _m().reduce_sum(losses, [1])


def sampled_softmax_loss(weights, biases, labels, inputs, num_sampled, num_classes, num_true=1,
                         sampled_values=None, remove_accidental_hits=True,
                         partition_strategy="mod", name="sampled_softmax_loss", seed=None):
    """The sampled softmax training loss per example (TF1 `tf.nn.sampled_softmax_loss`).

    Arguments as `nce_loss`, except that accidental hits are removed by default and `seed`
    seeds the default sampler. The logits less log(expected count) go through a softmax
    cross-entropy with labels 1/num_true on the true classes.

    Returns:
        A float Tensor [batch_size] of per-example losses.
    """
    from kernflow.core.ops import nn_ops
    logits, labels = _compute_sampled_logits(
        weights, biases, labels, inputs, num_sampled, num_classes, num_true, sampled_values,
        True, remove_accidental_hits, partition_strategy, name, seed=seed)
    labels = _a().stop_gradient(labels, name="labels_stop_gradient")
    return nn_ops.softmax_cross_entropy_with_logits_v2(labels=labels, logits=logits)
