"""kf.estimator: Estimator train/evaluate/predict against numpy gradient descent, checkpoints across
calls, max_steps, EstimatorSpec / RunConfig / numpy_input_fn validation (TF1 semantics)."""

import numpy as np
import pytest

import kernflow.core as kf
from kernflow.core import estimator

ModeKeys = estimator.ModeKeys
X = np.linspace(-1.0, 1.0, 40, dtype=np.float32).reshape(-1, 1)
Y = (3.0 * X + 2.0).astype(np.float32)


def _linear_model_fn(features, labels, mode, params):
    w = kf.get_variable("w", [1, 1], initializer=kf.zeros_initializer())
    b = kf.get_variable("b", [1], initializer=kf.zeros_initializer())
    pred = kf.matmul(features["x"], w) + b
    if mode == ModeKeys.PREDICT:
        return estimator.EstimatorSpec(mode, predictions={"y": pred, "double": 2.0 * pred})
    loss = kf.reduce_mean(kf.square(pred - labels))
    if mode == ModeKeys.EVAL:
        return estimator.EstimatorSpec(mode, loss=loss, eval_metric_ops={
            "mae": kf.metrics.mean_absolute_error(labels, pred)})
    opt = kf.train.GradientDescentOptimizer(params.get("lr", 0.5))
    train_op = opt.minimize(loss, global_step=kf.train.get_global_step())
    return estimator.EstimatorSpec(mode, loss=loss, train_op=train_op)


def _numpy_gd(steps, lr=0.5, x=X, y=Y, w=0.0, b=0.0):
    """Full-batch gradient descent on mean((w*x + b - y)^2)."""
    for _ in range(steps):
        r = w * x[:, 0] + b - y[:, 0]
        w, b = w - lr * 2 * np.mean(r * x[:, 0]), b - lr * 2 * np.mean(r)
    return w, b


def _full_batch_fn(**kw):
    kw = dict(dict(batch_size=len(X), num_epochs=None, shuffle=False), **kw)
    return estimator.inputs.numpy_input_fn({"x": X}, Y, **kw)


def _est(tmp_path, **kw):
    cfg = estimator.RunConfig(log_step_count_steps=None, **kw.pop("config", {}))
    return estimator.Estimator(_linear_model_fn, model_dir=str(tmp_path), config=cfg,
                               params=kw.pop("params", {"lr": 0.5}), **kw)


def test_train_evaluate_predict_matches_numpy_gradient_descent(tmp_path):
    est = _est(tmp_path)
    assert est.train(_full_batch_fn(), steps=30) is est
    w, b = _numpy_gd(30)
    np.testing.assert_allclose(est.get_variable_value("w"), [[w]], rtol=1e-4)
    np.testing.assert_allclose(est.get_variable_value("b"), [b], rtol=1e-4)
    assert {"w", "b", "global_step"} <= set(est.get_variable_names())
    assert est.latest_checkpoint().endswith("model.ckpt-30")

    res = est.evaluate(estimator.inputs.numpy_input_fn({"x": X}, Y, batch_size=15, shuffle=False))
    assert set(res) == {"mae", "loss", "global_step"} and res["global_step"] == 30
    pred = w * X[:, 0] + b
    batches = [slice(0, 15), slice(15, 30), slice(30, 40)]       # the last batch is partial
    loss = np.mean([np.mean((pred[s] - Y[s, 0]) ** 2) for s in batches])   # mean of batch losses
    np.testing.assert_allclose(res["loss"], loss, rtol=1e-4)
    np.testing.assert_allclose(res["mae"], np.mean(np.abs(pred - Y[:, 0])), rtol=1e-4)

    two = est.evaluate(estimator.inputs.numpy_input_fn({"x": X}, Y, batch_size=15, shuffle=False), steps=2)
    np.testing.assert_allclose(two["loss"], np.mean([np.mean((pred[s] - Y[s, 0]) ** 2)
                                                     for s in batches[:2]]), rtol=1e-4)

    pfn = estimator.inputs.numpy_input_fn({"x": X}, batch_size=16, shuffle=False)
    singles = list(est.predict(pfn))
    assert len(singles) == 40 and set(singles[0]) == {"y", "double"} and singles[0]["y"].shape == (1,)
    np.testing.assert_allclose([p["y"][0] for p in singles], pred, rtol=1e-4, atol=1e-5)
    batched = list(est.predict(pfn, predict_keys=["y"], yield_single_examples=False))
    assert [v["y"].shape for v in batched] == [(16, 1), (16, 1), (8, 1)] and set(batched[0]) == {"y"}
    with pytest.raises(ValueError, match="Expected to run at least one output"):
        list(est.predict(pfn, predict_keys=["nope"]))


def test_checkpoints_resume_across_train_calls(tmp_path):
    est = _est(tmp_path)
    est.train(_full_batch_fn(), steps=4).train(_full_batch_fn(), steps=6)
    assert est.get_variable_value("global_step") == 10
    w, b = _numpy_gd(10)
    np.testing.assert_allclose(est.get_variable_value("w"), [[w]], rtol=1e-4)
    np.testing.assert_allclose(est.get_variable_value("b"), [b], rtol=1e-4)
    # A second Estimator over the same model_dir continues from there too.
    again = _est(tmp_path).train(_full_batch_fn(), steps=1)
    np.testing.assert_allclose(again.get_variable_value("w"), [[_numpy_gd(11)[0]]], rtol=1e-4)


def test_max_steps_and_step_errors(tmp_path):
    est = _est(tmp_path)
    est.train(_full_batch_fn(), max_steps=3)
    assert est.get_variable_value("global_step") == 3
    est.train(_full_batch_fn(), max_steps=3)          # already there: no training at all
    assert est.get_variable_value("global_step") == 3
    est.train(_full_batch_fn(), max_steps=5)
    assert est.get_variable_value("global_step") == 5
    with pytest.raises(ValueError, match="Can not provide both steps and max_steps"):
        est.train(_full_batch_fn(), steps=1, max_steps=9)
    with pytest.raises(ValueError, match="Must specify steps > 0, given: 0"):
        est.train(_full_batch_fn(), steps=0)
    with pytest.raises(ValueError, match="Must specify max_steps > 0"):
        est.train(_full_batch_fn(), max_steps=-1)
    with pytest.raises(ValueError, match="Must specify steps > 0"):
        est.evaluate(_full_batch_fn(), steps=0)
    with pytest.raises(TypeError, match="SessionRunHook"):
        est.train(_full_batch_fn(), steps=1, hooks=[object()])


def test_out_of_range_ends_training_and_dataset_input(tmp_path):
    est = _est(tmp_path)
    est.train(estimator.inputs.numpy_input_fn({"x": X}, Y, batch_size=16, num_epochs=2, shuffle=True))
    assert est.get_variable_value("global_step") == 5          # 80 rows in batches of 16 (epochs join)

    def ds_fn(params, mode):
        assert mode == ModeKeys.TRAIN and params == {"lr": 0.5}
        return kf.data.Dataset.from_tensor_slices(({"x": X}, Y)).repeat().batch(40)
    est2 = _est(tmp_path / "ds").train(ds_fn, steps=5)
    np.testing.assert_allclose(est2.get_variable_value("w"), [[_numpy_gd(5)[0]]], rtol=1e-4)


def test_evaluate_and_predict_without_checkpoint_use_initial_values(tmp_path):
    est = _est(tmp_path)
    assert est.latest_checkpoint() is None
    res = est.evaluate(_full_batch_fn(num_epochs=1))
    assert res["global_step"] == 0
    np.testing.assert_allclose(res["loss"], np.mean(Y ** 2), rtol=1e-5)
    preds = list(est.predict(estimator.inputs.numpy_input_fn({"x": X[:3]}, shuffle=False), predict_keys="y"))
    assert [p["y"][0] for p in preds] == [0.0, 0.0, 0.0]
    with pytest.raises(ValueError, match="Could not find trained model in model_dir"):
        est.get_variable_value("w")


def test_saving_listeners_hooks_and_warm_start(tmp_path):
    calls = []

    class Listener(kf.train.CheckpointSaverListener):
        def after_save(self, session, global_step_value):
            calls.append(int(global_step_value))

    est = _est(tmp_path / "a", config={"save_checkpoints_steps": 2})
    logging_hook = kf.train.LoggingTensorHook({"w": "w:0"}, every_n_iter=2)
    est.train(_full_batch_fn(), steps=5, saving_listeners=[Listener()], hooks=[logging_hook])
    assert calls == [0, 2, 4, 5]
    none = _est(tmp_path / "b", config={"save_checkpoints_secs": None})
    with pytest.raises(ValueError, match="There should be a CheckpointSaverHook"):
        none.train(_full_batch_fn(), steps=1, saving_listeners=[Listener()])

    warm = _est(tmp_path / "c", params={"lr": 0.0}, warm_start_from=est.model_dir)
    warm.train(_full_batch_fn(), steps=1)
    np.testing.assert_allclose(warm.get_variable_value("w"), est.get_variable_value("w"))
    assert warm.get_variable_value("global_step") == 1


def test_random_seed_from_config(tmp_path):
    def model_fn(features, labels, mode):
        pred = kf.layers.dense(features["x"], 1)
        loss = kf.losses.mean_squared_error(labels, pred)
        return estimator.EstimatorSpec(mode, loss=loss)

    def loss_of(d, seed):
        est = estimator.Estimator(model_fn, str(d), estimator.RunConfig(tf_random_seed=seed))
        return est.evaluate(_full_batch_fn(num_epochs=1))["loss"]
    assert loss_of(tmp_path / "a", 7) == loss_of(tmp_path / "b", 7)


def test_estimator_constructor_and_model_fn_checks(tmp_path):
    est = estimator.Estimator(lambda features, labels, mode: None)
    assert est.model_dir and est.config.model_dir == est.model_dir         # a temporary directory
    with pytest.raises(ValueError, match="must include features argument"):
        estimator.Estimator(lambda x, labels: None)
    with pytest.raises(ValueError, match="does not include params argument"):
        estimator.Estimator(lambda features: None, params={"a": 1})
    with pytest.raises(ValueError, match="not expected args"):
        estimator.Estimator(lambda features, extra: None)
    with pytest.raises(ValueError, match="set both in constructor and `RunConfig`"):
        estimator.Estimator(_linear_model_fn, model_dir=str(tmp_path / "a"),
                            config=estimator.RunConfig(model_dir=str(tmp_path / "b")))
    with pytest.raises(ValueError, match="config must be an instance of `RunConfig`"):
        estimator.Estimator(_linear_model_fn, config={})
    with pytest.raises(ValueError, match="model_fn should return an EstimatorSpec"):
        est.train(_full_batch_fn(), steps=1)
    no_labels = estimator.Estimator(lambda features: None, str(tmp_path / "c"))
    with pytest.raises(ValueError, match="model_fn does not take labels, but input_fn returns labels"):
        no_labels.train(_full_batch_fn(), steps=1)
    with pytest.raises(ValueError, match="warm_start_from must be a string or a WarmStartSettings"):
        estimator.Estimator(_linear_model_fn, params={}, warm_start_from=3)


def test_estimator_spec_validation():
    with kf.Graph().as_default():
        loss = kf.constant(1.0)
        op = kf.no_op()
        spec = estimator.EstimatorSpec(ModeKeys.TRAIN, loss=kf.constant([2.0]), train_op=op)
        assert spec.loss.shape.as_list() == [] and spec.predictions == {} and spec.eval_metric_ops == {}
        assert isinstance(spec.scaffold, kf.train.Scaffold) and spec.training_hooks == ()
        for kwargs, err, msg in [
                (dict(mode=ModeKeys.TRAIN, loss=loss), ValueError, "Missing train_op"),
                (dict(mode=ModeKeys.EVAL), ValueError, "Missing loss"),
                (dict(mode=ModeKeys.PREDICT), ValueError, "Missing predictions"),
                (dict(mode="bogus", loss=loss), ValueError, "mode='bogus' unrecognized"),
                (dict(mode=ModeKeys.EVAL, loss=kf.constant([1.0, 2.0])), ValueError, "Loss must be scalar"),
                (dict(mode=ModeKeys.TRAIN, loss=loss, train_op="op"), TypeError, "train_op must be"),
                (dict(mode=ModeKeys.PREDICT, predictions={"a": 1}), TypeError,
                 r"predictions\[a\] must be Tensor"),
                (dict(mode=ModeKeys.EVAL, loss=loss, eval_metric_ops=[]), TypeError, "must be a dict"),
                (dict(mode=ModeKeys.EVAL, loss=loss, eval_metric_ops={"m": loss}), TypeError,
                 r"\(metric_value, update_op\) tuples"),
                (dict(mode=ModeKeys.EVAL, loss=loss, evaluation_hooks=[1]), TypeError, "SessionRunHook"),
                (dict(mode=ModeKeys.EVAL, loss=loss, scaffold=1), TypeError, "tf.train.Scaffold"),
                (dict(mode=ModeKeys.EVAL, loss=loss, export_outputs=[1]), TypeError, "export_outputs")]:
            with pytest.raises(err, match=msg):
                estimator.EstimatorSpec(**kwargs)
        with pytest.raises(ValueError, match="mode of EstimatorSpec cannot be changed"):
            spec._replace(mode=ModeKeys.EVAL)
        assert spec._replace(loss=loss).loss is loss
    with kf.Graph().as_default():
        with pytest.raises(ValueError, match="must be from the default graph"):
            estimator.EstimatorSpec(ModeKeys.EVAL, loss=loss)
    assert (ModeKeys.TRAIN, ModeKeys.EVAL, ModeKeys.PREDICT) == ("train", "eval", "infer")


def test_run_config():
    cfg = estimator.RunConfig()
    assert (cfg.save_checkpoints_secs, cfg.save_checkpoints_steps, cfg.keep_checkpoint_max,
            cfg.save_summary_steps, cfg.log_step_count_steps, cfg.model_dir) == (600, None, 5, 100, 100, None)
    assert cfg.is_chief and cfg.num_worker_replicas == 1 and cfg.task_type == "worker"
    steps = estimator.RunConfig(save_checkpoints_steps=10)
    assert (steps.save_checkpoints_steps, steps.save_checkpoints_secs) == (10, None)
    new = steps.replace(tf_random_seed=3, model_dir="/tmp/x")
    assert (new.tf_random_seed, new.model_dir, steps.tf_random_seed) == (3, "/tmp/x", None)
    with pytest.raises(ValueError, match="Can not specify both"):
        estimator.RunConfig(save_checkpoints_steps=1, save_checkpoints_secs=1)
    with pytest.raises(ValueError, match="tf_random_seed must be integer"):
        estimator.RunConfig(tf_random_seed=1.5)
    with pytest.raises(ValueError, match="keep_checkpoint_max should be >= 0"):
        estimator.RunConfig(keep_checkpoint_max=-1)
    with pytest.raises(ValueError, match="bogus property cannot be replaced"):
        cfg.replace(bogus=1)


def _read_all(input_fn):
    out = []
    with kf.Graph().as_default(), kf.Session() as sess:
        t = input_fn()
        while True:
            try:
                out.append(sess.run(t))
            except kf.errors.OutOfRangeError:
                return out


def test_numpy_input_fn_batches_in_order_and_ends():
    x = np.arange(10, dtype=np.float64).reshape(5, 2)
    y = np.arange(5, dtype=np.int32)
    batches = _read_all(estimator.inputs.numpy_input_fn({"a": x}, y, batch_size=2, num_epochs=2,
                                                        shuffle=False))
    assert [b[1].tolist() for b in batches] == [[0, 1], [2, 3], [4, 0], [1, 2], [3, 4]]
    assert batches[0][0]["a"].dtype == np.float64 and batches[1][1].dtype == np.int32
    np.testing.assert_array_equal(batches[0][0]["a"], x[:2])
    only_x = _read_all(estimator.inputs.numpy_input_fn(x, batch_size=4, shuffle=False))
    assert [b.shape for b in only_x] == [(4, 2), (1, 2)]
    shuffled = _read_all(estimator.inputs.numpy_input_fn({"a": x}, {"y": y}, batch_size=5, shuffle=True))
    assert sorted(shuffled[0][1]["y"].tolist()) == [0, 1, 2, 3, 4]
    np.testing.assert_array_equal(shuffled[0][0]["a"][:, 0], 2 * shuffled[0][1]["y"])   # rows stay paired


def test_numpy_input_fn_errors():
    fn = estimator.inputs.numpy_input_fn
    with pytest.raises(ValueError, match="shuffle must be provided and explicitly set as boolean"):
        fn({"a": X})
    with pytest.raises(ValueError, match="x cannot be an empty dict"):
        fn({}, shuffle=False)
    with pytest.raises(ValueError, match="duplicate keys are found in both x and y"):
        fn({"a": X}, {"a": Y}, shuffle=False)
    with pytest.raises(ValueError, match="Length of tensors in x and y is mismatched"):
        fn({"a": X}, Y[:3], shuffle=False)
    with pytest.raises(TypeError, match="x must be a dict or array; got list"):
        fn([1, 2], shuffle=False)


def test_pandas_input_fn():
    pd = pytest.importorskip("pandas")
    df = pd.DataFrame({"a": [1.0, 2.0, 3.0], "b": [4, 5, 6]})
    batches = _read_all(estimator.inputs.pandas_input_fn(df, pd.Series([7, 8, 9]), batch_size=2,
                                                         shuffle=False))
    assert batches[0][0]["a"].tolist() == [1.0, 2.0] and batches[1][1].tolist() == [9]


def test_tensor_predictions_spec_hooks_config_and_nan_loss(tmp_path):
    seen = []

    class Hook(kf.train.SessionRunHook):
        def __init__(self, tag):
            self.tag = tag

        def end(self, session):
            seen.append(self.tag)

    def model_fn(features, labels, mode, config):
        assert isinstance(config, estimator.RunConfig) and config.model_dir == str(tmp_path)
        w = kf.get_variable("w", [], initializer=kf.ones_initializer())
        pred = features * w
        if mode == ModeKeys.PREDICT:
            scalar = kf.reduce_sum(pred) if features.shape.ndims == 0 else pred
            return estimator.EstimatorSpec(mode, predictions=scalar, prediction_hooks=[Hook("predict")])
        loss = kf.reduce_mean(kf.log(w - 2.0))                       # NaN: log of a negative number
        train_op = kf.assign_add(kf.train.get_global_step(), 1)
        return estimator.EstimatorSpec(mode, loss=loss, train_op=train_op, training_hooks=[Hook("train")],
                                       training_chief_hooks=[Hook("chief")])

    est = estimator.Estimator(model_fn, str(tmp_path), estimator.RunConfig(log_step_count_steps=None))
    batches = lambda: kf.data.Dataset.from_tensors(np.float32([1.0, 2.0, 5.0]))  # noqa: E731
    assert [float(p) for p in est.predict(batches)] == [1.0, 2.0, 5.0]
    assert seen == ["predict"]
    scalar = lambda: kf.data.Dataset.from_tensors(np.float32(3.0))  # noqa: E731
    with pytest.raises(ValueError, match="is a scalar"):
        list(est.predict(scalar))
    assert list(est.predict(scalar, yield_single_examples=False)) == [3.0]
    with pytest.raises(kf.train.NanLossDuringTrainingError):
        est.train(lambda: (kf.constant([1.0]), kf.constant([1.0])), steps=2)
    spec = est.model_fn(kf.constant([1.0]), None, ModeKeys.PREDICT, est.config)
    assert isinstance(spec, estimator.EstimatorSpec)


def test_train_writes_loss_summaries_to_model_dir(tmp_path):
    import glob
    import os
    est = _est(tmp_path, config={"save_summary_steps": 2})
    est.train(_full_batch_fn(), steps=5)
    kf.summary.FileWriterCache.clear()   # (flushes and closes the cached writer)
    (path,) = glob.glob(os.path.join(str(tmp_path), "events.out.tfevents.*"))
    events = list(kf.train.summary_iterator(path))
    losses = [(e.step, v.simple_value) for e in events if e.HasField("summary")
              for v in e.summary.value if v.tag == "loss"]
    assert [s for s, _ in losses] == [1, 3, 5]
    w, b = _numpy_gd(4)   # the loss the fifth step computed is the one after four updates
    expected = float(np.mean((w * X[:, 0] + b - Y[:, 0]) ** 2))
    assert losses[-1][1] == pytest.approx(expected, rel=1e-4)
    assert any(e.graph_def for e in events)
