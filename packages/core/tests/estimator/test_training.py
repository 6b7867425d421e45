"""kf.estimator.train_and_evaluate (local mode) with TrainSpec / EvalSpec and the Latest/Final
exporters: evaluations follow checkpoint saves, throttled, with a final one (TF 1.15 semantics);
the parts of the distributed mode that need no other process (a one-task cluster, an evaluator,
the refused task types, the workers' start delay). tests/test_estimator_distributed.py runs a
whole cluster."""

import glob
import json
import os

import numpy as np
import pytest

import kernflow.core as kf
from kernflow.core import estimator
from kernflow.core.estimator import export

ModeKeys = estimator.ModeKeys
X = np.linspace(-1.0, 1.0, 20, dtype=np.float32).reshape(-1, 1)
Y = (3.0 * X + 2.0).astype(np.float32)


def _model_fn(features, labels, mode):
    w = kf.get_variable("w", [1, 1], initializer=kf.zeros_initializer())
    b = kf.get_variable("b", [1], initializer=kf.zeros_initializer())
    pred = kf.matmul(features["x"], w) + b
    if mode == ModeKeys.PREDICT:
        return estimator.EstimatorSpec(mode, predictions={"y": pred})
    loss = kf.reduce_mean(kf.square(pred - labels))
    train_op = kf.train.GradientDescentOptimizer(0.5).minimize(loss, global_step=kf.train.get_global_step())
    return estimator.EstimatorSpec(mode, loss=loss, train_op=train_op)


def _input_fn(num_epochs=None):
    return estimator.inputs.numpy_input_fn({"x": X}, Y, batch_size=20, num_epochs=num_epochs, shuffle=False)


def _est(tmp_path, **config):
    config = dict(dict(log_step_count_steps=None, save_checkpoints_steps=5), **config)
    return estimator.Estimator(_model_fn, model_dir=str(tmp_path / "model"),
                               config=estimator.RunConfig(**config))


class _CountEvals(estimator.SessionRunHook):
    def __init__(self):
        self.steps_evaluated = []

    def after_create_session(self, session, coord):
        self.steps_evaluated.append(int(session.run(kf.train.get_global_step())))


def _receiver_fn():
    return export.build_raw_serving_input_receiver_fn({"x": kf.placeholder(kf.float32, [None, 1])})()


def test_evaluates_every_checkpoint_and_exports(tmp_path):
    est, counter = _est(tmp_path), _CountEvals()
    latest = estimator.LatestExporter("latest", _receiver_fn, exports_to_keep=1)
    final = estimator.FinalExporter("final", _receiver_fn)
    result, exports = estimator.train_and_evaluate(
        est, estimator.TrainSpec(_input_fn(), max_steps=10),
        estimator.EvalSpec(_input_fn(1), steps=None, hooks=[counter], exporters=[latest, final],
                           throttle_secs=0))
    # The save at step 0 (session creation) is not evaluated; those at 5 and 10 are.
    assert counter.steps_evaluated == [5, 10]
    assert result["global_step"] == 10 and result["loss"] < 0.05
    assert result["loss"] == pytest.approx(est.evaluate(_input_fn(1))["loss"])
    # The last evaluation's exports: the latest exporter's and the final exporter's; the latest
    # exporter exported twice (timestamps a second apart) and kept one.
    assert len(exports) == 2 and all(isinstance(e, bytes) for e in exports)
    for name, path in zip(["latest", "final"], exports):
        base = os.path.join(est.model_dir, "export", name)
        assert os.listdir(base) == [os.path.basename(os.fsdecode(path))]
        assert kf.saved_model.contains_saved_model(path)


def test_throttle_skips_evaluations_but_the_final_one_runs(tmp_path):
    est, counter = _est(tmp_path), _CountEvals()
    result, exports = estimator.train_and_evaluate(
        est, estimator.TrainSpec(_input_fn(), max_steps=15),
        estimator.EvalSpec(_input_fn(1), steps=1, hooks=[counter], name="t", throttle_secs=3600))
    assert counter.steps_evaluated == [5, 15] and result["global_step"] == 15 and exports == []
    # Each evaluation's scalars are summaries in eval_dir(name), at the evaluated step.
    events = [e for f in sorted(glob.glob(os.path.join(est.eval_dir("t"), "events.*")))
              for e in kf.train.summary_iterator(f) if e.HasField("summary")]
    assert [e.step for e in events] == [5, 15]
    assert {v.tag for v in events[-1].summary.value} == {"loss"}
    assert events[-1].summary.value[0].simple_value == pytest.approx(result["loss"])
    # Resuming past max_steps trains nothing and evaluates nothing: TF returns (None, None).
    assert estimator.train_and_evaluate(est, estimator.TrainSpec(_input_fn(), max_steps=15),
                                        estimator.EvalSpec(_input_fn(1))) == (None, None)


def test_final_evaluation_when_the_input_ends_before_max_steps(tmp_path):
    est, counter = _est(tmp_path, save_checkpoints_steps=None, save_checkpoints_secs=600), _CountEvals()
    result, _ = estimator.train_and_evaluate(
        est, estimator.TrainSpec(_input_fn(num_epochs=3)),
        estimator.EvalSpec(_input_fn(1), hooks=[counter], exporters=estimator.FinalExporter(
            "f", _receiver_fn)))
    assert counter.steps_evaluated == [3] and result["global_step"] == 3
    assert not os.path.exists(os.path.join(est.model_dir, "export"))   # no max_steps: never "final"


def _set_tf_config(monkeypatch, cluster, task_type, index=0):
    monkeypatch.setenv("TF_CONFIG", json.dumps({"cluster": cluster,
                                                "task": {"type": task_type, "index": index}}))


_CLUSTER = {"chief": ["localhost:2222"], "ps": ["localhost:2223"]}


def test_unknown_task_types_and_second_evaluators_are_refused_before_anything_starts(tmp_path, monkeypatch):
    _set_tf_config(monkeypatch, dict(_CLUSTER, trainer=["localhost:2224"]), "trainer")
    with pytest.raises(ValueError, match=r"Task type trainer is not supported.*'chief'.*'evaluator'"):
        estimator.train_and_evaluate(_est(tmp_path), estimator.TrainSpec(_input_fn(), max_steps=1),
                                     estimator.EvalSpec(_input_fn(1)))
    _set_tf_config(monkeypatch, _CLUSTER, "evaluator", 1)
    with pytest.raises(ValueError, match="only be one `evaluator` task.*Given task id 1"):
        estimator.train_and_evaluate(_est(tmp_path), estimator.TrainSpec(_input_fn(), max_steps=1),
                                     estimator.EvalSpec(_input_fn(1)))
    assert not os.path.exists(os.path.join(tmp_path, "model", "checkpoint"))


def test_a_cluster_of_one_chief_trains_in_process_without_a_server(tmp_path, monkeypatch):
    _set_tf_config(monkeypatch, {"chief": ["localhost:1"]}, "chief")   # (port 1: nothing may bind it)
    est = _est(tmp_path)
    assert est.config.master == "" and est.config.is_chief
    assert estimator.train_and_evaluate(est, estimator.TrainSpec(_input_fn(), max_steps=5),
                                        estimator.EvalSpec(_input_fn(1))) is None   # a chief's
    assert est.get_variable_value("global_step") == 5


def test_tf_master_task_trains_and_evaluates_like_the_local_mode(tmp_path, monkeypatch):
    _set_tf_config(monkeypatch, {"master": ["localhost:1"]}, "master")   # one task: no server
    est, counter = _est(tmp_path), _CountEvals()
    assert est.config.is_chief and est.config.task_type == "master"
    result, exports = estimator.train_and_evaluate(
        est, estimator.TrainSpec(_input_fn(), max_steps=10),
        estimator.EvalSpec(_input_fn(1), hooks=[counter], throttle_secs=0))
    assert counter.steps_evaluated == [5, 10] and result["global_step"] == 10 and exports == []


def test_the_evaluator_evaluates_the_final_checkpoint_and_exports(tmp_path, monkeypatch):
    trained = _est(tmp_path).train(_input_fn(), max_steps=10)
    _set_tf_config(monkeypatch, _CLUSTER, "evaluator")
    est = _est(tmp_path)
    assert est.config.task_type == "evaluator" and not est.config.cluster_spec
    counter = _CountEvals()
    result, exports = estimator.train_and_evaluate(
        est, estimator.TrainSpec(_input_fn(), max_steps=10),
        estimator.EvalSpec(_input_fn(1), hooks=[counter],
                           exporters=estimator.FinalExporter("f", _receiver_fn),
                           start_delay_secs=0, throttle_secs=0))
    assert counter.steps_evaluated == [10] and result["global_step"] == 10
    assert result["loss"] == pytest.approx(trained.evaluate(_input_fn(1))["loss"])
    assert len(exports) == 1 and kf.saved_model.contains_saved_model(exports[0])


@pytest.mark.parametrize("task, cap, want", [("chief", None, 0), ("worker", None, 5), ("worker", 3, 3),
                                             ("worker", 0, 0)])
def test_worker_start_delay(monkeypatch, task, cap, want):
    from kernflow.core.estimator.training import _worker_start_delay
    _set_tf_config(monkeypatch, dict(_CLUSTER, worker=["localhost:2224"] * 20), task)
    assert _worker_start_delay(estimator.RunConfig(experimental_max_worker_delay_secs=cap)) == want
    _set_tf_config(monkeypatch, dict(_CLUSTER, worker=["localhost:2224"] * 20), "worker", 19)
    assert _worker_start_delay(estimator.RunConfig()) == 60


def test_spec_validation():
    fn = _input_fn()
    assert estimator.TrainSpec(fn) == (fn, None, ())
    spec = estimator.EvalSpec(fn)
    assert (spec.steps, spec.name, spec.hooks, spec.exporters, spec.start_delay_secs,
            spec.throttle_secs) == (100, None, (), (), 120, 600)
    with pytest.raises(TypeError, match="callable"):
        estimator.TrainSpec(None)
    with pytest.raises(ValueError, match="max_steps > 0"):
        estimator.TrainSpec(fn, max_steps=0)
    with pytest.raises(TypeError, match="SessionRunHook"):
        estimator.TrainSpec(fn, hooks=[object()])
    with pytest.raises(ValueError, match="steps > 0"):
        estimator.EvalSpec(fn, steps=0)
    with pytest.raises(ValueError, match="throttle_secs >= 0"):
        estimator.EvalSpec(fn, throttle_secs=-1)
    with pytest.raises(ValueError, match="start_delay_secs >= 0"):
        estimator.EvalSpec(fn, start_delay_secs=-1)
    with pytest.raises(ValueError, match="unique names"):
        estimator.EvalSpec(fn, exporters=[estimator.FinalExporter("a", _receiver_fn),
                                          estimator.LatestExporter("a", _receiver_fn)])
    with pytest.raises(TypeError, match="Exporter"):
        estimator.EvalSpec(fn, exporters=[_receiver_fn])
    with pytest.raises(ValueError, match="exports_to_keep"):
        estimator.LatestExporter("a", _receiver_fn, exports_to_keep=0)
    with pytest.raises(TypeError, match="train_spec"):
        estimator.train_and_evaluate(estimator.Estimator(_model_fn), None, estimator.EvalSpec(fn))
