"""The standard session hooks (kernflow/core/train/basic_session_run_hooks.py) and the timer."""

import logging
import os
import threading
import time

import numpy as np
import pytest

import kernflow.core as kf
from kernflow.core.train import basic_session_run_hooks as hooks_mod

LOGGER = "kernflow.core.train.basic_session_run_hooks"


def _train(sess, op, n):
    for _ in range(n):
        if sess.should_stop():
            break
        sess.run(op)


# ---------------------------------------------------------------------------- SecondOrStepTimer
def test_second_or_step_timer_by_steps():
    timer = kf.train.SecondOrStepTimer(every_steps=3)
    assert timer.should_trigger_for_step(0) and timer.last_triggered_step() is None
    assert timer.update_last_triggered_step(0) == (None, None)
    assert not timer.should_trigger_for_step(0)  # never twice for one step
    assert not timer.should_trigger_for_step(2)
    assert timer.should_trigger_for_step(3)
    elapsed_secs, elapsed_steps = timer.update_last_triggered_step(4)
    assert elapsed_steps == 4 and elapsed_secs >= 0 and timer.last_triggered_step() == 4
    # due_step: the first step that may trigger (the hooks skip the call before it)
    assert timer.due_step == 7 and not timer.should_trigger_for_step(6) and timer.should_trigger_for_step(7)
    timer.reset()
    assert timer.due_step is None and timer.should_trigger_for_step(4)
    by_secs = kf.train.SecondOrStepTimer(every_secs=10)
    by_secs.update_last_triggered_step(1)
    assert by_secs.due_step is None      # seconds: every step asks should_trigger_for_step


def test_second_or_step_timer_by_seconds(monkeypatch):
    now = [100.0]
    monkeypatch.setattr(hooks_mod.time, "time", lambda: now[0])
    timer = kf.train.SecondOrStepTimer(every_secs=10)
    timer.update_last_triggered_step(1)
    assert not timer.should_trigger_for_step(500)
    now[0] = 110.0
    assert timer.should_trigger_for_step(2)
    assert timer.update_last_triggered_step(2) == (10.0, 1)


def test_second_or_step_timer_arguments():
    with pytest.raises(ValueError, match="Either every_secs or every_steps"):
        kf.train.SecondOrStepTimer()
    with pytest.raises(ValueError, match="Can not provide both"):
        kf.train.SecondOrStepTimer(every_secs=1, every_steps=1)


# ---------------------------------------------------------------------------- StopAtStepHook
def test_stop_at_step_hook(model, step_reading):
    with pytest.raises(ValueError, match="One of num_steps or last_step"):
        kf.train.StopAtStepHook()
    with pytest.raises(ValueError, match="Only one of"):
        kf.train.StopAtStepHook(num_steps=1, last_step=1)
    assert kf.train.get_or_create_global_step() is model.global_step  # the existing one, again
    final = kf.train.FinalOpsHook(model.global_step)
    with kf.train.SingularMonitoredSession(hooks=[kf.train.StopAtStepHook(num_steps=4), final]) as sess:
        sess.raw_session().run(model.train_op)  # num_steps counts from the step at creation (0)
        _train(sess, model.train_op, 100)
    assert final.final_ops_values == 4


def test_stop_at_step_hook_needs_a_global_step():
    with kf.Graph().as_default():
        kf.Variable(1.0)
        with pytest.raises(RuntimeError, match="Global step should be created to use StopAtStepHook"):
            kf.train.MonitoredSession(hooks=[kf.train.StopAtStepHook(last_step=1)])


# ---------------------------------------------------------------------------- logging hooks
def test_logging_tensor_hook_every_n_iter_and_at_end(model, caplog):
    hook = kf.train.LoggingTensorHook({"loss": model.loss, "step": "global_step"}, every_n_iter=2,
                                      at_end=True)
    with caplog.at_level(logging.INFO, logger=LOGGER):
        with kf.train.MonitoredSession(hooks=[hook]) as sess:
            _train(sess, model.train_op, 5)
    lines = [r.getMessage() for r in caplog.records if "loss = " in r.getMessage()]
    assert len(lines) == 4  # iterations 0, 2, 4 and the end
    assert lines[0].startswith("loss = 4.0, step = ")
    assert "sec)" in lines[1] and lines[-1].startswith("loss = ") and "step = 5" in lines[-1]


def test_logging_tensor_hook_formatter_and_arguments(model, caplog):
    hook = kf.train.LoggingTensorHook([model.loss], every_n_secs=3600,
                                      formatter=lambda values: f"custom {sorted(values)}")
    with caplog.at_level(logging.INFO, logger=LOGGER):
        with kf.train.MonitoredSession(hooks=[hook]) as sess:
            _train(sess, model.train_op, 3)
    lines = [r.getMessage() for r in caplog.records if "custom" in r.getMessage()]
    assert len(lines) == 1 and "loss:0" in lines[0]  # every hour: only the first step logs
    with pytest.raises(ValueError, match="exactly one of every_n_iter and every_n_secs"):
        kf.train.LoggingTensorHook([model.loss])
    with pytest.raises(ValueError, match="invalid every_n_iter"):
        kf.train.LoggingTensorHook([model.loss], every_n_iter=0)


def test_step_counter_hook_logs_steps_per_second(model, caplog, step_reading):
    with pytest.raises(ValueError, match="exactly one of every_n_steps and every_n_secs"):
        kf.train.StepCounterHook(every_n_steps=None)
    with caplog.at_level(logging.INFO, logger=LOGGER):
        with kf.train.MonitoredSession(hooks=[kf.train.StepCounterHook(every_n_steps=2)]) as sess:
            _train(sess, model.train_op, 6)
    rates = [r.getMessage() for r in caplog.records if r.getMessage().startswith("global_step/sec: ")]
    assert len(rates) >= 2 and float(rates[0].split(": ")[1]) > 0


# ---------------------------------------------------------------------------- checks, feeds, final ops
def test_nan_tensor_hook(model, caplog):
    nan_x = np.full((4, 2), np.nan, np.float32)
    with pytest.raises(kf.train.NanLossDuringTrainingError, match="NaN loss during training"):
        with kf.train.MonitoredSession(hooks=[kf.train.NanTensorHook(model.loss)]) as sess:
            sess.run(model.train_op)
            sess.run(model.train_op, feed_dict={model.x: nan_x})
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        hook = kf.train.NanTensorHook(model.loss, fail_on_nan_loss=False)
        with kf.train.MonitoredSession(hooks=[hook]) as sess:
            sess.run(model.train_op)
            assert not sess.should_stop()
            sess.run(model.train_op, feed_dict={model.x: nan_x})
            assert sess.should_stop()
    assert "Model diverged with loss = NaN." in caplog.text


def test_feed_fn_hook(model):
    xv = np.full((4, 2), 3.0, np.float32)
    calls = []

    def feed_fn():
        calls.append(1)
        return {model.x: xv}
    with kf.train.MonitoredSession(hooks=[kf.train.FeedFnHook(feed_fn)]) as sess:
        assert sess.run(model.loss) == pytest.approx(4.0)  # w = 0: mean((0 - 2)^2)
        sess.run(model.train_op)
        w = sess.run(model.w)
        assert sess.run(model.loss) == pytest.approx(float(np.mean((xv @ w - 2.0) ** 2)))
    assert len(calls) == 4


def test_final_ops_hook(model):
    xv = np.full((4, 2), 1.0, np.float32)
    hook = kf.train.FinalOpsHook({"step": model.global_step, "loss": model.loss},
                                 final_ops_feed_dict={model.x: xv})
    with kf.train.MonitoredSession(hooks=[hook]) as sess:
        _train(sess, model.train_op, 3)
        assert hook.final_ops_values is None
    assert hook.final_ops_values["step"] == 3 and hook.final_ops_values["loss"] < 4.0
    # Not run when the session ends with an error.
    hook = kf.train.FinalOpsHook(model.global_step)
    with pytest.raises(KeyError):
        with kf.train.MonitoredSession(hooks=[hook]):
            raise KeyError("boom")
    assert hook.final_ops_values is None


# ---------------------------------------------------------------------------- checkpoints
class Listener(kf.train.CheckpointSaverListener):
    def __init__(self, stop_at=None):
        self.events, self.stop_at = [], stop_at

    def begin(self):
        self.events.append("begin")

    def before_save(self, session, global_step_value):
        self.events.append(("before_save", int(global_step_value)))

    def after_save(self, session, global_step_value):
        self.events.append(("after_save", int(global_step_value)))
        return global_step_value == self.stop_at

    def end(self, session, global_step_value):
        self.events.append(("end", int(global_step_value)))


def test_checkpoint_saver_hook_save_steps_and_listener(model, tmp_path, step_reading):
    d = str(tmp_path)
    listener = Listener()
    hooks = [kf.train.CheckpointSaverHook(d, save_steps=3, listeners=[listener]),
             kf.train.StopAtStepHook(last_step=7)]
    with kf.train.MonitoredSession(hooks=hooks) as sess:
        _train(sess, model.train_op, 100)
    saves = [e[1] for e in listener.events if e[0] == "after_save"]
    assert saves == [0, 3, 6, 7]  # at creation, every 3 steps, and the last step at the end
    assert listener.events[0] == "begin" and listener.events[-1] == ("end", 7)
    assert listener.events[1:3] == [("before_save", 0), ("after_save", 0)]
    state = kf.train.get_checkpoint_state(d)
    assert [os.path.basename(p) for p in state.all_model_checkpoint_paths] == \
        ["model.ckpt-0", "model.ckpt-3", "model.ckpt-6", "model.ckpt-7"]
    assert os.path.exists(os.path.join(d, "graph.pbtxt"))


def test_checkpoint_saver_listener_requests_stop(model, tmp_path, step_reading):
    listener = Listener(stop_at=2)
    hook = kf.train.CheckpointSaverHook(str(tmp_path), save_steps=2, listeners=[listener],
                                        checkpoint_basename="m", save_graph_def=False)
    with kf.train.MonitoredSession(hooks=[hook]) as sess:
        _train(sess, model.train_op, 100)
        assert sess.should_stop()
    assert kf.train.latest_checkpoint(str(tmp_path)).endswith("m-2")
    assert not os.path.exists(os.path.join(str(tmp_path), "graph.pbtxt"))


def test_checkpoint_saver_hook_arguments(model, tmp_path):
    with pytest.raises(ValueError, match="both saver and scaffold"):
        kf.train.CheckpointSaverHook(str(tmp_path), save_steps=1, saver=kf.train.Saver(),
                                     scaffold=kf.train.Scaffold())
    with pytest.raises(ValueError, match="Either every_secs or every_steps"):
        kf.train.CheckpointSaverHook(str(tmp_path))


# ---------------------------------------------------------------------------- GlobalStepWaiterHook
def test_global_step_waiter_hook_waits_for_another_thread(model, in_thread):
    inc = kf.assign_add(model.global_step, 1)
    waiter = kf.train.GlobalStepWaiterHook(wait_until_step=5)
    waiter._poll_secs = 0.01
    with kf.train.SingularMonitoredSession(hooks=[waiter]) as sess:
        raw = sess.raw_session()
        stop = threading.Event()

        def advance():
            while not stop.wait(0.02):
                raw.run(inc)
        t, box = in_thread(lambda: sess.run(model.global_step))
        time.sleep(0.1)
        assert t.is_alive() and raw.run(model.global_step) == 0  # nobody advanced the step yet
        advancer = threading.Thread(target=advance, daemon=True)
        advancer.start()
        t.join(10)
        stop.set()
        advancer.join(10)
        assert not t.is_alive() and not advancer.is_alive()
        assert box[0][0] == "ok" and box[0][1] >= 5
        sess.run(model.global_step)  # started: no more waiting
    no_wait = kf.train.GlobalStepWaiterHook(wait_until_step=0)
    with kf.train.MonitoredSession(hooks=[no_wait]) as sess:
        assert sess.run(model.global_step) == 0
