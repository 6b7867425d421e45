"""`kf.estimator.DNNLinearCombinedClassifier` and `DNNLinearCombinedRegressor`: wide (linear) and
deep (DNN) models whose logits are summed (TF1 `tf.compat.v1.estimator`).

Each part has its own optimizer over its own variables ("linear/..." and "dnn/..."): 'Ftrl' at
min(0.2, 1/sqrt(number of linear columns)) and 'Adagrad' at 0.05 by default; the global step
advances once per training step.
"""

from __future__ import annotations

from kernflow.core.estimator.canned import head as _head
from kernflow.core.estimator.canned.model import linear_learning_rate, make_model_fn
from kernflow.core.estimator.estimator import Estimator
from kernflow.core.losses import Reduction
from kernflow.core.ops.nn_ops import relu

__all__ = ["DNNLinearCombinedClassifier", "DNNLinearCombinedRegressor"]


def _combined_model_fn(head, linear_feature_columns, linear_optimizer, dnn_feature_columns, dnn_optimizer,
                       dnn_hidden_units, dnn_activation_fn, dnn_dropout, input_layer_partitioner, batch_norm,
                       linear_sparse_combiner):
    linear_feature_columns = tuple(linear_feature_columns or ())
    dnn_feature_columns = tuple(dnn_feature_columns or ())
    if not linear_feature_columns and not dnn_feature_columns:
        raise ValueError("Either linear_feature_columns or dnn_feature_columns must be defined.")
    if dnn_feature_columns and not dnn_hidden_units:
        raise ValueError(f"dnn_hidden_units cannot be empty when dnn_feature_columns is given. "
                         f"dnn_hidden_units: {dnn_hidden_units}")
    return make_model_fn(
        head, linear_feature_columns=linear_feature_columns, linear_optimizer=linear_optimizer,
        linear_lr=linear_learning_rate(max(len(linear_feature_columns), 1)),
        linear_sparse_combiner=linear_sparse_combiner, dnn_feature_columns=dnn_feature_columns,
        dnn_optimizer=dnn_optimizer, dnn_hidden_units=dnn_hidden_units, dnn_activation_fn=dnn_activation_fn,
        dnn_dropout=dnn_dropout, batch_norm=batch_norm, input_layer_partitioner=input_layer_partitioner)


class DNNLinearCombinedClassifier(Estimator):
    """A classifier over a linear model plus a feed-forward network.

    Args:
        model_dir: the checkpoint directory.
        linear_feature_columns: the linear part's columns (dense or categorical).
        linear_optimizer: the linear part's optimizer (a name, Optimizer or callable).
        dnn_feature_columns: the DNN part's DenseColumns.
        dnn_optimizer: the DNN part's optimizer.
        dnn_hidden_units: the hidden layer sizes (required with dnn_feature_columns).
        dnn_activation_fn: the hidden layers' activation.
        dnn_dropout: the drop probability of hidden units in training.
        n_classes, weight_column, label_vocabulary: as `DNNClassifier`.
        input_layer_partitioner, config, warm_start_from, loss_reduction, batch_norm: as
            `DNNClassifier`.
        linear_sparse_combiner: as `LinearClassifier.sparse_combiner`.

    Raises:
        ValueError: no columns for either part, or DNN columns without hidden units.
    """

    def __init__(self, model_dir=None, linear_feature_columns=None, linear_optimizer="Ftrl",
                 dnn_feature_columns=None, dnn_optimizer="Adagrad", dnn_hidden_units=None,
                 dnn_activation_fn=relu, dnn_dropout=None, n_classes=2, weight_column=None,
                 label_vocabulary=None, input_layer_partitioner=None, config=None, warm_start_from=None,
                 loss_reduction=Reduction.SUM, batch_norm=False, linear_sparse_combiner="sum"):
        head = _head.binary_or_multi_class_head(n_classes, weight_column, label_vocabulary, loss_reduction)
        super().__init__(_combined_model_fn(head, linear_feature_columns, linear_optimizer,
                                            dnn_feature_columns, dnn_optimizer, dnn_hidden_units,
                                            dnn_activation_fn, dnn_dropout, input_layer_partitioner,
                                            batch_norm, linear_sparse_combiner),
                         model_dir=model_dir, config=config, warm_start_from=warm_start_from)


class DNNLinearCombinedRegressor(Estimator):
    """A regressor over a linear model plus a feed-forward network.

    Args:
        label_dimension: the number of regression targets per example.
        Others: as `DNNLinearCombinedClassifier` (without n_classes and label_vocabulary).
    """

    def __init__(self, model_dir=None, linear_feature_columns=None, linear_optimizer="Ftrl",
                 dnn_feature_columns=None, dnn_optimizer="Adagrad", dnn_hidden_units=None,
                 dnn_activation_fn=relu, dnn_dropout=None, label_dimension=1, weight_column=None,
                 input_layer_partitioner=None, config=None, warm_start_from=None,
                 loss_reduction=Reduction.SUM, batch_norm=False, linear_sparse_combiner="sum"):
        head = _head.regression_head(label_dimension, weight_column, loss_reduction)
        super().__init__(_combined_model_fn(head, linear_feature_columns, linear_optimizer,
                                            dnn_feature_columns, dnn_optimizer, dnn_hidden_units,
                                            dnn_activation_fn, dnn_dropout, input_layer_partitioner,
                                            batch_norm, linear_sparse_combiner),
                         model_dir=model_dir, config=config, warm_start_from=warm_start_from)
