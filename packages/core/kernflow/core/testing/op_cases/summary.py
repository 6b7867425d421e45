"""Contract cases of the summary ops (kernflow.core.ops.summary_ops).

The references build the expected Summary protos independently (byte-equal to TensorFlow's for
the same inputs); images are compared by their decoded pixels. Scalar string outputs are reshaped
to [1] (the kit cannot compare a fetched `bytes` scalar).
"""

import numpy as np

import kernflow.core as kf
from kernflow.core.framework.op_def_library import apply_op
from kernflow.core.ops import summary_ops
from kernflow.core.protobuf import summary_pb2
from kernflow.core.testing.kernel_contract import OpCase


def _one(t):
    return kf.reshape(t, [1])


def _bytes(summary):
    return np.array([summary.SerializeToString()], dtype=object)


def _scalar_ref(x):
    return _bytes(summary_pb2.Summary(value=[summary_pb2.Summary.Value(tag=t, simple_value=float(v))
                                             for t, v in zip(["a", "b"], x)]))


def _histo_ref(x):
    # TF's buckets for [1, 5, 5, -7] (observed): limits around -7, 1 and 5, empty runs collapsed.
    h = summary_pb2.HistogramProto(min=-7, max=5, num=4, sum=4, sum_squares=100)
    h.bucket_limit.extend([-7.4666377932988732, -6.7878525393626115, 0.917246389039776, 1.0089710279437536,
                           4.6361946174186253, 5.0998140791604882, 1.7976931348623157e+308])
    h.bucket.extend([0, 1, 0, 1, 0, 2, 0])
    return _bytes(summary_pb2.Summary(value=[summary_pb2.Summary.Value(tag="h", histo=h)]))


def _tensor_ref(x):
    v = summary_pb2.Summary.Value(tag="t", tensor=kf.make_tensor_proto(x),
                                  metadata=summary_pb2.SummaryMetadata(display_name="d"))
    return _bytes(summary_pb2.Summary(value=[v]))


def _tensor_v1_ref(x):
    return _bytes(summary_pb2.Summary(value=[summary_pb2.Summary.Value(node_name="tsv1",
                                                                        tensor=kf.make_tensor_proto(x))]))


def _wav_ref(x):
    # TF's WAV bytes for [[0.5, -0.25, 1.5]] at 44100.7 Hz (observed; the rate rounds to 44101).
    wav = bytes.fromhex("524946462a00000057415645666d7420100000000100010045ac00008a58010002001000"
                        "6461746106000000004000e0ff7f")
    a = summary_pb2.Summary.Audio(sample_rate=44100.7, num_channels=1, length_frames=3,
                                  encoded_audio_string=wav, content_type="audio/wav")
    return _bytes(summary_pb2.Summary(value=[summary_pb2.Summary.Value(tag="s/audio", audio=a)]))


def _merge(x):
    return _one(summary_ops.merge_summary([summary_ops.scalar_summary("m1", x),
                                           summary_ops.scalar_summary(["m2", "m3"], kf.stack([x, x]))]))


def _merge_ref(x):
    return _bytes(summary_pb2.Summary(value=[summary_pb2.Summary.Value(tag=t, simple_value=float(x))
                                             for t in ("m1", "m2", "m3")]))


def _fused(x, y):
    # (what the summary fusion pass makes of MergeSummary over two ScalarSummaries)
    op = apply_op("_FusedScalarSummaries", [[x, y]], {"tags": ["f1", "f2"], "summary_nodes": ["s1", "s2"]})
    return _one(op.outputs[0])


def _fused_ref(x, y):
    return _bytes(summary_pb2.Summary(value=[summary_pb2.Summary.Value(tag=t, simple_value=float(v))
                                             for t, v in (("f1", x), ("f2", y))]))


def _image_gray(x):
    s = summary_ops.image_summary("im", x, max_images=2)
    return _one(s)


def _image_compare(actual, expected):
    import io

    from PIL import Image
    v = summary_pb2.Summary.FromString(np.asarray(actual).reshape(-1)[0]).value
    assert [x.tag for x in v] == ["im/image/0"], [x.tag for x in v]
    assert (v[0].image.height, v[0].image.width, v[0].image.colorspace) == (2, 2, 1)
    pixels = np.asarray(Image.open(io.BytesIO(v[0].image.encoded_image_string)))
    # TF's pixels for [[-2, 1], [0.5, inf]]: scaled by 127/2 around 128, the infinity red.
    np.testing.assert_array_equal(pixels, [[1, 191], [159, 255]])


_meta = summary_pb2.SummaryMetadata(display_name="d").SerializeToString()

CASES = [
    OpCase("ScalarSummary", lambda x: _one(summary_ops.scalar_summary(["a", "b"], x)),
           [np.array([1.5, -2.25], np.float32)], _scalar_ref),
    OpCase("HistogramSummary", lambda x: _one(summary_ops.histogram_summary("h", x)),
           [np.array([1, 5, 5, -7], np.int32)], _histo_ref),
    OpCase("TensorSummaryV2", lambda x: _one(summary_ops.tensor_summary_v2("t", x, _meta)),
           [np.array([[1, 2]], np.int32)], _tensor_ref),
    OpCase("TensorSummary", lambda x: _one(summary_ops.tensor_summary(x, name="tsv1")),
           [np.array([1.0, 2.0], np.float64)], _tensor_v1_ref),
    OpCase("AudioSummaryV2", lambda x: _one(summary_ops.audio_summary_v2("s", x, 44100.7, max_outputs=1)),
           [np.array([[0.5, -0.25, 1.5]], np.float32)], _wav_ref),
    OpCase("MergeSummary", _merge, [np.array(0.5, np.float32)], _merge_ref),
    OpCase("_FusedScalarSummaries", _fused, [np.array(0.5, np.float32), np.array(-3.25, np.float64)],
           _fused_ref),
    OpCase("ImageSummary", _image_gray, [np.array([[[[-2.0], [1.0]], [[0.5], [np.inf]]]], np.float32)],
           compare=_image_compare),
]
