"""kf.estimator.RunConfig reads TF_CONFIG as TF 1.15 does: the local mode, every task of a
chief/worker/ps cluster (master, global id, replica counts, default device filters), the
evaluator outside the cluster, TF's older "master" job, and the errors of a TF_CONFIG whose
cluster and task disagree. No process is started."""

import json

import pytest

import kernflow.core as kf
from kernflow.core import estimator
from kernflow.core.estimator.estimator import _replica_device_setter

# TF's documented example cluster (RunConfig.global_id_in_cluster).
CLUSTER = {"chief": ["host0:2222"], "ps": ["host1:2222", "host2:2222"],
           "worker": ["host3:2222", "host4:2222", "host5:2222"]}


def _config(monkeypatch, tf_config, **kwargs):
    monkeypatch.setenv("TF_CONFIG", tf_config if isinstance(tf_config, str) else json.dumps(tf_config))
    return estimator.RunConfig(**kwargs)


def _task(cluster, task_type, index):
    return {"cluster": cluster, "task": {"type": task_type, "index": index}}


def _summary(cfg):
    return (cfg.task_type, cfg.task_id, cfg.master, cfg.evaluation_master, cfg.is_chief, cfg.num_ps_replicas,
            cfg.num_worker_replicas, cfg.global_id_in_cluster)


def test_without_tf_config_the_config_is_the_local_chief(monkeypatch):
    monkeypatch.delenv("TF_CONFIG", raising=False)
    cfg = estimator.RunConfig()
    assert not cfg.cluster_spec and cfg.service is None and cfg.session_config is None
    assert _summary(cfg) == ("worker", 0, "", "", True, 0, 1, 0)
    cfg = _config(monkeypatch, {"session_master": "grpc://m:1", "eval_session_master": "grpc://e:2",
                                "task": {"type": "worker", "index": 0}, "environment": "cloud"})
    assert _summary(cfg) == ("worker", 0, "grpc://m:1", "grpc://e:2", True, 0, 1, 0)
    assert _summary(_config(monkeypatch, "  ")) == ("worker", 0, "", "", True, 0, 1, 0)
    with pytest.raises(ValueError, match="task type must be WORKER"):
        _config(monkeypatch, {"task": {"type": "chief", "index": 0}})
    with pytest.raises(ValueError, match="task index must be 0"):
        _config(monkeypatch, {"cluster": {}, "task": {"type": "worker", "index": 1}})


@pytest.mark.parametrize("task_type, index, want_global_id", [
    ("chief", 0, 0), ("worker", 0, 1), ("worker", 1, 2), ("worker", 2, 3), ("ps", 0, 4), ("ps", 1, 5)])
def test_every_task_of_a_cluster(monkeypatch, task_type, index, want_global_id):
    cfg = _config(monkeypatch, _task(CLUSTER, task_type, index))
    address = CLUSTER[task_type][index]
    assert _summary(cfg) == (task_type, index, "grpc://" + address, "", task_type == "chief", 2, 4,
                             want_global_id)
    assert cfg.cluster_spec == kf.train.ClusterSpec(CLUSTER)
    filters = {"chief": ["/job:ps", "/job:chief"], "worker": ["/job:ps", f"/job:worker/task:{index}"],
               "ps": ["/job:ps", "/job:worker", "/job:chief", "/job:master"]}[task_type]
    assert list(cfg.session_config.device_filters) == filters and cfg.session_config.allow_soft_placement
    # replace() keeps the task; a session config of the user's replaces TF's default.
    assert _summary(cfg.replace(save_summary_steps=7)) == _summary(cfg)
    own = kf.ConfigProto(inter_op_parallelism_threads=2)
    assert _config(monkeypatch, _task(CLUSTER, task_type, index), session_config=own).session_config == own


def test_the_evaluator_is_not_part_of_the_training_cluster(monkeypatch):
    cfg = _config(monkeypatch, _task(CLUSTER, "evaluator", 0))
    assert not cfg.cluster_spec and cfg.session_config is None
    assert _summary(cfg) == ("evaluator", 0, "", "", False, 0, 0, None)
    cfg = _config(monkeypatch, dict(_task(CLUSTER, "evaluator", 0), session_master="grpc://e:1"))
    assert (cfg.master, cfg.evaluation_master) == ("", "grpc://e:1")


def test_tf_older_master_job_is_the_chief(monkeypatch):
    cluster = {"master": ["h0:1"], "ps": ["h1:1"], "worker": ["h2:1", "h3:1"]}
    cfg = _config(monkeypatch, _task(cluster, "master", 0))
    assert _summary(cfg) == ("master", 0, "grpc://h0:1", "", True, 1, 3, 0)
    assert list(cfg.session_config.device_filters) == ["/job:ps", "/job:master"]
    assert _summary(_config(monkeypatch, _task(cluster, "worker", "1"))) == (
        "worker", 1, "grpc://h3:1", "", False, 1, 3, 2)
    with pytest.raises(ValueError, match="`master` node exists in `cluster`, job `chief` is not supported"):
        _config(monkeypatch, _task(dict(cluster, chief=["h4:1"]), "master", 0))
    with pytest.raises(ValueError, match="task_type `evaluator` is not supported"):
        _config(monkeypatch, _task(cluster, "evaluator", 0))


def test_a_cluster_of_one_task_trains_in_process(monkeypatch):
    cfg = _config(monkeypatch, _task({"chief": ["h0:1"]}, "chief", 0))
    assert _summary(cfg) == ("chief", 0, "", "", True, 0, 1, 0)
    assert cfg.service is None
    cfg = _config(monkeypatch, dict(_task({"chief": ["h0:1"]}, "chief", 0), service={"name": "x"}))
    assert cfg.service == {"name": "x"}


@pytest.mark.parametrize("tf_config, error, match", [
    ("{not json", ValueError, "TF_CONFIG is not valid JSON"),
    ("[1, 2]", ValueError, "must be a JSON object"),
    (_task({"ps": ["h:1"], "worker": ["h:2"]}, "worker", 0), ValueError, 'must have one "chief" node'),
    (_task({"chief": ["h:1", "h:2"]}, "chief", 0), ValueError, 'must have only one "chief" node'),
    ({"cluster": CLUSTER, "task": {"index": 0}}, ValueError, "task type must be set"),
    ({"cluster": CLUSTER, "task": {"type": "worker"}}, ValueError, "task index must be set"),
    (_task(CLUSTER, "worker", -1), ValueError, "must be non-negative"),
    (_task(CLUSTER, "trainer", 0), ValueError, "trainer is not a valid task_type"),
    (_task(CLUSTER, "worker", 3), ValueError, "3 is not a valid task_id for task_type worker"),
    (dict(_task(CLUSTER, "chief", 0), service=["x"]), TypeError,
     '"service" is set in TF_CONFIG, it must be a dict'),
])
def test_tf_config_errors(monkeypatch, tf_config, error, match):
    with pytest.raises(error, match=match):
        _config(monkeypatch, tf_config)


def test_worker_delay_must_not_be_negative(monkeypatch):
    monkeypatch.delenv("TF_CONFIG", raising=False)
    with pytest.raises(ValueError, match="experimental_max_worker_delay_secs should be >= 0"):
        estimator.RunConfig(experimental_max_worker_delay_secs=-1)


def test_with_ps_tasks_the_estimator_puts_variables_on_them_and_the_rest_on_this_task(monkeypatch):
    fn = _replica_device_setter(_config(monkeypatch, _task(CLUSTER, "worker", 1)))
    with kf.Graph().as_default() as g, g.device(fn):
        v1, v2 = kf.Variable(1.0, name="v1"), kf.Variable(2.0, name="v2")
        total = v1 + v2
    assert [v1.op.device, v2.op.device] == ["/job:ps/task:0", "/job:ps/task:1"]
    assert total.op.device == "/job:worker/task:1"
    assert _replica_device_setter(_config(monkeypatch, _task({"chief": ["h:1"], "worker": ["h:2"]},
                                                              "worker", 0))) is None
