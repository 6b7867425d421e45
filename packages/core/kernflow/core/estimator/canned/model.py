"""The model_fn behind every canned estimator: a linear part, a DNN part, or both, and a head (TF1).

One function serves `Linear*`, `DNN*` and `DNNLinearCombined*` estimators, since TF1's three
model_fns build the same variables under the same scopes:

- linear part, under variable scope "linear": `kf.feature_column.linear_model` with `units =
  head.logits_dimension` (variables "linear/linear_model/<column>/weights",
  "linear/linear_model/bias_weights");
- DNN part, under "dnn": `input_layer` (in "input_from_feature_columns"), then per hidden layer
  "hiddenlayer_<i>" a glorot-uniform dense layer with `activation_fn`, dropout (TRAIN only) and
  batch normalization ("batchnorm_<i>", momentum 0.999) when asked, then a linear "logits" layer;
- logits = the sum of the parts' logits; the head makes the `EstimatorSpec`.

Training: a part's optimizer minimizes the loss over that part's trainable variables; with one
part the optimizer increments the global step, with two the step is incremented once after both
updates ran.
"""

from __future__ import annotations

import math

from kernflow.core.estimator.canned.optimizers import get_optimizer_instance
from kernflow.core.estimator.model_fn import ModeKeys
from kernflow.core.framework import ops as _ops

__all__ = ["canned_model_fn", "DNN_LEARNING_RATE", "LINEAR_LEARNING_RATE", "linear_learning_rate"]

DNN_LEARNING_RATE = 0.05
LINEAR_LEARNING_RATE = 0.2


def _kf():
    import kernflow.core as kf
    return kf


def linear_learning_rate(num_linear_feature_columns):
    """The default learning rate of the linear part of a combined model: min(0.2, 1/sqrt(n))."""
    return min(LINEAR_LEARNING_RATE, 1.0 / math.sqrt(num_linear_feature_columns))


def _dnn_logits(features, feature_columns, hidden_units, units, activation_fn, dropout, batch_norm, mode):
    kf = _kf()
    with kf.variable_scope("input_from_feature_columns"):
        net = kf.feature_column.input_layer(features, feature_columns)
    training = mode == ModeKeys.TRAIN
    for layer_id, num_units in enumerate(hidden_units):
        with kf.variable_scope(f"hiddenlayer_{layer_id}", values=(net,)) as scope:
            net = kf.layers.dense(net, num_units, activation=activation_fn,
                                  kernel_initializer=kf.glorot_uniform_initializer(), name=scope)
            if dropout is not None and training:
                net = kf.layers.dropout(net, rate=dropout, training=True)
            if batch_norm:
                net = kf.layers.batch_normalization(net, momentum=0.999, training=training,
                                                    name=f"batchnorm_{layer_id}")
    with kf.variable_scope("logits", values=(net,)) as scope:
        return kf.layers.dense(net, units, activation=None,
                               kernel_initializer=kf.glorot_uniform_initializer(), name=scope)


def _check_features(features):
    if not isinstance(features, dict):
        raise ValueError(f"features should be a dictionary of `Tensor`s. Given type: {type(features)}")


class _Part:
    """A scope's logits and the optimizer of its variables."""

    def __init__(self, scope, logits, optimizer):
        self.scope, self.logits, self.optimizer = scope, logits, optimizer


def canned_model_fn(features, labels, mode, head, linear_feature_columns=None, linear_optimizer="Ftrl",
                    linear_lr=LINEAR_LEARNING_RATE, linear_sparse_combiner="sum", dnn_feature_columns=None,
                    dnn_optimizer="Adagrad", dnn_hidden_units=None, dnn_activation_fn=None, dnn_dropout=None,
                    batch_norm=False, input_layer_partitioner=None, linear_partitioner=None):
    """The `EstimatorSpec` of a linear, DNN or combined model with `head`.

    Raises:
        ValueError: no feature columns at all, or features that are not a dict.
    """
    kf = _kf()
    _check_features(features)
    if not linear_feature_columns and not dnn_feature_columns:
        raise ValueError("Either linear_feature_columns or dnn_feature_columns must be defined.")
    parts = []
    if dnn_feature_columns:
        with kf.variable_scope("dnn", values=tuple(features.values()), partitioner=input_layer_partitioner):
            logits = _dnn_logits(features, dnn_feature_columns, dnn_hidden_units, head.logits_dimension,
                                 dnn_activation_fn or kf.nn.relu, dnn_dropout, batch_norm, mode)
        parts.append(_Part("dnn", logits, (dnn_optimizer, DNN_LEARNING_RATE)))
    if linear_feature_columns:
        with kf.variable_scope("linear", values=tuple(features.values()), partitioner=linear_partitioner):
            logits = kf.feature_column.linear_model(features, linear_feature_columns,
                                                    units=head.logits_dimension,
                                                    sparse_combiner=linear_sparse_combiner)
        parts.append(_Part("linear", logits, (linear_optimizer, linear_lr)))
    logits = parts[0].logits if len(parts) == 1 else kf.add_n([p.logits for p in parts])

    def train_op_fn(loss):
        global_step = kf.train.get_global_step()
        if len(parts) == 1:
            return get_optimizer_instance(*parts[0].optimizer).minimize(loss, global_step=global_step)
        updates = [get_optimizer_instance(*p.optimizer).minimize(
            loss, var_list=_ops.get_collection(_ops.GraphKeys.TRAINABLE_VARIABLES, scope=p.scope + "/"))
            for p in parts]
        with _ops.control_dependencies(updates):
            return kf.assign_add(global_step, 1).op
    return head.create_estimator_spec(features, mode, logits, labels=labels,
                                      train_op_fn=train_op_fn if mode == ModeKeys.TRAIN else None)


def make_model_fn(head, **kwargs):
    """A `model_fn(features, labels, mode, config)` of `canned_model_fn` with `head` and `kwargs`."""
    def _model_fn(features, labels, mode, config):
        return canned_model_fn(features, labels, mode, head, **kwargs)
    return _model_fn
