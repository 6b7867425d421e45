"""Canned estimators end to end over kf.feature_column: DNNClassifier on iris, binary heads with a label
vocabulary and weights, LinearRegressor recovering a linear function, DNNLinearCombinedClassifier
with a categorical column, DNNRegressor with dropout and batch norm, export of a canned model;
metric and prediction keys, SUM loss reduction and argument validation (TF1 semantics)."""

import numpy as np
import pytest

import kernflow.core as kf
from kernflow.core import estimator
from kernflow.core.estimator import export

fc = kf.feature_column
inputs = estimator.inputs
BINARY_METRICS = {"accuracy", "accuracy_baseline", "auc", "auc_precision_recall", "average_loss",
                  "label/mean", "prediction/mean", "precision", "recall", "loss", "global_step"}
CLASS_PREDICTIONS = {"logits", "probabilities", "class_ids", "classes", "all_class_ids", "all_classes"}


def _iris():
    from sklearn.datasets import load_iris
    x, y = load_iris(return_X_y=True)
    return ((x - x.mean(0)) / x.std(0)).astype(np.float32), y.astype(np.int64)


def _config(**kw):
    return estimator.RunConfig(tf_random_seed=1, log_step_count_steps=None, **kw)


def _batches(x, y=None, n=None, epochs=None):
    n = n or len(next(iter(x.values())))
    return inputs.numpy_input_fn(x, y, batch_size=n, num_epochs=epochs, shuffle=False)


def test_dnn_classifier_learns_iris(tmp_path):
    x, y = _iris()
    est = estimator.DNNClassifier([16], [fc.numeric_column("x", shape=[4])], n_classes=3, optimizer="Adam",
                                  model_dir=str(tmp_path), config=_config())
    est.train(_batches({"x": x}, y), steps=60)
    res = est.evaluate(_batches({"x": x}, y, epochs=1))
    assert set(res) == {"accuracy", "average_loss", "loss", "global_step"}
    assert res["accuracy"] > 0.93 and res["global_step"] == 60
    # Loss reduction SUM (the TF1 default): the loss of one batch of 150 is 150 x the mean loss.
    assert res["loss"] == pytest.approx(150 * res["average_loss"], rel=1e-4)
    preds = list(est.predict(_batches({"x": x[[0, 60, 120]]}, epochs=1)))
    assert set(preds[0]) == CLASS_PREDICTIONS
    assert [int(p["class_ids"][0]) for p in preds] == [0, 1, 2]
    assert [p["classes"][0] for p in preds] == [b"0", b"1", b"2"]
    np.testing.assert_allclose(preds[1]["probabilities"].sum(), 1.0, rtol=1e-5)
    assert list(preds[2]["all_classes"]) == [b"0", b"1", b"2"]
    assert {"dnn/hiddenlayer_0/kernel", "dnn/logits/bias"} <= set(est.get_variable_names())


def test_binary_heads_with_vocabulary_and_weights(tmp_path):
    x, y = _iris()
    labels = np.where(y == 0, "setosa", "other")
    weights = np.ones(len(y), np.float32)
    for i, cls in enumerate([estimator.LinearClassifier, estimator.DNNClassifier]):
        args = ([4], ) if cls is estimator.DNNClassifier else ()
        est = cls(*args, feature_columns=[fc.numeric_column("x", shape=[4])], optimizer="Adam",
                  label_vocabulary=["other", "setosa"], weight_column="w", model_dir=str(tmp_path / str(i)),
                  config=_config())
        est.train(_batches({"x": x, "w": weights}, labels), steps=40)
        res = est.evaluate(_batches({"x": x, "w": weights}, labels, epochs=1))
        assert set(res) == BINARY_METRICS
        assert res["accuracy"] == 1.0 and res["auc"] > 0.99 and res["precision"] == res["recall"] == 1.0
        assert res["label/mean"] == pytest.approx(50 / 150)
        assert res["accuracy_baseline"] == pytest.approx(2 / 3)
        p = next(est.predict(_batches({"x": x[:1]}, epochs=1)))
        assert set(p) == CLASS_PREDICTIONS | {"logistic"}
        assert p["classes"][0] == b"setosa" and list(p["all_classes"]) == [b"other", b"setosa"]
        np.testing.assert_allclose(p["probabilities"][1], p["logistic"][0], rtol=1e-5)
    # A weight of zero removes an example from the metrics.
    half = (np.arange(len(y)) < 75).astype(np.float32)
    res = est.evaluate(_batches({"x": x, "w": half}, labels, epochs=1))
    assert res["label/mean"] == pytest.approx(50 / 75)


def test_linear_regressor_recovers_a_linear_function(tmp_path):
    rng = np.random.RandomState(0)
    x = rng.uniform(-1, 1, size=(100, 2)).astype(np.float32)
    y = (2.0 * x[:, 0] - 3.0 * x[:, 1] + 1.0).astype(np.float32)
    est = estimator.LinearRegressor([fc.numeric_column("a"), fc.numeric_column("b")],
                                    optimizer=lambda: kf.train.GradientDescentOptimizer(0.005),
                                    model_dir=str(tmp_path), config=_config())
    est.train(_batches({"a": x[:, 0], "b": x[:, 1]}, y), steps=150)
    np.testing.assert_allclose(est.get_variable_value("linear/linear_model/a/weights"), [[2.0]], atol=0.02)
    np.testing.assert_allclose(est.get_variable_value("linear/linear_model/b/weights"), [[-3.0]], atol=0.02)
    np.testing.assert_allclose(est.get_variable_value("linear/linear_model/bias_weights"), [1.0], atol=0.02)
    res = est.evaluate(_batches({"a": x[:, 0], "b": x[:, 1]}, y, epochs=1))
    assert set(res) == {"average_loss", "label/mean", "prediction/mean", "loss", "global_step"}
    assert res["average_loss"] < 1e-3 and res["label/mean"] == pytest.approx(float(y.mean()), rel=1e-4)
    p = next(est.predict(_batches({"a": np.float32([0.5]), "b": np.float32([0.0])}, epochs=1)))
    assert set(p) == {"predictions"} and p["predictions"][0] == pytest.approx(2.0, abs=0.03)


def _color_data(n=120):
    rng = np.random.RandomState(1)
    colors = np.array(["red", "green", "blue"])[rng.randint(0, 3, size=n)]
    size = rng.uniform(-1, 1, size=n).astype(np.float32)
    label = ((colors == "red") | (size > 0.5)).astype(np.int64)
    return {"color": colors, "size": size}, label


def test_dnn_linear_combined_classifier_with_categorical_column(tmp_path):
    features, label = _color_data()
    color = fc.categorical_column_with_vocabulary_list("color", ["red", "green", "blue"])
    est = estimator.DNNLinearCombinedClassifier(
        linear_feature_columns=[color, fc.numeric_column("size")],
        dnn_feature_columns=[fc.embedding_column(color, 2), fc.indicator_column(color),
                             fc.numeric_column("size")],
        dnn_hidden_units=[8], dnn_optimizer="Adam", linear_optimizer="Adam", model_dir=str(tmp_path),
        config=_config(save_checkpoints_steps=40))
    result, exports = estimator.train_and_evaluate(
        est, estimator.TrainSpec(_batches(features, label), max_steps=80),
        estimator.EvalSpec(_batches(features, label, epochs=1), steps=None, throttle_secs=0))
    assert result["global_step"] == 80 and result["accuracy"] > 0.95 and exports == []
    names = set(est.get_variable_names())
    assert {"linear/linear_model/color/weights", "linear/linear_model/bias_weights",
            "dnn/hiddenlayer_0/kernel", "dnn/logits/kernel"} <= names
    assert any(n.startswith("dnn/input_from_feature_columns/") and "embedding" in n for n in names)
    assert est.get_variable_value("global_step") == 80   # one increment per step for both parts
    p = list(est.predict(_batches({"color": np.array(["red", "green"]), "size": np.float32([0.0, 0.0])},
                                  epochs=1)))
    assert [int(q["class_ids"][0]) for q in p] == [1, 0]


def test_export_of_a_canned_classifier_serves_classify_and_predict(tmp_path):
    features, label = _color_data()
    columns = [fc.categorical_column_with_vocabulary_list("color", ["red", "green", "blue"]),
               fc.numeric_column("size")]
    est = estimator.LinearClassifier(columns, optimizer="Adam", model_dir=str(tmp_path / "m"),
                                     config=_config())
    est.train(_batches(features, label), steps=60)
    spec = fc.make_parse_example_spec(columns)
    path = est.export_saved_model(str(tmp_path / "export"),
                                  export.build_parsing_serving_input_receiver_fn(spec))

    def example(color, size):
        return kf.train.Example(features=kf.train.Features(feature={
            "color": kf.train.Feature(bytes_list=kf.train.BytesList(value=[color])),
            "size": kf.train.Feature(float_list=kf.train.FloatList(value=[size]))})).SerializeToString()
    batch = [example(b"red", 0.0), example(b"blue", -0.5)]
    with kf.Graph().as_default(), kf.Session() as sess:
        meta = kf.saved_model.loader.load(sess, [kf.saved_model.SERVING], path)
        assert set(meta.signature_def) == {"serving_default", "classification", "regression", "predict"}
        sig = meta.signature_def["serving_default"]
        assert sig.method_name == kf.saved_model.CLASSIFY_METHOD_NAME
        classes, scores = sess.run([sig.outputs["classes"].name, sig.outputs["scores"].name],
                                   {sig.inputs["inputs"].name: batch})
        pred = meta.signature_def["predict"]
        ids = sess.run(pred.outputs["class_ids"].name, {pred.inputs["examples"].name: batch})
    assert classes.tolist() == [[b"0", b"1"]] * 2 and scores.shape == (2, 2)
    assert ids[:, 0].tolist() == [1, 0] and scores[0, 1] > 0.5 > scores[1, 1]


def test_dnn_regressor_with_dropout_and_batch_norm(tmp_path):
    rng = np.random.RandomState(2)
    x = rng.normal(size=(64, 3)).astype(np.float32)
    y = np.stack([x.sum(1), x[:, 0] - x[:, 1]], 1).astype(np.float32)
    est = estimator.DNNRegressor([16], [fc.numeric_column("x", shape=[3])], label_dimension=2, dropout=0.1,
                                 batch_norm=True, optimizer="Adam", loss_reduction=kf.losses.Reduction.MEAN,
                                 model_dir=str(tmp_path), config=_config())
    before = est.evaluate(_batches({"x": x}, y, epochs=1))
    est.train(_batches({"x": x}, y), steps=80)
    after = est.evaluate(_batches({"x": x}, y, epochs=1))
    assert after["average_loss"] < 0.25 * before["average_loss"]
    assert after["loss"] == pytest.approx(after["average_loss"], rel=1e-4)   # MEAN reduction
    # The batch norm statistics moved (UPDATE_OPS run with the train op).
    assert np.abs(est.get_variable_value("dnn/hiddenlayer_0/batchnorm_0/moving_mean")).max() > 0.01
    assert next(est.predict(_batches({"x": x[:1]}, epochs=1)))["predictions"].shape == (2,)


def test_argument_validation(tmp_path):
    col = [fc.numeric_column("x")]
    with pytest.raises(ValueError, match="n_classes must be > 1"):
        estimator.LinearClassifier(col, n_classes=1)
    with pytest.raises(ValueError, match="label_vocabulary"):
        estimator.DNNClassifier([2], col, n_classes=3, label_vocabulary=["a", "b"])
    with pytest.raises(ValueError, match="Invalid loss_reduction"):
        estimator.LinearRegressor(col, loss_reduction=kf.losses.Reduction.NONE)
    with pytest.raises(ValueError, match="Either linear_feature_columns or dnn_feature_columns"):
        estimator.DNNLinearCombinedRegressor()
    with pytest.raises(ValueError, match="dnn_hidden_units"):
        estimator.DNNLinearCombinedClassifier(dnn_feature_columns=col)
    x, y = np.float32([1.0, 2.0]), np.int64([0, 1])
    with pytest.raises(ValueError, match="Unsupported optimizer name"):
        estimator.LinearRegressor(col, optimizer="Nope", model_dir=str(tmp_path / "a")).train(
            _batches({"x": x}, x), steps=1)
    with pytest.raises(kf.errors.InvalidArgumentError, match=r"Labels must be in \[0, 2\)"):
        estimator.LinearClassifier(col, model_dir=str(tmp_path / "b")).train(
            _batches({"x": x}, np.int64([0, 2])), steps=1)
    with pytest.raises(ValueError, match="Labels dtype should be integer"):
        estimator.LinearClassifier(col, model_dir=str(tmp_path / "c")).train(
            _batches({"x": x}, np.array(["a", "b"])), steps=1)
    with pytest.raises(ValueError, match="features should be a dictionary"):
        estimator.LinearClassifier(col, model_dir=str(tmp_path / "d")).train(_batches_array(x, y), steps=1)


def _batches_array(x, y):
    return inputs.numpy_input_fn(x, y, batch_size=2, num_epochs=None, shuffle=False)


def test_default_optimizers_ftrl_and_adagrad_train(tmp_path):
    from kernflow.core.estimator.canned.optimizers import get_optimizer_instance
    ftrl = get_optimizer_instance("Ftrl", 0.2)
    assert isinstance(ftrl, kf.train.FtrlOptimizer)
    adagrad = get_optimizer_instance(lambda: kf.train.AdagradOptimizer(0.1))
    assert isinstance(adagrad, kf.train.AdagradOptimizer)
    with pytest.raises(ValueError, match="learning_rate must be specified"):
        get_optimizer_instance("SGD")
    with pytest.raises(ValueError, match="not an Optimizer"):
        get_optimizer_instance(object())
    x, y = _iris()
    binary = (y == 0).astype(np.int64)
    for i, est in enumerate([
            estimator.LinearClassifier([fc.numeric_column("x", shape=[4])], model_dir=str(tmp_path / "l"),
                                       config=_config()),
            estimator.DNNClassifier([8], [fc.numeric_column("x", shape=[4])], model_dir=str(tmp_path / "d"),
                                    config=_config())]):
        est.train(_batches({"x": x}, binary), steps=30)
        assert est.evaluate(_batches({"x": x}, binary, epochs=1))["accuracy"] > 0.95
        slots = [n for n in est.get_variable_names() if n.endswith(("/Ftrl", "/Adagrad"))]
        assert slots and all(n.endswith("/Ftrl" if i == 0 else "/Adagrad") for n in slots)
