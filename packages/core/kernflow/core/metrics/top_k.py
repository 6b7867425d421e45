"""The top-k metrics of `kf.metrics`: precision/recall/average precision at k (TF1 metrics_impl).

TF1 computes these with set ops (set_intersection, set_difference, set_size); kernflow has none,
so each row's sets are compared element-wise: ``hit[b, i, j]`` says whether the i-th predicted
id of row b equals its j-th label. Labels are a dense int tensor [D1..DN, num_labels] (or
[D1..DN]), or a SparseTensor; repeated label values count once, as in a set. Counts are float64,
as in TF1, in variables named by name scopes ("precision_at_5/true_positive_at_5").
"""

from kernflow.core.framework import dtypes as _dtypes
from kernflow.core.framework import ops as _ops
from kernflow.core.losses import broadcast_weights, div_no_nan
from kernflow.core.metrics.metric_utils import _add, metric_variable

__all__ = ["average_precision_at_k", "precision_at_k", "precision_at_top_k", "recall_at_k",
           "recall_at_top_k", "sparse_average_precision_at_k", "sparse_precision_at_k"]

_f64 = _dtypes.float64


def _kf():
    import kernflow.core as kf
    return kf


def _at_k_name(name, k=None, class_id=None):
    if k is not None:
        name = f"{name}_at_{k}"
    else:
        name = f"{name}_at_k"
    if class_id is not None:
        name = f"{name}_class{class_id}"
    return name


def _labels_2d(labels, predictions_idx):
    """(labels [rows, num_labels] int64, valid [rows, num_labels] bool): dense labels are all
    valid (a trailing dimension is added when labels have one less rank than predictions_idx);
    a SparseTensor's missing entries are not."""
    kf = _kf()
    if isinstance(labels, kf.SparseTensor):
        dense = kf.sparse_tensor_to_dense(kf.SparseTensor(labels.indices, kf.cast(labels.values,
                                                                                   _dtypes.int64),
                                                          labels.dense_shape), default_value=-1)
        present = kf.SparseTensor(labels.indices, kf.ones_like(labels.values, dtype=_dtypes.bool),
                                  labels.dense_shape)
        valid = kf.sparse_tensor_to_dense(present, default_value=False)
    else:
        dense = kf.cast(labels, _dtypes.int64)
        p_rank, l_rank = predictions_idx.get_shape().ndims, dense.get_shape().ndims
        if p_rank is not None and l_rank is not None and l_rank == p_rank - 1:
            dense = kf.expand_dims(dense, -1)
        valid = kf.ones_like(dense, dtype=_dtypes.bool)
    num_labels = kf.shape(dense)[-1]
    return kf.reshape(dense, kf.stack([-1, num_labels])), kf.reshape(valid, kf.stack([-1, num_labels]))


def _first_occurrence(kf, labels, valid):
    """[rows, L] bool: valid and not equal to an earlier valid label of the row."""
    same = kf.logical_and(kf.equal(kf.expand_dims(labels, 2), kf.expand_dims(labels, 1)),
                          kf.expand_dims(valid, 1))
    positions = kf.range(kf.shape(labels)[-1])
    earlier = kf.less(kf.expand_dims(positions, 0), kf.expand_dims(positions, 1))  # [j, j'] j' < j
    duplicate = kf.reduce_any(kf.logical_and(same, earlier), axis=2)
    return kf.logical_and(valid, kf.logical_not(duplicate))


class _Rows:
    """Per-row membership of a [rows, k] id matrix against the [rows, L] label sets."""

    def __init__(self, kf, ids, labels, valid, class_id=None):
        hit = kf.logical_and(kf.equal(kf.expand_dims(ids, 2), kf.expand_dims(labels, 1)),
                             kf.expand_dims(valid, 1))
        self.pred_in_labels = kf.reduce_any(hit, axis=2)       # [rows, k]
        label_first = _first_occurrence(kf, labels, valid)
        self.label_in_preds = kf.logical_and(kf.reduce_any(hit, axis=1), label_first)  # [rows, L]
        self.label_first = label_first
        self.pred_kept = kf.ones_like(ids, dtype=_dtypes.bool)
        if class_id is not None:  # only the selected class is kept in both sets
            self.pred_kept = kf.equal(ids, class_id)
            self.label_first = kf.logical_and(label_first, kf.equal(labels, class_id))
            self.pred_in_labels = kf.logical_and(self.pred_in_labels, self.pred_kept)
            self.label_in_preds = kf.logical_and(self.label_in_preds, self.label_first)

    @staticmethod
    def count(kf, mask):
        return kf.reduce_sum(kf.cast(mask, _f64), axis=1)

    def tp(self, kf):
        return self.count(kf, self.pred_in_labels)

    def fp(self, kf):
        return self.count(kf, kf.logical_and(self.pred_kept, kf.logical_not(self.pred_in_labels)))

    def fn(self, kf):
        return self.count(kf, kf.logical_and(self.label_first, kf.logical_not(self.label_in_preds)))


def _row_weights(kf, weights, per_row_shape_source):
    """weights broadcast to predictions_idx's [D1..DN] and flattened to [rows]."""
    weights = broadcast_weights(kf.cast(weights, _f64), per_row_shape_source)
    return kf.reshape(weights, [-1])


def _streaming_count(kf, rows_count, weights, name, k, class_id):
    with _ops.name_scope(None, _at_k_name(name, k, class_id)) as scope:
        if weights is not None:
            rows_count = kf.multiply(rows_count, weights)
        var = metric_variable([], _f64, name=scope)
        return var, kf.assign_add(var, kf.reduce_sum(rows_count), name="update")


def _top_k_ratio(kind, labels, predictions_idx, k, class_id, weights, metrics_collections,
                 updates_collections, name):
    kf = _kf()
    with _ops.name_scope(name, _at_k_name(kind, k, class_id),
                         (predictions_idx, labels, weights)) as scope:
        ids = kf.cast(_ops.convert_to_tensor(predictions_idx), _dtypes.int64)
        if ids.get_shape().ndims is not None and ids.get_shape().ndims < 1:
            raise ValueError(f"predictions_idx must have rank >= 1, got shape {ids.get_shape()}")
        k_static = ids.get_shape().as_list()[-1] if ids.get_shape().ndims else None
        if k is not None and k_static is not None and k != k_static:
            raise ValueError(f"k={k} does not match predictions_idx's last dimension {k_static}")
        label_rows, valid = _labels_2d(labels, ids)
        flat_ids = kf.reshape(ids, kf.stack([-1, kf.shape(ids)[-1]]))
        rows = _Rows(kf, flat_ids, label_rows, valid, class_id)
        w = None
        if weights is not None:
            w = _row_weights(kf, weights, kf.zeros(kf.shape(ids)[:-1], _f64))
        tp, tp_update = _streaming_count(kf, rows.tp(kf), w, "true_positive", k, class_id)
        other_name = "false_positive" if kind == "precision" else "false_negative"
        other_rows = rows.fp(kf) if kind == "precision" else rows.fn(kf)
        other, other_update = _streaming_count(kf, other_rows, w, other_name, k, class_id)
        value = kf.truediv(tp, kf.add(tp, other), name=scope)
        update = kf.truediv(tp_update, kf.add(tp_update, other_update), name="update")
        _add(metrics_collections, value)
        _add(updates_collections, update)
        return value, update


def precision_at_top_k(labels, predictions_idx, k=None, class_id=None, weights=None,
                       metrics_collections=None, updates_collections=None, name=None):
    """Streaming precision of top-k ids: the fraction of predicted ids that are labels.

    Args:
        labels: int [D1..DN, num_labels] or [D1..DN], or a SparseTensor, of class ids.
        predictions_idx: int [D1..DN, k], the predicted ids (distinct in a row).
        k: optional, checked against predictions_idx and used in names.
        class_id: when given, the precision of that class alone.
        weights: None, or broadcastable to [D1..DN] (one weight per row).

    Returns:
        (precision, update_op), float64; NaN while nothing was predicted, as in TF1.
    """
    return _top_k_ratio("precision", labels, predictions_idx, k, class_id, weights,
                        metrics_collections, updates_collections, name)


def recall_at_top_k(labels, predictions_idx, k=None, class_id=None, weights=None,
                    metrics_collections=None, updates_collections=None, name=None):
    """Streaming recall of top-k ids: the fraction of labels among the predicted ids.

    Arguments as `precision_at_top_k`. Returns (recall, update_op), float64, NaN without labels.
    """
    return _top_k_ratio("recall", labels, predictions_idx, k, class_id, weights,
                        metrics_collections, updates_collections, name)


def _check_k(k):
    if k is None or k < 1:
        raise ValueError(f"Invalid k={k}.")


def precision_at_k(labels, predictions, k, class_id=None, weights=None, metrics_collections=None,
                   updates_collections=None, name=None):
    """`precision_at_top_k` of the top `k` classes of the [D1..DN, num_classes] `predictions`."""
    kf = _kf()
    _check_k(k)
    with _ops.name_scope(name, _at_k_name("precision", k, class_id),
                         (predictions, labels, weights)) as scope:
        _, top_k_idx = kf.nn.top_k(predictions, k)
        return precision_at_top_k(labels, top_k_idx, k, class_id, weights, metrics_collections,
                                  updates_collections, name=scope)


def recall_at_k(labels, predictions, k, class_id=None, weights=None, metrics_collections=None,
                updates_collections=None, name=None):
    """`recall_at_top_k` of the top `k` classes of the [D1..DN, num_classes] `predictions`."""
    kf = _kf()
    _check_k(k)
    with _ops.name_scope(name, _at_k_name("recall", k, class_id),
                         (predictions, labels, weights)) as scope:
        _, top_k_idx = kf.nn.top_k(predictions, k)
        return recall_at_top_k(labels, top_k_idx, k, class_id, weights, metrics_collections,
                               updates_collections, name=scope)


def sparse_precision_at_k(labels, predictions, k, class_id=None, weights=None,
                          metrics_collections=None, updates_collections=None, name=None):
    """The deprecated TF1 alias of `precision_at_k`."""
    return precision_at_k(labels, predictions, k, class_id, weights, metrics_collections,
                          updates_collections, name)


def _average_precision_rows(kf, labels, ids, k):
    """[rows] average precision@k: sum over relevant ranks of precision@rank / min(|labels|, k)."""
    label_rows, valid = _labels_2d(labels, ids)
    flat_ids = kf.reshape(ids, kf.stack([-1, kf.shape(ids)[-1]]))
    rows = _Rows(kf, flat_ids, label_rows, valid)
    relevant = kf.cast(rows.pred_in_labels, _f64)                     # [rows, k]
    tp_per_k = kf.cumsum(relevant, axis=1)
    retrieved = kf.cumsum(kf.ones_like(relevant), axis=1)
    precision_sum = kf.reduce_sum(tp_per_k / retrieved * relevant, axis=1)
    num_relevant = kf.minimum(_Rows.count(kf, rows.label_first), float(k))
    return kf.truediv(precision_sum, num_relevant)


def average_precision_at_k(labels, predictions, k, weights=None, metrics_collections=None,
                           updates_collections=None, name=None):
    """Streaming mean average precision@k of the [D1..DN, num_classes] `predictions`.

    Variables "<scope>/max" (the rows, or their weights) and "<scope>/total" (the summed AP).

    Raises:
        ValueError: k < 1.
    """
    kf = _kf()
    _check_k(k)
    with _ops.name_scope(name, _at_k_name("average_precision", k), (predictions, labels, weights)) \
            as scope:
        _, ids = kf.nn.top_k(predictions, k)
        ids = kf.cast(ids, _dtypes.int64)
        average_precision = _average_precision_rows(kf, labels, ids, k)
        if weights is not None:
            weights = _row_weights(kf, weights, kf.zeros(kf.shape(ids)[:-1], _f64))
            average_precision = kf.multiply(average_precision, weights)
        with _ops.name_scope(None, "max") as max_scope:
            max_var = metric_variable([], _f64, name=max_scope)
            batch_max = (kf.cast(kf.size(average_precision), _f64) if weights is None
                         else kf.reduce_sum(weights, name="batch_max"))
            max_update = kf.assign_add(max_var, batch_max, name="update")
        with _ops.name_scope(None, "total") as total_scope:
            total_var = metric_variable([], _f64, name=total_scope)
            total_update = kf.assign_add(total_var, kf.reduce_sum(average_precision), name="update")
        value = div_no_nan(total_var, max_var, name="mean")
        update = div_no_nan(total_update, max_update, name=scope)
        _add(metrics_collections, value)
        _add(updates_collections, update)
        return value, update


def sparse_average_precision_at_k(labels, predictions, k, weights=None, metrics_collections=None,
                                  updates_collections=None, name=None):
    """The deprecated TF1 alias of `average_precision_at_k`."""
    return average_precision_at_k(labels, predictions, k, weights, metrics_collections,
                                  updates_collections, name)
