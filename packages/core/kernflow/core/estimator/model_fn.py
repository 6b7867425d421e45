"""`kf.estimator.ModeKeys` and `kf.estimator.EstimatorSpec`: what a `model_fn` returns (TF1).

An `EstimatorSpec` is validated when it is made, as TF does: TRAIN needs `loss` and `train_op`,
EVAL needs `loss`, PREDICT needs `predictions`; `loss` must hold one element (it is reshaped to a
scalar); every tensor must be of the default graph; `eval_metric_ops` values are
`(value, update_op)` pairs; `export_outputs` values are `ExportOutput`s, one of them the default
serving signature; hooks must be `SessionRunHook`s and `scaffold` a `Scaffold`.
"""

from __future__ import annotations

import collections

from kernflow.core.framework import ops as _ops
from kernflow.core.ops import array_ops
from kernflow.core.train.scaffold import Scaffold
from kernflow.core.train.session_run_hook import SessionRunHook

__all__ = ["ModeKeys", "EstimatorSpec"]

# The key of the mean loss in the dict `Estimator.evaluate` returns.
LOSS_METRIC_KEY = "loss"
AVERAGE_LOSS_METRIC_KEY = "average_loss"


class ModeKeys:
    """The modes a `model_fn` is called in: "train", "eval" and "infer"."""

    TRAIN = "train"
    EVAL = "eval"
    PREDICT = "infer"


_FIELDS = ["mode", "predictions", "loss", "train_op", "eval_metric_ops", "export_outputs",
           "training_chief_hooks", "training_hooks", "scaffold", "evaluation_hooks", "prediction_hooks"]


class EstimatorSpec(collections.namedtuple("EstimatorSpec", _FIELDS)):
    """The ops and objects a `model_fn` returns for one mode.

    Args:
        mode: a `ModeKeys` value.
        predictions: a Tensor or a dict of Tensors (required for PREDICT).
        loss: a scalar (one-element) Tensor (required for TRAIN and EVAL).
        train_op: the Operation or Tensor of one training step (required for TRAIN).
        eval_metric_ops: {name: (metric value tensor, update op)}, e.g. from `kf.metrics`.
        export_outputs: {name: `kf.estimator.export.ExportOutput`}; a single output also becomes
            the default serving signature, several must name one "serving_default".
        training_chief_hooks: `SessionRunHook`s run on the chief only during training.
        training_hooks: `SessionRunHook`s run during training.
        scaffold: a `kf.train.Scaffold` (default: a new one).
        evaluation_hooks: `SessionRunHook`s run during evaluation.
        prediction_hooks: `SessionRunHook`s run during prediction.

    Raises:
        ValueError: a required field is missing, `loss` has more than one element, or a tensor is
            not of the default graph.
        TypeError: a field has the wrong type.
    """

    def __new__(cls, mode, predictions=None, loss=None, train_op=None, eval_metric_ops=None,
                export_outputs=None, training_chief_hooks=None, training_hooks=None, scaffold=None,
                evaluation_hooks=None, prediction_hooks=None):
        if mode not in (ModeKeys.TRAIN, ModeKeys.EVAL, ModeKeys.PREDICT):
            raise ValueError(f"mode={mode!r} unrecognized. Expected one of "
                             f"{[ModeKeys.TRAIN, ModeKeys.EVAL, ModeKeys.PREDICT]}.")
        graph = _ops.get_default_graph()
        train_op = _validate_train_op(train_op, mode, graph)
        loss = _validate_loss(loss, mode, graph)
        predictions = _validate_predictions(predictions, mode, graph)
        eval_metric_ops = _validate_eval_metric_ops(eval_metric_ops, graph)
        if export_outputs is not None:
            from kernflow.core.estimator.export_output import get_export_outputs
            export_outputs = get_export_outputs(export_outputs, predictions)
        hooks = [_validate_hooks(h) for h in (training_chief_hooks, training_hooks, evaluation_hooks,
                                              prediction_hooks)]
        scaffold = scaffold or Scaffold()
        if not isinstance(scaffold, Scaffold):
            raise TypeError(f"scaffold must be tf.train.Scaffold. Given: {scaffold}")
        return super().__new__(cls, mode, predictions, loss, train_op, eval_metric_ops, export_outputs,
                               hooks[0], hooks[1], scaffold, hooks[2], hooks[3])

    def _replace(self, **kwds):
        if "mode" in kwds and self.mode != kwds["mode"]:
            raise ValueError("mode of EstimatorSpec cannot be changed.")
        return EstimatorSpec(**dict(self._asdict(), **kwds))


def _check_graph(tensor, graph, name):
    if tensor.graph is not graph:
        raise ValueError(f"{name} must be from the default graph. Possible causes of this error "
                         f"include: a tensor created outside the model_fn's graph. Given: {tensor}")


def _check_is_tensor(x, name, graph):
    if isinstance(x, _ops.Operation) or not hasattr(x, "dtype") or not hasattr(x, "graph"):
        raise TypeError(f"{name} must be Tensor, given: {x}")
    _check_graph(x, graph, name)
    return x


def _validate_train_op(train_op, mode, graph):
    if train_op is None:
        if mode == ModeKeys.TRAIN:
            raise ValueError("Missing train_op.")
        return None
    if not isinstance(train_op, (_ops.Operation, _ops.Tensor)):
        raise TypeError(f"train_op must be Operation or Tensor, given: {train_op}")
    _check_graph(train_op, graph, "train_op")
    return train_op


def _validate_loss(loss, mode, graph):
    if loss is None:
        if mode in (ModeKeys.TRAIN, ModeKeys.EVAL):
            raise ValueError("Missing loss.")
        return None
    loss = _check_is_tensor(_ops.convert_to_tensor(loss) if not hasattr(loss, "graph") else loss,
                            "loss", graph)
    shape = loss.shape
    if shape.num_elements() not in (None, 1):
        raise ValueError(f"Loss must be scalar, given: {loss}")
    if shape.ndims != 0:
        loss = array_ops.reshape(loss, [])
    return loss


def _validate_predictions(predictions, mode, graph):
    if predictions is None:
        if mode == ModeKeys.PREDICT:
            raise ValueError("Missing predictions.")
        return {}
    if isinstance(predictions, dict):
        return {k: _check_is_tensor(v, f"predictions[{k}]", graph) for k, v in predictions.items()}
    return _check_is_tensor(predictions, "predictions", graph)


def _validate_eval_metric_ops(eval_metric_ops, graph):
    if eval_metric_ops is None:
        return {}
    if not isinstance(eval_metric_ops, dict):
        raise TypeError(f"eval_metric_ops must be a dict, given: {eval_metric_ops}")
    for key, value in eval_metric_ops.items():
        if not isinstance(value, tuple) or len(value) != 2:
            raise TypeError("Values of eval_metric_ops must be (metric_value, update_op) tuples, "
                            f"given: {value} for key: {key}")
        for v in value:
            if isinstance(v, (_ops.Operation, _ops.Tensor)):
                _check_graph(v, graph, f"eval_metric_ops[{key}]")
    return dict(eval_metric_ops)


def _validate_hooks(hooks):
    hooks = tuple(hooks or [])
    for hook in hooks:
        if not isinstance(hook, SessionRunHook):
            raise TypeError(f"All hooks must be SessionRunHook instances, given: {hook}")
    return hooks
