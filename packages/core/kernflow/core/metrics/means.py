"""The averaging metrics of `kf.metrics`: mean, mean_tensor, accuracy and the error means."""

from kernflow.core.framework import dtypes as _dtypes
from kernflow.core.losses import broadcast_weights, div_no_nan, remove_squeezable_dimensions
from kernflow.core.metrics.metric_utils import _add, _remove_squeezable_dimensions, metric_variable

__all__ = ["accuracy", "mean", "mean_absolute_error", "mean_cosine_distance", "mean_relative_error",
           "mean_squared_error", "mean_tensor", "percentage_below", "root_mean_squared_error"]

_f32 = _dtypes.float32


def _kf():
    import kernflow.core as kf
    return kf


def mean(values, weights=None, metrics_collections=None, updates_collections=None, name=None):
    """The (weighted) mean of all `values` seen: variables "<name>/total" and "<name>/count"."""
    kf = _kf()
    with kf.variable_scope(name, "mean", (values, weights)):
        values = kf.cast(values, _f32)
        total = metric_variable([], _f32, name="total")
        count = metric_variable([], _f32, name="count")
        if weights is None:
            num_values = kf.cast(kf.size(values), _f32)
        else:
            values, _, weights = _remove_squeezable_dimensions(values, None, weights)
            weights = broadcast_weights(kf.cast(weights, _f32), values)
            values = kf.multiply(values, weights)
            num_values = kf.reduce_sum(weights)
        update_total_op = kf.assign_add(total, kf.reduce_sum(values))
        with kf.control_dependencies([values]):
            update_count_op = kf.assign_add(count, num_values)
        mean_t = div_no_nan(total, kf.maximum(count, 0.0), name="value")
        _add(metrics_collections, mean_t)
        update_op = div_no_nan(update_total_op, kf.maximum(update_count_op, 0.0), name="update_op")
        _add(updates_collections, update_op)
        return mean_t, update_op


def mean_tensor(values, weights=None, metrics_collections=None, updates_collections=None, name=None):
    """The element-wise (weighted) mean of `values` over the batches: "total_tensor" and
    "count_tensor" variables of values' (fully defined) shape."""
    kf = _kf()
    with kf.variable_scope(name, "mean", (values, weights)):
        values = kf.cast(values, _f32)
        total = metric_variable(values.get_shape().as_list(), _f32, name="total_tensor")
        count = metric_variable(values.get_shape().as_list(), _f32, name="count_tensor")
        num_values = kf.ones_like(values)
        if weights is not None:
            values, _, weights = _remove_squeezable_dimensions(values, None, weights)
            weights = broadcast_weights(kf.cast(weights, _f32), values)
            values = kf.multiply(values, weights)
            num_values = kf.multiply(num_values, weights)
        update_total_op = kf.assign_add(total, values)
        with kf.control_dependencies([values]):
            update_count_op = kf.assign_add(count, num_values)
        mean_t = kf.truediv(total, kf.maximum(count, 1.0), name="value")
        _add(metrics_collections, mean_t)
        update_op = kf.truediv(update_total_op, kf.maximum(update_count_op, 1.0), name="update_op")
        _add(updates_collections, update_op)
        return mean_t, update_op


def accuracy(labels, predictions, weights=None, metrics_collections=None, updates_collections=None,
             name=None):
    """How often predictions equal labels: `mean` of the matches, scope "accuracy".

    Raises:
        ValueError: predictions and labels have incompatible shapes.
    """
    kf = _kf()
    predictions, labels, weights = _remove_squeezable_dimensions(predictions, labels, weights)
    if labels.dtype.base_dtype != predictions.dtype.base_dtype:
        predictions = kf.cast(predictions, labels.dtype.base_dtype)
    is_correct = kf.cast(kf.equal(predictions, labels), _f32)
    return mean(is_correct, weights, metrics_collections, updates_collections, name or "accuracy")


def _mean_of(fn, default_name):
    """A metric that is `mean` of fn(labels, predictions) (after the shapes are checked)."""
    def metric(labels, predictions, weights=None, metrics_collections=None, updates_collections=None,
               name=None):
        kf = _kf()
        predictions, labels, weights = _remove_squeezable_dimensions(predictions, labels, weights)
        errors = fn(kf, kf.cast(labels, _f32), kf.cast(predictions, _f32))
        return mean(errors, weights, metrics_collections, updates_collections, name or default_name)
    metric.__name__ = default_name
    metric.__doc__ = (f"`mean` of the element-wise {default_name.replace('_', ' ')}, scope "
                      f'"{default_name}". Raises ValueError on incompatible shapes.')
    return metric


mean_absolute_error = _mean_of(lambda kf, lab, pred: kf.abs(pred - lab), "mean_absolute_error")
mean_squared_error = _mean_of(lambda kf, lab, pred: kf.squared_difference(pred, lab), "mean_squared_error")


def root_mean_squared_error(labels, predictions, weights=None, metrics_collections=None,
                            updates_collections=None, name=None):
    """sqrt of the streaming mean squared error, scope "root_mean_squared_error"."""
    kf = _kf()
    mse, update_mse = mean_squared_error(labels, predictions, weights, None, None,
                                         name or "root_mean_squared_error")
    rmse, update_op = kf.sqrt(mse), kf.sqrt(update_mse)
    _add(metrics_collections, rmse)
    _add(updates_collections, update_op)
    return rmse, update_op


def mean_relative_error(labels, predictions, normalizer, weights=None, metrics_collections=None,
                        updates_collections=None, name=None):
    """`mean` of |labels - predictions| / normalizer (0 where the normalizer is 0)."""
    kf = _kf()
    predictions, labels, weights = _remove_squeezable_dimensions(predictions, labels, weights)
    predictions = kf.cast(predictions, _f32)
    labels = kf.cast(labels, _f32)
    normalizer, predictions = remove_squeezable_dimensions(kf.cast(normalizer, _f32), predictions)
    predictions.get_shape().assert_is_compatible_with(normalizer.get_shape())
    safe = kf.where(kf.equal(normalizer, 0.0), kf.ones_like(normalizer), normalizer)
    relative = kf.where(kf.equal(normalizer, 0.0), kf.zeros_like(labels),
                        kf.truediv(kf.abs(labels - predictions), safe))
    return mean(relative, weights, metrics_collections, updates_collections,
                name or "mean_relative_error")


def mean_cosine_distance(labels, predictions, dim, weights=None, metrics_collections=None,
                         updates_collections=None, name=None):
    """1 - the streaming mean of sum(labels * predictions, dim) (inputs unit-normalized)."""
    kf = _kf()
    predictions, labels, weights = _remove_squeezable_dimensions(predictions, labels, weights)
    radial = kf.reduce_sum(kf.cast(predictions, _f32) * kf.cast(labels, _f32), axis=[dim],
                           keepdims=True)
    mean_distance, update_op = mean(radial, weights, None, None, name or "mean_cosine_distance")
    mean_distance = kf.subtract(1.0, mean_distance)
    update_op = kf.subtract(1.0, update_op)
    _add(metrics_collections, mean_distance)
    _add(updates_collections, update_op)
    return mean_distance, update_op


def percentage_below(values, threshold, weights=None, metrics_collections=None,
                     updates_collections=None, name=None):
    """The (weighted) fraction of `values` below `threshold`."""
    kf = _kf()
    is_below = kf.cast(kf.less(values, threshold), _f32)
    return mean(is_below, weights, metrics_collections, updates_collections,
                name or "percentage_below_threshold")
