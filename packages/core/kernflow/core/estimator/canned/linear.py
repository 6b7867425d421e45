"""`kf.estimator.LinearClassifier` and `LinearRegressor`: linear models over feature columns (TF1
`tf.compat.v1.estimator`; defaults: Ftrl at 0.2, loss summed over the batch).

The model is `kf.feature_column.linear_model` under the variable scope "linear" ("linear/
linear_model/<column>/weights", "linear/linear_model/bias_weights") with a head.
"""

from __future__ import annotations

from kernflow.core.estimator.canned import head as _head
from kernflow.core.estimator.canned.model import LINEAR_LEARNING_RATE, make_model_fn
from kernflow.core.estimator.estimator import Estimator
from kernflow.core.losses import Reduction

__all__ = ["LinearClassifier", "LinearRegressor"]


class LinearClassifier(Estimator):
    """A linear classifier.

    Args:
        feature_columns: dense and categorical columns (categorical ones act as one-hot).
        model_dir: the checkpoint directory.
        n_classes: the number of classes (2: a binary head, one logit).
        weight_column: a feature name or numeric_column of per-example weights.
        label_vocabulary: the class names when labels are strings.
        optimizer: 'Ftrl', 'Adagrad', 'Adam', 'RMSProp', 'SGD' (at learning rate 0.2), an
            Optimizer or a callable returning one.
        config: a `RunConfig`.
        partitioner: the partitioner of the model's variables.
        warm_start_from: a checkpoint path or `WarmStartSettings`.
        loss_reduction: how the training loss reduces the batch.
        sparse_combiner: how a multivalent categorical column's weights combine: 'sum', 'mean'
            or 'sqrtn'.
    """

    def __init__(self, feature_columns, model_dir=None, n_classes=2, weight_column=None,
                 label_vocabulary=None, optimizer="Ftrl", config=None, partitioner=None, warm_start_from=None,
                 loss_reduction=Reduction.SUM, sparse_combiner="sum"):
        head = _head.binary_or_multi_class_head(n_classes, weight_column, label_vocabulary, loss_reduction)
        super().__init__(make_model_fn(head, linear_feature_columns=tuple(feature_columns),
                                       linear_optimizer=optimizer, linear_lr=LINEAR_LEARNING_RATE,
                                       linear_sparse_combiner=sparse_combiner,
                                       linear_partitioner=partitioner),
                         model_dir=model_dir, config=config, warm_start_from=warm_start_from)


class LinearRegressor(Estimator):
    """A linear regressor.

    Args:
        label_dimension: the number of regression targets per example.
        Others: as `LinearClassifier` (without n_classes and label_vocabulary).
    """

    def __init__(self, feature_columns, model_dir=None, label_dimension=1, weight_column=None,
                 optimizer="Ftrl", config=None, partitioner=None, warm_start_from=None,
                 loss_reduction=Reduction.SUM, sparse_combiner="sum"):
        head = _head.regression_head(label_dimension, weight_column, loss_reduction)
        super().__init__(make_model_fn(head, linear_feature_columns=tuple(feature_columns),
                                       linear_optimizer=optimizer, linear_lr=LINEAR_LEARNING_RATE,
                                       linear_sparse_combiner=sparse_combiner,
                                       linear_partitioner=partitioner),
                         model_dir=model_dir, config=config, warm_start_from=warm_start_from)
