"""Tests of kf.summary (kernflow/core/summary/): summary ops, FileWriter event files, protos.

Expected values were observed with TensorFlow 2.21's tf.compat.v1.summary.
"""

import glob
import io
import os
import threading
import time

import numpy as np
import pytest

import kernflow.core as kf
from kernflow.core import summary as S
from kernflow.core.data.tfrecord import tf_record_iterator
from kernflow.core.ops import summary_ops
from kernflow.core.protobuf.event_pb2 import Event
from kernflow.core.testing import kernel_contract
from kernflow.core.testing.op_cases import summary as summary_cases


def _run(t):
    with kf.Session(graph=t.graph) as sess:
        return S.Summary.FromString(sess.run(t))


@pytest.mark.parametrize("case", summary_cases.CASES, ids=lambda c: c.id)
def test_contract_cases(case):
    kernel_contract.run_case(case)


def test_protos_serialize_as_tensorflow():
    # Bytes of TF's Summary/Event for the same fields (observed).
    ev = Event(wall_time=1.25, step=7, summary=S.Summary(value=[S.Summary.Value(tag="a", simple_value=1.5)]))
    assert ev.SerializeToString().hex() == "09000000000000f43f10072a0a0a080a0161150000c03f"
    log = Event(step=4, session_log=S.SessionLog(status=S.SessionLog.START))
    assert log.SerializeToString() == b"\x10\x04:\x02\x08\x01"


def test_scalar_tags_follow_name_scopes_and_collections():
    g = kf.Graph()
    with g.as_default():
        with kf.name_scope("outer"):
            a = S.scalar("loss", kf.constant(1.5))
            b = S.scalar("loss", 2.0)
        c = S.scalar("a b!", 1.0, family="fam")
        d = S.scalar("/lead", 1.0, collections=["mine"])
        names = [a.op.name, b.op.name, c.op.name, d.op.name]
        assert names == ["outer/loss", "outer/loss_1", "fam/a_b_", "lead"]
        assert g.get_collection(kf.GraphKeys.SUMMARIES) == [a, b, c]
        assert g.get_collection("mine") == [d]
        assert a.op.type == "ScalarSummary" and a.shape.rank == 0
        merged = S.merge_all()
        assert merged.op.name == "Merge/MergeSummary"
    s = _run(merged)
    assert [(v.tag, v.simple_value) for v in s.value] == [("outer/loss", 1.5), ("outer/loss_1", 2.0),
                                                          ("fam/fam/a_b_", 1.0)]
    with kf.Graph().as_default():
        assert S.merge_all() is None


def test_histogram_buckets_equal_tensorflow():
    x = np.array([-3.0, -0.5, 0.0, 0.0, 1e-13, 0.7, 2.0, 2.0, 100.0], np.float32)
    with kf.Graph().as_default():
        h = _run(S.histogram("w", kf.constant(x))).value[0].histo
    assert (h.min, h.max, h.num) == (-3, 100, 9)
    assert h.sum == 101.19999998807917 and h.sum_squares == 10017.739999983311
    assert list(h.bucket_limit) == [-3.1665833053880363, -2.8787120958073054, -0.51776167404891815,
                                    -0.47069243095356195, 0, 1e-12, 0.68914078815911028, 0.75805486697502134,
                                    1.9661990955585713, 2.1628190051144287, 97.88757810018231,
                                    107.67633591020055, 1.7976931348623157e+308]
    assert list(h.bucket) == [0, 1, 0, 1, 0, 3, 0, 1, 0, 2, 0, 1, 0]


def test_histogram_empty_and_nan():
    with kf.Graph().as_default():
        h = _run(S.histogram("e", kf.zeros([0]))).value[0].histo
        bad = S.histogram("h", kf.constant([1.0, float("nan")]))
        inf = S.histogram("i", kf.constant([float("inf")]))
        with kf.Session() as sess:
            with pytest.raises(kf.errors.InvalidArgumentError, match="Nan in summary histogram for: h"):
                sess.run(bad)
            with pytest.raises(kf.errors.InvalidArgumentError, match="Infinity in summary histogram"):
                sess.run(inf)
    assert (h.min, h.max, h.num, list(h.bucket_limit), list(h.bucket)) == (
        1.7976931348623157e+308, -1.7976931348623157e+308, 0, [1.7976931348623157e+308], [0])


def _pixels(value):
    from PIL import Image
    return np.asarray(Image.open(io.BytesIO(value.image.encoded_image_string))).tolist()


def test_image_png_decodes_with_tensorflow_scaling():
    rgb = np.array([[[[0.0, 0.2, 0.4], [1.0, 0.5, 0.3]]]], np.float32)
    rgba = np.array([[[[0.0, 0.2, 0.4, 1.0], [3.0, -0.5, 0.3, 1.0]]]], np.float64)
    with kf.Graph().as_default():
        with kf.name_scope("outer"):
            s = _run(S.image("img", kf.constant(np.concatenate([rgb] * 4)), max_outputs=3))
        one = _run(S.image("one", kf.zeros([2, 2, 3, 1], kf.uint8) + 7, max_outputs=1))
        four = _run(S.image("rgba", kf.constant(rgba)))
    assert [v.tag for v in s.value] == ["outer/img/image/0", "outer/img/image/1", "outer/img/image/2"]
    assert (s.value[0].image.height, s.value[0].image.width, s.value[0].image.colorspace) == (1, 2, 3)
    assert _pixels(s.value[2]) == [[[0, 51, 102], [255, 127, 76]]]
    assert [v.tag for v in one.value] == ["one/image"] and _pixels(one.value[0]) == [[7, 7, 7]] * 2
    assert _pixels(four.value[0]) == [[[128, 136, 144, 170], [254, 106, 140, 170]]]


def test_image_and_audio_bad_shapes():
    with kf.Graph().as_default():
        im = S.image("bad", kf.zeros([2, 2, 2, 2]))
        au = S.audio("bad", kf.zeros([2, 2, 2, 2]), 100)
        sc = summary_ops.scalar_summary(["a", "b"], [1.0])
        with kf.Session() as sess:
            with pytest.raises(kf.errors.InvalidArgumentError, match=r"1, 3, or 4, not \[2, 2, 2, 2\]"):
                sess.run(im)
            with pytest.raises(kf.errors.InvalidArgumentError, match="must be 3-D or 2-D"):
                sess.run(au)
            with pytest.raises(kf.errors.InvalidArgumentError, match=r"not the same shape: \[2\] != \[1\]"):
                sess.run(sc)


def test_audio_wav_multichannel():
    import wave
    x = np.linspace(-1, 1, 8, dtype=np.float32).reshape(1, 4, 2)
    with kf.Graph().as_default():
        v = _run(S.audio("snd", kf.constant(x), 8000)).value[0]
    assert v.tag == "snd/audio/0" and (v.audio.num_channels, v.audio.length_frames) == (2, 4)
    # TF's WAV (observed): 16-bit little-endian, samples x * 32768 rounded and clipped.
    assert v.audio.encoded_audio_string[44:] == b"\x00\x80\x92\xa4%\xc9\xb7\xedI\x12\xdb6n[\xff\x7f"
    with wave.open(io.BytesIO(v.audio.encoded_audio_string)) as w:
        assert (w.getnchannels(), w.getframerate(), w.getnframes()) == (2, 8000, 4)


def test_text_tensor_summary_and_description():
    with kf.Graph().as_default() as g:
        t = _run(S.text("txt", kf.constant("hello"))).value[0]
        ts = _run(S.tensor_summary("tens", kf.constant([1, 2]), summary_description="desc",
                                   display_name="dn")).value[0]
        with pytest.raises(ValueError, match="to have dtype string"):
            S.text("t", kf.constant(1))
        summary_ops.tensor_summary(kf.constant(1.0), description='{"type_hint": "scalar"}', name="v1")
        assert S.get_summary_description(g.get_operation_by_name("v1").node_def).type_hint == "scalar"
        with pytest.raises(ValueError, match="Can't get_summary_description on Const"):
            S.get_summary_description(g.get_operation_by_name("Const").node_def)
    assert t.metadata.plugin_data.plugin_name == "text" and list(t.tensor.string_val) == [b"hello"]
    assert (ts.metadata.summary_description, ts.metadata.display_name) == ("desc", "dn")
    assert kf.make_ndarray(ts.tensor).tolist() == [1, 2]
    assert S.all_v2_summary_ops() == []


def test_merge_errors():
    with kf.Graph().as_default():
        s = S.scalar("dup", 1.0)
        dup = S.merge([s, s])
        junk = S.merge([kf.constant(b"garbage\xff")])
        with kf.Session() as sess:
            with pytest.raises(kf.errors.InvalidArgumentError, match="Duplicate tag dup found"):
                sess.run(dup)
            with pytest.raises(kf.errors.InvalidArgumentError, match="Could not parse one of the summary"):
                sess.run(junk)


def _events(logdir):
    (path,) = glob.glob(os.path.join(logdir, "events.out.tfevents.*"))
    return path, [Event.FromString(r) for r in tf_record_iterator(path)]


def test_file_writer_writes_event_file(tmp_path):
    g = kf.Graph()
    with g.as_default():
        merged = S.merge([S.scalar("x", 2.0), S.text("t", kf.constant("a"))])
    with kf.Session(graph=g) as sess:
        blob = sess.run(merged)
    w = S.FileWriter(str(tmp_path / "logs"), graph=g, filename_suffix=".sfx")
    assert w.get_logdir() == str(tmp_path / "logs")
    w.add_summary(blob, global_step=3)
    w.add_summary(S.Summary.FromString(blob), global_step=4)
    w.add_session_log(S.SessionLog(status=S.SessionLog.START), 5)
    w.add_run_metadata(kf.RunMetadata(), "step1")
    with pytest.raises(ValueError, match="already used"):
        w.add_run_metadata(kf.RunMetadata(), "step1")
    with pytest.raises(TypeError, match="must be type MetaGraphDef"):
        w.add_meta_graph(kf.GraphDef())
    w.close()
    path, events = _events(str(tmp_path / "logs"))
    assert path.endswith(".sfx") and ".tfevents." in path
    assert events[0].file_version == "brain.Event:2" and events[0].wall_time == int(events[0].wall_time)
    assert [e.WhichOneof("what") for e in events[1:]] == ["graph_def", "summary", "summary", "session_log",
                                                          "tagged_run_metadata"]
    assert kf.GraphDef.FromString(events[1].graph_def).node[0].name == g.get_operations()[0].name
    assert [e.step for e in events[2:5]] == [3, 4, 5]
    # Metadata is written only with the first value of each tag.
    assert events[2].summary.value[1].HasField("metadata")
    assert not events[3].summary.value[1].HasField("metadata")
    assert events[3].summary.value[0].simple_value == 2.0
    assert [e.step for e in S.summary_iterator(path)] == [e.step for e in events]


def test_file_writer_flush_and_reopen(tmp_path):
    logdir = str(tmp_path)
    with S.FileWriter(logdir, max_queue=2, flush_secs=3600) as w:
        for step in range(5):  # more than max_queue: the writer thread drains the queue
            w.add_summary(S.Summary(value=[S.Summary.Value(tag="s", simple_value=step)]), step)
        w.flush()  # returns once everything added is on disk, without closing
        _, events = _events(logdir)
        assert [e.step for e in events[1:]] == [0, 1, 2, 3, 4]
    w.add_summary(S.Summary(), 9)  # ignored once closed
    w.reopen()
    w.add_summary(S.Summary(), 10)
    w.close()
    files = sorted(glob.glob(os.path.join(logdir, "events.out.tfevents.*")))
    assert len(files) == 2
    steps = [[e.step for e in S.summary_iterator(f)] for f in files]
    assert sorted(steps) == sorted([[0, 0, 1, 2, 3, 4], [0, 10]])


def test_file_writer_cache(tmp_path):
    a = S.FileWriterCache.get(str(tmp_path / "a"))
    assert S.FileWriterCache.get(str(tmp_path / "a")) is a
    assert S.FileWriterCache.get(str(tmp_path / "b")) is not a
    S.FileWriterCache.clear()
    assert S.FileWriterCache.get(str(tmp_path / "a")) is not a
    S.FileWriterCache.clear()


def _steps_on_disk(logdir):
    _, events = _events(logdir)
    return [e.step for e in events[1:]]


def test_file_writer_add_never_waits_for_disk_only_for_a_full_queue(tmp_path, in_thread):
    logdir = str(tmp_path)
    w = S.FileWriter(logdir, max_queue=4, flush_secs=3600)
    disk, real_write = threading.Event(), w.event_writer._file.write
    w.event_writer._file.write = lambda data: (disk.wait(), real_write(data))  # a stalled disk
    # Events of half the wake-up size: the writer thread is woken every two (a batch), then add may
    # run max_queue events ahead of it before blocking.
    from kernflow.core.summary import writer as _writer
    summary = S.Summary(value=[S.Summary.Value(tag="s" * (_writer._WAKE_BYTES // 2), simple_value=1.0)])
    t0 = time.monotonic()
    for step in range(4):  # up to max_queue pending events: enqueued without waiting
        w.add_summary(summary, step)
    assert time.monotonic() - t0 < 1.0
    more, box = in_thread(lambda: [w.add_summary(summary, step) for step in range(4, 16)])
    more.join(0.3)
    assert more.is_alive()  # the queue is full while the writer thread waits for the disk: add blocks
    disk.set()
    more.join(10)
    assert not more.is_alive() and box[0][0] == "ok"
    w.flush()
    assert _steps_on_disk(logdir) == list(range(16))
    w.close()


def test_file_writer_writes_a_few_pending_events_by_flush_secs(tmp_path):
    logdir = str(tmp_path)
    with S.FileWriter(logdir, max_queue=10, flush_secs=0.2) as w:
        w.add_summary(S.Summary(value=[S.Summary.Value(tag="s", simple_value=1.0)]), 7)
        deadline = time.monotonic() + 10
        while _steps_on_disk(logdir) != [7] and time.monotonic() < deadline:
            time.sleep(0.05)  # one event wakes no thread; the flush_secs timer writes it
        assert _steps_on_disk(logdir) == [7]
