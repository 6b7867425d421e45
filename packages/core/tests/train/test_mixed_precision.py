"""Loss scales and MixedPrecisionLossScaleOptimizer (kf.train.experimental, kf.mixed_precision)."""

import logging

import numpy as np
import pytest

import kernflow.core as kf
from kernflow.core.train import loss_scale_optimizer

X = np.array([[1.0, 2.0], [-1.0, 0.5], [0.5, -2.0]], np.float32)
W0 = np.array([[0.5], [-1.0]], np.float32)
Y = np.array([[1.0], [0.0], [2.0]], np.float32)
MP = kf.train.experimental

# Feeding inf and nan into the model is the point of several tests: numpy's warnings are expected.
pytestmark = pytest.mark.filterwarnings("ignore:(invalid value|overflow) encountered:RuntimeWarning")


def _model(make_opt, wrap=None):
    """A float32 linear least-squares model; `p` (default 1) multiplies the loss, so feeding inf or
    nan makes every gradient non-finite. `wrap` is a loss scale or a function making one in this
    graph. Returns its parts and the train op."""
    if callable(wrap) and not isinstance(wrap, MP.LossScale):
        wrap = wrap()
    w = kf.Variable(W0, name="w")
    b = kf.Variable(np.zeros([1], np.float32), name="b")
    p = kf.placeholder_with_default(np.float32(1.0), [], name="p")
    loss = kf.reduce_mean(kf.square(kf.matmul(X, w) + b - Y)) * p
    gs = kf.train.get_or_create_global_step()
    opt = make_opt() if wrap is None else MP.MixedPrecisionLossScaleOptimizer(make_opt(), wrap)
    return dict(w=w, b=b, p=p, loss=loss, gs=gs, opt=opt, train=opt.minimize(loss, global_step=gs))


def _trajectory(make_opt, wrap=None, steps=4):
    with kf.Graph().as_default():
        m = _model(make_opt, wrap)
        with kf.Session() as s:
            s.run(kf.global_variables_initializer())
            out = []
            for _ in range(steps):
                s.run(m["train"])
                out.append(s.run([m["w"], m["b"]]))
            assert s.run(m["gs"]) == steps
    return out


def _state(s, m, slot_names):
    """The values of the variables, the wrapped optimizer's slots and non-slot variables."""
    opt = m["opt"]
    slots = [opt.get_slot(v, n) for v in (m["w"], m["b"]) for n in slot_names]
    return s.run([m["w"], m["b"]] + slots + opt.variables())


OPTIMIZERS = {
    "adam": (lambda: kf.train.AdamOptimizer(0.1), ["m", "v"]),
    "momentum": (lambda: kf.train.MomentumOptimizer(0.1, 0.9), ["momentum"]),
    "sgd": (lambda: kf.train.GradientDescentOptimizer(0.1), []),
}


@pytest.mark.parametrize("bad", [np.inf, -np.inf, np.nan])
@pytest.mark.parametrize("name", ["adam", "momentum"])
def test_dynamic_scale_halves_and_skips_on_non_finite_gradient(name, bad):
    make_opt, slot_names = OPTIMIZERS[name]
    with kf.Graph().as_default():
        scale = MP.DynamicLossScale(initial_loss_scale=1024.0, increment_period=100)
        m = _model(make_opt, scale)
        assert sorted(m["opt"].get_slot_names()) == sorted(slot_names)
        with kf.Session() as s:
            s.run(kf.global_variables_initializer())
            s.run(m["train"])             # one good step, so the slots hold something
            before = _state(s, m, slot_names)
            assert s.run([scale(), scale._num_good_steps]) == [1024.0, 1]
            s.run(m["train"], {m["p"]: bad})
            after = _state(s, m, slot_names)
            for a, b in zip(before, after):
                np.testing.assert_array_equal(a, b)
            assert s.run([scale(), scale._num_good_steps]) == [512.0, 0]
            assert s.run(m["gs"]) == 1    # TF1.15: a skipped step does not count
            s.run(m["train"])
            assert s.run(m["gs"]) == 2
            assert not np.array_equal(s.run(m["w"]), before[0])


def test_dynamic_scale_doubles_after_increment_period_finite_steps():
    with kf.Graph().as_default():
        scale = MP.DynamicLossScale(initial_loss_scale=4.0, increment_period=3, multiplier=2.0)
        m = _model(OPTIMIZERS["sgd"][0], scale)
        with kf.Session() as s:
            s.run(kf.global_variables_initializer())
            seen = []
            for _ in range(7):
                s.run(m["train"])
                seen.append(tuple(s.run([scale(), scale._num_good_steps])))
            assert seen == [(4, 1), (4, 2), (8, 0), (8, 1), (8, 2), (16, 0), (16, 1)]
            s.run(m["train"], {m["p"]: np.nan})   # a bad step restarts the count
            s.run(m["train"])
            s.run(m["train"])
            assert s.run([scale(), scale._num_good_steps]) == [8.0, 2]


def test_dynamic_scale_limits():
    """The scale never drops below 1, and keeps its value when growing would overflow float32."""
    with kf.Graph().as_default():
        low = MP.DynamicLossScale(initial_loss_scale=3.0, multiplier=4.0)
        high = MP.DynamicLossScale(initial_loss_scale=2.0 ** 127, increment_period=1)
        bad = kf.constant([1.0, np.nan])
        good = kf.constant([1.0, 2.0])
        low_op, low_ok = low.update([bad, None])
        high_op, high_ok = high.update({"a": good})
        with kf.Session() as s:
            s.run(kf.global_variables_initializer())
            assert not s.run(low_ok)
            s.run(low_op)
            assert s.run(low()) == 1.0
            s.run(low_op)
            assert s.run(low()) == 1.0
            assert s.run(high_ok)
            s.run(high_op)
            assert s.run([high(), high._num_good_steps]) == [np.float32(2.0 ** 127), 0]


def test_sparse_gradients_are_checked_and_unscaled():
    """IndexedSlices gradients (a gather) are unscaled, and a non-finite row skips the step."""
    with kf.Graph().as_default():
        table = kf.Variable(np.ones((4, 2), np.float32), name="table")
        p = kf.placeholder_with_default(np.float32(1.0), [])
        loss = kf.reduce_sum(kf.gather(table, [0, 2])) * p
        scale = MP.DynamicLossScale(initial_loss_scale=256.0)
        opt = MP.MixedPrecisionLossScaleOptimizer(kf.train.GradientDescentOptimizer(0.5), scale)
        (grad, _), = opt.compute_gradients(loss)
        assert isinstance(grad, kf.IndexedSlices)
        train = opt.apply_gradients([(grad, table)])
        with kf.Session() as s:
            s.run(kf.global_variables_initializer())
            s.run(train)
            want = np.ones((4, 2), np.float32)
            want[[0, 2]] -= 0.5
            np.testing.assert_allclose(s.run(table), want)
            s.run(train, {p: np.inf})
            np.testing.assert_allclose(s.run(table), want)
            assert s.run(scale()) == 128.0


@pytest.mark.parametrize("name", ["sgd", "momentum", "adam"])
def test_fixed_scale_trains_like_the_unwrapped_optimizer(name):
    make_opt, _ = OPTIMIZERS[name]
    plain = _trajectory(make_opt)
    for scale in (128, MP.FixedLossScale(1000.0)):
        scaled = _trajectory(make_opt, scale)
        for (w1, b1), (w2, b2) in zip(plain, scaled):
            np.testing.assert_allclose(w2, w1, rtol=1e-5, atol=1e-6)
            np.testing.assert_allclose(b2, b1, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("name", ["momentum", "adam"])
def test_dynamic_scale_with_finite_gradients_trains_like_the_unwrapped_optimizer(name):
    make_opt, _ = OPTIMIZERS[name]
    plain = _trajectory(make_opt)
    scaled = _trajectory(make_opt,
                         lambda: MP.DynamicLossScale(initial_loss_scale=2.0 ** 10, increment_period=2))
    for (w1, b1), (w2, b2) in zip(plain, scaled):
        np.testing.assert_allclose(w2, w1, rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(b2, b1, rtol=1e-5, atol=1e-6)


def _float16_step(wrap):
    """One SGD step on a float16 model whose weight gradients are 1e-8: below float16's smallest
    subnormal (6e-8), so they flush to zero unless the loss is scaled. Variables are float32 and
    cast to float16 for the compute. Returns (float32 gradient, new w)."""
    with kf.Graph().as_default():
        w = kf.Variable(np.zeros((2, 1), np.float32), name="w")
        x = kf.constant(np.full((1, 2), 1e-4, np.float16))
        loss = kf.reduce_sum(kf.matmul(x, kf.cast(w, kf.float16))) * kf.constant(1e-4, kf.float16)
        assert loss.dtype == kf.float16
        opt = kf.train.GradientDescentOptimizer(1000.0)
        if wrap is not None:
            opt = kf.train.experimental.enable_mixed_precision_graph_rewrite(opt, loss_scale=wrap)
        (grad, _), = opt.compute_gradients(loss, var_list=[w])
        train = opt.apply_gradients([(grad, w)])
        with kf.Session() as s:
            s.run(kf.global_variables_initializer())
            g = s.run(grad)
            s.run(train)
            return g, s.run(w)


def test_float16_gradients_underflow_without_loss_scaling():
    assert np.float16(1e-8) == 0       # the premise: 1e-8 is not a float16
    g, w = _float16_step(None)
    np.testing.assert_array_equal(g, np.zeros((2, 1)))
    np.testing.assert_array_equal(w, np.zeros((2, 1)))
    try:
        for scale in ("dynamic", 2 ** 15):
            g, w = _float16_step(scale)
            np.testing.assert_allclose(g, np.full((2, 1), 1e-8), rtol=2e-3)
            np.testing.assert_allclose(w, np.full((2, 1), -1e-5), rtol=2e-3)
    finally:
        kf.train.experimental.disable_mixed_precision_graph_rewrite()


def test_minimize_inside_monitored_training_session_and_checkpoint_restore(tmp_path):
    ckpt = str(tmp_path)

    def build():
        scale = MP.DynamicLossScale(initial_loss_scale=64.0, increment_period=3)
        return _model(OPTIMIZERS["adam"][0], scale), scale

    with kf.Graph().as_default():
        m, scale = build()
        hooks = [kf.train.StopAtStepHook(last_step=100)]
        with kf.train.MonitoredTrainingSession(checkpoint_dir=ckpt, hooks=hooks, save_summaries_steps=None,
                                               save_checkpoint_secs=None, save_checkpoint_steps=1000,
                                               log_step_count_steps=None) as sess:
            sess.run(m["train"], {m["p"]: np.nan})    # skipped: no step counted
            for _ in range(5):
                sess.run(m["train"])
            state = sess.run([scale(), scale._num_good_steps, m["gs"], m["w"]])
    assert state[:3] == [64.0, 2, 5]        # 32 after the nan, 64 after 3 good steps, then 2 more
    with kf.Graph().as_default():
        m, scale = build()
        with kf.train.MonitoredTrainingSession(checkpoint_dir=ckpt, save_summaries_steps=None,
                                               save_checkpoint_secs=None,
                                               log_step_count_steps=None) as sess:
            restored = sess.run([scale(), scale._num_good_steps, m["gs"], m["w"]])
            assert restored[:3] == state[:3]
            np.testing.assert_array_equal(restored[3], state[3])
            sess.run(m["train"])
            assert sess.run([scale(), scale._num_good_steps]) == [128.0, 0]


def test_saver_round_trip_of_the_loss_scale(tmp_path):
    path = str(tmp_path / "model")
    with kf.Graph().as_default():
        scale = MP.DynamicLossScale(initial_loss_scale=16.0)
        op, _ = scale.update([kf.constant([np.inf])])
        saver = kf.train.Saver()
        with kf.Session() as s:
            s.run(kf.global_variables_initializer())
            s.run(op)
            saver.save(s, path)
    with kf.Graph().as_default():
        scale = MP.DynamicLossScale(initial_loss_scale=16.0)
        assert sorted(v.op.name for v in kf.global_variables()) == ["current_loss_scale", "good_steps"]
        assert not kf.trainable_variables()
        with kf.Session() as s:
            kf.train.Saver().restore(s, path)
            assert s.run(scale()) == 8.0


def test_object_checkpoint_of_a_loss_scale(tmp_path):
    with kf.Graph().as_default():
        scale = MP.DynamicLossScale(initial_loss_scale=16.0)
        op, _ = scale.update([kf.constant([np.nan])])
        with kf.Session() as s:
            s.run(kf.global_variables_initializer())
            s.run(op)
            path = kf.train.Checkpoint(loss_scale=scale).save(str(tmp_path / "ckpt"), session=s)
    with kf.Graph().as_default():
        scale = MP.DynamicLossScale(initial_loss_scale=16.0)
        with kf.Session() as s:
            kf.train.Checkpoint(loss_scale=scale).restore(path).run_restore_ops(s)
            assert s.run(scale()) == 8.0


def test_wrapper_delegates_to_the_wrapped_optimizer():
    with kf.Graph().as_default():
        inner = kf.train.AdamOptimizer(0.1, name="MyAdam")
        m = _model(lambda: inner, "dynamic")
        opt = m["opt"]
        assert opt.get_name() == "MyAdam"
        assert isinstance(opt, kf.train.Optimizer)
        assert isinstance(opt.loss_scale, MP.DynamicLossScale)
        assert opt.get_slot(m["w"], "m") is inner.get_slot(m["w"], "m") is not None
        assert opt.get_slot_names() == inner.get_slot_names()
        assert opt.variables() == inner.variables()


def test_config_round_trip():
    assert MP.FixedLossScale(3).get_config() == {"loss_scale_value": 3.0}
    assert MP.FixedLossScale.from_config({"loss_scale_value": 5.0}).get_config() == {"loss_scale_value": 5.0}
    with kf.Graph().as_default():
        config = {"initial_loss_scale": 8.0, "increment_period": 10, "multiplier": 4.0}
        dyn = MP.DynamicLossScale.from_config(config)
        assert dyn.get_config() == config
        assert (dyn.initial_loss_scale, dyn.increment_period, dyn.multiplier) == (8.0, 10, 4.0)
        with kf.Session() as s:
            s.run(kf.global_variables_initializer())
            assert s.run(MP.FixedLossScale(3)()) == 3.0
            op, ok = MP.FixedLossScale(3).update([kf.constant([np.nan])])
            assert ok is True and isinstance(op, kf.Operation)


def test_bad_arguments():
    with kf.Graph().as_default():
        sgd = kf.train.GradientDescentOptimizer(0.1)
        for value in (0.5, 0, -2):
            with pytest.raises(ValueError, match="at least 1"):
                MP.FixedLossScale(value)
        for value in ("2", None, True):
            with pytest.raises(ValueError, match="Python int or float"):
                MP.FixedLossScale(value)
        with pytest.raises(ValueError, match="increment_period"):
            MP.DynamicLossScale(increment_period=0)
        with pytest.raises(ValueError):
            MP.DynamicLossScale(multiplier="x")
        with pytest.raises(TypeError):
            MP.DynamicLossScale(initial_loss_scale=None)
        with pytest.raises(ValueError, match="must be an instance of Optimizer"):
            MP.MixedPrecisionLossScaleOptimizer("sgd", "dynamic")
        with pytest.raises(ValueError, match="loss_scale cannot be None"):
            MP.MixedPrecisionLossScaleOptimizer(sgd, None)
        for value in ("static", [2.0]):
            with pytest.raises(ValueError, match="Invalid argument: loss_scale"):
                MP.MixedPrecisionLossScaleOptimizer(sgd, value)
        wrapped = MP.enable_mixed_precision_graph_rewrite(sgd)
        try:
            with pytest.raises(ValueError, match="must not already be"):
                MP.enable_mixed_precision_graph_rewrite(wrapped)
            with pytest.raises(ValueError, match="kf.train.Optimizer"):
                MP.enable_mixed_precision_graph_rewrite(object())
        finally:
            MP.disable_mixed_precision_graph_rewrite()


def test_enable_logs_once_that_there_is_no_float16_rewrite(caplog, monkeypatch):
    monkeypatch.setattr(loss_scale_optimizer, "_rewrite", {"enabled": False, "logged": False})
    caplog.set_level(logging.WARNING, logger="kernflow")
    with kf.Graph().as_default():
        sgd = kf.train.GradientDescentOptimizer(0.1)
        first = kf.mixed_precision.enable_mixed_precision_graph_rewrite(sgd)
        kf.mixed_precision.enable_mixed_precision_graph_rewrite(kf.train.AdamOptimizer(), loss_scale=8)
    assert isinstance(first, MP.MixedPrecisionLossScaleOptimizer)
    assert isinstance(first.loss_scale, MP.DynamicLossScale)
    assert sum("no automatic mixed precision graph rewrite" in r.getMessage() for r in caplog.records) == 1
    assert loss_scale_optimizer.mixed_precision_graph_rewrite_is_enabled()
    kf.mixed_precision.disable_mixed_precision_graph_rewrite()
    assert not loss_scale_optimizer.mixed_precision_graph_rewrite_is_enabled()
    kf.mixed_precision.disable_mixed_precision_graph_rewrite()
    assert any("already disabled" in r.getMessage() for r in caplog.records)


def test_namespaces():
    exp = kf.mixed_precision.experimental
    assert (exp.LossScale, exp.FixedLossScale, exp.DynamicLossScale) == \
        (MP.LossScale, MP.FixedLossScale, MP.DynamicLossScale)
    assert kf.mixed_precision.MixedPrecisionLossScaleOptimizer is MP.MixedPrecisionLossScaleOptimizer
    assert kf.mixed_precision.enable_mixed_precision_graph_rewrite is MP.enable_mixed_precision_graph_rewrite
    assert issubclass(MP.DynamicLossScale, MP.LossScale) and issubclass(MP.FixedLossScale, MP.LossScale)
    with pytest.raises(TypeError):
        MP.LossScale()
