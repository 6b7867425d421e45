"""`kf.estimator.train_and_evaluate` with `TrainSpec` and `EvalSpec` (TF 1.15).

The estimator's `RunConfig` (its TF_CONFIG) picks the mode.

Local mode (no cluster): one `Estimator.train(max_steps=...)` call whose checkpoint saves (every
`RunConfig.save_checkpoints_steps`/`_secs`) are followed by an evaluation of the new checkpoint
through a `CheckpointSaverListener`:

- the save made when the session is created is not evaluated (nothing was trained since it);
- a later save is evaluated unless the last evaluation was less than `throttle_secs` ago;
- when training ends, the last checkpoint is evaluated unless it just was;
- each evaluation runs the `EvalSpec`'s exporters (`<model_dir>/export/<exporter name>`), with
  `is_the_final_export` when the evaluated global step reached `max_steps`.

It returns `(metrics of the last evaluation, export results of the last evaluation)`, as TF 1.15
does; the metrics are None when training saved no new checkpoint. `start_delay_secs` only
concerns a separate evaluator task and is validated but unused here.

Distributed mode (between-graph replication; every task runs the same program with its own
TF_CONFIG, and all share `model_dir`), by the task's type:

- "ps": starts this task's `kf.train.Server` and joins it: serves until the process is killed.
- "chief", "worker": start this task's server, then `Estimator.train(max_steps=...)` on it (the
  config's `master`): the chief initializes or restores the model on the ps tasks, saves the
  checkpoints and summaries; a worker waits for the chief's initialization. Worker i first sleeps
  ``min(experimental_max_worker_delay_secs (60 by default), 5 * (i + 1))`` seconds after starting
  its server, as TF 1.15 does (asynchronous training converges better when workers join one by
  one); set `RunConfig(experimental_max_worker_delay_secs=...)` to shorten it. The server stops
  when the training ends. Returns None.
- "master" (TF's older name of the chief): the chief's training with the local mode's evaluations
  after each save; returns what the local mode returns.
- "evaluator" (index 0 only, not part of the cluster): after `start_delay_secs`, evaluates each new
  checkpoint in `model_dir` and runs the exporters, at most once per `throttle_secs`, until it has
  evaluated a checkpoint at `max_steps` or later (forever without `max_steps`, as TF). Returns the
  last `(metrics, export results)` (TF's return value is undefined here).

Any other task type is a ValueError naming the supported ones.
"""

from __future__ import annotations

import collections
import logging
import os
import time

from kernflow.core.estimator.exporter import Exporter
from kernflow.core.estimator.model_fn import _validate_hooks
from kernflow.core.estimator.run_config import TaskType
from kernflow.core.train import basic_session_run_hooks as _hooks

__all__ = ["TrainSpec", "EvalSpec", "train_and_evaluate"]

_log = logging.getLogger(__name__)

_DELAY_SECS_PER_WORKER = 5   # worker i waits (i + 1) times this before training (TF 1.15)
_MAX_DELAY_SECS = 60         # unless RunConfig.experimental_max_worker_delay_secs says otherwise
# Departure: with `throttle_secs` already spent and no new checkpoint, the evaluator still waits
# this long before it looks again (TF looks again at once, spinning when throttle_secs is 0).
_IDLE_POLL_SECS = 0.5


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
        is_final = _reached_max_steps(metrics, self._max_training_steps)
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


def _reached_max_steps(metrics, max_steps):
    return bool(max_steps) and metrics["global_step"] >= max_steps


def train_and_evaluate(estimator, train_spec, eval_spec):
    """Trains `estimator` with `train_spec` and evaluates (and exports) it with `eval_spec`, here
    or, with a TF_CONFIG cluster, as this process's task of it (see the module docstring).

    Args:
        estimator: an `Estimator`.
        train_spec: a `TrainSpec`.
        eval_spec: an `EvalSpec`.

    Returns:
        Local mode, a "master" task or an evaluator: (eval_result, export_results), the metrics
        dict of the last evaluation (None when no new checkpoint was evaluated) and the list of
        what its exporters returned. A chief or worker: None. A ps task does not return.

    Raises:
        TypeError: arguments of the wrong types.
        ValueError: an evaluator with a task index other than 0, or a task type that is none of
            chief, master, worker, ps and evaluator.
        RuntimeError: a cluster task whose config names no server to start.
    """
    from kernflow.core.estimator.estimator import Estimator
    if not isinstance(estimator, Estimator):
        raise TypeError(f"`estimator` must have type `tf.estimator.Estimator`. Got: {type(estimator)}")
    if not isinstance(train_spec, TrainSpec):
        raise TypeError(f"`train_spec` must have type `tf.estimator.TrainSpec`. Got: {type(train_spec)}")
    if not isinstance(eval_spec, EvalSpec):
        raise TypeError(f"`eval_spec` must have type `tf.estimator.EvalSpec`. Got: {type(eval_spec)}")
    config = estimator.config
    if config.task_type == TaskType.EVALUATOR and config.task_id > 0:
        raise ValueError(f"For distributed training, there can only be one `evaluator` task (with task "
                         f"id 0). Given task id {config.task_id}")
    if not config.cluster_spec and config.task_type != TaskType.EVALUATOR:
        _log.info("Running training and evaluation locally (non-distributed).")
        return _run_local(estimator, train_spec, eval_spec)
    run = _TASK_RUNNERS.get(config.task_type)
    if run is None:
        raise ValueError(f"Task type {config.task_type} is not supported. Supported task types are "
                         f"{sorted(_TASK_RUNNERS)} (and a TF_CONFIG without a cluster for local training).")
    return run(estimator, train_spec, eval_spec)


def _run_local(estimator, train_spec, eval_spec):
    config = estimator.config
    _log.info("Start train and evaluate loop. The evaluate will happen after every checkpoint. "
              "Checkpoint frequency is determined based on RunConfig arguments: "
              "save_checkpoints_steps %s or save_checkpoints_secs %s.",
              config.save_checkpoints_steps, config.save_checkpoints_secs)
    listener = _evaluating_listener(estimator, train_spec, eval_spec)
    _train(estimator, train_spec, [listener])
    return listener.eval_result, listener.export_results


def _evaluating_listener(estimator, train_spec, eval_spec):
    evaluator = _Evaluator(estimator, eval_spec, train_spec.max_steps)
    return _NewCheckpointListenerForEvaluate(evaluator, eval_spec.throttle_secs)


def _train(estimator, train_spec, saving_listeners=None):
    estimator.train(train_spec.input_fn, hooks=list(train_spec.hooks), max_steps=train_spec.max_steps,
                    saving_listeners=saving_listeners)


def _run_ps(estimator, train_spec, eval_spec):
    _start_server(estimator.config).join()


def _run_trainer(estimator, train_spec, eval_spec):
    """A chief or worker: trains on its own server (stopped when the training ends)."""
    _train_in_cluster(estimator, train_spec)


def _run_master(estimator, train_spec, eval_spec):
    """TF's "master": the chief, evaluating and exporting after its checkpoint saves."""
    listener = _evaluating_listener(estimator, train_spec, eval_spec)
    _train_in_cluster(estimator, train_spec, [listener])
    return listener.eval_result, listener.export_results


def _train_in_cluster(estimator, train_spec, saving_listeners=None):
    config = estimator.config
    # The server starts before the delay, so the other tasks can reach this one meanwhile.
    server = _start_server(config)
    try:
        delay = _worker_start_delay(config)
        if delay > 0:
            _log.info("Waiting %g secs before starting training.", delay)
            time.sleep(delay)
        _train(estimator, train_spec, saving_listeners)
    finally:
        if server is not None:
            server.stop()


def _worker_start_delay(config):
    if config.task_type != TaskType.WORKER:
        return 0
    cap = config.experimental_max_worker_delay_secs
    return min(_MAX_DELAY_SECS if cap is None else cap, (config.task_id + 1) * _DELAY_SECS_PER_WORKER)


def _start_server(config):
    """Starts this task's `kf.train.Server` (None for a cluster of this one trainer)."""
    from kernflow.core.protobuf.config_pb2 import ConfigProto
    from kernflow.core.train.server_lib import Server
    cluster = config.cluster_spec
    if not cluster or not config.task_type or config.task_id is None:
        raise RuntimeError("Could not start server; be sure to specify cluster_spec, task_type, and task in "
                           "RunConfig or set the TF_CONFIG environment variable.")
    if not config.master:
        jobs = cluster.jobs
        if len(jobs) == 1 and cluster.num_tasks(jobs[0]) == 1 and config.task_type in _TRAINERS:
            _log.info("Skip starting the server: the cluster has only this task.")
            return None
        raise RuntimeError("Could not start server; be sure to specify master in RunConfig or set the "
                           "TF_CONFIG environment variable.")
    server_config = None
    if config.session_config is not None:
        server_config = ConfigProto(gpu_options=config.session_config.gpu_options)
    _log.info("Starting the server of /job:%s/task:%d.", config.task_type, config.task_id)
    return Server(cluster, job_name=config.task_type, task_index=config.task_id, config=server_config,
                  protocol=config.protocol)


def _run_evaluator(estimator, train_spec, eval_spec):
    """Evaluates each new checkpoint until one at `max_steps` (TF's continuous evaluation)."""
    if eval_spec.start_delay_secs:
        _log.info("Waiting %g secs before starting eval.", eval_spec.start_delay_secs)
        time.sleep(eval_spec.start_delay_secs)
    evaluator = _Evaluator(estimator, eval_spec, train_spec.max_steps)
    last = (None, [])
    while True:
        started = time.monotonic()
        metrics, exports = evaluator.evaluate_and_export()
        if metrics is not None:
            last = (metrics, exports)
            if _reached_max_steps(metrics, train_spec.max_steps):
                _log.info("Exiting evaluation, global_step=%s >= train max_steps=%s",
                          metrics["global_step"], train_spec.max_steps)
                return last
        wait = eval_spec.throttle_secs - (time.monotonic() - started)
        if metrics is None:
            wait = max(wait, _IDLE_POLL_SECS)
        if wait > 0:
            time.sleep(wait)


_TRAINERS = (TaskType.CHIEF, TaskType.MASTER, TaskType.WORKER)
_TASK_RUNNERS = {TaskType.PS: _run_ps, TaskType.CHIEF: _run_trainer, TaskType.WORKER: _run_trainer,
                 TaskType.MASTER: _run_master, TaskType.EVALUATOR: _run_evaluator}
