"""`kf.estimator.RunConfig`: where and how often an `Estimator` saves, logs and seeds (TF1).

Checkpoints: every 600 seconds unless `save_checkpoints_steps` or `save_checkpoints_secs` is
given (giving one turns the other off; giving both is an error; None for both: never, but for the
last step of a training). kernflow runs a single process: the config is always the chief of a
one-worker cluster.
"""

from __future__ import annotations

import copy

__all__ = ["RunConfig"]

_USE_DEFAULT = object()
_DEFAULT_SAVE_CHECKPOINTS_SECS = 600

_REPLACEABLE = ("model_dir", "tf_random_seed", "save_summary_steps", "save_checkpoints_steps",
                "save_checkpoints_secs", "session_config", "keep_checkpoint_max",
                "keep_checkpoint_every_n_hours", "log_step_count_steps", "train_distribute", "device_fn",
                "protocol", "eval_distribute", "experimental_distribute",
                "experimental_max_worker_delay_secs", "session_creation_timeout_secs",
                "checkpoint_save_graph_def")


def _check(name, value, ok, message, error=ValueError):
    if value is not None and not ok(value):
        raise error(f"{message} Given {name}={value!r}.")


class RunConfig:
    """The run configuration of an `Estimator`.

    Args:
        model_dir: the directory of checkpoints (and of the Estimator when it gets none).
        tf_random_seed: the graph-level random seed of every graph the Estimator builds.
        save_summary_steps: write the summaries (and a ``loss`` scalar) to model_dir every N steps.
        save_checkpoints_steps: save every N global steps.
        save_checkpoints_secs: save every N seconds (default 600 when neither is given).
        session_config: the sessions' `ConfigProto`.
        keep_checkpoint_max: how many recent checkpoints to keep (None or 0: all).
        keep_checkpoint_every_n_hours: also keep one checkpoint every N hours.
        log_step_count_steps: log the loss and global_step/sec every N steps (None: never).
        train_distribute, device_fn, protocol, eval_distribute, experimental_distribute,
        experimental_max_worker_delay_secs: accepted for TF compatibility; must be None.
        session_creation_timeout_secs: how long a worker waits for its session.
        checkpoint_save_graph_def: write graph.pbtxt and the meta graph with the checkpoints.

    Raises:
        ValueError: both save_checkpoints_steps and save_checkpoints_secs, a negative count, a
            non-integer seed, or a distribution argument kernflow does not support.
    """

    def __init__(self, model_dir=None, tf_random_seed=None, save_summary_steps=100,
                 save_checkpoints_steps=_USE_DEFAULT, save_checkpoints_secs=_USE_DEFAULT,
                 session_config=None, keep_checkpoint_max=5, keep_checkpoint_every_n_hours=10000,
                 log_step_count_steps=100, train_distribute=None, device_fn=None, protocol=None,
                 eval_distribute=None, experimental_distribute=None,
                 experimental_max_worker_delay_secs=None, session_creation_timeout_secs=7200,
                 checkpoint_save_graph_def=True):
        if save_checkpoints_steps is _USE_DEFAULT and save_checkpoints_secs is _USE_DEFAULT:
            save_checkpoints_steps, save_checkpoints_secs = None, _DEFAULT_SAVE_CHECKPOINTS_SECS
        elif save_checkpoints_steps is _USE_DEFAULT:
            save_checkpoints_steps = None
        elif save_checkpoints_secs is _USE_DEFAULT:
            save_checkpoints_secs = None
        self._model_dir = _get_model_dir(model_dir)
        self._tf_random_seed = tf_random_seed
        self._save_summary_steps = save_summary_steps
        self._save_checkpoints_steps = save_checkpoints_steps
        self._save_checkpoints_secs = save_checkpoints_secs
        self._session_config = session_config
        self._keep_checkpoint_max = keep_checkpoint_max
        self._keep_checkpoint_every_n_hours = keep_checkpoint_every_n_hours
        self._log_step_count_steps = log_step_count_steps
        self._train_distribute = train_distribute
        self._device_fn = device_fn
        self._protocol = protocol
        self._eval_distribute = eval_distribute
        self._experimental_distribute = experimental_distribute
        self._experimental_max_worker_delay_secs = experimental_max_worker_delay_secs
        self._session_creation_timeout_secs = session_creation_timeout_secs
        self._checkpoint_save_graph_def = checkpoint_save_graph_def
        self._validate()

    def _validate(self):
        if self._save_checkpoints_steps and self._save_checkpoints_secs:
            raise ValueError("Can not specify both save_checkpoints_steps and save_checkpoints_secs.")
        nonneg = lambda v: v >= 0  # noqa: E731
        _check("save_summary_steps", self._save_summary_steps, nonneg, "save_summary_steps should be >= 0.")
        _check("save_checkpoints_steps", self._save_checkpoints_steps, nonneg,
               "save_checkpoints_steps should be >= 0.")
        _check("save_checkpoints_secs", self._save_checkpoints_secs, nonneg,
               "save_checkpoints_secs should be >= 0.")
        _check("keep_checkpoint_max", self._keep_checkpoint_max, nonneg,
               "keep_checkpoint_max should be >= 0.")
        _check("keep_checkpoint_every_n_hours", self._keep_checkpoint_every_n_hours, lambda v: v > 0,
               "keep_checkpoint_every_n_hours should be > 0.")
        _check("log_step_count_steps", self._log_step_count_steps, nonneg,
               "log_step_count_steps should be >= 0.")
        _check("tf_random_seed", self._tf_random_seed,
               lambda v: isinstance(v, int) and not isinstance(v, bool), "tf_random_seed must be integer.")
        _check("session_creation_timeout_secs", self._session_creation_timeout_secs, lambda v: v > 0,
               "session_creation_timeout_secs should be > 0.")
        if self._device_fn is not None and not callable(self._device_fn):
            raise ValueError(f"device_fn must be callable with exactly one argument `op`. Given "
                             f"device_fn={self._device_fn!r}.")
        for name in ("train_distribute", "eval_distribute", "experimental_distribute"):
            if getattr(self, "_" + name) is not None:
                raise ValueError(f"{name} is not supported by kernflow's Estimator (single process).")

    def replace(self, **kwargs):
        """Returns a copy with the given properties replaced.

        Raises:
            ValueError: a property that cannot be replaced, or an invalid new value.
        """
        new = copy.deepcopy(self)
        for key, value in kwargs.items():
            if key not in _REPLACEABLE:
                raise ValueError(f"{key} property cannot be replaced.")
            setattr(new, "_" + key, _get_model_dir(value) if key == "model_dir" else value)
        new._validate()
        return new

    # Single process: always the chief of a one-worker cluster.
    cluster_spec = property(lambda self: None)
    evaluation_master = property(lambda self: "")
    global_id_in_cluster = property(lambda self: 0)
    is_chief = property(lambda self: True)
    master = property(lambda self: "")
    num_ps_replicas = property(lambda self: 0)
    num_worker_replicas = property(lambda self: 1)
    task_id = property(lambda self: 0)
    task_type = property(lambda self: "worker")
    service = property(lambda self: None)


def _config_property(name, doc):
    return property(lambda self: getattr(self, "_" + name), doc=doc)


for _name in _REPLACEABLE:
    setattr(RunConfig, _name, _config_property(_name, f"The `{_name}` of this config."))


def _get_model_dir(model_dir):
    if model_dir is None:
        return None
    return str(model_dir)
