"""kernflow's event files read by TensorBoard's own reader (EventAccumulator): every summary kind,
the graph and meta graph, and run metadata. tensorboard is a test dependency (requirements-dev.txt),
so these tests fail rather than skip when it is missing."""

import io

import numpy as np
import pytest
from tensorboard.backend.event_processing import event_accumulator as ea
from tensorboard.util import tensor_util as tb_tensor_util

import kernflow.core as kf

# Keep every event of every kind (TensorBoard samples by default).
_KEEP_ALL = {kind: 0 for kind in (ea.SCALARS, ea.HISTOGRAMS, ea.COMPRESSED_HISTOGRAMS, ea.IMAGES,
                                  ea.AUDIO, ea.TENSORS)}


def _accumulator(logdir):
    acc = ea.EventAccumulator(str(logdir), size_guidance=_KEEP_ALL)
    acc.Reload()
    return acc


def _write_steps(logdir, graph, merged, steps, feed=None):
    with kf.Session(graph=graph) as sess, kf.summary.FileWriter(str(logdir), graph) as writer:
        for step in range(steps):
            writer.add_summary(sess.run(merged, feed(step) if feed else None), global_step=step)


def test_scalars(tmp_path):
    g = kf.Graph()
    with g.as_default():
        v = kf.placeholder(kf.float32, [], name="v")
        with kf.name_scope("train"):
            kf.summary.scalar("loss", v)
        kf.summary.scalar("twice", v * 2, family="fam")
        merged = kf.summary.merge_all()
    _write_steps(tmp_path, g, merged, 5, feed=lambda s: {v: 1.0 / (s + 1)})
    acc = _accumulator(tmp_path)
    assert sorted(acc.Tags()[ea.SCALARS]) == ["fam/fam/twice", "train/loss"]
    loss = acc.Scalars("train/loss")
    assert [e.step for e in loss] == [0, 1, 2, 3, 4]
    np.testing.assert_allclose([e.value for e in loss], [1, 1 / 2, 1 / 3, 1 / 4, 1 / 5], rtol=1e-6)
    np.testing.assert_allclose([e.value for e in acc.Scalars("fam/fam/twice")], [2, 1, 2 / 3, 1 / 2, 2 / 5],
                               rtol=1e-6)
    assert all(e.wall_time > 1.6e9 for e in loss)


def test_histograms_have_tensorflow_bucket_layout(tmp_path):
    x = np.array([-3.0, -0.5, 0.0, 0.0, 1e-13, 0.7, 2.0, 2.0, 100.0], np.float32)
    g = kf.Graph()
    with g.as_default():
        kf.summary.histogram("w", kf.constant(x))
        merged = kf.summary.merge_all()
    _write_steps(tmp_path, g, merged, 2)
    acc = _accumulator(tmp_path)
    assert acc.Tags()[ea.HISTOGRAMS] == ["w"]
    [first, second] = acc.Histograms("w")
    h = first.histogram_value
    assert (first.step, second.step) == (0, 1)
    assert (h.min, h.max, h.num) == (-3, 100, 9)
    assert h.sum == pytest.approx(101.2) and h.sum_squares == pytest.approx(10017.74)
    # TF's layout: limits 1e-12 * 1.1^k (mirrored for negatives), empty runs collapsed, DBL_MAX last.
    assert h.bucket_limit == [-3.1665833053880363, -2.8787120958073054, -0.51776167404891815,
                              -0.47069243095356195, 0, 1e-12, 0.68914078815911028, 0.75805486697502134,
                              1.9661990955585713, 2.1628190051144287, 97.88757810018231, 107.67633591020055,
                              1.7976931348623157e+308]
    assert h.bucket == [0, 1, 0, 1, 0, 3, 0, 1, 0, 2, 0, 1, 0]
    # TensorBoard's distributions (compressed histograms) are computed from those buckets.
    compressed = acc.CompressedHistograms("w")[0].compressed_histogram_values
    assert [bp for bp, _ in compressed] == list(ea.NORMAL_HISTOGRAM_BPS)
    assert compressed[0][1] == -3 and compressed[-1][1] == 100


def test_images(tmp_path):
    from PIL import Image
    pixels = np.zeros([2, 3, 4, 3], np.uint8)
    pixels[0, :, :, 0] = 200
    pixels[1, 1, 2] = [10, 20, 30]
    g = kf.Graph()
    with g.as_default():
        kf.summary.image("img", kf.constant(pixels), max_outputs=2)
        merged = kf.summary.merge_all()
    _write_steps(tmp_path, g, merged, 1)
    acc = _accumulator(tmp_path)
    assert sorted(acc.Tags()[ea.IMAGES]) == ["img/image/0", "img/image/1"]
    for i in range(2):
        [event] = acc.Images(f"img/image/{i}")
        assert (event.width, event.height) == (4, 3)
        decoded = np.asarray(Image.open(io.BytesIO(event.encoded_image_string)))
        np.testing.assert_array_equal(decoded, pixels[i])


def test_audio(tmp_path):
    import wave
    clip = np.sin(np.linspace(0, 20, 400, dtype=np.float32)).reshape(1, 400, 1) * 0.5
    g = kf.Graph()
    with g.as_default():
        kf.summary.audio("snd", kf.constant(clip), 16000, max_outputs=1)
        merged = kf.summary.merge_all()
    _write_steps(tmp_path, g, merged, 1)
    acc = _accumulator(tmp_path)
    assert acc.Tags()[ea.AUDIO] == ["snd/audio"]
    [event] = acc.Audio("snd/audio")
    assert (event.content_type, event.sample_rate, event.length_frames) == ("audio/wav", 16000, 400)
    with wave.open(io.BytesIO(event.encoded_audio_string)) as w:
        assert (w.getnchannels(), w.getframerate(), w.getnframes()) == (1, 16000, 400)
        samples = np.frombuffer(w.readframes(400), np.int16)
    np.testing.assert_allclose(samples / 32768.0, clip.ravel(), atol=1 / 32768)


@pytest.mark.filterwarnings("ignore:html5lib's sanitizer is deprecated:DeprecationWarning")
def test_text_and_tensor_summaries(tmp_path):
    g = kf.Graph()
    with g.as_default():
        kf.summary.text("notes", kf.constant([["a", "b"], ["**c**", "d"]]))
        kf.summary.tensor_summary("tens", kf.constant([[1.5, 2.0], [3.0, 4.0]]), display_name="A tensor",
                                  summary_description="a 2x2 tensor")
        merged = kf.summary.merge_all()
    _write_steps(tmp_path, g, merged, 1)
    acc = _accumulator(tmp_path)
    assert sorted(acc.Tags()[ea.TENSORS]) == ["notes", "tens"]
    assert acc.SummaryMetadata("notes").plugin_data.plugin_name == "text"
    [text] = acc.Tensors("notes")
    assert tb_tensor_util.make_ndarray(text.tensor_proto).tolist() == [[b"a", b"b"], [b"**c**", b"d"]]
    from tensorboard.plugins.text import text_plugin
    html = text_plugin.text_array_to_html(tb_tensor_util.make_ndarray(text.tensor_proto),
                                          enable_markdown=True)
    assert "<strong>c</strong>" in html and "<table>" in html
    meta = acc.SummaryMetadata("tens")
    assert (meta.display_name, meta.summary_description) == ("A tensor", "a 2x2 tensor")
    [tensor] = acc.Tensors("tens")
    assert tb_tensor_util.make_ndarray(tensor.tensor_proto).tolist() == [[1.5, 2.0], [3.0, 4.0]]


def test_graph_with_devices_and_meta_graph(tmp_path):
    g = kf.Graph()
    with g.as_default():
        with kf.device("/job:localhost/replica:0/task:0/device:CPU:0"):
            x = kf.placeholder(kf.float32, [None, 3], name="x")
            w = kf.Variable(kf.ones([3, 2]), name="w")
        y = kf.matmul(x, w, name="y")
        meta = kf.train.export_meta_graph(graph=g)
    with kf.summary.FileWriter(str(tmp_path), g) as writer:
        writer.add_meta_graph(meta)
    acc = _accumulator(tmp_path)
    assert acc.Tags()["graph"] and acc.Tags()["meta_graph"]
    nodes = {n.name: n for n in acc.Graph().node}
    assert nodes["x"].device == "/job:localhost/replica:0/task:0/device:CPU:0"
    assert nodes["w"].op == "VariableV2" and nodes["y"].device == ""
    assert list(nodes["y"].input) == ["x", "w/read"]
    assert nodes["y"].attr["_output_shapes"].list.shape[0].dim[1].size == 2  # written with shapes
    assert y.op.name in {n.name for n in acc.MetaGraph().graph_def.node}


def test_run_metadata(tmp_path):
    g = kf.Graph()
    with g.as_default():
        x = kf.placeholder(kf.float32, [4, 4], name="x")
        y = kf.matmul(x, x, name="square")
    md = kf.RunMetadata()
    with kf.Session(graph=g) as sess:
        sess.run(y, {x: np.eye(4, dtype=np.float32)},
                 options=kf.RunOptions(trace_level=kf.RunOptions.FULL_TRACE), run_metadata=md)
    with kf.summary.FileWriter(str(tmp_path), g) as writer:
        writer.add_run_metadata(md, "step1", global_step=1)
    acc = _accumulator(tmp_path)
    assert acc.Tags()[ea.RUN_METADATA] == ["step1"]
    read = acc.RunMetadata("step1")
    nodes = {ns.node_name for ds in read.step_stats.dev_stats for ns in ds.node_stats}
    assert "square" in nodes
    assert [ds.device for ds in read.step_stats.dev_stats] == [ds.device for ds in md.step_stats.dev_stats]


def test_training_hooks_events(tmp_path):
    g = kf.Graph()
    with g.as_default():
        w = kf.Variable(5.0, name="w")
        loss = kf.square(w, name="loss")
        kf.summary.scalar("loss", loss)
        step = kf.train.get_or_create_global_step()
        train = kf.train.GradientDescentOptimizer(0.1).minimize(loss, global_step=step)
        with kf.train.MonitoredTrainingSession(checkpoint_dir=str(tmp_path), save_summaries_steps=1,
                                               log_step_count_steps=1) as sess:
            for _ in range(4):
                sess.run(train)
    kf.summary.FileWriterCache.clear()
    acc = _accumulator(tmp_path)
    # The summary tag "loss" is uniquified against the op named "loss", as in TF.
    values = [(e.step, e.value) for e in acc.Scalars("loss_1")]
    assert [s for s, _ in values] == [1, 2, 3, 4]
    np.testing.assert_allclose([v for _, v in values], [25 * 0.64 ** k for k in range(4)], rtol=1e-5)
    assert [e.step for e in acc.Scalars("global_step/sec")] == [2, 3, 4]
    assert acc.Tags()["graph"] and acc.Tags()["meta_graph"]
