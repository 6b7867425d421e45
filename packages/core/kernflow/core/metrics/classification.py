"""The counting metrics of `kf.metrics`: confusion counts (at thresholds), precision, recall,
AUC, sensitivity/specificity, mean IoU and mean per-class accuracy (TF1 metrics_impl)."""

import logging

import numpy as np

from kernflow.core.framework import dtypes as _dtypes
from kernflow.core.framework import ops as _ops
from kernflow.core.losses import broadcast_weights, div_no_nan
from kernflow.core.metrics.metric_utils import (_add, _read, _remove_squeezable_dimensions,
                                                confusion_matrix, metric_variable)

__all__ = ["auc", "false_negatives", "false_negatives_at_thresholds", "false_positives",
           "false_positives_at_thresholds", "mean_iou", "mean_per_class_accuracy", "precision",
           "precision_at_thresholds", "recall", "recall_at_thresholds", "sensitivity_at_specificity",
           "specificity_at_sensitivity", "true_negatives", "true_negatives_at_thresholds",
           "true_positives", "true_positives_at_thresholds"]

_f32 = _dtypes.float32
_log = logging.getLogger(__name__)


def _kf():
    import kernflow.core as kf
    return kf


# ------------------------------------------------------------------------ confusion counts
def _count_condition(values, weights, metrics_collections, updates_collections):
    """Streams the (weighted) number of true entries of the bool `values` into "count"."""
    kf = _kf()
    count = metric_variable([], _f32, name="count")
    values = kf.cast(values, _f32)
    if weights is not None:
        values = kf.multiply(values, kf.cast(weights, _f32))
    value = _read(count, metrics_collections)
    update_op = kf.assign_add(count, kf.reduce_sum(values))
    _add(updates_collections, update_op)
    return value, update_op


def _condition_metric(default_name, label_value, prediction_value):
    def metric(labels, predictions, weights=None, metrics_collections=None, updates_collections=None,
               name=None):
        kf = _kf()
        with kf.variable_scope(name, default_name, (predictions, labels, weights)):
            predictions, labels, weights = _remove_squeezable_dimensions(
                kf.cast(predictions, _dtypes.bool), kf.cast(labels, _dtypes.bool), weights)
            is_case = kf.logical_and(kf.equal(labels, label_value),
                                     kf.equal(predictions, prediction_value))
            return _count_condition(is_case, weights, metrics_collections, updates_collections)
    metric.__name__ = default_name
    metric.__doc__ = (f"The streaming (weighted) count of {default_name.replace('_', ' ')} "
                      f'(labels {label_value}, predictions {prediction_value}), in "{default_name}/count".')
    return metric


true_positives = _condition_metric("true_positives", True, True)
false_positives = _condition_metric("false_positives", False, True)
true_negatives = _condition_metric("true_negatives", False, False)
false_negatives = _condition_metric("false_negatives", True, False)

_VAR_NAMES = {"tp": "true_positives", "fn": "false_negatives", "tn": "true_negatives",
              "fp": "false_positives"}


def _confusion_matrix_at_thresholds(labels, predictions, thresholds, weights=None, includes=None):
    """Streams tp/fn/tn/fp counts at each threshold (prediction > threshold is positive).

    Returns:
        (values, update_ops): dicts keyed by the `includes` among "tp", "fn", "tn", "fp"; values
        are the [num_thresholds] variables.
    """
    kf = _kf()
    includes = includes or ("tp", "fn", "tn", "fp")
    for key in includes:
        if key not in _VAR_NAMES:
            raise ValueError(f"Invalid key: {key}")
    predictions, labels, weights = _remove_squeezable_dimensions(
        kf.cast(predictions, _f32), kf.cast(labels, _dtypes.bool), weights)
    num_thresholds = len(thresholds)
    predictions_2d = kf.reshape(predictions, [-1, 1])
    labels_2d = kf.reshape(labels, [1, -1])
    num_predictions = kf.shape(predictions_2d)[0]
    thresh = kf.constant(np.asarray(thresholds, np.float32).reshape(-1, 1))
    thresh_tiled = kf.tile(thresh, kf.stack([1, num_predictions]))
    preds_tiled = kf.tile(kf.transpose(predictions_2d), [num_thresholds, 1])
    pred_is_pos = kf.greater(preds_tiled, thresh_tiled)
    pred_is_neg = kf.logical_not(pred_is_pos)
    label_is_pos = kf.tile(labels_2d, [num_thresholds, 1])
    label_is_neg = kf.logical_not(label_is_pos)
    weights_tiled = None
    if weights is not None:
        weights = broadcast_weights(kf.cast(weights, _f32), predictions)
        weights_tiled = kf.tile(kf.reshape(weights, [1, -1]), [num_thresholds, 1])
    cases = {"tp": (label_is_pos, pred_is_pos), "fn": (label_is_pos, pred_is_neg),
             "tn": (label_is_neg, pred_is_neg), "fp": (label_is_neg, pred_is_pos)}
    values, update_ops = {}, {}
    for key in includes:
        var = metric_variable([num_thresholds], _f32, name=_VAR_NAMES[key])
        hits = kf.cast(kf.logical_and(*cases[key]), _f32)
        if weights_tiled is not None:
            hits = kf.multiply(hits, weights_tiled)
        values[key] = var
        update_ops[key] = kf.assign_add(var, kf.reduce_sum(hits, 1))
    return values, update_ops


def _at_thresholds_metric(key, default_name):
    def metric(labels, predictions, thresholds, weights=None, metrics_collections=None,
               updates_collections=None, name=None):
        kf = _kf()
        with kf.variable_scope(name, default_name, (predictions, labels, weights)):
            values, update_ops = _confusion_matrix_at_thresholds(labels, predictions, thresholds,
                                                                 weights, includes=(key,))
            return _read(values[key], metrics_collections), _added(updates_collections,
                                                                   update_ops[key])
    metric.__name__ = default_name + "_at_thresholds"
    metric.__doc__ = (f"The streaming [len(thresholds)] counts of {default_name.replace('_', ' ')},"
                      " a prediction > threshold being positive.")
    return metric


def _added(collections, tensor):
    _add(collections, tensor)
    return tensor


true_positives_at_thresholds = _at_thresholds_metric("tp", "true_positives")
false_positives_at_thresholds = _at_thresholds_metric("fp", "false_positives")
true_negatives_at_thresholds = _at_thresholds_metric("tn", "true_negatives")
false_negatives_at_thresholds = _at_thresholds_metric("fn", "false_negatives")


# ------------------------------------------------------------------------- precision/recall
def _ratio_metric(default_name, other_metric):
    def metric(labels, predictions, weights=None, metrics_collections=None, updates_collections=None,
               name=None):
        kf = _kf()
        with kf.variable_scope(name, default_name, (predictions, labels, weights)):
            predictions, labels, weights = _remove_squeezable_dimensions(
                kf.cast(predictions, _dtypes.bool), kf.cast(labels, _dtypes.bool), weights)
            tp, tp_update = true_positives(labels, predictions, weights)
            other, other_update = other_metric(labels, predictions, weights)

            def ratio(t, o, op_name):
                return kf.where(kf.greater(t + o, 0.0), kf.truediv(t, kf.maximum(t + o, 1e-30)), 0.0,
                                name=op_name)
            value = ratio(tp, other, "value")
            update_op = ratio(tp_update, other_update, "update_op")
            _add(metrics_collections, value)
            _add(updates_collections, update_op)
            return value, update_op
    metric.__name__ = default_name
    return metric


precision = _ratio_metric("precision", false_positives)
precision.__doc__ = "tp / (tp + fp) over the batches so far (0 when there are none)."
recall = _ratio_metric("recall", false_negatives)
recall.__doc__ = "tp / (tp + fn) over the batches so far (0 when there are none)."


def _thresholds_ratio(default_name, other):
    def metric(labels, predictions, thresholds, weights=None, metrics_collections=None,
               updates_collections=None, name=None):
        kf = _kf()
        with kf.variable_scope(name, default_name, (predictions, labels, weights)):
            values, update_ops = _confusion_matrix_at_thresholds(labels, predictions, thresholds,
                                                                 weights, includes=("tp", other))
            prefix = default_name.split("_")[0] + "_"

            def ratio(tp, o, op_name):
                return kf.truediv(tp, 1e-7 + tp + o, name=prefix + op_name)
            value = ratio(values["tp"], values[other], "value")
            update_op = ratio(update_ops["tp"], update_ops[other], "update_op")
            _add(metrics_collections, value)
            _add(updates_collections, update_op)
            return value, update_op
    metric.__name__ = default_name
    return metric


precision_at_thresholds = _thresholds_ratio("precision_at_thresholds", "fp")
precision_at_thresholds.__doc__ = "tp / (tp + fp + 1e-7) at each threshold, streamed."
recall_at_thresholds = _thresholds_ratio("recall_at_thresholds", "fn")
recall_at_thresholds.__doc__ = "tp / (tp + fn + 1e-7) at each threshold, streamed."


# ---------------------------------------------------------------------------------------- auc
def _interpolate_pr_auc(kf, tp, fp, fn, n):
    """PR-AUC by Davis & Goadrich's interpolation (TF1's 'careful_interpolation')."""
    dtp = tp[:n - 1] - tp[1:]
    p = tp + fp
    prec_slope = div_no_nan(dtp, kf.maximum(p[:n - 1] - p[1:], 0.0), name="prec_slope")
    intercept = tp[1:] - kf.multiply(prec_slope, p[1:])
    safe_p_ratio = kf.where(kf.logical_and(p[:n - 1] > 0, p[1:] > 0),
                            div_no_nan(p[:n - 1], kf.maximum(p[1:], 0.0), name="recall_relative_ratio"),
                            kf.ones_like(p[1:]))
    increments = div_no_nan(prec_slope * (dtp + intercept * kf.log(safe_p_ratio)),
                            kf.maximum(tp[1:] + fn[1:], 0.0), name="pr_auc_increment")
    return kf.reduce_sum(increments, name="interpolate_pr_auc")


def _compute_auc(kf, counts, curve, summation_method, n, name):
    tp, fn, tn, fp = counts["tp"], counts["fn"], counts["tn"], counts["fp"]
    if curve == "PR" and summation_method == "careful_interpolation":
        return _interpolate_pr_auc(kf, tp, fp, fn, n)
    epsilon = 1.0e-6
    rec = kf.truediv(tp + epsilon, tp + fn + epsilon)
    if curve == "ROC":
        x, y = kf.truediv(fp, fp + tn + epsilon), rec
    else:
        x, y = rec, kf.truediv(tp + epsilon, tp + fp + epsilon)
    heights = {"trapezoidal": lambda: (y[:n - 1] + y[1:]) / 2.0,
               "careful_interpolation": lambda: (y[:n - 1] + y[1:]) / 2.0,
               "minoring": lambda: kf.minimum(y[:n - 1], y[1:]),
               "majoring": lambda: kf.maximum(y[:n - 1], y[1:])}[summation_method]()
    return kf.reduce_sum(kf.multiply(x[:n - 1] - x[1:], heights), name=name)


def _thresholds(num_thresholds, kepsilon=1e-7):
    inner = [(i + 1) * 1.0 / (num_thresholds - 1) for i in range(num_thresholds - 2)]
    return [0.0 - kepsilon] + inner + [1.0 + kepsilon]


def auc(labels, predictions, weights=None, num_thresholds=200, metrics_collections=None,
        updates_collections=None, curve="ROC", name=None, summation_method="trapezoidal",
        thresholds=None):
    """Approximate area under the ROC or PR curve by a Riemann sum over thresholds.

    Args:
        labels: bool-castable labels of predictions' shape.
        predictions: floats in [0, 1].
        weights: None, or broadcastable to predictions.
        num_thresholds: the number of thresholds (ignored when `thresholds` is given).
        curve: "ROC" or "PR".
        summation_method: "trapezoidal", "careful_interpolation", "minoring" or "majoring".
        thresholds: explicit thresholds in (0, 1); -1e-7 and 1 + 1e-7 are added.

    Returns:
        (auc, update_op), scalars.

    Raises:
        ValueError: an unknown curve or summation method.
    """
    kf = _kf()
    if curve not in ("ROC", "PR"):
        raise ValueError(f"curve must be either ROC or PR, {curve} unknown")
    if summation_method not in ("trapezoidal", "careful_interpolation", "minoring", "majoring"):
        raise ValueError(f"Invalid summation_method: {summation_method}")
    if curve == "PR" and summation_method == "trapezoidal":
        _log.warning("Trapezoidal rule is known to produce incorrect PR-AUCs; "
                     'please switch to "careful_interpolation" instead.')
    with kf.variable_scope(name, "auc", (labels, predictions, weights)):
        if thresholds is not None:
            thresholds = [-1e-7] + sorted(thresholds) + [1.0 + 1e-7]
        else:
            thresholds = _thresholds(num_thresholds)
        n = len(thresholds)
        values, update_ops = _confusion_matrix_at_thresholds(labels, predictions, thresholds, weights)
        value = _compute_auc(kf, values, curve, summation_method, n, "value")
        update_op = _compute_auc(kf, update_ops, curve, summation_method, n, "update_op")
        _add(metrics_collections, value)
        _add(updates_collections, update_op)
        return value, update_op


def _check_rate(value, what):
    if value < 0 or value > 1:
        raise ValueError(f"`{what}` must be in the range [0, 1].")


def sensitivity_at_specificity(labels, predictions, specificity, weights=None, num_thresholds=200,
                               metrics_collections=None, updates_collections=None, name=None):
    """The sensitivity at the threshold whose specificity is closest to `specificity` (the first
    such threshold). Raises ValueError when specificity is outside [0, 1]."""
    kf = _kf()
    _check_rate(specificity, "specificity")
    with kf.variable_scope(name, "sensitivity_at_specificity", (predictions, labels, weights)):
        kepsilon = 1e-7
        values, update_ops = _confusion_matrix_at_thresholds(labels, predictions,
                                                             _thresholds(num_thresholds), weights)

        def compute(c, op_name):
            specificities = kf.truediv(c["tn"], c["tn"] + c["fp"] + kepsilon)
            index = kf.cast(kf.argmin(kf.abs(specificities - specificity), 0), _dtypes.int32)
            tp, fn = kf.gather(c["tp"], index), kf.gather(c["fn"], index)
            return kf.truediv(tp, tp + fn + kepsilon, name=op_name)
        value, update_op = compute(values, "value"), compute(update_ops, "update_op")
        _add(metrics_collections, value)
        _add(updates_collections, update_op)
        return value, update_op


def specificity_at_sensitivity(labels, predictions, sensitivity, weights=None, num_thresholds=200,
                               metrics_collections=None, updates_collections=None, name=None):
    """The specificity at the threshold whose sensitivity is closest to `sensitivity` (the last
    such threshold). Raises ValueError when sensitivity is outside [0, 1]."""
    kf = _kf()
    _check_rate(sensitivity, "sensitivity")
    with kf.variable_scope(name, "specificity_at_sensitivity", (predictions, labels, weights)):
        kepsilon = 1e-7
        values, update_ops = _confusion_matrix_at_thresholds(labels, predictions,
                                                             _thresholds(num_thresholds), weights)

        def compute(c, op_name):
            distance = kf.abs(kf.truediv(c["tp"], c["tp"] + c["fn"] + kepsilon) - sensitivity)
            at_min = kf.cast(kf.equal(distance, kf.reduce_min(distance)), _dtypes.int64)
            # argmax of the running count of minima: the last index at the minimum.
            index = kf.cast(kf.argmax(kf.cumsum(at_min), 0), _dtypes.int32)
            tn, fp = kf.gather(c["tn"], index), kf.gather(c["fp"], index)
            return kf.truediv(tn, tn + fp + kepsilon, name=op_name)
        value, update_op = compute(values, "value"), compute(update_ops, "update_op")
        _add(metrics_collections, value)
        _add(updates_collections, update_op)
        return value, update_op


# ---------------------------------------------------------------------------- multi-class
def _flat(kf, t):
    return kf.reshape(t, [-1]) if t.get_shape().ndims != 1 else t


def mean_iou(labels, predictions, num_classes, weights=None, metrics_collections=None,
             updates_collections=None, name=None):
    """Mean intersection-over-union over the classes that occur, from a streamed
    [num_classes, num_classes] float64 confusion matrix "total_confusion_matrix".

    Returns:
        (mean_iou, update_op); as in TF1, update_op yields the updated confusion matrix.

    Raises:
        ValueError: predictions and labels have incompatible shapes.
    """
    kf = _kf()
    with kf.variable_scope(name, "mean_iou", (predictions, labels, weights)):
        predictions = _ops.convert_to_tensor(predictions)
        labels = _ops.convert_to_tensor(labels)
        predictions.get_shape().assert_is_compatible_with(labels.get_shape())
        total_cm = metric_variable([num_classes, num_classes], _dtypes.float64,
                                   name="total_confusion_matrix")
        if weights is not None:
            weights = _flat(kf, _ops.convert_to_tensor(weights))
        current = confusion_matrix(_flat(kf, labels), _flat(kf, predictions), num_classes,
                                   weights=weights, dtype=_dtypes.float64)
        update_op = kf.assign_add(total_cm, current)
        cm = kf.cast(total_cm, _f32)
        diag = kf.reduce_sum(cm * kf.constant(np.eye(num_classes, dtype=np.float32)), 1)
        denominator = kf.reduce_sum(cm, 0) + kf.reduce_sum(cm, 1) - diag
        num_valid = kf.reduce_sum(kf.cast(kf.not_equal(denominator, 0.0), _f32))
        denominator = kf.where(kf.greater(denominator, 0.0), denominator, kf.ones_like(denominator))
        iou_sum = kf.reduce_sum(kf.truediv(diag, denominator), name="mean_iou")
        value = kf.where(kf.greater(num_valid, 0.0), iou_sum / kf.maximum(num_valid, 1.0), 0.0,
                         name="value")
        _add(metrics_collections, value)
        _add(updates_collections, update_op)
        return value, update_op


def mean_per_class_accuracy(labels, predictions, num_classes, weights=None, metrics_collections=None,
                            updates_collections=None, name=None):
    """The mean over classes of each class's accuracy (its correct / its labels).

    Variables (TF1's names): "mean_accuracy/total" counts the labels of each class,
    "mean_accuracy/count" the correct ones. As in TF1, update_op yields the per-class
    accuracies [num_classes].

    Raises:
        ValueError: predictions and labels have incompatible shapes.
    """
    kf = _kf()
    with kf.variable_scope(name, "mean_accuracy", (predictions, labels, weights)):
        labels = _flat(kf, kf.cast(labels, _dtypes.int64))
        predictions = _flat(kf, _ops.convert_to_tensor(predictions))
        predictions.get_shape().assert_is_compatible_with(labels.get_shape())
        total = metric_variable([num_classes], _f32, name="total")
        count = metric_variable([num_classes], _f32, name="count")
        ones = kf.ones_like(labels, dtype=_f32)
        if labels.dtype.base_dtype != predictions.dtype.base_dtype:
            predictions = kf.cast(predictions, labels.dtype.base_dtype)
        is_correct = kf.cast(kf.equal(predictions, labels), _f32)
        if weights is not None:
            weights = _flat(kf, kf.cast(weights, _f32))
            is_correct *= weights
            ones *= weights
        update_total_op = kf.scatter_add(total, labels, ones)
        update_count_op = kf.scatter_add(count, labels, is_correct)
        per_class = div_no_nan(count, kf.maximum(total, 0.0))
        value = kf.reduce_mean(per_class, name="mean_accuracy")
        _add(metrics_collections, value)
        update_op = div_no_nan(update_count_op, kf.maximum(update_total_op, 0.0), name="update_op")
        _add(updates_collections, update_op)
        return value, update_op
