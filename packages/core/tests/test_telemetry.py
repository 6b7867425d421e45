"""kernflow's OpenTelemetry instruments, read back through an in-memory SDK reader installed for
kernflow only (`kernflow.core.testing.metrics.MetricsRecorder`): steps, step latency, queue sizes,
dropped gradients, checkpoint durations; and nothing recorded or checked without a provider."""

import numpy as np
import pytest

import kernflow.core as kf
from kernflow.core import telemetry
from kernflow.core.framework import errors
from kernflow.core.testing.metrics import MetricsRecorder

EMBEDDED = {"kernflow.session.kind": "embedded"}


@pytest.fixture
def rec():
    with MetricsRecorder() as r:
        yield r


def _add_one():
    g = kf.Graph()
    with g.as_default():
        x = kf.placeholder(kf.float32, [1], name="x")
        y = x + 1.0
    return g, x, y


def test_steps_are_counted_with_their_latency(rec):
    g, x, y = _add_one()
    with kf.Session(graph=g) as s:
        for _ in range(3):
            s.run(y, {x: np.ones(1, np.float32)})
        f = s.make_callable(y, [x])
        f(np.ones(1, np.float32))
        f(np.ones(1, np.float32))
    assert rec.value("kernflow.session.steps", EMBEDDED) == 5
    (hist,) = rec.matching("kernflow.session.step.duration", EMBEDDED)
    assert hist.count == 5 and sum(hist.bucket_counts) == 5
    assert 0 < hist.sum < 5.0
    assert hist.explicit_bounds[0] == pytest.approx(1e-5)   # seconds, down to a fast embedded step


def test_a_failed_step_is_counted_with_its_error_type(rec):
    g = kf.Graph()
    with g.as_default():
        x = kf.placeholder(kf.float32, [], name="x")
        bad = kf.debugging.assert_positive(x)
    with kf.Session(graph=g) as s:
        with pytest.raises(errors.InvalidArgumentError):
            s.run(bad, {x: -1.0})
    assert rec.value("kernflow.session.steps", {**EMBEDDED, "error.type": "InvalidArgumentError"}) == 1


def test_no_provider_means_no_recording_and_no_clock():
    # Tests install providers only through MetricsRecorder (kernflow's own, removed on exit); the
    # global one is installed in subprocesses (test_metrics_sdk.py), so none is active here.
    assert not telemetry.metrics_active(), "a test installed a global MeterProvider in process"
    assert telemetry.step_start() is None
    assert telemetry.checkpoint_timer("save") is telemetry.checkpoint_timer("restore")  # shared no-op
    g, x, y = _add_one()
    with kf.Session(graph=g) as s:
        s.run(y, {x: np.ones(1, np.float32)})   # nothing to record into, nothing fails
    with MetricsRecorder() as r:
        assert telemetry.metrics_active() and telemetry.step_start() is not None
        assert r.value("kernflow.session.steps") == 0   # the step above was not recorded later
    assert not telemetry.metrics_active()


def test_queue_sizes_are_observed(rec):
    g = kf.Graph()
    with g.as_default():
        q = kf.FIFOQueue(10, [kf.float32], shapes=[[]], shared_name="telemetry_q")
        enq = q.enqueue_many([[1.0, 2.0, 3.0]])
        deq = q.dequeue()
    with kf.Session(graph=g) as s:
        s.run(enq)
        attrs = {"kernflow.queue.name": "telemetry_q", "kernflow.queue.kind": "FIFOQueue"}
        assert rec.value("kernflow.queue.size", attrs) == 3
        s.run(deq)
        assert rec.value("kernflow.queue.size", attrs) == 2


def test_stale_gradients_dropped_by_an_accumulator_are_counted(rec):
    g = kf.Graph()
    with g.as_default():
        acc = kf.ConditionalAccumulator(kf.float32, shape=[2], shared_name="telemetry_acc")
        step = kf.placeholder(kf.int64, [])
        apply = acc.apply_grad(kf.constant([1.0, 2.0]), local_step=step)
        set_step = acc.set_global_step(5)
        dropped = acc.num_dropped()
    with kf.Session(graph=g) as s:
        s.run(set_step)
        for local in (1, 2, 7):   # two stale, one current
            s.run(apply, {step: local})
        assert s.run(dropped) == 2
    assert rec.value("kernflow.accumulator.dropped_gradients",
                     {"kernflow.accumulator.name": "telemetry_acc"}) == 2


def test_checkpoint_save_and_restore_durations(rec, tmp_path):
    g = kf.Graph()
    with g.as_default():
        v = kf.Variable(np.arange(4, dtype=np.float32), name="v")
        saver = kf.train.Saver()
        init = kf.global_variables_initializer()
    with kf.Session(graph=g) as s:
        s.run(init)
        path = saver.save(s, str(tmp_path / "model"))
        saver.save(s, str(tmp_path / "model"), global_step=1)
        saver.restore(s, path)
        with pytest.raises(ValueError):
            saver.restore(s, str(tmp_path / "absent"))   # no checkpoint: nothing was timed
    (save,) = rec.matching("kernflow.checkpoint.duration", {"kernflow.checkpoint.operation": "save"})
    (restore,) = rec.matching("kernflow.checkpoint.duration", {"kernflow.checkpoint.operation": "restore"})
    assert (save.count, restore.count) == (2, 1)
    assert save.sum > 0 and restore.sum > 0


def test_instruments_follow_the_provider():
    with MetricsRecorder() as a:
        first = telemetry.instruments()
        assert telemetry.instruments() is first
    with MetricsRecorder() as b:
        assert telemetry.instruments() is not first
        g, x, y = _add_one()
        with kf.Session(graph=g) as s:
            s.run(y, {x: np.ones(1, np.float32)})
        assert b.value("kernflow.session.steps") == 1
    assert a.value("kernflow.session.steps") == 0
