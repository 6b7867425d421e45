"""`kf.estimator.train_and_evaluate` with `TrainSpec` and `EvalSpec` (TF1, local mode).

Local mode (no TF_CONFIG cluster): one `Estimator.train(max_steps=...)` call whose checkpoint
saves (every `RunConfig.save_checkpoints_steps`/`_secs`) are followed by an evaluation of the
new checkpoint through a `CheckpointSaverListener`:

- the save made when the session is created is not evaluated (nothing was trained since it);
- a later save is evaluated unless the last evaluation was less than `throttle_secs` ago;
- when training ends, the last checkpoint is evaluated unless it just was;
- each evaluation runs the `EvalSpec`'s exporters (`<model_dir>/export/<exporter name>`), with
  `is_the_final_export` when the evaluated global step reached `max_steps`.

It returns `(metrics of the last evaluation, export results of the last evaluation)`, as TF 1.15
does; the metrics are None when training saved no new checkpoint. `start_delay_secs` only
concerns a separate evaluator task and is validated but unused here.

Distributed mode (TF_CONFIG naming a cluster: chief, workers, ps, evaluator tasks) is not
implemented: `train_and_evaluate` raises `UnimplementedError` naming the cluster, rather than
silently training alone.
"""

from __future__ import annotations

import collections
import json
import logging
import os

from kernflow.core.estimator.exporter import Exporter
from kernflow.core.estimator.model_fn import _validate_hooks
from kernflow.core.framework import errors
from kernflow.core.train import basic_session_run_hooks as _hooks

__all__ = ["TrainSpec", "EvalSpec", "train_and_evaluate"]

_log = logging.getLogger(__name__)


def _validate_input_fn(input_fn):
    if not callable(input_fn):
        raise TypeError(f"`input_fn` must be callable, given: {input_fn}")


def _validate_exporters(exporters):
    if exporters is None:
        return ()
    if isinstance(exporters, Exporter):
        exporters = [exporters]
    names = set()
    for exporter in exporters:
        if not isinstance(exporter, Exporter):
            raise TypeError(f"`exporters` must be an Exporter, an iterable of Exporter, or `None`, "
                            f"found {exporter}.")
        if not exporter.name or not isinstance(exporter.name, str):
            raise ValueError(f"An Exporter must have a non-empty string name, found {exporter.name!r}.")
        if exporter.name in names:
            raise ValueError(f"`exporters` must have unique names. Such a name cannot be `None`. "
                             f"{exporter.name} was used more than once.")
        names.add(exporter.name)
    return tuple(exporters)


class TrainSpec(collections.namedtuple("TrainSpec", ["input_fn", "max_steps", "hooks"])):
    """The training half of `train_and_evaluate`.

    Args:
        input_fn: the training `input_fn`.
        max_steps: train until the global step reaches this (None: until the input ends).
        hooks: `SessionRunHook`s of the training.

    Raises:
        TypeError: `input_fn` not callable or a hook not a `SessionRunHook`.
        ValueError: `max_steps` <= 0.
    """

    def __new__(cls, input_fn, max_steps=None, hooks=None):
        _validate_input_fn(input_fn)
        if max_steps is not None and max_steps <= 0:
            raise ValueError(f"Must specify max_steps > 0, given: {max_steps}")
        return super().__new__(cls, input_fn, max_steps, _validate_hooks(hooks))


class EvalSpec(collections.namedtuple("EvalSpec", ["input_fn", "steps", "name", "hooks", "exporters",
                                                   "start_delay_secs", "throttle_secs"])):
    """The evaluation (and export) half of `train_and_evaluate`.

    Args:
        input_fn: the evaluation `input_fn`.
        steps: evaluate this many batches (None: until the input ends).
        name: the evaluation's name (its directory is `Estimator.eval_dir(name)`).
        hooks: `SessionRunHook`s of the evaluation.
        exporters: an `Exporter` or an iterable of them, run after each evaluation.
        start_delay_secs: how long an evaluator task waits before its first evaluation.
        throttle_secs: the least number of seconds between two evaluations of new checkpoints.

    Raises:
        TypeError: `input_fn` not callable, or a hook or exporter of the wrong type.
        ValueError: `steps` <= 0, a non-string name, exporters without unique names, or a
            negative delay.
    """

    def __new__(cls, input_fn, steps=100, name=None, hooks=None, exporters=None, start_delay_secs=120,
                throttle_secs=600):
        _validate_input_fn(input_fn)
        if steps is not None and steps <= 0:
            raise ValueError(f"Must specify steps > 0, given: {steps}")
        if name is not None and not isinstance(name, str):
            raise TypeError(f"`name` must be string, given: {name}")
        if start_delay_secs < 0:
            raise ValueError(f"Must specify start_delay_secs >= 0, given: {start_delay_secs}")
        if throttle_secs < 0:
            raise ValueError(f"Must specify throttle_secs >= 0, given: {throttle_secs}")
        return super().__new__(cls, input_fn, steps, name, _validate_hooks(hooks),
                               _validate_exporters(exporters), start_delay_secs, throttle_secs)


def _tf_config_cluster():
    """The cluster named by the TF_CONFIG environment variable ({} when there is none)."""
    raw = os.environ.get("TF_CONFIG", "")
    if not raw.strip():
        return {}
    try:
        config = json.loads(raw)
    except ValueError as e:
        raise ValueError(f"TF_CONFIG is not valid JSON: {e}") from e
    return dict(config.get("cluster") or {})


class _Evaluator:
    """Evaluates each new checkpoint of the estimator and runs the exporters after it."""

    def __init__(self, estimator, eval_spec, max_training_steps):
        self._estimator = estimator
        self._eval_spec = eval_spec
        self._max_training_steps = max_training_steps
        self._previous_ckpt_path = None

    def evaluate_and_export(self):
        """(metrics or None, export results) of the latest checkpoint; None metrics when there is
        no checkpoint or it was already evaluated."""
        latest = self._estimator.latest_checkpoint()
        if not latest:
            _log.warning("Estimator is not trained yet. Will start an evaluation when a checkpoint is "
                         "ready.")
            return None, []
        if latest == self._previous_ckpt_path:
            _log.warning("No new checkpoint ready for evaluation. Skip the current evaluation pass as "
                         "evaluation results are expected to be same for the same checkpoint.")
            return None, []
        spec = self._eval_spec
        metrics = self._estimator.evaluate(spec.input_fn, steps=spec.steps, hooks=list(spec.hooks),
                                           checkpoint_path=latest, name=spec.name)
        if not isinstance(metrics, dict) or "global_step" not in metrics:
            raise ValueError(f"Internal error: `Estimator.evaluate` should return a dict with "
                             f"'global_step'; got {metrics}")
        is_final = bool(self._max_training_steps) and metrics["global_step"] >= self._max_training_steps
        base = os.path.join(self._estimator.model_dir, "export")
        exports = [exporter.export(self._estimator, os.path.join(base, exporter.name), latest, metrics,
                                   is_final) for exporter in spec.exporters]
        self._previous_ckpt_path = latest
        return metrics, exports


class _NewCheckpointListenerForEvaluate(_hooks.CheckpointSaverListener):
    """Evaluates after checkpoint saves, at most once per `throttle_secs`, and after the last one."""

    def __init__(self, evaluator, throttle_secs):
        self._evaluator = evaluator
        self._throttle_secs = throttle_secs
        self.eval_result, self.export_results = None, None

    def begin(self):
        self._timer = _hooks.SecondOrStepTimer(every_secs=self._throttle_secs)
        self._is_first_run = True

    def after_save(self, session, global_step_value):
        if self._is_first_run:   # the save of the new session: nothing trained since
            self._is_first_run = False
            return
        if self._timer.should_trigger_for_step(global_step_value):
            self._evaluate(global_step_value)
        else:
            _log.info("Skip the current checkpoint eval due to throttle secs (%s secs).", self._throttle_secs)

    def end(self, session, global_step_value):
        if global_step_value != self._timer.last_triggered_step():
            self._evaluate(global_step_value)

    def _evaluate(self, global_step_value):
        self._timer.update_last_triggered_step(global_step_value)
        self.eval_result, self.export_results = self._evaluator.evaluate_and_export()
        if self.eval_result is None:
            raise RuntimeError("There was no new checkpoint after the training.")


def train_and_evaluate(estimator, train_spec, eval_spec):
    """Trains `estimator` with `train_spec`, evaluating (and exporting) with `eval_spec` after the
    checkpoints it saves.

    Args:
        estimator: an `Estimator`.
        train_spec: a `TrainSpec`.
        eval_spec: an `EvalSpec`.

    Returns:
        (eval_result, export_results): the metrics dict of the last evaluation (None when no new
        checkpoint was evaluated) and the list of what its exporters returned.

    Raises:
        TypeError: arguments of the wrong types.
        UnimplementedError: TF_CONFIG names a cluster (distributed training is not supported).
    """
    from kernflow.core.estimator.estimator import Estimator
    if not isinstance(estimator, Estimator):
        raise TypeError(f"`estimator` must have type `tf.estimator.Estimator`. Got: {type(estimator)}")
    if not isinstance(train_spec, TrainSpec):
        raise TypeError(f"`train_spec` must have type `tf.estimator.TrainSpec`. Got: {type(train_spec)}")
    if not isinstance(eval_spec, EvalSpec):
        raise TypeError(f"`eval_spec` must have type `tf.estimator.EvalSpec`. Got: {type(eval_spec)}")
    cluster = _tf_config_cluster()
    if cluster:
        raise errors.UnimplementedError(
            None, None, f"train_and_evaluate: distributed training (TF_CONFIG cluster with jobs "
                        f"{sorted(cluster)}) is not supported by kernflow's Estimator; only the local "
                        f"mode runs. Unset TF_CONFIG to train and evaluate in this process.")
    config = estimator.config
    _log.info("Start train and evaluate loop. The evaluate will happen after every checkpoint. "
              "Checkpoint frequency is determined based on RunConfig arguments: "
              "save_checkpoints_steps %s or save_checkpoints_secs %s.",
              config.save_checkpoints_steps, config.save_checkpoints_secs)
    evaluator = _Evaluator(estimator, eval_spec, train_spec.max_steps)
    listener = _NewCheckpointListenerForEvaluate(evaluator, eval_spec.throttle_secs)
    estimator.train(train_spec.input_fn, hooks=list(train_spec.hooks), max_steps=train_spec.max_steps,
                    saving_listeners=[listener])
    return listener.eval_result, listener.export_results
