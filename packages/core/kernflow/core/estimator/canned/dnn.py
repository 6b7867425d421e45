"""`kf.estimator.DNNClassifier` and `DNNRegressor`: feed-forward networks over dense feature
columns (TF1 `tf.compat.v1.estimator`; defaults: Adagrad at 0.05, relu, loss summed over the batch).

The model is `canned_model_fn`'s DNN part (variables "dnn/hiddenlayer_<i>/kernel|bias",
"dnn/logits/kernel|bias") with a binary, multi-class or regression head.
"""

from __future__ import annotations

from kernflow.core.estimator.canned import head as _head
from kernflow.core.estimator.canned.model import make_model_fn
from kernflow.core.estimator.estimator import Estimator
from kernflow.core.losses import Reduction
from kernflow.core.ops.nn_ops import relu

__all__ = ["DNNClassifier", "DNNRegressor"]


def _dnn_model_fn(head, hidden_units, feature_columns, optimizer, activation_fn, dropout, batch_norm,
                  input_layer_partitioner):
    return make_model_fn(head, dnn_feature_columns=tuple(feature_columns), dnn_optimizer=optimizer,
                         dnn_hidden_units=hidden_units, dnn_activation_fn=activation_fn, dnn_dropout=dropout,
                         batch_norm=batch_norm, input_layer_partitioner=input_layer_partitioner)


class DNNClassifier(Estimator):
    """A classifier for a feed-forward network.

    Args:
        hidden_units: the sizes of the hidden layers, e.g. [64, 32].
        feature_columns: DenseColumns (wrap categorical columns in an embedding or indicator
            column).
        model_dir: the checkpoint directory.
        n_classes: the number of classes (2: a binary head, one logit).
        weight_column: a feature name or numeric_column of per-example weights.
        label_vocabulary: the class names when labels are strings (else ids in [0, n_classes)).
        optimizer: 'Adagrad', 'Adam', 'Ftrl', 'RMSProp', 'SGD', an Optimizer or a callable
            returning one.
        activation_fn: the hidden layers' activation.
        dropout: the probability of dropping a hidden unit in training (None: no dropout).
        input_layer_partitioner: the partitioner of the input layer's variables.
        config: a `RunConfig`.
        warm_start_from: a checkpoint path or `WarmStartSettings`.
        loss_reduction: how the training loss reduces the batch (a `kf.losses.Reduction`).
        batch_norm: batch-normalize each hidden layer's output.
    """

    def __init__(self, hidden_units, feature_columns, model_dir=None, n_classes=2, weight_column=None,
                 label_vocabulary=None, optimizer="Adagrad", activation_fn=relu, dropout=None,
                 input_layer_partitioner=None, config=None, warm_start_from=None,
                 loss_reduction=Reduction.SUM, batch_norm=False):
        head = _head.binary_or_multi_class_head(n_classes, weight_column, label_vocabulary, loss_reduction)
        super().__init__(_dnn_model_fn(head, hidden_units, feature_columns, optimizer, activation_fn, dropout,
                                       batch_norm, input_layer_partitioner),
                         model_dir=model_dir, config=config, warm_start_from=warm_start_from)


class DNNRegressor(Estimator):
    """A regressor for a feed-forward network.

    Args:
        label_dimension: the number of regression targets per example.
        Others: as `DNNClassifier` (without n_classes and label_vocabulary).
    """

    def __init__(self, hidden_units, feature_columns, model_dir=None, label_dimension=1, weight_column=None,
                 optimizer="Adagrad", activation_fn=relu, dropout=None, input_layer_partitioner=None,
                 config=None, warm_start_from=None, loss_reduction=Reduction.SUM, batch_norm=False):
        head = _head.regression_head(label_dimension, weight_column, loss_reduction)
        super().__init__(_dnn_model_fn(head, hidden_units, feature_columns, optimizer, activation_fn, dropout,
                                       batch_norm, input_layer_partitioner),
                         model_dir=model_dir, config=config, warm_start_from=warm_start_from)
