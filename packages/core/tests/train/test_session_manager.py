"""`kf.train.SessionManager`, `kf.report_uninitialized_variables` and the worker side of
`WorkerSessionCreator` / `MonitoredTrainingSession(is_chief=False)`."""

import threading
import time

import pytest

import kernflow.core as kf
from kernflow.core.testing.processes import have_distributed
from kernflow.core.framework import errors



needs_dist = pytest.mark.skipif(not have_distributed(), reason="kernflow-client/master/worker not installed")


# ---------------------------------------------------------------------------- report_uninitialized_variables
def test_report_uninitialized_variables():
    g = kf.Graph()
    with g.as_default():
        a = kf.Variable(1.0, name="a")
        b = kf.Variable(2.0, name="b")
        loc = kf.Variable(3.0, name="loc", collections=[kf.GraphKeys.LOCAL_VARIABLES])
        every = kf.report_uninitialized_variables()
        only_b = kf.report_uninitialized_variables([b], name="only_b")
        none = kf.report_uninitialized_variables([], name="none")
    with kf.Session(graph=g) as sess:
        assert sorted(sess.run(every)) == [b"a", b"b", b"loc"]
        sess.run(a.initializer)
        assert sorted(sess.run(every)) == [b"b", b"loc"]
        assert list(sess.run(only_b)) == [b"b"]
        sess.run([b.initializer, loc.initializer])
        out = sess.run(every)
        assert out.shape == (0,) and sess.run(none).shape == (0,)
    assert every.dtype == kf.string


# ---------------------------------------------------------------------------- prepare_session
def test_prepare_session_initializes_then_restores(model, tmp_path):
    saver = kf.train.Saver()
    init = kf.global_variables_initializer()
    ready = kf.report_uninitialized_variables()
    sm = kf.train.SessionManager(ready_op=ready)
    sess = sm.prepare_session("", init_op=init, saver=saver, checkpoint_dir=str(tmp_path))
    sess.run(model.train_op)
    sess.run(model.train_op)
    saver.save(sess, str(tmp_path / "model.ckpt"), global_step=model.global_step)
    sess.close()
    sess = sm.prepare_session("", init_op=None, saver=saver, checkpoint_dir=str(tmp_path))
    assert sess.run(model.global_step) == 2
    assert saver.last_checkpoints == [str(tmp_path / "model.ckpt-2")]
    sess.close()
    # An explicit checkpoint file, and the recover_session path.
    path = str(tmp_path / "model.ckpt-2")
    sess = sm.prepare_session("", saver=saver, checkpoint_filename_with_path=path)
    assert sess.run(model.global_step) == 2
    sess.close()
    sess, initialized = sm.recover_session("", saver=saver, checkpoint_dir=str(tmp_path))
    assert initialized and sess.run(model.global_step) == 2
    sess.close()
    sess, initialized = sm.recover_session("", saver=saver, checkpoint_dir=str(tmp_path / "empty"))
    assert not initialized
    sess.close()


def test_prepare_session_errors(model, tmp_path):
    ready = kf.report_uninitialized_variables()
    sm = kf.train.SessionManager(ready_op=ready)
    with pytest.raises(RuntimeError, match="no init_op or init_fn or local_init_op"):
        sm.prepare_session("")
    with pytest.raises(RuntimeError, match="did not make model ready.*Variables not initialized: "):
        sm.prepare_session("", init_op=model.w.initializer)
    with pytest.raises(ValueError, match="both checkpoint_dir and checkpoint_filename_with_path"):
        sm.prepare_session("", saver=kf.train.Saver(), checkpoint_dir=str(tmp_path),
                           checkpoint_filename_with_path="x")
    with pytest.raises(ValueError, match="must also pass a local_init_op"):
        kf.train.SessionManager(ready_for_local_init_op=ready)
    # init_fn alone is enough.
    init = kf.global_variables_initializer()
    sess = sm.prepare_session("", init_fn=lambda s: s.run(init))
    assert sess.run(model.global_step) == 0
    sess.close()


def test_local_init_op_waits_for_ready_for_local_init(model):
    with model.graph.as_default():
        loc = kf.Variable(5.0, name="loc", collections=[kf.GraphKeys.LOCAL_VARIABLES])
        sm = kf.train.SessionManager(
            local_init_op=kf.local_variables_initializer(),
            ready_op=kf.report_uninitialized_variables(),
            ready_for_local_init_op=kf.report_uninitialized_variables(kf.global_variables()),
            recovery_wait_secs=0.01)
        init = kf.global_variables_initializer()
    sess = sm.prepare_session("", init_op=init)
    assert sess.run(loc) == 5.0
    sess.close()
    with pytest.raises(RuntimeError, match="not make model ready for local_init"):
        sm.prepare_session("", init_op=model.w.initializer)


# ---------------------------------------------------------------------------- wait_for_session
def test_wait_for_session_deadline(model):
    sm = kf.train.SessionManager(ready_op=kf.report_uninitialized_variables(), recovery_wait_secs=0.05)
    start = time.monotonic()
    with pytest.raises(errors.DeadlineExceededError, match="not ready after waiting.*global_step"):
        sm.wait_for_session("", max_wait_secs=0.3)
    assert time.monotonic() - start < 5
    # The model never becomes ready in a fresh embedded session; with no ready_op it is ready at once.
    sess = kf.train.SessionManager(ready_op=None).wait_for_session("", max_wait_secs=0)
    sess.close()


def test_waits_start_short_and_back_off_to_recovery_wait_secs(model, monkeypatch):
    from kernflow.core.train import session_manager
    sm = kf.train.SessionManager(ready_op=kf.report_uninitialized_variables(), recovery_wait_secs=30)
    waits = sm._waits()
    assert [next(waits) for _ in range(10)] == [0.25, 0.5, 1, 2, 4, 8, 16, 30, 30, 30]
    short = kf.train.SessionManager(recovery_wait_secs=0.1)._waits()
    assert [next(short) for _ in range(3)] == [0.1, 0.1, 0.1]
    slept = []
    # `time.sleep` is process-wide: other threads (a watchdog an earlier test started) keep sleeping
    # for real, or they would spin and fill the list.
    me, real_sleep = threading.get_ident(), time.sleep
    monkeypatch.setattr(session_manager.time, "sleep",
                        lambda s: slept.append(s) if threading.get_ident() == me else real_sleep(s))
    with pytest.raises(errors.DeadlineExceededError):
        sm.wait_for_session("", max_wait_secs=5)   # sleep is a no-op: a pause of 8 s passes 5 s
    assert slept == [0.25, 0.5, 1, 2, 4]


@needs_dist
def test_worker_waits_for_the_chief_on_a_shared_server(model, in_thread):
    server = kf.train.Server.create_local_server()
    try:
        scaffold = kf.train.Scaffold()
        worker = kf.train.WorkerSessionCreator(scaffold=scaffold, master=server.target, max_wait_secs=30)
        worker._recovery_wait_secs = 0.05

        def create():
            with model.graph.as_default():
                return worker.create_session()
        t, box = in_thread(create)
        time.sleep(0.3)
        assert t.is_alive()  # nobody initialized the variables yet
        chief = kf.train.ChiefSessionCreator(scaffold=scaffold, master=server.target).create_session()
        chief.run(model.train_op)
        t.join(10)
        assert box and box[0][0] == "ok", box
        worker_sess = box[0][1]
        assert worker_sess.run(model.global_step) == 1
        worker_sess.close()
        chief.close()
    finally:
        server.stop()
        model.graph._unsafe_unfinalize()


@needs_dist
def test_worker_times_out_without_a_chief(model):
    server = kf.train.Server.create_local_server()
    try:
        worker = kf.train.WorkerSessionCreator(master=server.target, max_wait_secs=0.3)
        worker._recovery_wait_secs = 0.05
        with pytest.raises(errors.DeadlineExceededError, match="Session was not ready"):
            worker.create_session()
    finally:
        server.stop()
        model.graph._unsafe_unfinalize()


@needs_dist
def test_monitored_training_session_worker_and_chief(make_model, tmp_path, monkeypatch):
    # Chief and worker each build their own graph, as two processes would; the server holds the
    # variables both sessions use.
    from kernflow.core.train import monitored_session
    monkeypatch.setattr(monitored_session._ScaffoldSessionCreator, "_recovery_wait_secs", 0.05)
    server = kf.train.Server.create_local_server()
    chief_model, worker_model = make_model(), make_model()
    done = threading.Event()

    def chief():
        time.sleep(0.2)
        with chief_model.graph.as_default():
            with kf.train.MonitoredTrainingSession(master=server.target, checkpoint_dir=str(tmp_path),
                                                   hooks=[kf.train.StopAtStepHook(last_step=3)]) as sess:
                while not sess.should_stop():
                    sess.run(chief_model.train_op)
        done.set()
    try:
        t = threading.Thread(target=chief, daemon=True)
        t.start()
        start = time.monotonic()
        with worker_model.graph.as_default():
            with kf.train.MonitoredTrainingSession(master=server.target, is_chief=False,
                                                   max_wait_secs=20) as sess:
                waited = time.monotonic() - start
                step = sess.run(worker_model.global_step)
        assert waited >= 0.15  # it waited for the chief's initialization
        assert 0 <= step <= 3
        assert done.wait(20)
        t.join(20)
        assert kf.train.latest_checkpoint(str(tmp_path)).endswith("model.ckpt-3")
    finally:
        server.stop()
