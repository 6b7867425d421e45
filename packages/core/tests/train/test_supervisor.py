"""`kf.train.Supervisor`: managed sessions, the checkpoint service, restore, stop and threads."""

import os
import time

import pytest

import kernflow.core as kf
from kernflow.core.framework import errors


def _wait_for(cond, timeout=10.0):
    deadline = time.monotonic() + timeout
    while not cond():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.01)
    return True


def test_managed_session_trains_saves_and_a_second_supervisor_restores(make_model, tmp_path):
    d = str(tmp_path)
    m = make_model()
    with m.graph.as_default():
        sv = kf.train.Supervisor(logdir=d, save_model_secs=3600)
        assert m.graph.finalized and sv.is_chief
        assert sv.global_step is m.global_step and sv.save_path == os.path.join(d, "model.ckpt")
        assert isinstance(sv.saver, kf.train.Saver) and isinstance(sv.coord, kf.train.Coordinator)
        assert isinstance(sv.session_manager, kf.train.SessionManager)
        with sv.managed_session() as sess:
            # The checkpoint service saves once right away (step 0), then every save_model_secs.
            assert _wait_for(lambda: kf.train.latest_checkpoint(d) is not None)
            for _ in range(5):
                sess.run(m.train_op)
            sv.saver.save(sess, sv.save_path, global_step=sv.global_step)
        assert sv.should_stop()
    assert kf.train.latest_checkpoint(d) == os.path.join(d, "model.ckpt-5")
    assert os.path.exists(os.path.join(d, "model.ckpt-0.index"))
    assert os.path.exists(os.path.join(d, "graph.pbtxt"))
    m2 = make_model()
    with m2.graph.as_default():
        sv2 = kf.train.Supervisor(logdir=d, save_model_secs=0)
        with sv2.managed_session() as sess:
            assert sess.run(m2.global_step) == 5
            sv2.request_stop()
            assert sv2.should_stop()
    assert kf.train.latest_checkpoint(d) == os.path.join(d, "model.ckpt-5")  # no service: no save


def test_checkpoint_service_saves_periodically(model, tmp_path):
    d = str(tmp_path)
    sv = kf.train.Supervisor(logdir=d, save_model_secs=0.05)

    def saved_three():
        state = kf.train.get_checkpoint_state(d)
        return state is not None and len(state.all_model_checkpoint_paths) >= 3
    with sv.managed_session() as sess:
        step = 0
        while not _wait_for(saved_three, timeout=0.05):
            sess.run(model.train_op)
            step += 1
            assert step < 2000
        sv.stop()
    assert kf.train.latest_checkpoint(d) is not None


def test_exception_in_managed_session_is_reraised(model):
    sv = kf.train.Supervisor(logdir=None)
    assert sv.save_path is None
    with pytest.raises(ValueError, match="in the loop"):
        with sv.managed_session() as sess:
            sess.run(model.train_op)
            raise ValueError("in the loop")
    assert sv.should_stop()
    # The end of the input is a clean stop.
    with sv.managed_session() as sess:
        assert not sv.should_stop()  # the coordinator was cleared for the new session
        raise errors.OutOfRangeError(None, None, "End of sequence")


def test_loop_and_stop(model):
    sv = kf.train.Supervisor(save_model_secs=0)
    calls = []
    with sv.managed_session():
        looper = sv.loop(0.01, calls.append, args=(1,))
        assert _wait_for(lambda: len(calls) >= 3)
        sv.stop()
        assert not looper.is_alive()


def test_thread_error_is_raised_by_stop(model):
    sv = kf.train.Supervisor(save_model_secs=0)

    def fail():
        raise RuntimeError("service failed")
    with pytest.raises(RuntimeError, match="service failed"):
        with sv.managed_session():
            sv.loop(0.01, fail)
            assert _wait_for(sv.should_stop)


def test_explicit_pieces_and_prepare_session(model):
    init = kf.global_variables_initializer()
    init_fn_sessions = []
    sv = kf.train.Supervisor(init_op=init, ready_op=None, saver=None, global_step=None,
                             init_fn=init_fn_sessions.append, logdir=None)
    assert sv.init_op is init and sv.ready_op is None and sv.saver is None and sv.global_step is None
    assert sv.summary_writer is None and sv.summary_op is None
    sess = sv.prepare_or_wait_for_session(start_standard_services=False)
    assert sess.run(model.global_step) == 0 and init_fn_sessions == [sess]
    with pytest.raises(RuntimeError, match="requires a summary writer"):
        sv.summary_computed(sess, b"")
    sv.stop()
    sess.close()


def test_non_chief_supervisor(model):
    with pytest.raises(ValueError, match="all Variables must have their device set"):
        kf.train.Supervisor(is_chief=False)
    g = kf.Graph()
    with g.as_default(), kf.device("/cpu:0"):
        v = kf.Variable(1.0, name="v")
    sv = kf.train.Supervisor(graph=g, is_chief=False, recovery_wait_secs=0.05)
    with pytest.raises(RuntimeError, match="Only chief supervisor can start standard services"):
        sv.start_standard_services(None)
    # A fresh embedded session never sees a chief's initialization: the worker gives up.
    with pytest.raises(errors.DeadlineExceededError):
        sv.prepare_or_wait_for_session(max_wait_secs=0.2)
    assert sv.save_path is None and sv.summary_writer is None and v.device


def test_queue_runners_run_on_the_supervisor_coordinator(model):
    q = kf.FIFOQueue(4, kf.float32, shapes=[[]])
    kf.train.add_queue_runner(kf.train.QueueRunner(q, [q.enqueue(3.0)]))
    value = q.dequeue()
    sv = kf.train.Supervisor(save_model_secs=0)
    with sv.managed_session() as sess:
        assert [sess.run(value) for _ in range(6)] == [3.0] * 6
    assert sv.coord.joined and sv.should_stop()


def test_chief_writes_events_to_logdir(make_model, tmp_path):
    import glob
    d = str(tmp_path)
    m = make_model()
    with m.graph.as_default():
        kf.summary.scalar("train_loss", m.loss)
        sv = kf.train.Supervisor(logdir=d, save_model_secs=3600, save_summaries_secs=0.05)
        assert isinstance(sv.summary_writer, kf.summary.FileWriter)
        assert sv.summary_op is not None  # merge_all() of the SUMMARIES collection, as TF1
        with sv.managed_session() as sess:
            for _ in range(3):
                sess.run(m.train_op)
            assert _wait_for(lambda: sess.run(m.global_step) == 3)
            time.sleep(0.3)  # a few summary and step-counter periods
    files = glob.glob(os.path.join(d, "events.out.tfevents.*"))
    assert len(files) == 1
    events = list(kf.train.summary_iterator(files[0]))
    assert any(e.graph_def for e in events) and any(e.meta_graph_def for e in events)
    assert [e.session_log.status for e in events if e.HasField("session_log")][:1] == \
        [kf.summary.SessionLog.START]
    tags = {v.tag for e in events if e.HasField("summary") for v in e.summary.value}
    assert "train_loss" in tags and m.global_step.op.name + "/sec" in tags
