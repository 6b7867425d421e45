"""Estimator.export_saved_model / export_savedmodel, kf.estimator.export receivers and export outputs:
the export loads with kf.saved_model.loader.load in a fresh graph and its signatures serve the
trained model (TF1 semantics)."""

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
    x = features["x"] if isinstance(features, dict) else features
    w = kf.get_variable("w", [1, 1], initializer=kf.zeros_initializer())
    b = kf.get_variable("b", [1], initializer=kf.zeros_initializer())
    pred = kf.matmul(x, w) + b
    if mode == ModeKeys.PREDICT:
        return estimator.EstimatorSpec(mode, predictions={"y": pred}, export_outputs={
            "serving_default": export.PredictOutput({"y": pred, "twice": 2.0 * pred}),
            "regress": export.RegressionOutput(kf.reshape(pred, [-1]))})
    loss = kf.reduce_mean(kf.square(pred - labels))
    train_op = kf.train.GradientDescentOptimizer(0.5).minimize(loss, global_step=kf.train.get_global_step())
    return estimator.EstimatorSpec(mode, loss=loss, train_op=train_op)


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    est = estimator.Estimator(_model_fn, model_dir=str(tmp_path_factory.mktemp("model")),
                              config=estimator.RunConfig(log_step_count_steps=None))
    est.train(estimator.inputs.numpy_input_fn({"x": X}, Y, batch_size=20, num_epochs=None, shuffle=False),
              steps=40)
    return est


def _serve(export_dir, signature_key, feeds):
    """Loads the export in a fresh graph and runs one signature; returns {output key: value}."""
    with kf.Graph().as_default(), kf.Session() as sess:
        meta = kf.saved_model.loader.load(sess, [kf.saved_model.tag_constants.SERVING], export_dir)
        sig = meta.signature_def[signature_key]
        fetches = {k: v.name for k, v in sig.outputs.items()}
        return sess.run(fetches, {sig.inputs[k].name: v for k, v in feeds.items()}), meta


def test_export_raw_receiver_serves_the_trained_model(trained, tmp_path):
    w, b = trained.get_variable_value("w")[0, 0], trained.get_variable_value("b")[0]
    assert abs(w - 3.0) < 0.1 and abs(b - 2.0) < 0.1
    fn = export.build_raw_serving_input_receiver_fn({"x": kf.placeholder(kf.float32, [None, 1], name="x")})
    path = trained.export_saved_model(str(tmp_path / "exp"), fn)
    assert isinstance(path, bytes)
    name = os.path.basename(os.fsdecode(path))
    assert name.isdigit() and os.listdir(tmp_path / "exp") == [name]   # no temp- dir left
    out, meta = _serve(path, "serving_default", {"x": [[1.0], [-2.0]]})
    np.testing.assert_allclose(out["y"][:, 0], [w + b, -2 * w + b], rtol=1e-5)
    np.testing.assert_allclose(out["twice"], 2 * out["y"], rtol=1e-6)
    # A regress signature needs one string input: over float placeholders it is left out.
    assert set(meta.signature_def) == {"serving_default"}


def test_export_parsing_receiver_gives_classify_and_regress_signatures(trained, tmp_path):
    fn = export.build_parsing_serving_input_receiver_fn({"x": kf.FixedLenFeature([1], kf.float32)})
    path = trained.export_savedmodel(str(tmp_path), fn, as_text=True,
                                     checkpoint_path=trained.latest_checkpoint())
    assert os.path.isfile(os.path.join(path, b"saved_model.pbtxt"))
    example = kf.train.Example(features=kf.train.Features(feature={
        "x": kf.train.Feature(float_list=kf.train.FloatList(value=[0.5]))})).SerializeToString()
    out, meta = _serve(path, "regress", {"inputs": [example, example]})
    assert set(meta.signature_def) == {"serving_default", "regress"}
    assert meta.signature_def["regress"].method_name == kf.saved_model.REGRESS_METHOD_NAME
    w, b = trained.get_variable_value("w")[0, 0], trained.get_variable_value("b")[0]
    np.testing.assert_allclose(out["outputs"], [0.5 * w + b] * 2, rtol=1e-5)
    out, _ = _serve(path, "serving_default", {"examples": [example]})
    np.testing.assert_allclose(out["y"], [[0.5 * w + b]], rtol=1e-5)


def test_export_tensor_receiver_and_assets_extra(trained, tmp_path):
    src = tmp_path / "vocab.txt"
    src.write_text("a\nb\n")

    def receiver_fn():
        x = kf.placeholder(kf.float32, [None, 1], name="raw")
        return export.TensorServingInputReceiver(x, {"raw": x})
    path = trained.export_saved_model(str(tmp_path / "e"), receiver_fn,
                                      assets_extra={"some/vocab.txt": str(src)})
    assert (tmp_path / "e" / os.path.basename(os.fsdecode(path)) / "assets.extra" / "some" /
            "vocab.txt").read_text() == "a\nb\n"
    out, _ = _serve(path, "serving_default", {"raw": [[0.0]]})
    np.testing.assert_allclose(out["y"], [[trained.get_variable_value("b")[0]]], rtol=1e-5)


def test_export_without_checkpoint_or_receiver_fn_raises(tmp_path):
    est = estimator.Estimator(_model_fn, model_dir=str(tmp_path / "m"))
    fn = export.build_raw_serving_input_receiver_fn({"x": kf.placeholder(kf.float32, [None, 1])})
    with pytest.raises(ValueError, match="Couldn't find trained model"):
        est.export_saved_model(str(tmp_path / "e"), fn)
    with pytest.raises(ValueError, match="input_receiver_fn must be defined"):
        est.export_saved_model(str(tmp_path / "e"), None)


def test_receivers_wrap_single_tensors_and_check_types():
    with kf.Graph().as_default():
        x = kf.placeholder(kf.float32, [None, 2])
        s = kf.placeholder(kf.string, [None])
        r = export.ServingInputReceiver(x, s)
        assert r.features == {"feature": x} and r.receiver_tensors == {"input": s}
        assert r.receiver_tensors_alternatives is None
        t = export.TensorServingInputReceiver(x, {"x": x})
        assert t.features is x and t.receiver_tensors == {"x": x}
        with pytest.raises(ValueError, match="single Tensor"):
            export.TensorServingInputReceiver({"x": x}, x)
        with pytest.raises(ValueError, match="keys must be strings"):
            export.ServingInputReceiver({1: x}, s)
        with pytest.raises(ValueError, match="Tensor or SparseTensor"):
            export.ServingInputReceiver({"x": np.zeros(2)}, s)


def test_export_outputs_validation_and_signatures():
    with kf.Graph().as_default():
        scores = kf.placeholder(kf.float32, [None, 3])
        classes = kf.placeholder(kf.string, [None, 3])
        examples = kf.placeholder(kf.string, [None])
        with pytest.raises(ValueError, match="At least one"):
            export.ClassificationOutput()
        with pytest.raises(ValueError, match="classes must be a string"):
            export.ClassificationOutput(classes=scores)
        with pytest.raises(ValueError, match="float32"):
            export.RegressionOutput(classes)
        sig = export.ClassificationOutput(scores, classes).as_signature_def({"examples": examples})
        assert sig.method_name == kf.saved_model.CLASSIFY_METHOD_NAME
        assert set(sig.outputs) == {"classes", "scores"} and sig.inputs["inputs"].name == examples.name
        with pytest.raises(ValueError, match="single string Tensor"):
            export.ClassificationOutput(scores).as_signature_def({"x": scores})
        assert set(export.PredictOutput(scores).outputs) == {"output"}
        # EstimatorSpec: one output becomes the default; several need a default; values are outputs.
        spec = estimator.EstimatorSpec(ModeKeys.PREDICT, predictions=scores,
                                       export_outputs={"p": export.PredictOutput(scores)})
        assert set(spec.export_outputs) == {"p", "serving_default"}
        with pytest.raises(ValueError, match="none of them is specified as the default"):
            estimator.EstimatorSpec(ModeKeys.PREDICT, predictions=scores, export_outputs={
                "a": export.PredictOutput(scores), "b": export.RegressionOutput(scores)})
        with pytest.raises(TypeError, match="ExportOutput"):
            estimator.EstimatorSpec(ModeKeys.PREDICT, predictions=scores, export_outputs={"a": scores})
