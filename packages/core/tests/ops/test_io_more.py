"""tf.io file and serialization ops (kernflow.core.ops.io_ops_more) and the `kf.io` namespace,
against values observed from TensorFlow (tf.compat.v1) on the same inputs."""

import gzip
import os
import zlib

import numpy as np
import pytest

import kernflow.core as kf
from kernflow.core import io as kfio
from kernflow.core.framework import errors
from kernflow.core.protobuf import example_pb2


def run(t, feed=None):
    with kf.Session() as sess:
        return sess.run(t, feed)


@pytest.fixture(autouse=True)
def _graph():
    with kf.Graph().as_default():
        yield


# ---------------------------------------------------------------------------- files
def test_write_then_read_file_creates_parent_directories(tmp_path):
    path = str(tmp_path / "new" / "sub" / "f.bin")
    data = bytes(range(256)) * 3
    write = kf.write_file(path, data)
    assert write.type == "WriteFile" and write.outputs == []
    with kf.control_dependencies([write]):
        text = kf.read_file(path)
    assert text.shape == kf.TensorShape([]) and text.dtype == kf.string
    assert run(text) == data
    assert open(path, "rb").read() == data


def test_read_file_missing_is_not_found(tmp_path):
    with pytest.raises(errors.NotFoundError, match="No such file or directory"):
        run(kf.read_file(str(tmp_path / "nope")))


def test_file_ops_need_scalar_names():
    with pytest.raises(ValueError, match="rank 0"):
        kf.read_file(["a", "b"])
    with pytest.raises(ValueError, match="rank 0"):
        kf.write_file("a", ["x", "y"])


def test_read_file_fed_name(tmp_path):
    (tmp_path / "a.txt").write_bytes(b"alpha")
    name = kf.placeholder(kf.string)
    text = kfio.read_file(name)
    assert run(text, {name: str(tmp_path / "a.txt")}) == b"alpha"


# ---------------------------------------------------------------------------- serialize / parse tensors
@pytest.mark.parametrize("value, dtype, expected", [
    # Bytes observed from tf.io.serialize_tensor.
    ([[1.5, 2]], kf.float32,
     b'\x08\x01\x12\x08\x12\x02\x08\x01\x12\x02\x08\x02"\x08\x00\x00\xc0?\x00\x00\x00@'),
    ([b"ab", b"c"], kf.string, b"\x08\x07\x12\x04\x12\x02\x08\x02B\x02abB\x01c"),
    (True, kf.bool, b'\x08\n\x12\x00"\x01\x01'),
    (3, kf.int64, b'\x08\t\x12\x00"\x08\x03\x00\x00\x00\x00\x00\x00\x00'),
    ([1 + 2j], kf.complex64, b'\x08\x08\x12\x04\x12\x02\x08\x01"\x08\x00\x00\x80?\x00\x00\x00@'),
    ([1.5], kf.float16, b'\x08\x13\x12\x04\x12\x02\x08\x01"\x02\x00>'),
])
def test_serialize_tensor_bytes_equal_tf(value, dtype, expected):
    s = kf.serialize_tensor(kf.constant(value, dtype))
    assert s.shape == kf.TensorShape([]) and s.dtype == kf.string
    assert run(s) == expected


@pytest.mark.parametrize("value", [
    np.arange(6, dtype=np.int32).reshape(2, 3), np.array([0.25, -1e30], np.float64),
    np.array([[True, False]]), np.array([b"x", b"", "\u00e9".encode()], object), np.zeros((0, 4), np.uint8),
    np.array(7, np.int16),
])
def test_parse_tensor_round_trips(value):
    dt = kf.as_dtype(value.dtype) if value.dtype != object else kf.string
    parsed = kf.parse_tensor(kf.serialize_tensor(kf.constant(value, dt)), dt)
    assert parsed.dtype == dt and parsed.shape.rank is None
    out = run(parsed)
    assert out.shape == value.shape and out.dtype == value.dtype
    np.testing.assert_array_equal(out, value)


def test_parse_tensor_errors():
    s = kf.serialize_tensor(kf.constant([[1, 2]], kf.int32))
    with pytest.raises(errors.InvalidArgumentError,
                       match=r"Type mismatch between parsed tensor \(int32\) and dtype \(float32\)"):
        run(kf.parse_tensor(s, kf.float32))
    with pytest.raises(errors.InvalidArgumentError, match="Could not parse `serialized` as TensorProto"):
        run(kf.parse_tensor(b"garbage\xff", kf.float32))
    with pytest.raises(ValueError, match="scalar"):
        kf.parse_tensor([s, s], kf.int32)
    fed = kf.placeholder(kf.string)
    with pytest.raises(errors.InvalidArgumentError, match=r"scalar, got shape: \[2\]"):
        run(kf.parse_tensor(fed, kf.int32), {fed: [b"", b""]})
    short = kf.make_tensor_proto([1, 2], kf.int32)
    short.tensor_content = short.tensor_content[:4]   # int32[2] needs 8 bytes
    with pytest.raises(errors.InvalidArgumentError, match="Invalid TensorProto: .*holds 4 bytes, "
                                                          "expected 8"):
        run(kf.parse_tensor(short.SerializeToString(), kf.int32))


# ---------------------------------------------------------------------------- decode_compressed
def test_decode_compressed_zlib_gzip_and_none():
    z, g = zlib.compress(b"hello"), gzip.compress(b"world")
    out = kf.decode_compressed([[z, zlib.compress(b"")]], "ZLIB")
    assert out.shape == kf.TensorShape([1, 2])
    np.testing.assert_array_equal(run(out), np.array([[b"hello", b""]], object))
    assert run(kf.decode_compressed(g, "GZIP")) == b"world"
    assert run(kfio.decode_compressed(b"raw")) == b"raw"


def test_decode_compressed_errors():
    with pytest.raises(errors.DataLossError, match="ZLIB decompression failed"):
        run(kf.decode_compressed(b"bad", "ZLIB"))
    with pytest.raises(ValueError, match="compression_type must be one of"):
        kf.decode_compressed(b"x", "LZMA")


# ---------------------------------------------------------------------------- decode_json_example
def test_decode_json_example_gives_parseable_examples():
    js = ('{"features": {"feature": {"x": {"floatList": {"value": [1.5, 2]}}, '
          '"s": {"bytesList": {"value": ["YWI="]}}, "i": {"int64List": {"value": ["3", 4]}}}}}')
    out = kf.decode_json_example([js, '{}'])
    assert out.shape == kf.TensorShape([2])
    a, b = run(out)
    ex = example_pb2.Example.FromString(a)
    f = ex.features.feature
    assert list(f["x"].float_list.value) == [1.5, 2.0]
    assert list(f["s"].bytes_list.value) == [b"ab"]
    assert list(f["i"].int64_list.value) == [3, 4]
    assert b == b""


def test_decode_json_example_bad_json():
    with pytest.raises(errors.InvalidArgumentError, match="Error while parsing JSON"):
        run(kf.decode_json_example('{"bad": 1}'))


# ---------------------------------------------------------------------------- tensor protos
def test_make_tensor_proto_and_make_ndarray():
    p = kf.make_tensor_proto([1, 2, 3, 4], dtype=kf.float32, shape=[2, 2])
    np.testing.assert_array_equal(kf.make_ndarray(p), np.array([[1, 2], [3, 4]], np.float32))
    assert kf.make_ndarray(kf.make_tensor_proto(5.0, shape=[3])).tolist() == [5.0, 5.0, 5.0]
    with pytest.raises(TypeError, match=r"Expected Tensor's shape: \(2, 1\), but got \(2,\)"):
        kf.make_tensor_proto([1, 2], shape=[2, 1], verify_shape=True)
    # A proto from make_tensor_proto is what SerializeTensor writes.
    assert run(kf.serialize_tensor(kf.constant([1.5, 2.0]))) == \
        kf.make_tensor_proto(np.array([1.5, 2.0], np.float32)).SerializeToString()


# ---------------------------------------------------------------------------- kf.io namespace
def test_io_namespace_names(tmp_path):
    from kernflow.core import gfile
    io = kfio
    from kernflow.core.data import tfrecord
    assert io.gfile is gfile
    assert io.TFRecordWriter is tfrecord.TFRecordWriter
    assert io.tf_record_iterator is tfrecord.tf_record_iterator
    assert io.TFRecordOptions is tfrecord.TFRecordOptions
    assert io.TFRecordCompressionType.GZIP == 2
    assert io.PaddingFIFOQueue is kf.PaddingFIFOQueue and io.RandomShuffleQueue is kf.RandomShuffleQueue
    assert io.read_file is kf.read_file and io.serialize_tensor is kf.serialize_tensor
    assert io.decode_base64 is kf.decode_base64
    assert io.write_graph is kf.train.write_graph
    for n in ("parse_example", "FixedLenFeature", "VarLenFeature", "decode_raw", "decode_csv",
              "decode_png", "decode_jpeg", "decode_image", "encode_png", "matching_files"):
        assert callable(getattr(io, n)), n
    assert "parse_single_example" in dir(io)
    with pytest.raises(AttributeError, match="no attribute 'nope'"):
        io.nope  # noqa: B018


def test_io_tfrecord_writer_and_matching_files(tmp_path):
    path = str(tmp_path / "r.tfrecord")
    with kfio.TFRecordWriter(path, kfio.TFRecordOptions("GZIP")) as w:
        for r in (b"r0", b"rec1"):
            w.write(r)
    assert list(kfio.tf_record_iterator(path, kfio.TFRecordOptions("GZIP"))) == [b"r0", b"rec1"]
    (tmp_path / "b.tfrecord").write_bytes(b"")
    got = run(kfio.matching_files(str(tmp_path / "*.tfrecord")))
    assert [os.path.basename(p) for p in got.tolist()] == [b"b.tfrecord", b"r.tfrecord"]
