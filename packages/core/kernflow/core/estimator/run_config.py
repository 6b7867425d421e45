"""`kf.estimator.RunConfig`: where and how often an `Estimator` saves, logs and seeds, and which
task of a cluster it is (TF1).

Checkpoints: every 600 seconds unless `save_checkpoints_steps` or `save_checkpoints_secs` is
given (giving one turns the other off; giving both is an error; None for both: never, but for the
last step of a training).

The cluster comes from the TF_CONFIG environment variable, read when the config is made, as TF 1.15
reads it: ``{"cluster": {job: [address, ...]}, "task": {"type": job, "index": i}, "service": {...},
"session_master": ..., "eval_session_master": ...}`` (other keys, like "environment", are
ignored). Invariants:

- No "cluster" (or an empty one): the local mode. The task must be worker 0 (the default); the
  config is the chief of a one-worker cluster, `master` is TF_CONFIG's "session_master" or "".
- A "cluster" has exactly one chief task (or, TF's older spelling, one "master" task and then no
  "chief" job and no evaluator); the task's type and index must name one of its tasks, except an
  "evaluator", which is not part of the training cluster: its `cluster_spec` is empty, its `master`
  "", it counts no replicas and has no global id.
- A training task's `master` is ``grpc://<its own address>`` (its in-process `kf.train.Server`),
  or "" in a cluster of one task; `num_worker_replicas` counts the chief (or master) and the
  workers; `global_id_in_cluster` numbers the chief 0, then the other jobs but ps in name order,
  then the ps tasks.
- With a cluster and no `session_config`, the config gets TF's default for between-graph training:
  soft placement and device filters, so a chief or worker talks only to the ps tasks and itself
  (and does not wait for the other trainers when it creates a session).
"""

from __future__ import annotations

import collections
import copy
import json
import os

__all__ = ["RunConfig", "TaskType"]

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


class TaskType:
    """The task types of a TF_CONFIG cluster."""
    MASTER = "master"
    PS = "ps"
    WORKER = "worker"
    CHIEF = "chief"
    EVALUATOR = "evaluator"


_LOCAL_MASTER = ""
_GRPC_SCHEME = "grpc://"

# What TF_CONFIG decides (the local mode's values are the defaults).
_Cluster = collections.namedtuple("_Cluster", [
    "cluster_spec", "task_type", "task_id", "master", "evaluation_master", "is_chief", "num_ps_replicas",
    "num_worker_replicas", "global_id_in_cluster", "service"])


def _read_tf_config():
    """The TF_CONFIG environment variable as a dict ({} when unset or blank)."""
    raw = os.environ.get("TF_CONFIG", "")
    if not raw.strip():
        return {}
    try:
        config = json.loads(raw)
    except ValueError as e:
        raise ValueError(f"TF_CONFIG is not valid JSON: {e}. Given TF_CONFIG={raw!r}.") from e
    if not isinstance(config, dict):
        raise ValueError(f"TF_CONFIG must be a JSON object, given TF_CONFIG={raw!r}.")
    return config


def _cluster_from_tf_config(tf_config):
    """The `_Cluster` of a parsed TF_CONFIG (TF 1.15's rules; see the module docstring)."""
    from kernflow.core.train.server_lib import ClusterSpec
    service = tf_config.get("service")
    if service is not None and not isinstance(service, dict):
        raise TypeError(f'If "service" is set in TF_CONFIG, it must be a dict. Given {service!r}')
    common = dict(service=service)
    cluster = ClusterSpec(tf_config.get("cluster") or {})
    task = tf_config.get("task") or {}
    if not cluster:
        return _local_cluster(cluster, task, tf_config, common)
    chief_type = TaskType.MASTER if TaskType.MASTER in cluster.jobs else TaskType.CHIEF
    if chief_type == TaskType.MASTER and TaskType.CHIEF in cluster.jobs:
        raise ValueError("If `master` node exists in `cluster`, job `chief` is not supported.")
    task_type, task_id = _validated_task(cluster, task, chief_type)
    evaluation_master = tf_config.get("eval_session_master", _LOCAL_MASTER)
    if task_type == TaskType.EVALUATOR:
        if chief_type == TaskType.MASTER:
            raise ValueError("If `master` node exists in `cluster`, task_type `evaluator` is not "
                             "supported.")
        evaluation_master = tf_config.get("eval_session_master",
                                          tf_config.get("session_master", _LOCAL_MASTER))
        return _Cluster(ClusterSpec({}), task_type, task_id, _LOCAL_MASTER, evaluation_master, False, 0, 0,
                        None, **common)
    return _Cluster(cluster, task_type, task_id, _session_master(cluster, task_type, task_id, tf_config),
                    evaluation_master, task_type == chief_type, _num_tasks(cluster, TaskType.PS),
                    _num_tasks(cluster, chief_type) + _num_tasks(cluster, TaskType.WORKER),
                    _global_id(cluster, task_type, task_id, chief_type), **common)


def _local_cluster(cluster, task, tf_config, common):
    task_type = task.get("type", TaskType.WORKER)
    task_id = int(task.get("index", 0))
    if task_type != TaskType.WORKER:
        raise ValueError('If "cluster" is not set in TF_CONFIG, task type must be WORKER.')
    if task_id != 0:
        raise ValueError('If "cluster" is not set in TF_CONFIG, task index must be 0.')
    return _Cluster(cluster, task_type, task_id, tf_config.get("session_master", _LOCAL_MASTER),
                    tf_config.get("eval_session_master", _LOCAL_MASTER), True, 0, 1, 0, **common)


def _validated_task(cluster, task, chief_type):
    """(task type, task index) of TF_CONFIG's "task", checked against the cluster."""
    if chief_type not in cluster.jobs:
        raise ValueError(f'If "cluster" is set in TF_CONFIG, it must have one "{chief_type}" node. '
                         f"Given cluster: {cluster.as_dict()}")
    if cluster.num_tasks(chief_type) > 1:
        raise ValueError(f'The "cluster" in TF_CONFIG must have only one "{chief_type}" node. '
                         f"Given cluster: {cluster.as_dict()}")
    task_type, task_id = task.get("type"), task.get("index")
    if not task_type:
        raise ValueError('If "cluster" is set in TF_CONFIG, task type must be set.')
    if task_id is None:
        raise ValueError('If "cluster" is set in TF_CONFIG, task index must be set.')
    task_id = int(task_id)
    if task_id < 0:
        raise ValueError(f"Task index must be non-negative number. Given {task_id}.")
    if task_type == TaskType.EVALUATOR:   # not part of the training cluster
        return task_type, task_id
    if task_type not in cluster.jobs:
        raise ValueError(f"{task_type} is not a valid task_type in the cluster_spec: {cluster.as_dict()}. "
                         "Note that these values may be coming from the TF_CONFIG environment variable.")
    if task_id not in cluster.task_indices(task_type):
        raise ValueError(f"{task_id} is not a valid task_id for task_type {task_type} in the cluster_spec: "
                         f"{cluster.as_dict()}. Note that these values may be coming from the TF_CONFIG "
                         "environment variable.")
    return task_type, task_id


def _num_tasks(cluster, job):
    return cluster.num_tasks(job) if job in cluster.jobs else 0


def _session_master(cluster, task_type, task_id, tf_config):
    if "session_master" in tf_config:
        return tf_config["session_master"]
    jobs = cluster.jobs
    if len(jobs) == 1 and cluster.num_tasks(jobs[0]) == 1:   # one task: it trains in process
        return _LOCAL_MASTER
    return _GRPC_SCHEME + cluster.task_address(task_type, task_id)


def _global_id(cluster, task_type, task_id, chief_type):
    """The chief is 0, then the tasks of the other jobs in name order, the ps tasks last."""
    order = [chief_type] + [j for j in cluster.jobs if j not in (chief_type, TaskType.PS)] + [TaskType.PS]
    first = 0
    for job in order:
        if job == task_type:
            return first + task_id
        first += _num_tasks(cluster, job)
    raise RuntimeError(f"Internal error: task_type {task_type!r} is not in the cluster {cluster.as_dict()}")


def _default_distributed_session_config(task_type, task_id):
    """TF's session config of a between-graph trainer: it sees the ps tasks and itself only."""
    from kernflow.core.protobuf.config_pb2 import ConfigProto
    filters = {TaskType.MASTER: ["/job:ps", "/job:master"], TaskType.CHIEF: ["/job:ps", "/job:chief"],
               TaskType.WORKER: ["/job:ps", f"/job:worker/task:{task_id}"],
               TaskType.PS: ["/job:ps", "/job:worker", "/job:chief", "/job:master"]}.get(task_type)
    if filters is None:
        return None
    return ConfigProto(allow_soft_placement=True, device_filters=filters)


class RunConfig:
    """The run configuration of an `Estimator`.

    Args:
        model_dir: the directory of checkpoints (and of the Estimator when it gets none).
        tf_random_seed: the graph-level random seed of every graph the Estimator builds.
        save_summary_steps: write the summaries (and a ``loss`` scalar) to model_dir every N steps.
        save_checkpoints_steps: save every N global steps.
        save_checkpoints_secs: save every N seconds (default 600 when neither is given).
        session_config: the sessions' `ConfigProto` (default in a cluster: soft placement and the
            device filters of a between-graph trainer, see the module docstring).
        keep_checkpoint_max: how many recent checkpoints to keep (None or 0: all).
        keep_checkpoint_every_n_hours: also keep one checkpoint every N hours.
        log_step_count_steps: log the loss and global_step/sec every N steps (None: never).
        device_fn: ``fn(op) -> device`` for every op the Estimator builds (default: with ps tasks,
            `kf.train.replica_device_setter` over them).
        protocol: the protocol of the task's `kf.train.Server` (default "grpc").
        experimental_max_worker_delay_secs: the longest a worker of a cluster waits before it
            starts training in `train_and_evaluate` (default 60; worker i waits
            ``min(this, 5 * (i + 1))`` seconds).
        train_distribute, eval_distribute, experimental_distribute: accepted for TF
            compatibility; must be None.
        session_creation_timeout_secs: how long a session waits for the cluster's tasks (and a
            worker for the chief's initialization).
        checkpoint_save_graph_def: write graph.pbtxt and the meta graph with the checkpoints.

    Raises:
        ValueError: both save_checkpoints_steps and save_checkpoints_secs, a negative count, a
            non-integer seed, a distribution argument kernflow does not support, or a TF_CONFIG
            that is not valid JSON or whose cluster and task do not agree (module docstring).
        TypeError: a TF_CONFIG "service" that is not a dict.
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
        self._cluster = _cluster_from_tf_config(_read_tf_config())
        if self._session_config is None and self._cluster.cluster_spec:
            self._session_config = _default_distributed_session_config(self.task_type, self.task_id)
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
        _check("experimental_max_worker_delay_secs", self._experimental_max_worker_delay_secs, nonneg,
               "experimental_max_worker_delay_secs should be >= 0.")
        _check("session_creation_timeout_secs", self._session_creation_timeout_secs, lambda v: v > 0,
               "session_creation_timeout_secs should be > 0.")
        if self._device_fn is not None and not callable(self._device_fn):
            raise ValueError(f"device_fn must be callable with exactly one argument `op`. Given "
                             f"device_fn={self._device_fn!r}.")
        for name in ("train_distribute", "eval_distribute", "experimental_distribute"):
            if getattr(self, "_" + name) is not None:
                raise ValueError(f"{name} is not supported by kernflow's Estimator (between-graph "
                                 "replication through TF_CONFIG is).")

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

    # The cluster and this task (TF_CONFIG, read by __init__).
    cluster_spec = property(lambda self: self._cluster.cluster_spec,
                            doc="The training cluster's `ClusterSpec` (empty: local, or an evaluator).")
    evaluation_master = property(lambda self: self._cluster.evaluation_master,
                                 doc="The session target of evaluations.")
    global_id_in_cluster = property(lambda self: self._cluster.global_id_in_cluster,
                                    doc="This task's index among all the training cluster's tasks.")
    is_chief = property(lambda self: self._cluster.is_chief,
                        doc="Whether this task initializes, saves checkpoints and writes summaries.")
    master = property(lambda self: self._cluster.master, doc="The session target of training.")
    num_ps_replicas = property(lambda self: self._cluster.num_ps_replicas, doc="The number of ps tasks.")
    num_worker_replicas = property(lambda self: self._cluster.num_worker_replicas,
                                   doc="The number of training tasks (the chief and the workers).")
    task_id = property(lambda self: self._cluster.task_id, doc="This task's index in its job.")
    task_type = property(lambda self: self._cluster.task_type, doc="This task's job.")
    service = property(lambda self: self._cluster.service, doc='TF_CONFIG\'s "service" dict, or None.')


def _config_property(name, doc):
    return property(lambda self: getattr(self, "_" + name), doc=doc)


for _name in _REPLACEABLE:
    setattr(RunConfig, _name, _config_property(_name, f"The `{_name}` of this config."))


def _get_model_dir(model_dir):
    if model_dir is None:
        return None
    return str(model_dir)
