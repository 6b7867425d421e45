"""Helpers shared by the `kf.metrics` modules: metric variables, collections, squeezing."""

from kernflow.core.framework import dtypes as _dtypes
from kernflow.core.framework import ops as _ops
from kernflow.core.losses import remove_squeezable_dimensions

__all__ = ["metric_variable", "confusion_matrix"]


def _kf():
    import kernflow.core as kf
    return kf


# ------------------------------------------------------------------------------------ helpers
def metric_variable(shape, dtype, validate_shape=True, name=None):
    """A zero-initialized, non-trainable variable in LOCAL_VARIABLES and METRIC_VARIABLES."""
    kf = _kf()
    return kf.Variable(lambda: kf.zeros(shape, dtype), trainable=False,
                       collections=[_ops.GraphKeys.LOCAL_VARIABLES, _ops.GraphKeys.METRIC_VARIABLES],
                       validate_shape=validate_shape, name=name)


def _read(var, metrics_collections, name="value"):
    value = _kf().identity(var, name=name)
    _add(metrics_collections, value)
    return value


def _add(collections, tensor):
    if collections:
        _ops.add_to_collections(collections, tensor)


def _remove_squeezable_dimensions(predictions, labels, weights):
    """TF1 metrics' helper: squeezes labels vs predictions, then weights to predictions' rank
    (squeezing a trailing 1, or adding one)."""
    kf = _kf()
    predictions = _ops.convert_to_tensor(predictions)
    if labels is not None:
        labels, predictions = remove_squeezable_dimensions(labels, predictions)
        predictions.get_shape().assert_is_compatible_with(labels.get_shape())
    if weights is None:
        return predictions, labels, None
    weights = _ops.convert_to_tensor(weights)
    w_rank, p_rank = weights.get_shape().ndims, predictions.get_shape().ndims
    if w_rank == 0 or w_rank is None or p_rank is None:
        return predictions, labels, weights
    if w_rank - p_rank == 1 and weights.get_shape().as_list()[-1] in (1, None):
        weights = kf.squeeze(weights, [-1])
    elif p_rank - w_rank == 1:
        weights = kf.expand_dims(weights, -1)
    return predictions, labels, weights


def confusion_matrix(labels, predictions, num_classes, weights=None, dtype=_dtypes.int32, name=None):
    """TF1 `tf.confusion_matrix` for a Python int `num_classes`: rows are labels, columns
    predictions, entries the (weighted) counts."""
    kf = _kf()
    with _ops.name_scope(name, "confusion_matrix", [predictions, labels, num_classes, weights]):
        labels = kf.reshape(kf.cast(labels, _dtypes.int32), [-1])
        predictions = kf.reshape(kf.cast(predictions, _dtypes.int32), [-1])
        if weights is None:
            weights = kf.ones_like(predictions, dtype=dtype)
        else:
            weights = kf.reshape(kf.cast(weights, dtype), [-1])
        index = labels * num_classes + predictions
        flat = kf.unsorted_segment_sum(weights, index, num_classes * num_classes)
        return kf.reshape(flat, [num_classes, num_classes])
