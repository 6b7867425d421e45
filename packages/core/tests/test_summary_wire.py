"""Tests of kernflow/core/summary/wire.py: summaries that remember their tags, events encoded by hand.

The fast path (a summary op's output going into an event without a parse) must write exactly the
bytes the protobuf path writes, and MergeSummary must reject what it rejected before.
"""

import glob
import os

import numpy as np
import pytest

import kernflow.core as kf
from kernflow.core import summary as S
from kernflow.core.data.tfrecord import tf_record_iterator
from kernflow.core.framework import errors
from kernflow.core.ops import summary_ops
from kernflow.core.protobuf.event_pb2 import Event
from kernflow.core.summary import wire
from kernflow.core.summary import writer as writer_mod


@pytest.mark.parametrize("step", [None, 0, 1, 127, 128, 300, 2 ** 40, -1, -3, np.int64(77)])
@pytest.mark.parametrize("wall_time", [0.0, 1.25, 1764340000.123456])
def test_event_bytes_equal_protobuf(step, wall_time):
    summary = S.Summary(value=[S.Summary.Value(tag="loss", simple_value=0.5)]).SerializeToString()
    expected = Event(wall_time=wall_time, summary=S.Summary.FromString(summary))
    if step is not None:
        expected.step = int(step)
    assert wire.event_bytes(wall_time, step, summary) == expected.SerializeToString()


def test_event_bytes_of_an_empty_summary():
    assert wire.event_bytes(2.0, 3, b"") == Event(wall_time=2.0, step=3, summary=S.Summary()).SerializeToString()


def _merged_graph(dup=False):
    g = kf.Graph()
    with g.as_default():
        a = summary_ops.scalar_summary("loss", kf.constant(1.5))
        b = summary_ops.scalar_summary("loss" if dup else "acc", kf.constant(0.25))
        m = kf.summary.merge([a, b])
    return g, a, b, m


def test_summary_ops_return_summary_bytes_with_their_tags():
    g, a, _, m = _merged_graph()
    with kf.Session(graph=g) as sess:
        one, merged = sess.run([a, m])
    assert type(one) is wire.SummaryBytes and one.tags == ("loss",) and not one.has_metadata
    assert type(merged) is wire.SummaryBytes and merged.tags == ("loss", "acc")
    assert [(v.tag, v.simple_value) for v in S.Summary.FromString(merged).value] == [("loss", 1.5), ("acc", 0.25)]


def test_merge_rejects_duplicate_tags_without_parsing():
    g, _, _, m = _merged_graph(dup=True)
    with kf.Session(graph=g) as sess:
        with pytest.raises(errors.InvalidArgumentError, match="Duplicate tag loss found in summary inputs"):
            sess.run(m)


def test_merge_of_fed_bytes_and_op_outputs():
    # A fed (plain bytes) summary is parsed; an op's is not; duplicates across the two are caught.
    g = kf.Graph()
    with g.as_default():
        fed = kf.placeholder(kf.string, [])
        m = kf.summary.merge([fed, kf.summary.scalar("acc", kf.constant(0.25))])
    with kf.Session(graph=g) as sess:
        other = S.Summary(value=[S.Summary.Value(tag="lr", simple_value=0.1)]).SerializeToString()
        out = sess.run(m, {fed: other})
        assert out.tags == ("lr", "acc")
        assert [v.tag for v in S.Summary.FromString(out).value] == ["lr", "acc"]
        dup = S.Summary(value=[S.Summary.Value(tag="acc", simple_value=0.1)]).SerializeToString()
        with pytest.raises(errors.InvalidArgumentError, match="Duplicate tag acc"):
            sess.run(m, {fed: dup})
        with pytest.raises(errors.InvalidArgumentError, match="Could not parse one of the summary inputs"):
            sess.run(m, {fed: b"\xff\xff\xff"})
        meta = S.Summary(value=[S.Summary.Value(tag="t", metadata=S.SummaryMetadata(display_name="x"))])
        assert sess.run(m, {fed: meta.SerializeToString()}).has_metadata


def _records(logdir):
    (path,) = glob.glob(os.path.join(logdir, "events.out.tfevents.*"))
    return list(tf_record_iterator(path))


def test_file_writer_fast_path_writes_the_protobuf_paths_bytes(tmp_path, monkeypatch):
    monkeypatch.setattr(writer_mod.time, "time", lambda: 1764340000.5)
    g, _, _, m = _merged_graph()
    with kf.Session(graph=g) as sess:
        merged = sess.run(m)
    assert type(merged) is wire.SummaryBytes
    fast, slow = str(tmp_path / "fast"), str(tmp_path / "slow")
    with S.FileWriter(fast) as w:
        for step in (None, 0, 5, 1 << 33):
            w.add_summary(merged, step)
    with S.FileWriter(slow) as w:
        for step in (None, 0, 5, 1 << 33):
            w.add_summary(bytes(merged), step)   # plain bytes: parsed, as before
    assert _records(fast) == _records(slow)
    events = [Event.FromString(r) for r in _records(fast)[1:]]
    assert [e.step for e in events] == [0, 0, 5, 1 << 33]
    assert all(e.summary.value[0].tag == "loss" for e in events)


def test_the_writer_thread_encodes_the_step_the_caller_gave(tmp_path):
    # A summary op's output is encoded on the writer thread; the step is taken when add_summary
    # is called: a numpy step, even a mutable 0-d array changed afterwards, is written as it was.
    g, _, _, m = _merged_graph()
    with kf.Session(graph=g) as sess:
        merged = sess.run(m)
    step = np.array(7, np.int64)
    with S.FileWriter(str(tmp_path)) as w:
        w.add_summary(merged, step)
        step[()] = 99
        w.add_summary(merged, np.int64(8))
        with pytest.raises((TypeError, ValueError)):
            w.add_summary(merged, "not a step")      # fails here, not on the writer thread
        w.add_summary(merged, 9)
    events = [Event.FromString(r) for r in _records(str(tmp_path))[1:]]
    assert [e.step for e in events] == [7, 8, 9]
    assert all(e.summary == events[0].summary for e in events)


@pytest.mark.parametrize("tag", ["loss", "global_step/sec", "x" * 200, "ü/é"])
@pytest.mark.parametrize("value", [0.0, 1.5, -3.25e10, float("inf"), float("nan"), 1e39, -1e39])
def test_scalar_summary_bytes_equal_protobuf(tag, value):
    ref = S.Summary(value=[S.Summary.Value(tag=tag, simple_value=value)]).SerializeToString()
    got = wire.scalar_summary(tag, value)
    assert got == ref and got.tags == (tag,) and not got.has_metadata
