"""The heads of the canned estimators: logits -> predictions, loss, metrics, train op, exports (TF1).

A head turns the model's `logits` [batch, logits_dimension] into the `EstimatorSpec` of a mode:

| head | logits_dimension | unreduced loss [batch, d] | predictions |
|---|---|---|---|
| binary | 1 | sigmoid cross-entropy | logits, logistic, probabilities + the class predictions |
| multi-class | n_classes | sparse softmax cross-entropy | logits, probabilities + the class predictions |
| regression | label_dimension | squared error | predictions |

The class predictions are class_ids and classes [batch, 1], all_class_ids and all_classes [batch, n].

Invariants: labels become [batch, d] (a [batch] label is expanded); classification labels are
ids in [0, n_classes) (checked in the graph) or, with `label_vocabulary`, strings looked up in
it; the weight column gives one weight per example, [batch, 1]. The training loss is the
weighted unreduced loss reduced by `loss_reduction` (TF1 default SUM: summed over the batch);
"average_loss" is the weighted mean of the unreduced loss; `Estimator.evaluate` adds "loss",
the mean over batches of the training loss. Export outputs: classification heads serve a
ClassificationOutput (scores = probabilities, classes = all_classes) as "serving_default" and
"classification", the binary head also a RegressionOutput of `logistic` as "regression";
the regression head serves a RegressionOutput; every head serves "predict" (all predictions).
"""

from __future__ import annotations

from kernflow.core.estimator.export_output import (ClassificationOutput, PredictOutput,
                                                   RegressionOutput)
from kernflow.core.estimator.model_fn import EstimatorSpec, ModeKeys
from kernflow.core.framework import dtypes as _dtypes
from kernflow.core.framework import ops as _ops
from kernflow.core.framework.sparse_tensor import SparseTensor
from kernflow.core.losses import Reduction

__all__ = ["binary_classification_head", "multi_class_head", "regression_head",
           "binary_or_multi_class_head"]

_DEFAULT_SERVING_KEY = "serving_default"
_CLASSIFY_SERVING_KEY = "classification"
_REGRESS_SERVING_KEY = "regression"
_PREDICT_SERVING_KEY = "predict"


def _kf():
    import kernflow.core as kf
    return kf


def _check_loss_reduction(loss_reduction):
    if loss_reduction not in Reduction.all() or loss_reduction == Reduction.NONE:
        raise ValueError(f"Invalid loss_reduction: {loss_reduction}")


def _as_2d(tensor, what):
    """`tensor` as [batch, d]: a rank-1 tensor is expanded."""
    kf = _kf()
    if isinstance(tensor, SparseTensor):
        raise ValueError(f"SparseTensor {what} is not supported: {tensor}")
    tensor = _ops.convert_to_tensor(tensor)
    if tensor.get_shape().ndims == 1:
        tensor = kf.expand_dims(tensor, -1)
    return tensor


def _get_weights(features, weight_column):
    """The example weights [batch, 1] (float32), or None without a weight column."""
    kf = _kf()
    if weight_column is None:
        return None
    if isinstance(weight_column, str):
        if weight_column not in features:
            raise ValueError(f"weight_column {weight_column!r} is not in features: {sorted(features)}")
        weights = _as_2d(features[weight_column], "weights")
    else:
        if not hasattr(weight_column, "key") or not hasattr(weight_column, "shape"):
            raise TypeError(f"Weight column must be either a string or a numeric_column. Given "
                            f"{weight_column!r}")
        weights = kf.feature_column.input_layer(features, [weight_column])
    return kf.cast(weights, _dtypes.float32)


def _check_logits(logits, logits_dimension):
    logits = _ops.convert_to_tensor(logits)
    last = logits.get_shape().as_list()[-1] if logits.get_shape().ndims else None
    if logits.get_shape().ndims not in (None, 2) or (last is not None and last != logits_dimension):
        raise ValueError(f"logits shape must be [D0, {logits_dimension}], got {logits.get_shape()}.")
    return logits


class _Head:
    """Shared EstimatorSpec assembly; subclasses give predictions, labels, loss and metrics."""

    def __init__(self, logits_dimension, weight_column, loss_reduction):
        _check_loss_reduction(loss_reduction)
        self.logits_dimension = logits_dimension
        self._weight_column = weight_column
        self._loss_reduction = loss_reduction

    def create_estimator_spec(self, features, mode, logits, labels=None, optimizer=None,
                              train_op_fn=None, regularization_losses=None):
        """The `EstimatorSpec` of `mode` for `logits`.

        Args:
            features: the input dict (read for the weight column).
            mode: a `ModeKeys` value.
            logits: [batch, logits_dimension] float Tensor.
            labels: the labels (needed in TRAIN and EVAL).
            optimizer: an Optimizer minimizing the loss in TRAIN (global step incremented).
            train_op_fn: fn(loss) -> train op, when no `optimizer` is given.
            regularization_losses: scalar losses added to the training loss.

        Raises:
            ValueError: logits of the wrong shape, missing labels, or neither optimizer nor
                train_op_fn in TRAIN.
        """
        kf = _kf()
        with _ops.name_scope("head"):
            logits = _check_logits(logits, self.logits_dimension)
            predictions = self._predictions(logits)
            if mode == ModeKeys.PREDICT:
                return EstimatorSpec(mode, predictions=predictions,
                                     export_outputs=self._export_outputs(predictions))
            if labels is None:
                raise ValueError("You must provide a labels Tensor. Given: None. Suggested "
                                 "troubleshooting steps: Check that your data contain your label "
                                 "feature. Check that your input_fn properly parses and returns labels.")
            weights = _get_weights(features, self._weight_column)
            labels = self._processed_labels(labels)
            unreduced = self._unreduced_loss(labels, logits)
            loss = kf.losses.compute_weighted_loss(unreduced, 1.0 if weights is None else weights,
                                                   reduction=self._loss_reduction)
            if regularization_losses:
                loss = kf.add_n([loss] + list(regularization_losses))
        if mode == ModeKeys.EVAL:
            return EstimatorSpec(mode, predictions=predictions, loss=loss,
                                 eval_metric_ops=self._eval_metrics(labels, predictions, unreduced, weights))
        train_op = self._train_op(loss, optimizer, train_op_fn)
        kf.summary.scalar("loss", loss)
        kf.summary.scalar("average_loss", _weighted_mean(unreduced, weights))
        return EstimatorSpec(mode, predictions=predictions, loss=loss, train_op=train_op)

    @staticmethod
    def _train_op(loss, optimizer, train_op_fn):
        kf = _kf()
        if optimizer is not None:
            if train_op_fn is not None:
                raise ValueError("train_op_fn and optimizer cannot both be set.")
            train_op = optimizer.minimize(loss, global_step=kf.train.get_global_step())
        elif train_op_fn is not None:
            train_op = train_op_fn(loss)
        else:
            raise ValueError("train_op_fn and optimizer cannot both be None.")
        update_ops = _ops.get_collection(_ops.GraphKeys.UPDATE_OPS)   # e.g. batch norm statistics
        return kf.group(train_op, *update_ops) if update_ops else train_op


def _weighted_mean(values, weights):
    kf = _kf()
    if weights is None:
        return kf.reduce_mean(values)
    weights = weights * kf.ones_like(values)
    return kf.math.divide_no_nan(kf.reduce_sum(values * weights), kf.reduce_sum(weights))


class _ClassificationHead(_Head):
    """Class ids from labels (an id or a vocabulary string) and the class predictions."""

    def __init__(self, n_classes, logits_dimension, weight_column, label_vocabulary, loss_reduction):
        if label_vocabulary is not None:
            if not isinstance(label_vocabulary, (list, tuple)):
                raise ValueError(f"label_vocabulary should be a list or a tuple. Given type: "
                                 f"{type(label_vocabulary)}")
            if len(label_vocabulary) != n_classes:
                raise ValueError(f"label_vocabulary ({len(label_vocabulary)} classes) must hold "
                                 f"n_classes ({n_classes}) strings.")
        super().__init__(logits_dimension, weight_column, loss_reduction)
        self._n_classes = n_classes
        self._label_vocabulary = list(label_vocabulary) if label_vocabulary is not None else None

    def _label_ids(self, labels):
        """[batch, 1] int64 class ids of `labels`, checked to be in [0, n_classes)."""
        kf = _kf()
        labels = _as_2d(labels, "labels")
        if self._label_vocabulary is not None:
            if labels.dtype.base_dtype != _dtypes.string:
                raise ValueError(f"Labels dtype should be string when label_vocabulary is given. "
                                 f"Instead got {labels.dtype}.")
            table = kf.lookup.index_table_from_tensor(self._label_vocabulary, name="class_id_lookup")
            ids = table.lookup(labels)
            message = f"Labels must be in label_vocabulary {self._label_vocabulary}"
        else:
            if labels.dtype.base_dtype == _dtypes.string:
                raise ValueError("Labels dtype should be integer. Instead got string. Set "
                                 "label_vocabulary to use string labels.")
            ids = kf.cast(labels, _dtypes.int64)
            message = f"Labels must be in [0, {self._n_classes})"
        checks = [kf.debugging.assert_non_negative(ids, message=message),
                  kf.debugging.assert_less(ids, kf.constant(self._n_classes, _dtypes.int64), message=message)]
        with _ops.control_dependencies(checks):
            return kf.identity(ids)

    def _class_predictions(self, logits, class_ids):
        """class_ids [batch, 1] and the classes, all_class_ids, all_classes predictions."""
        kf = _kf()
        batch = kf.shape(logits)[0]
        all_ids = kf.tile(kf.expand_dims(kf.range(self._n_classes), 0), kf.stack([batch, 1]))
        if self._label_vocabulary is not None:
            vocab = kf.constant(self._label_vocabulary, _dtypes.string)
            classes = kf.gather(vocab, class_ids)
            all_classes = kf.gather(vocab, all_ids)
        else:
            classes = kf.as_string(class_ids)
            all_classes = kf.as_string(all_ids)
        return {"class_ids": class_ids, "classes": classes, "all_class_ids": all_ids,
                "all_classes": all_classes}

    def _classification_output(self, predictions):
        return ClassificationOutput(scores=predictions["probabilities"], classes=predictions["all_classes"])


class _BinaryLogisticHead(_ClassificationHead):
    """Two classes, one logit: sigmoid cross-entropy."""

    def __init__(self, weight_column=None, label_vocabulary=None, loss_reduction=Reduction.SUM):
        super().__init__(2, 1, weight_column, label_vocabulary, loss_reduction)

    def _predictions(self, logits):
        kf = _kf()
        two_class_logits = kf.concat([kf.zeros_like(logits), logits], axis=-1)
        class_ids = kf.expand_dims(kf.argmax(two_class_logits, axis=-1), -1)
        predictions = {"logits": logits, "logistic": kf.sigmoid(logits),
                       "probabilities": kf.nn.softmax(two_class_logits)}
        predictions.update(self._class_predictions(logits, class_ids))
        return predictions

    def _processed_labels(self, labels):
        return _kf().cast(self._label_ids(labels), _dtypes.float32)

    def _unreduced_loss(self, labels, logits):
        return _kf().nn.sigmoid_cross_entropy_with_logits(labels=labels, logits=logits)

    def _export_outputs(self, predictions):
        classification = self._classification_output(predictions)
        return {_DEFAULT_SERVING_KEY: classification, _CLASSIFY_SERVING_KEY: classification,
                _REGRESS_SERVING_KEY: RegressionOutput(value=predictions["logistic"]),
                _PREDICT_SERVING_KEY: PredictOutput(predictions)}

    def _eval_metrics(self, labels, predictions, unreduced, weights):
        kf = _kf()
        m = kf.metrics
        class_ids = kf.cast(predictions["class_ids"], _dtypes.float32)
        logistic = predictions["logistic"]
        label_mean = m.mean(labels, weights=weights, name="label/mean")
        return {
            "average_loss": m.mean(unreduced, weights=weights, name="average_loss"),
            "accuracy": m.accuracy(labels, class_ids, weights=weights, name="accuracy"),
            "precision": m.precision(labels, class_ids, weights=weights, name="precision"),
            "recall": m.recall(labels, class_ids, weights=weights, name="recall"),
            "prediction/mean": m.mean(logistic, weights=weights, name="prediction/mean"),
            "label/mean": label_mean,
            "accuracy_baseline": tuple(kf.maximum(v, 1.0 - v) for v in label_mean),
            "auc": m.auc(labels, logistic, weights=weights, curve="ROC", name="auc"),
            "auc_precision_recall": m.auc(labels, logistic, weights=weights, curve="PR",
                                          name="auc_precision_recall"),
        }


class _MultiClassHead(_ClassificationHead):
    """n_classes > 2 logits: sparse softmax cross-entropy."""

    def __init__(self, n_classes, weight_column=None, label_vocabulary=None, loss_reduction=Reduction.SUM):
        if n_classes is None or n_classes <= 2:
            raise ValueError(f"n_classes must be > 2: {n_classes}.")
        super().__init__(n_classes, n_classes, weight_column, label_vocabulary, loss_reduction)

    def _predictions(self, logits):
        kf = _kf()
        class_ids = kf.expand_dims(kf.argmax(logits, axis=-1), -1)
        predictions = {"logits": logits, "probabilities": kf.nn.softmax(logits)}
        predictions.update(self._class_predictions(logits, class_ids))
        return predictions

    def _processed_labels(self, labels):
        return self._label_ids(labels)

    def _unreduced_loss(self, labels, logits):
        kf = _kf()
        loss = kf.nn.sparse_softmax_cross_entropy_with_logits(labels=kf.squeeze(labels, [-1]), logits=logits)
        return kf.expand_dims(loss, -1)

    def _export_outputs(self, predictions):
        classification = self._classification_output(predictions)
        return {_DEFAULT_SERVING_KEY: classification, _CLASSIFY_SERVING_KEY: classification,
                _PREDICT_SERVING_KEY: PredictOutput(predictions)}

    def _eval_metrics(self, labels, predictions, unreduced, weights):
        m = _kf().metrics
        return {"average_loss": m.mean(unreduced, weights=weights, name="average_loss"),
                "accuracy": m.accuracy(labels, predictions["class_ids"], weights=weights, name="accuracy")}


class _RegressionHead(_Head):
    """label_dimension float outputs: squared error."""

    def __init__(self, label_dimension=1, weight_column=None, loss_reduction=Reduction.SUM):
        if label_dimension < 1:
            raise ValueError(f"Invalid label_dimension {label_dimension}.")
        super().__init__(label_dimension, weight_column, loss_reduction)

    def _predictions(self, logits):
        return {"predictions": logits}

    def _processed_labels(self, labels):
        labels = _kf().cast(_as_2d(labels, "labels"), _dtypes.float32)
        last = labels.get_shape().as_list()[-1] if labels.get_shape().ndims else None
        if last is not None and last != self.logits_dimension:
            raise ValueError(f"Mismatched label shape. Expected labels dimension={self.logits_dimension}. "
                             f"Received {last}.")
        return labels

    def _unreduced_loss(self, labels, logits):
        return _kf().squared_difference(labels, logits)

    def _export_outputs(self, predictions):
        regression = RegressionOutput(value=predictions["predictions"])
        return {_DEFAULT_SERVING_KEY: regression, _REGRESS_SERVING_KEY: regression,
                _PREDICT_SERVING_KEY: PredictOutput(predictions)}

    def _eval_metrics(self, labels, predictions, unreduced, weights):
        m = _kf().metrics
        return {"average_loss": m.mean(unreduced, weights=weights, name="average_loss"),
                "prediction/mean": m.mean(predictions["predictions"], weights=weights,
                                          name="prediction/mean"),
                "label/mean": m.mean(labels, weights=weights, name="label/mean")}


def binary_classification_head(weight_column=None, label_vocabulary=None, loss_reduction=Reduction.SUM):
    """The head of two-class classifiers (one logit)."""
    return _BinaryLogisticHead(weight_column, label_vocabulary, loss_reduction)


def multi_class_head(n_classes, weight_column=None, label_vocabulary=None, loss_reduction=Reduction.SUM):
    """The head of n_classes > 2 classifiers."""
    return _MultiClassHead(n_classes, weight_column, label_vocabulary, loss_reduction)


def regression_head(label_dimension=1, weight_column=None, loss_reduction=Reduction.SUM):
    """The head of regressors of `label_dimension` outputs."""
    return _RegressionHead(label_dimension, weight_column, loss_reduction)


def binary_or_multi_class_head(n_classes, weight_column, label_vocabulary, loss_reduction):
    """The head of a canned classifier: binary for n_classes == 2, else multi-class.

    Raises:
        ValueError: n_classes < 2.
    """
    if n_classes is None or n_classes < 2:
        raise ValueError(f"n_classes must be > 1: {n_classes}.")
    if n_classes == 2:
        return binary_classification_head(weight_column, label_vocabulary, loss_reduction)
    return multi_class_head(n_classes, weight_column, label_vocabulary, loss_reduction)
