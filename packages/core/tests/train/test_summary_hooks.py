"""The hooks that write TensorBoard events (basic_session_run_hooks.py): SummarySaverHook,
StepCounterHook's global_step/sec, CheckpointSaverHook's graph/meta graph/CHECKPOINT events, and the
hooks MonitoredTrainingSession adds for them. Expected events follow TF1's hooks."""

import glob
import os

import pytest

import kernflow.core as kf
from kernflow.core.protobuf.graph_pb2 import GraphDef
from kernflow.core.protobuf.meta_graph_pb2 import MetaGraphDef

START, CHECKPOINT = kf.summary.SessionLog.START, kf.summary.SessionLog.CHECKPOINT


@pytest.fixture(autouse=True)
def _close_cached_writers():
    yield
    kf.summary.FileWriterCache.clear()


def _events(logdir):
    """Every event written to `logdir` (after the cached writer flushed), file_version left out."""
    kf.summary.FileWriterCache.get(str(logdir)).flush()
    files = sorted(glob.glob(os.path.join(str(logdir), "events.out.tfevents.*")))
    assert len(files) == 1, files
    return [e for e in kf.train.summary_iterator(files[0]) if not e.file_version]


def _scalars(events, tag):
    return [(e.step, v.simple_value) for e in events if e.HasField("summary")
            for v in e.summary.value if v.tag == tag]


def _session_logs(events):
    return [(e.step, e.session_log.status, e.session_log.checkpoint_path) for e in events
            if e.HasField("session_log")]


def _train(sess, op, fetch, steps):
    return [sess.run([op, fetch])[1] for _ in range(steps)]


def test_summary_saver_hook_writes_start_and_every_n_steps(model, tmp_path, step_reading):
    summary = kf.summary.scalar("mse", model.loss)
    hook = kf.train.SummarySaverHook(save_steps=2, output_dir=str(tmp_path), summary_op=summary)
    with kf.train.MonitoredSession(hooks=[hook]) as sess:
        losses = _train(sess, model.train_op, model.loss, 5)
    events = _events(tmp_path)
    assert _session_logs(events) == [(1, START, "")]
    # Stamped with the global step after the step ran; the value is the loss that step computed.
    assert _scalars(events, "mse") == [(1, pytest.approx(losses[0])), (3, pytest.approx(losses[2])),
                                        (5, pytest.approx(losses[4]))]
    assert losses[4] < losses[0]
    graphs = [e for e in events if e.graph_def]
    assert len(graphs) == 1  # FileWriterCache's writer writes the default graph once
    assert "loss" in {n.name for n in GraphDef.FromString(graphs[0].graph_def).node}


def test_summary_saver_hook_takes_the_scaffold_summary_op_and_a_writer(model, tmp_path):
    kf.summary.scalar("w_sum", kf.reduce_sum(model.w))
    kf.summary.histogram("weights", model.w)
    scaffold = kf.train.Scaffold()
    writer = kf.summary.FileWriter(str(tmp_path))
    hook = kf.train.SummarySaverHook(save_secs=3600, summary_writer=writer, scaffold=scaffold)
    with kf.train.MonitoredSession(session_creator=kf.train.ChiefSessionCreator(scaffold=scaffold),
                                   hooks=[hook]) as sess:
        _train(sess, model.train_op, model.loss, 4)
    writer.close()
    assert scaffold.summary_op is not None  # kf.summary.merge_all() of the two summaries
    [path] = glob.glob(os.path.join(str(tmp_path), "events.out.tfevents.*"))
    events = [e for e in kf.train.summary_iterator(path) if e.HasField("summary")]
    assert [e.step for e in events] == [1]  # every hour: only the first step
    values = {v.tag: v for v in events[0].summary.value}
    assert set(values) == {"w_sum", "weights"} and values["weights"].histo.num == 2


def test_summary_saver_hook_arguments(model, tmp_path):
    summary = kf.summary.scalar("mse", model.loss)
    with pytest.raises(ValueError, match="Exactly one of scaffold or summary_op"):
        kf.train.SummarySaverHook(save_steps=1, output_dir=str(tmp_path))
    with pytest.raises(ValueError, match="Exactly one of scaffold or summary_op"):
        kf.train.SummarySaverHook(save_steps=1, scaffold=kf.train.Scaffold(), summary_op=summary)
    with pytest.raises(ValueError, match="Either every_secs or every_steps"):
        kf.train.SummarySaverHook(output_dir=str(tmp_path), summary_op=summary)
    with kf.Graph().as_default():
        loose = kf.train.SummarySaverHook(save_steps=1, output_dir=str(tmp_path),
                                          summary_op=kf.summary.scalar("c", 1.0))
        with pytest.raises(RuntimeError, match="Global step should be created to use SummarySaverHook"):
            loose.begin()


def test_summary_saver_hook_without_a_writer_fetches_nothing(model):
    summary = kf.summary.scalar("mse", model.loss)
    hook = kf.train.SummarySaverHook(save_steps=1, summary_op=summary)
    with kf.train.MonitoredSession(hooks=[hook]) as sess:
        sess.run(model.train_op)
        hook.begin()  # the same graph: no writer, so no summary is requested
        args = hook.before_run(None)
    # only the global step (a bare tensor: the request of every step that saves nothing)
    assert isinstance(args.fetches, kf.Tensor) and args.fetches.op.name.startswith("global_step"), args


def test_step_counter_hook_writes_global_step_per_second(model, tmp_path, step_reading):
    hook = kf.train.StepCounterHook(every_n_steps=2, output_dir=str(tmp_path))
    with kf.train.MonitoredSession(hooks=[hook]) as sess:
        _train(sess, model.train_op, model.loss, 7)
    rates = _scalars(_events(tmp_path), "global_step/sec")
    assert [step for step, _ in rates] == [3, 5, 7]  # the first trigger (step 1) only starts the clock
    assert all(rate > 0 for _, rate in rates)


def test_checkpoint_saver_hook_writes_graph_meta_graph_and_checkpoint_logs(model, tmp_path, step_reading):
    d = str(tmp_path)
    hook = kf.train.CheckpointSaverHook(d, save_steps=3)
    with kf.train.MonitoredSession(hooks=[hook]) as sess:
        _train(sess, model.train_op, model.loss, 4)
    events = _events(tmp_path)
    prefix = os.path.join(d, "model.ckpt")
    assert _session_logs(events) == [(0, CHECKPOINT, prefix), (3, CHECKPOINT, prefix),
                                     (4, CHECKPOINT, prefix)]
    graphs = [GraphDef.FromString(e.graph_def) for e in events if e.graph_def]
    assert len(graphs) == 2  # the cache's writer at begin, the complete graph after creation
    assert any(n.op == "SaveV2" for n in graphs[-1].node)  # the scaffold's saver was built by then
    [meta] = [MetaGraphDef.FromString(e.meta_graph_def) for e in events if e.meta_graph_def]
    assert meta.saver_def.save_tensor_name and len(meta.graph_def.node) == len(graphs[-1].node)
    assert "variables" in meta.collection_def


def test_checkpoint_saver_hook_without_graph_def_writes_only_checkpoint_logs(model, tmp_path):
    hook = kf.train.CheckpointSaverHook(str(tmp_path), save_steps=10, save_graph_def=False)
    with kf.train.MonitoredSession(hooks=[hook]) as sess:
        _train(sess, model.train_op, model.loss, 2)
    events = _events(tmp_path)
    assert [s for s, *_ in _session_logs(events)] == [0, 2]
    assert not [e for e in events if e.meta_graph_def]


def test_monitored_training_session_saves_summaries(model, tmp_path, step_reading):
    kf.summary.scalar("mse", model.loss)
    with kf.train.MonitoredTrainingSession(checkpoint_dir=str(tmp_path), save_summaries_steps=2,
                                           log_step_count_steps=2, save_checkpoint_steps=100,
                                           hooks=[kf.train.StopAtStepHook(last_step=5)]) as sess:
        while not sess.should_stop():
            sess.run(model.train_op)
    events = _events(tmp_path)
    assert [s for s, _ in _scalars(events, "mse")] == [1, 3, 5]
    assert [s for s, _ in _scalars(events, "global_step/sec")] == [3, 5]
    logs = [(s, status) for s, status, _ in _session_logs(events)]
    assert logs[0] == (0, CHECKPOINT) and (1, START) in logs and logs[-1] == (5, CHECKPOINT)


def _flat(fetches):
    if isinstance(fetches, dict):
        fetches = list(fetches.values())
    if isinstance(fetches, (list, tuple)):
        return [x for f in fetches for x in _flat(f)]
    return [fetches]


def test_the_global_step_hooks_fetch_it_only_where_the_session_cannot_read_it(model, tmp_path,
                                                                            step_reading, monkeypatch):
    from kernflow.core.train import training_util
    kf.summary.scalar("mse", model.loss)
    read_tensor = training_util.get_or_create_global_step_read()
    calls = []
    with kf.train.MonitoredTrainingSession(checkpoint_dir=str(tmp_path), save_summaries_steps=3,
                                           log_step_count_steps=3, save_checkpoint_steps=4,
                                           hooks=[kf.train.StopAtStepHook(last_step=7)]) as sess:
        run = kf.Session.run

        def recording_run(self, fetches, *args, **kwargs):
            calls.append(_flat(fetches))
            return run(self, fetches, *args, **kwargs)
        monkeypatch.setattr(kf.Session, "run", recording_run)   # (the steps from here on)
        while not sess.should_stop():
            sess.run(model.train_op)
        monkeypatch.undo()
    steps = [c for c in calls if model.train_op in c]
    assert len(steps) == 7   # StopAtStepHook stopped at the global step 7 either way
    summaries = [i + 1 for i, c in enumerate(steps)   # (the scaffold's merged summary op)
                 if any(f.op.type == "MergeSummary" for f in c if isinstance(f, kf.Tensor))]
    assert summaries == [1, 4, 7]
    others = [c for c in calls if model.train_op not in c]
    saves = [c for c in others if all(isinstance(f, str) for f in c)]   # (Saver.save's names)
    assert len(saves) == 1   # at the global step 4 (0 at creation, 7 in end(): not recorded)
    if step_reading == "read":   # nothing but the caller's op and, every 3 steps, the summary
        assert all(read_tensor not in c for c in calls)
        assert others == saves   # and no second run for the step's value after the update
    else:                        # TF's way: the read in every step, re-read before acting
        assert all(read_tensor in c for c in steps)
        assert len(others) > 1 and all(c == [read_tensor] for c in others if c not in saves)
    events = _events(tmp_path)
    assert [s for s, _ in _scalars(events, "mse")] == [1, 4, 7]
    assert [s for s, _ in _scalars(events, "global_step/sec")] == [4, 7]
    assert kf.train.latest_checkpoint(str(tmp_path)).endswith("model.ckpt-7")


def test_monitored_training_session_summary_dir_and_defaults(make_model, tmp_path):
    m = make_model()
    with m.graph.as_default():
        kf.summary.scalar("mse", m.loss)
        # The default: every 100 steps, into summary_dir (no checkpoint_dir needed).
        sess = kf.train.MonitoredTrainingSession(summary_dir=str(tmp_path / "s"), log_step_count_steps=0)
        kinds = [type(h).__name__ for h in sess._hooks]
        assert kinds == ["SummarySaverHook"] and sess._hooks[0]._timer._every_steps == 100
        for _ in range(3):
            sess.run(m.train_op)
        sess.close()
        assert [s for s, _ in _scalars(_events(tmp_path / "s"), "mse")] == [1]
        sess = kf.train.MonitoredTrainingSession(summary_dir=str(tmp_path / "t"), log_step_count_steps=0,
                                                 save_summaries_steps=None, save_summaries_secs=None)
        assert sess._hooks == []
        sess.close()
        sess = kf.train.MonitoredTrainingSession(summary_dir=str(tmp_path / "u"), log_step_count_steps=0,
                                                 save_summaries_secs=30)
        timer = sess._hooks[0]._timer
        assert (timer._every_steps, timer._every_secs) == (None, 30)
        sess.close()


def test_profiler_hook_saves_timelines_and_run_metadata(model, tmp_path):
    import json
    from kernflow.core.protobuf.config_pb2 import RunMetadata
    hook = kf.train.ProfilerHook(save_steps=2, output_dir=str(tmp_path), show_memory=True)
    with kf.train.MonitoredSession(hooks=[hook]) as sess:
        _train(sess, model.train_op, model.loss, 5)
    # The first step only starts the timer at its global step (0, as TF): steps 2 and 4 are traced,
    # named by the global step after them.
    files = sorted(os.path.basename(p) for p in glob.glob(os.path.join(str(tmp_path), "timeline-*.json")))
    assert files == ["timeline-2.json", "timeline-4.json"]
    with open(os.path.join(str(tmp_path), "timeline-2.json"), encoding="utf-8") as f:
        trace = json.load(f)
    ops = {e["args"]["name"] for e in trace["traceEvents"] if e.get("ph") == "X"}
    assert any(name.startswith("gradients") for name in ops), ops
    assert any(e.get("ph") == "C" for e in trace["traceEvents"])  # show_memory's counters
    tagged = [e.tagged_run_metadata for e in _events(tmp_path) if e.HasField("tagged_run_metadata")]
    assert [t.tag for t in tagged] == ["step_2", "step_4"]
    md = RunMetadata.FromString(tagged[0].run_metadata)
    assert md.step_stats.dev_stats and md.cost_graph.node


def test_profiler_hook_needs_a_global_step(tmp_path):
    with kf.Graph().as_default():
        kf.Variable(1.0)
        hook = kf.train.ProfilerHook(save_steps=1, output_dir=str(tmp_path))
        with pytest.raises(RuntimeError, match="Global step should be created to use ProfilerHook"):
            hook.begin()
    with pytest.raises(ValueError):
        kf.train.ProfilerHook(output_dir=str(tmp_path))
