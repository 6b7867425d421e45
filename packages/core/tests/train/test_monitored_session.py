"""`kf.train.MonitoredSession`, `SingularMonitoredSession`, `MonitoredTrainingSession`: hooks,
checkpoints, recovery from preemption errors, coordinator and queue runners."""

import logging
import os

import numpy as np
import pytest

import kernflow.core as kf
from kernflow.core.framework import errors


class RecordingHook(kf.train.SessionRunHook):
    """Records every call; optionally asks for fetches, feeds and options."""

    def __init__(self, fetches=None, feed_dict=None, options=None):
        self.calls = []
        self.args = kf.train.SessionRunArgs(fetches, feed_dict, options) \
            if fetches is not None or feed_dict or options else None
        self.values = []
        self.coord = None

    def begin(self):
        self.calls.append(("begin", kf.get_default_graph().finalized))

    def after_create_session(self, session, coord):
        self.coord = coord
        self.calls.append(("after_create_session", session.graph.finalized))

    def before_run(self, run_context):
        self.calls.append(("before_run", run_context.original_args))
        return self.args

    def after_run(self, run_context, run_values):
        self.values.append(run_values)
        self.calls.append(("after_run", run_values.results))

    def end(self, session):
        self.calls.append(("end", session is not None))


def _names(hook):
    return [c[0] for c in hook.calls]


# ---------------------------------------------------------------------------- training and checkpoints
def test_trains_to_last_step_then_a_second_session_resumes(make_model, tmp_path):
    d = str(tmp_path)
    m = make_model()
    with m.graph.as_default():
        with kf.train.MonitoredTrainingSession(checkpoint_dir=d, save_checkpoint_steps=4,
                                               hooks=[kf.train.StopAtStepHook(last_step=6)]) as sess:
            runs = 0
            while not sess.should_stop():
                sess.run(m.train_op)
                runs += 1
    assert runs == 6
    assert kf.train.latest_checkpoint(d) == os.path.join(d, "model.ckpt-6")
    state = kf.train.get_checkpoint_state(d)
    assert [os.path.basename(p) for p in state.all_model_checkpoint_paths] == \
        ["model.ckpt-0", "model.ckpt-4", "model.ckpt-6"]
    assert os.path.exists(os.path.join(d, "graph.pbtxt"))
    assert not m.graph.finalized  # unfinalized again on close
    trained_w = kf.train.load_variable(d, "w")
    # A new process (a new graph) restores step 6, not 0, and continues.
    m2 = make_model()
    with m2.graph.as_default():
        final = kf.train.FinalOpsHook(m2.global_step)
        with kf.train.MonitoredTrainingSession(checkpoint_dir=d, save_checkpoint_secs=None,
                                               hooks=[kf.train.StopAtStepHook(num_steps=3), final]) as sess:
            assert sess.run(m2.global_step) == 6
            np.testing.assert_array_equal(sess.run(m2.w), trained_w)
            while not sess.should_stop():
                sess.run(m2.train_op)
    assert final.final_ops_values == 9
    # save_checkpoint_secs=None and no steps: no CheckpointSaverHook, nothing new was saved.
    assert kf.train.latest_checkpoint(d) == os.path.join(d, "model.ckpt-6")


def test_monitored_training_session_hooks(model, tmp_path):
    first, last = RecordingHook(), RecordingHook()
    sess = kf.train.MonitoredTrainingSession(checkpoint_dir=str(tmp_path), chief_only_hooks=[first],
                                             hooks=[last], save_checkpoint_steps=10)
    kinds = [type(h).__name__ for h in sess._hooks]
    assert kinds == ["RecordingHook", "StepCounterHook", "SummarySaverHook", "CheckpointSaverHook",
                     "RecordingHook"]
    assert sess._hooks[0] is first and sess._hooks[-1] is last
    sess.close()
    sess = kf.train.MonitoredTrainingSession(log_step_count_steps=0, hooks=[last])
    assert sess._hooks == [last]
    assert sess.run(model.global_step) == 0  # initialized by the default scaffold
    sess.close()


# ---------------------------------------------------------------------------- hooks around run
def test_hook_call_order_and_merged_fetches_and_feeds(model):
    xv = np.full((4, 2), 2.0, np.float32)
    hook = RecordingHook(fetches={"loss": model.loss}, feed_dict={model.x: xv})
    plain = RecordingHook()
    with kf.train.MonitoredSession(hooks=[hook, plain]) as sess:
        assert _names(hook) == ["begin", "after_create_session"]
        assert hook.calls[0][1] is False and hook.calls[1][1] is True  # finalized in between
        w_before = sess.run(model.w)
        out = sess.run([model.loss, model.global_step])
        _, loss_arg = hook.calls[-2], hook.calls[-1][1]
        # The hook's feed applies to the whole call: the caller's loss is computed with it too.
        assert loss_arg["loss"] == pytest.approx(float(np.mean((xv @ w_before - 2.0) ** 2)))
        assert out[0] == pytest.approx(loss_arg["loss"])
        original = hook.calls[-2][1]
        assert original.fetches == [model.loss, model.global_step] and original.feed_dict is None
        assert plain.calls[-1] == ("after_run", None)
    assert _names(hook)[-1] == "end" and _names(plain)[-1] == "end"


def test_feed_conflicts_raise(model):
    xv = np.ones((4, 2), np.float32)
    with kf.train.MonitoredSession(hooks=[RecordingHook(feed_dict={model.x: xv})]) as sess:
        with pytest.raises(RuntimeError, match="Same tensor is fed by a SessionRunHook and user"):
            sess.run(model.loss, feed_dict={"x:0": xv})
        sess.run(model.loss, feed_dict={})  # an empty caller feed is fine
    hooks = [RecordingHook(feed_dict={model.x: xv}), RecordingHook(feed_dict={"x:0": xv})]
    with kf.train.MonitoredSession(hooks=hooks) as sess:
        with pytest.raises(RuntimeError, match="Same tensor is fed by two hooks"):
            sess.run(model.loss)


def test_run_options_are_merged(model):
    options = kf.RunOptions(timeout_in_ms=5000)
    hook = RecordingHook(options=kf.RunOptions(trace_level=kf.RunOptions.FULL_TRACE, timeout_in_ms=10))
    with kf.train.MonitoredSession(hooks=[hook]) as sess:
        metadata = kf.RunMetadata()
        sess.run(model.train_op, options=options, run_metadata=metadata)
        merged = hook.values[-1].options
        assert merged.trace_level == kf.RunOptions.FULL_TRACE and merged.timeout_in_ms == 5000
        assert options.trace_level == kf.RunOptions.NO_TRACE  # the caller's proto is not changed
        assert hook.values[-1].run_metadata is metadata
        assert len(metadata.step_stats.dev_stats) > 0


def test_hooks_get_empty_options_on_plain_steps_and_the_traced_metadata_on_traced_ones(model):
    class TraceEveryOther(kf.train.SessionRunHook):
        def __init__(self):
            self.n, self.values = 0, []

        def before_run(self, run_context):
            self.n += 1
            if self.n % 2 == 0:
                return kf.train.SessionRunArgs(None, options=kf.RunOptions(
                    trace_level=kf.RunOptions.FULL_TRACE))
            return None

        def after_run(self, run_context, run_values):
            self.values.append(run_values)
    hook = TraceEveryOther()
    with kf.train.MonitoredSession(hooks=[hook]) as sess:
        for _ in range(4):
            sess.run(model.train_op)
    plain, traced = hook.values[0::2], hook.values[1::2]
    for v in plain:   # no options asked: empty protos (shared by such steps)
        assert v.options.ByteSize() == 0 and v.run_metadata.ByteSize() == 0
    for v in traced:  # each traced step: its own metadata, with the step's stats
        assert v.options.trace_level == kf.RunOptions.FULL_TRACE
        assert len(v.run_metadata.step_stats.dev_stats) > 0
    assert traced[0].run_metadata is not traced[1].run_metadata
    assert plain[1].run_metadata.ByteSize() == 0    # a traced step left the plain steps' empty


def test_request_stop_and_run_after_stop(model):
    class StopAfterTwo(kf.train.SessionRunHook):
        def __init__(self):
            self.n = 0

        def after_run(self, run_context, run_values):
            self.n += 1
            if self.n == 2:
                run_context.request_stop()
                assert run_context.stop_requested
    with kf.train.MonitoredSession(hooks=[StopAfterTwo()]) as sess:
        sess.run(model.train_op)
        assert not sess.should_stop()
        sess.run(model.train_op)
        assert sess.should_stop()
        with pytest.raises(RuntimeError, match="Run called even after should_stop requested"):
            sess.run(model.train_op)


def test_exception_in_with_skips_end_and_propagates(model):
    hook = RecordingHook()
    with pytest.raises(ValueError, match="user error"):
        with kf.train.MonitoredSession(hooks=[hook]) as sess:
            sess.run(model.train_op)
            raise ValueError("user error")
    assert "end" not in _names(hook)
    assert sess.should_stop() and not model.graph.finalized
    # OutOfRangeError (the input is exhausted) ends the session normally and is absorbed.
    hook = RecordingHook()
    with kf.train.MonitoredSession(hooks=[hook]) as sess:
        raise errors.OutOfRangeError(None, None, "End of sequence")
    assert _names(hook)[-1] == "end"
    with pytest.raises(RuntimeError, match="Session is already closed"):
        sess.close()


def test_coordinator_error_surfaces_in_should_stop_and_close(model):
    hook = RecordingHook()
    sess = kf.train.MonitoredSession(hooks=[hook])
    hook.coord.request_stop(ValueError("thread failed"))
    assert sess.should_stop()
    with pytest.raises(ValueError, match="thread failed"):
        sess.close()


def test_queue_runners_start_on_the_session_coordinator(model):
    with model.graph.as_default():
        q = kf.FIFOQueue(4, kf.float32, shapes=[[]])
        kf.train.add_queue_runner(kf.train.QueueRunner(q, [q.enqueue(7.0)]))
        value = q.dequeue()
    hook = RecordingHook()
    with kf.train.MonitoredSession(hooks=[hook]) as sess:
        assert [sess.run(value) for _ in range(5)] == [7.0] * 5
        coord = hook.coord
    assert coord.should_stop() and coord.joined


def test_run_step_fn(model):
    hook = RecordingHook()
    steps = []

    def step_fn(step_context):
        step_context.run_with_hooks(model.train_op)
        steps.append(step_context.session.run(model.global_step))  # raw: no hooks
        if steps[-1] == 3:
            step_context.request_stop()
        return steps[-1]
    with kf.train.MonitoredSession(hooks=[hook]) as sess:
        assert sess.run_step_fn(step_fn) == 1
        while True:
            sess.run_step_fn(step_fn)
    assert steps == [1, 2, 3]
    assert _names(hook).count("before_run") == 3 and _names(hook)[-1] == "end"
    with kf.train.MonitoredSession() as sess:
        with pytest.raises(ValueError, match="step_context"):
            sess.run_step_fn(lambda ctx: None)


# ---------------------------------------------------------------------------- recovery
class _FlakySession:
    """A session whose `fail_at`-th hooked run (one with the caller's fetches) raises `error`."""

    def __init__(self, sess, error, fail_at):
        self._sess, self._error, self._fail_at, self._runs = sess, error, fail_at, 0

    graph = property(lambda self: self._sess.graph)
    sess_str = property(lambda self: self._sess.sess_str)

    def run(self, fetches, *args, **kwargs):
        if type(fetches) is list:   # HookedSession's: [the caller's fetches, the hooks' requests...]
            self._runs += 1
            if self._error is not None and self._runs == self._fail_at:
                raise self._error
        return self._sess.run(fetches, *args, **kwargs)

    def close(self):
        self._sess.close()

    def _variable_reader(self, op_name):
        return self._sess._variable_reader(op_name)


class FlakyCreator(kf.train.SessionCreator):
    """Wraps a creator: the first session fails with `error` on its `fail_at`-th hooked run."""

    def __init__(self, inner, error, fail_at):
        self.inner, self.error, self.fail_at, self.created = inner, error, fail_at, 0

    def create_session(self):
        self.created += 1
        error = self.error if self.created == 1 else None
        return _FlakySession(self.inner.create_session(), error, self.fail_at)


class StartStep(kf.train.SessionRunHook):
    def __init__(self, step):
        self.step, self.starts = step, []

    def after_create_session(self, session, coord):
        self.starts.append(int(session.run(self.step)))


@pytest.mark.parametrize("error_cls", [errors.AbortedError, errors.UnavailableError])
def test_recovers_from_preemption_errors(model, tmp_path, caplog, error_cls, step_reading):
    # ("read": the global-step hooks read each new session's variable, not the closed one's)
    d = str(tmp_path)
    creator = FlakyCreator(kf.train.ChiefSessionCreator(checkpoint_dir=d),
                           error_cls(None, None, "ps task went away"), fail_at=5)
    starts = StartStep(model.global_step)
    runs, final = RecordingHook(), kf.train.FinalOpsHook(model.global_step)
    hooks = [kf.train.CheckpointSaverHook(d, save_steps=3), kf.train.StopAtStepHook(last_step=8), starts,
             runs, final]
    with caplog.at_level(logging.INFO, logger="kernflow.core.train"):
        with kf.train.MonitoredSession(session_creator=creator, hooks=hooks) as sess:
            while not sess.should_stop():
                sess.run(model.train_op)
    assert final.final_ops_values == 8
    assert creator.created == 2
    assert starts.starts == [0, 3]  # the new session restored the checkpoint of step 3
    # Steps 1..4; the 5th call fails after its before_run and is re-issued, hooks included, on the
    # new session (step 4 again), which then runs steps 5..8.
    assert _names(runs).count("after_run") == 4 + 5
    assert _names(runs).count("before_run") == 4 + 1 + 5
    assert "An error was raised. This may be due to a preemption in a connected worker or parameter " \
        "server. The current session will be closed and a new session will be created" in caplog.text
    assert "ps task went away" in caplog.text
    assert kf.train.latest_checkpoint(d).endswith("model.ckpt-8")


def test_other_errors_propagate_without_recovery(model):
    creator = FlakyCreator(kf.train.ChiefSessionCreator(),
                           errors.InvalidArgumentError(None, None, "bad input"), fail_at=2)
    with pytest.raises(errors.InvalidArgumentError, match="bad input"):
        with kf.train.MonitoredSession(session_creator=creator) as sess:
            while True:
                sess.run(model.train_op)
    assert creator.created == 1


def test_singular_monitored_session_does_not_recover(model, tmp_path):
    hook = RecordingHook()
    with kf.train.SingularMonitoredSession(hooks=[hook], checkpoint_dir=str(tmp_path)) as sess:
        raw = sess.raw_session()
        assert isinstance(raw, kf.Session)
        raw.run(model.train_op)  # no hooks
        assert "before_run" not in _names(hook)
        sess.run(model.train_op)
        assert sess.run(model.global_step) == 2
    with pytest.raises(errors.AbortedError, match="preempted"):
        with kf.train.SingularMonitoredSession() as sess:
            def aborted(*args, **kwargs):
                raise errors.AbortedError(None, None, "preempted")
            sess.raw_session().run = aborted
            sess.run(model.train_op)
