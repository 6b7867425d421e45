"""`kf.estimator.Estimator`: trains, evaluates and predicts with a `model_fn` (TF1).

Each call builds a fresh `Graph`: the graph-level seed of the config, the int64 global step, the
tensors of `input_fn` (a `(features, labels)` pair, features alone, or a `kf.data.Dataset` of
either, read through a one-shot iterator), then the `EstimatorSpec` of `model_fn` for the mode.

- `train` runs `train_op` in a `MonitoredTrainingSession` over `model_dir` (restoring the latest
  checkpoint, saving through a `CheckpointSaverHook`) until a hook stops it (`steps`/`max_steps`
  become a `StopAtStepHook`) or the input raises `OutOfRangeError`. In a TF_CONFIG cluster the
  session runs on `config.master` (this task's server); only the chief (`config.is_chief`)
  initializes, restores, saves and writes summaries, a worker waits for the chief's
  initialization; with ps tasks and no `device_fn` the variables go to the ps tasks through
  `kf.train.replica_device_setter` and every other op to this task.
- `evaluate` restores a checkpoint (or initializes when there is none), runs the update ops of
  `eval_metric_ops` plus a mean of `loss` until the input ends or `steps` batches were read, and
  returns the metric values with "loss" and "global_step" (the scalars also go, as summaries, to
  `eval_dir(name)`).
- `predict` restores a checkpoint and yields the predictions (one example at a time by default).

Example::

    est = kf.estimator.Estimator(model_fn, model_dir="/tmp/model")
    est.train(kf.estimator.inputs.numpy_input_fn({"x": x}, y, shuffle=True, num_epochs=None),
              steps=100)
    metrics = est.evaluate(kf.estimator.inputs.numpy_input_fn({"x": x}, y, shuffle=False))
"""

from __future__ import annotations

import collections
import copy
import functools
import inspect
import logging
import os
import shutil
import tempfile

import numpy as np

from kernflow.core.estimator.model_fn import LOSS_METRIC_KEY, EstimatorSpec, ModeKeys
from kernflow.core.estimator.run_config import RunConfig
from kernflow.core.framework import ops as _ops
from kernflow.core.framework import random_seed
from kernflow.core.train import basic_session_run_hooks as _hooks
from kernflow.core.train import checkpoint_management, checkpoint_utils, learning_rate, training_util
from kernflow.core.train.monitored_session import (ChiefSessionCreator, MonitoredSession,
                                                   MonitoredTrainingSession)
from kernflow.core.train.session_run_hook import SessionRunHook
from kernflow.core.train.warm_starting import warm_start

__all__ = ["Estimator", "WarmStartSettings"]

_log = logging.getLogger(__name__)

_VALID_MODEL_FN_ARGS = {"features", "labels", "mode", "params", "self", "config"}
GLOBAL_STEP_KEY = "global_step"


class WarmStartSettings(collections.namedtuple("WarmStartSettings", [
        "ckpt_to_initialize_from", "vars_to_warm_start", "var_name_to_vocab_info",
        "var_name_to_prev_var_name"])):
    """Which variables an `Estimator` warm-starts from which checkpoint (see `kf.train.warm_start`).

    Args:
        ckpt_to_initialize_from: a checkpoint prefix or directory.
        vars_to_warm_start: a regex over the trainable variables, a list of regexes or variables.
        var_name_to_vocab_info: {variable name: `kf.train.VocabInfo`}.
        var_name_to_prev_var_name: {variable name: its name in the checkpoint}.
    """

    def __new__(cls, ckpt_to_initialize_from, vars_to_warm_start=".*", var_name_to_vocab_info=None,
                var_name_to_prev_var_name=None):
        if not ckpt_to_initialize_from:
            raise ValueError("`ckpt_to_initialize_from` MUST be set in WarmStartSettings")
        return super().__new__(cls, ckpt_to_initialize_from, vars_to_warm_start,
                               var_name_to_vocab_info or {}, var_name_to_prev_var_name or {})


def _fn_args(fn):
    """The argument names of `fn` (a function, bound method, callable object or partial)."""
    if isinstance(fn, functools.partial):
        args = _fn_args(fn.func)
        return tuple(a for a in args if a not in fn.keywords)[len(fn.args):]
    target = fn if inspect.isfunction(fn) or inspect.ismethod(fn) else getattr(fn, "__call__", fn)
    return tuple(inspect.signature(target).parameters)


def _verify_model_fn_args(model_fn, params):
    args = set(_fn_args(model_fn))
    if "features" not in args:
        raise ValueError(f"model_fn ({model_fn}) must include features argument.")
    if params is not None and "params" not in args:
        raise ValueError(f"model_fn ({model_fn}) does not include params argument, but params ({params}) "
                         "is passed to Estimator.")
    if params is None and "params" in args:
        _log.warning("Estimator's model_fn (%s) includes params argument, but params are not passed "
                     "to Estimator.", model_fn)
    unexpected = sorted(args - _VALID_MODEL_FN_ARGS)
    if unexpected:
        raise ValueError(f"model_fn ({model_fn}) has following not expected args: {unexpected}")


def _check_hooks_type(hooks):
    hooks = list(hooks or [])
    for h in hooks:
        if not isinstance(h, SessionRunHook):
            raise TypeError(f"Hooks must be a SessionRunHook, given: {h}")
    return hooks


def _check_listeners_type(listeners):
    listeners = list(listeners or [])
    for listener in listeners:
        if not isinstance(listener, _hooks.CheckpointSaverListener):
            raise TypeError(f"saving_listeners must be a list of CheckpointSaverListener, given: {listener}")
    return listeners


def _warm_start_settings(warm_start_from):
    if warm_start_from is None:
        return None
    if isinstance(warm_start_from, (str, bytes, os.PathLike)):
        return WarmStartSettings(ckpt_to_initialize_from=os.fsdecode(warm_start_from))
    if isinstance(warm_start_from, WarmStartSettings):
        return warm_start_from
    raise ValueError(f"warm_start_from must be a string or a WarmStartSettings, instead got "
                     f"{type(warm_start_from)}")


def _replica_device_setter(config):
    """TF's placement in a cluster with ps tasks: variables round robin over the ps tasks, every
    other op on this task (None without ps tasks)."""
    if not config.num_ps_replicas:
        return None
    from kernflow.core.train.device_setter import STANDARD_PS_OPS, replica_device_setter
    worker_device = f"/job:{config.task_type}/task:{config.task_id}" if config.task_type else "/job:worker"
    return replica_device_setter(ps_tasks=config.num_ps_replicas, worker_device=worker_device,
                                 merge_devices=True, ps_ops=list(STANDARD_PS_OPS),
                                 cluster=config.cluster_spec)


def _parse_input_fn_result(result):
    """(features, labels) of what input_fn returned; a Dataset is read by a one-shot iterator."""
    from kernflow.core.data.dataset_ops import Dataset
    if isinstance(result, Dataset):
        result = result.make_one_shot_iterator().get_next()
    if isinstance(result, (list, tuple)):
        if len(result) != 2:
            raise ValueError("input_fn should return (features, labels) as a len 2 tuple.")
        return result[0], result[1]
    return result, None


class _StopAfterNEvalsHook(SessionRunHook):
    """Requests a stop after `num_evals` evaluation batches."""

    def __init__(self, num_evals):
        self._num_evals = num_evals
        self._evals_completed = 0

    def after_create_session(self, session, coord):
        self._evals_completed = 0

    def after_run(self, run_context, run_values):
        self._evals_completed += 1
        _log.info("Evaluation [%d/%d]", self._evals_completed, self._num_evals)
        if self._evals_completed >= self._num_evals:
            run_context.request_stop()


def _load_global_step_from_checkpoint_dir(checkpoint_dir):
    try:
        return int(checkpoint_utils.load_variable(checkpoint_dir, _ops.GraphKeys.GLOBAL_STEP))
    except Exception:  # no checkpoint, or one without a global step: TF counts from 0 then
        return 0


def _extract_batch_length(preds):
    batch_length = None
    for key, value in preds.items():
        if np.ndim(value) == 0:
            raise ValueError(f"Prediction {key!r} is a scalar: predictions need a batch dimension to be "
                             "yielded one example at a time (use yield_single_examples=False).")
        batch_length = batch_length or value.shape[0]
        if value.shape[0] != batch_length:
            raise ValueError(f"Batch length of predictions should be same. {key} has different batch "
                             "length than others.")
    return batch_length


class Estimator:
    """Trains, evaluates and predicts with the model `model_fn` builds.

    Args:
        model_fn: `model_fn(features, labels, mode, params, config)` (features required; the others
            as it declares them) returning an `EstimatorSpec`.
        model_dir: the directory of checkpoints (default: `config.model_dir`, else a new temporary
            directory).
        config: a `RunConfig`.
        params: a dict passed to `model_fn` (and to `input_fn` when it takes `params`).
        warm_start_from: a checkpoint path or `WarmStartSettings` to initialize from in `train`.

    Raises:
        ValueError: `config` not a `RunConfig`, different model_dirs in the arguments and the
            config, or a `model_fn` with unexpected arguments.
    """

    def __init__(self, model_fn, model_dir=None, config=None, params=None, warm_start_from=None):
        if config is None:
            config = RunConfig()
        elif not isinstance(config, RunConfig):
            raise ValueError(f"config must be an instance of `RunConfig`, but provided {config}.")
        model_dir = os.fsdecode(model_dir) if model_dir is not None else None
        if model_dir and config.model_dir and model_dir != config.model_dir:
            raise ValueError("`model_dir` are set both in constructor and `RunConfig`, but with "
                             f"different values. In constructor: '{model_dir}', in `RunConfig`: "
                             f"'{config.model_dir}' ")
        model_dir = model_dir or config.model_dir
        if not model_dir:
            model_dir = tempfile.mkdtemp()
            _log.warning("Using temporary folder as model directory: %s", model_dir)
        if config.model_dir != model_dir:
            config = config.replace(model_dir=model_dir)
        _log.info("Using config: %s", {k: getattr(config, k) for k in ("model_dir", "tf_random_seed",
                                                                     "save_checkpoints_steps",
                                                                     "save_checkpoints_secs")})
        self._config = config
        self._model_dir = model_dir
        self._session_config = config.session_config
        self._device_fn = config.device_fn or _replica_device_setter(config)
        _verify_model_fn_args(model_fn, params)
        self._model_fn = model_fn
        self._params = copy.deepcopy(params or {})
        self._warm_start_settings = _warm_start_settings(warm_start_from)

    # ------------------------------------------------------------------ properties
    @property
    def model_dir(self):
        """The directory of the checkpoints."""
        return self._model_dir

    @property
    def config(self):
        """A copy of the `RunConfig`."""
        return copy.deepcopy(self._config)

    @property
    def params(self):
        """A copy of the params dict."""
        return copy.deepcopy(self._params)

    @property
    def model_fn(self):
        """`model_fn(features, labels, mode, config)` returning the `EstimatorSpec`."""
        def public_model_fn(features, labels, mode, config):
            return self._call_model_fn(features, labels, mode, config)
        return public_model_fn

    # ------------------------------------------------------------------ checkpoints
    def latest_checkpoint(self):
        """The prefix of the latest checkpoint in `model_dir`, or None."""
        return checkpoint_management.latest_checkpoint(self.model_dir)

    def get_variable_names(self):
        """The names of the variables in the latest checkpoint.

        Raises:
            ValueError: there is no checkpoint yet.
        """
        self._check_checkpoint_available()
        return [name for name, _ in checkpoint_utils.list_variables(self.model_dir)]

    def get_variable_value(self, name):
        """The value (numpy) of variable `name` in the latest checkpoint.

        Raises:
            ValueError: there is no checkpoint yet.
        """
        self._check_checkpoint_available()
        return checkpoint_utils.load_variable(self.model_dir, name)

    def eval_dir(self, name=None):
        """The directory of the evaluation `name` (model_dir/eval or model_dir/eval_<name>)."""
        return os.path.join(self._model_dir, "eval" if not name else "eval_" + name)

    def _check_checkpoint_available(self):
        if not self.latest_checkpoint():
            raise ValueError(f"Could not find trained model in model_dir: {self.model_dir}.")

    # ------------------------------------------------------------------ train
    def train(self, input_fn, hooks=None, steps=None, max_steps=None, saving_listeners=None):
        """Trains the model on the batches of `input_fn`.

        Args:
            input_fn: returns `(features, labels)`, features, or a `Dataset` of them.
            hooks: `SessionRunHook`s run during training.
            steps: train this many more steps (None: until the input ends).
            max_steps: train until the global step reaches this (nothing if it already has).
            saving_listeners: `CheckpointSaverListener`s of the checkpoint saves.

        Returns:
            self.

        Raises:
            ValueError: both steps and max_steps, a non-positive count, or listeners without
                checkpoints.
        """
        if steps is not None and max_steps is not None:
            raise ValueError("Can not provide both steps and max_steps.")
        if steps is not None and steps <= 0:
            raise ValueError(f"Must specify steps > 0, given: {steps}")
        if max_steps is not None and max_steps <= 0:
            raise ValueError(f"Must specify max_steps > 0, given: {max_steps}")
        if max_steps is not None:
            start_step = _load_global_step_from_checkpoint_dir(self._model_dir)
            if max_steps <= start_step:
                _log.info("Skipping training since max_steps has already saved.")
                return self
        hooks = _check_hooks_type(hooks)
        if steps is not None or max_steps is not None:
            hooks.append(_hooks.StopAtStepHook(steps, max_steps))
        saving_listeners = _check_listeners_type(saving_listeners)
        loss = self._train_model(input_fn, hooks, saving_listeners)
        _log.info("Loss for final step: %s.", loss)
        return self

    def _train_model(self, input_fn, hooks, saving_listeners):
        with _ops.Graph().as_default() as g, g.device(self._device_fn):
            random_seed.set_random_seed(self._config.tf_random_seed)
            global_step = self._create_global_step(g)
            training_util.get_or_create_global_step_read(g)
            features, labels = self._call_input_fn(input_fn, ModeKeys.TRAIN)
            spec = self._call_model_fn(features, labels, ModeKeys.TRAIN, self.config)
            return self._train_with_spec(spec, global_step, hooks, saving_listeners)

    def _train_with_spec(self, spec, global_step, hooks, saving_listeners):
        if self._warm_start_settings:
            _log.info("Warm-starting with WarmStartSettings: %s", self._warm_start_settings)
            warm_start(*self._warm_start_settings)
        # TensorBoard's "loss" curve, as TF's Estimator adds it unless the model_fn named one so.
        if not any(s.op.name == "loss" for s in _ops.get_collection(_ops.GraphKeys.SUMMARIES)):
            from kernflow.core.summary import summary_ops
            summary_ops.scalar("loss", spec.loss)
        worker_hooks = list(hooks) + [_hooks.NanTensorHook(spec.loss)]
        if self._config.log_step_count_steps:
            worker_hooks.append(_hooks.LoggingTensorHook({"loss": spec.loss, "step": global_step},
                                                         every_n_iter=self._config.log_step_count_steps))
        worker_hooks.extend(spec.training_hooks)
        self._add_default_saver(spec.scaffold)
        chief_hooks = self._checkpoint_hooks(spec, worker_hooks, saving_listeners)
        loss, any_step_done = None, False
        cfg = self._config
        with MonitoredTrainingSession(master=cfg.master, is_chief=cfg.is_chief,
                                      checkpoint_dir=self._model_dir, scaffold=spec.scaffold,
                                      hooks=worker_hooks,
                                      chief_only_hooks=chief_hooks + list(spec.training_chief_hooks),
                                      save_checkpoint_secs=0,
                                      save_summaries_steps=cfg.save_summary_steps or None,
                                      config=self._session_config,
                                      max_wait_secs=cfg.session_creation_timeout_secs,
                                      log_step_count_steps=cfg.log_step_count_steps,
                                      save_graph_def=cfg.checkpoint_save_graph_def) as sess:
            while not sess.should_stop():
                _, loss = sess.run([spec.train_op, spec.loss])
                any_step_done = True
        if not any_step_done:
            _log.warning("Training with estimator made no steps. Perhaps input is empty or misspecified.")
        return loss

    def _add_default_saver(self, scaffold):
        if scaffold.saver is not None or _ops.get_collection(_ops.GraphKeys.SAVERS):
            return
        from kernflow.core.train.saver import Saver
        _ops.add_to_collection(_ops.GraphKeys.SAVERS, Saver(
            sharded=True, max_to_keep=self._config.keep_checkpoint_max,
            keep_checkpoint_every_n_hours=self._config.keep_checkpoint_every_n_hours,
            defer_build=True, save_relative_paths=True))

    def _checkpoint_hooks(self, spec, worker_hooks, saving_listeners):
        """The chief's CheckpointSaverHook (unless the user gave one), with the listeners."""
        chief_hooks = []
        saver_hooks = [h for h in worker_hooks + list(spec.training_chief_hooks)
                       if isinstance(h, _hooks.CheckpointSaverHook)]
        cfg = self._config
        if (cfg.save_checkpoints_secs or cfg.save_checkpoints_steps) and not saver_hooks:
            chief_hooks = [_hooks.CheckpointSaverHook(
                self._model_dir, save_secs=cfg.save_checkpoints_secs, save_steps=cfg.save_checkpoints_steps,
                scaffold=spec.scaffold, save_graph_def=cfg.checkpoint_save_graph_def)]
            saver_hooks = chief_hooks
        if saving_listeners:
            if not saver_hooks:
                raise ValueError("There should be a CheckpointSaverHook to use saving_listeners. Please "
                                 "set one of the RunConfig.save_checkpoints_steps or "
                                 "RunConfig.save_checkpoints_secs.")
            listeners = saver_hooks[0]._listeners
            listeners.extend(lst for lst in saving_listeners if lst not in listeners)
        return chief_hooks

    # ------------------------------------------------------------------ evaluate
    def evaluate(self, input_fn, steps=None, hooks=None, checkpoint_path=None, name=None):
        """Evaluates the model on the batches of `input_fn`.

        Args:
            input_fn: returns `(features, labels)` or a `Dataset` of them.
            steps: evaluate this many batches (None: until the input raises OutOfRangeError).
            hooks: `SessionRunHook`s run during the evaluation.
            checkpoint_path: the checkpoint to evaluate (default: the latest; none: the
                initialized model).
            name: the name of the evaluation (its directory is `eval_dir(name)`).

        Returns:
            {metric name: value} of `eval_metric_ops`, plus "loss" (the mean of the batch losses)
            and "global_step" (that of the checkpoint).

        Raises:
            ValueError: a non-positive `steps`, or a metric named "loss" or "global_step".
        """
        hooks = _check_hooks_type(hooks)
        if steps is not None:
            if steps <= 0:
                raise ValueError(f"Must specify steps > 0, given: {steps}")
            hooks.append(_StopAfterNEvalsHook(num_evals=steps))
        checkpoint_path = self._checkpoint_to_use(checkpoint_path, "evaluate")
        with _ops.Graph().as_default() as g, g.device(self._device_fn):
            scaffold, update_op, eval_dict, all_hooks = self._evaluate_build_graph(input_fn, hooks, g)
            final_hook = _hooks.FinalOpsHook(eval_dict)
            creator = ChiefSessionCreator(scaffold=scaffold, checkpoint_filename_with_path=checkpoint_path,
                                          master=self._config.evaluation_master,
                                          config=self._session_config)
            _log.info("Starting evaluation of %s", checkpoint_path)
            with MonitoredSession(session_creator=creator, hooks=all_hooks + [final_hook]) as sess:
                while not sess.should_stop():
                    sess.run(update_op)
        results = dict(final_hook.final_ops_values or {})
        _log.info("Saving dict for global step %s: %s", results.get(GLOBAL_STEP_KEY), results)
        _write_dict_to_summary(self.eval_dir(name), results, results.get(GLOBAL_STEP_KEY, 0))
        return results

    def _evaluate_build_graph(self, input_fn, hooks, g):
        from kernflow.core.metrics import means
        random_seed.set_random_seed(self._config.tf_random_seed)
        global_step = self._create_global_step(g)
        features, labels = self._call_input_fn(input_fn, ModeKeys.EVAL)
        spec = self._call_model_fn(features, labels, ModeKeys.EVAL, self.config)
        if LOSS_METRIC_KEY in spec.eval_metric_ops:
            raise ValueError(f'Metric with name "{LOSS_METRIC_KEY}" is not allowed, because Estimator '
                             "already defines a default metric with the same name.")
        if GLOBAL_STEP_KEY in spec.eval_metric_ops:
            raise ValueError(f"Metric with name `{GLOBAL_STEP_KEY}` is not allowed, because Estimator "
                             "already defines a default metric with the same name.")
        metric_ops = dict(spec.eval_metric_ops)
        metric_ops[LOSS_METRIC_KEY] = means.mean(spec.loss)
        update_op = [metric_ops[k][1] for k in sorted(metric_ops)]
        eval_dict = {k: metric_ops[k][0] for k in metric_ops}
        eval_dict[GLOBAL_STEP_KEY] = global_step
        return spec.scaffold, update_op, eval_dict, list(hooks) + list(spec.evaluation_hooks)

    # ------------------------------------------------------------------ predict
    def predict(self, input_fn, predict_keys=None, hooks=None, checkpoint_path=None,
                yield_single_examples=True):
        """Yields the predictions of the model for the features of `input_fn`.

        Args:
            input_fn: returns features, `(features, labels)` (labels ignored) or a `Dataset`.
            predict_keys: the keys of a dict of predictions to compute (default: all).
            hooks: `SessionRunHook`s run during the prediction.
            checkpoint_path: the checkpoint to use (default: the latest; none: initialized).
            yield_single_examples: yield one example at a time (False: one batch at a time).

        Yields:
            The evaluated predictions (a numpy value or a dict of them).

        Raises:
            ValueError: `predict_keys` matching no prediction or given for non-dict predictions,
                or predictions of different batch lengths.
        """
        hooks = _check_hooks_type(hooks)
        checkpoint_path = self._checkpoint_to_use(checkpoint_path, "predict")
        with _ops.Graph().as_default() as g, g.device(self._device_fn):
            random_seed.set_random_seed(self._config.tf_random_seed)
            self._create_global_step(g)
            features, _ = self._call_input_fn(input_fn, ModeKeys.PREDICT)
            spec = self._call_model_fn(features, None, ModeKeys.PREDICT, self.config)
            predictions = _extract_keys(spec.predictions, predict_keys)
            creator = ChiefSessionCreator(scaffold=spec.scaffold, config=self._session_config,
                                          checkpoint_filename_with_path=checkpoint_path)
            with MonitoredSession(session_creator=creator,
                                  hooks=hooks + list(spec.prediction_hooks)) as sess:
                while not sess.should_stop():
                    values = sess.run(predictions)
                    if not yield_single_examples:
                        yield values
                    elif not isinstance(predictions, dict):
                        if np.ndim(values) == 0:
                            _extract_batch_length({"predictions": values})
                        yield from values
                    else:
                        for i in range(_extract_batch_length(values)):
                            yield {key: value[i] for key, value in values.items()}

    # ------------------------------------------------------------------ export
    def export_saved_model(self, export_dir_base, serving_input_receiver_fn, assets_extra=None,
                           as_text=False, checkpoint_path=None):
        """Exports the model in PREDICT mode as a SavedModel tagged "serve".

        The graph is the model_fn over the features of `serving_input_receiver_fn`; each of the
        spec's `export_outputs` (default: a `PredictOutput` of the predictions) becomes a
        signature over the receiver tensors; the variables come from the checkpoint.

        Args:
            export_dir_base: the directory under which a timestamped export directory is made.
            serving_input_receiver_fn: returns a `ServingInputReceiver` (or
                `TensorServingInputReceiver`).
            assets_extra: {destination path relative to assets.extra/: source file path}.
            as_text: write saved_model.pbtxt instead of saved_model.pb.
            checkpoint_path: the checkpoint to export (default: the latest).

        Returns:
            The export directory, as bytes.

        Raises:
            ValueError: no `serving_input_receiver_fn`, or no checkpoint to export.
        """
        return self._export_saved_model(export_dir_base, serving_input_receiver_fn, assets_extra,
                                        as_text, checkpoint_path, strip_default_attrs=True)

    def export_savedmodel(self, export_dir_base, serving_input_receiver_fn, assets_extra=None,
                          as_text=False, checkpoint_path=None, strip_default_attrs=False):
        """TF1's name of `export_saved_model` (default attrs are kept unless `strip_default_attrs`)."""
        return self._export_saved_model(export_dir_base, serving_input_receiver_fn, assets_extra,
                                        as_text, checkpoint_path, strip_default_attrs)

    def _export_saved_model(self, export_dir_base, serving_input_receiver_fn, assets_extra, as_text,
                            checkpoint_path, strip_default_attrs):
        from kernflow.core.estimator import export as _export
        from kernflow.core.saved_model.builder import SavedModelBuilder
        if not serving_input_receiver_fn:
            raise ValueError("An input_receiver_fn must be defined.")
        checkpoint_path = checkpoint_path or self.latest_checkpoint()
        if not checkpoint_path:
            raise ValueError(f"Couldn't find trained model at {self._model_dir}.")
        export_dir = _export.get_timestamped_export_dir(export_dir_base)
        temp_dir = _export.get_temp_export_dir(export_dir)
        builder = SavedModelBuilder(temp_dir)
        with _ops.Graph().as_default() as g:
            self._add_serving_meta_graph(builder, g, serving_input_receiver_fn, checkpoint_path,
                                         strip_default_attrs)
        builder.save(as_text)
        for dest, source in (assets_extra or {}).items():
            dest = os.path.join(os.fsdecode(temp_dir), "assets.extra", dest)
            os.makedirs(os.path.dirname(dest), exist_ok=True)
            shutil.copyfile(source, dest)
        os.rename(temp_dir, export_dir)
        _log.info("Exported SavedModel of %s to %s", checkpoint_path, os.fsdecode(export_dir))
        return export_dir

    def _add_serving_meta_graph(self, builder, graph, serving_input_receiver_fn, checkpoint_path,
                                strip_default_attrs):
        from kernflow.core.client.session import Session
        from kernflow.core.estimator import export as _export
        from kernflow.core.estimator.export_output import get_export_outputs
        from kernflow.core.saved_model import signature_constants, tag_constants
        from kernflow.core.train.saver import Saver
        from kernflow.core.train.scaffold import Scaffold
        random_seed.set_random_seed(self._config.tf_random_seed)
        receiver = serving_input_receiver_fn()
        self._create_global_step(graph)
        spec = self._call_model_fn(receiver.features, None, ModeKeys.PREDICT, self.config)
        signatures = _export.build_all_signature_defs(
            receiver.receiver_tensors, get_export_outputs(spec.export_outputs, spec.predictions),
            receiver.receiver_tensors_alternatives)
        if signature_constants.DEFAULT_SERVING_SIGNATURE_DEF_KEY not in signatures:
            _log.warning("Export includes no default signature! (signatures: %s)", sorted(signatures))
        saver = spec.scaffold.saver or Saver(sharded=True)
        local_init_op = spec.scaffold.local_init_op or Scaffold.default_local_init_op()
        with Session(config=self._session_config) as sess:
            saver.restore(sess, checkpoint_path)
            builder.add_meta_graph_and_variables(
                sess, [tag_constants.SERVING], signature_def_map=signatures,
                assets_collection=_ops.get_collection(_ops.GraphKeys.ASSET_FILEPATHS),
                main_op=local_init_op, saver=saver, strip_default_attrs=strip_default_attrs)

    # ------------------------------------------------------------------ shared
    def _checkpoint_to_use(self, checkpoint_path, what):
        if checkpoint_path:
            return checkpoint_path
        latest = self.latest_checkpoint()
        if not latest:
            _log.info("Could not find trained model in model_dir: %s, running initialization to %s.",
                      self._model_dir, what)
        return latest

    @staticmethod
    def _create_global_step(graph):
        step = learning_rate.create_global_step(graph)
        if step is not learning_rate.get_global_step(graph) or not step.dtype.is_integer:
            raise ValueError(f"global_step must be an integer variable of the graph, given: {step}")
        return step

    def _call_input_fn(self, input_fn, mode):
        args = _fn_args(input_fn)
        kwargs = {}
        if "mode" in args:
            kwargs["mode"] = mode
        if "params" in args:
            kwargs["params"] = self.params
        if "config" in args:
            kwargs["config"] = self.config
        with _ops.get_default_graph().device("/cpu:0"):
            return _parse_input_fn_result(input_fn(**kwargs))

    def _call_model_fn(self, features, labels, mode, config):
        args = _fn_args(self._model_fn)
        kwargs = {}
        if "labels" in args:
            kwargs["labels"] = labels
        elif labels is not None:
            raise ValueError("model_fn does not take labels, but input_fn returns labels.")
        if "mode" in args:
            kwargs["mode"] = mode
        if "params" in args:
            kwargs["params"] = self.params
        if "config" in args:
            kwargs["config"] = config
        _log.info("Calling model_fn.")
        spec = self._model_fn(features=features, **kwargs)
        _log.info("Done calling model_fn.")
        if not isinstance(spec, EstimatorSpec):
            raise ValueError("model_fn should return an EstimatorSpec.")
        return spec


def _write_dict_to_summary(output_dir, dictionary, global_step):
    """Writes the scalar values of `dictionary` (but global_step) as summaries at `global_step`,
    so TensorBoard shows the evaluation curves (TF writes them to `eval_dir` too)."""
    from kernflow.core.protobuf import summary_pb2
    from kernflow.core.summary.writer import FileWriterCache
    summary = summary_pb2.Summary()
    for key, value in sorted(dictionary.items()):
        numeric = np.ndim(value) == 0 and np.issubdtype(np.asarray(value).dtype, np.number)
        if key != GLOBAL_STEP_KEY and numeric:
            summary.value.add(tag=key, simple_value=float(value))
    writer = FileWriterCache.get(output_dir)
    writer.add_summary(summary, int(global_step))
    writer.flush()


def _extract_keys(predictions, predict_keys):
    if predict_keys is None:
        return predictions
    if not isinstance(predictions, dict):
        raise ValueError("predict_keys argument is not valid in case of non-dict predictions.")
    if isinstance(predict_keys, str):
        predict_keys = [predict_keys]
    existing = list(predictions)
    predictions = {k: v for k, v in predictions.items() if k in predict_keys}
    if not predictions:
        raise ValueError(f"Expected to run at least one output from {existing}, provided {predict_keys}.")
    return predictions
