"""Tensors on the wire: TensorProto round trips and chunked RecvTensor streams."""

import time

import numpy as np
import pytest

from kernflow.core.framework import errors
from kernflow.core.framework import tensor_codec
from kernflow.core.protobuf import types_pb2
from kernflow.client import codec
from kernflow.client.protobuf import worker_pb2

NUMERIC = [np.float16, np.float32, np.float64, np.int8, np.int16, np.int32, np.int64, np.uint8,
           np.uint16, np.uint32, np.uint64, np.bool_, np.complex64, np.complex128]
SHAPES = [(), (0,), (3,), (2, 3), (2, 0, 4), (1, 1, 1, 5)]


def _sample(dtype, shape):
    rng = np.random.default_rng(0)
    x = rng.standard_normal(shape) * 100
    if np.dtype(dtype).kind == "c":
        x = x + 1j * rng.standard_normal(shape)
    return np.asarray(x).astype(dtype)


@pytest.mark.parametrize("dtype", NUMERIC, ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("shape", SHAPES, ids=str)
def test_tensor_proto_round_trip(dtype, shape):
    a = _sample(dtype, shape)
    p = codec.tensor_to_proto(a)
    assert len(p.tensor_content) == a.nbytes  # raw bytes, nothing per element
    b = codec.proto_to_tensor(p)
    assert b.dtype == a.dtype and b.shape == a.shape
    np.testing.assert_array_equal(a, b)
    assert b.flags.writeable


@pytest.mark.parametrize("dtype", NUMERIC, ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("shape", SHAPES, ids=str)
def test_recv_stream_round_trip(dtype, shape):
    a = _sample(dtype, shape)
    msgs = list(codec.iter_recv_chunks(a, chunk_bytes=7))
    assert msgs[0].total_bytes == a.nbytes and list(msgs[0].shape.dim) == list(tensor_codec.shape_proto(shape).dim)
    assert all(len(m.content) <= 7 for m in msgs)
    assert all(m.dtype == 0 for m in msgs[1:])  # only the first carries the header
    b, dead = codec.assemble_recv_chunks(msgs)
    assert not dead and b.dtype == a.dtype and b.shape == a.shape
    np.testing.assert_array_equal(a, b)


def test_scalars_stay_zero_dimensional():
    for v in (np.float32(2.5), np.int64(-3), np.bool_(True), np.array(7, np.uint8)):
        assert codec.proto_to_tensor(codec.tensor_to_proto(v)).shape == ()
        assert codec.assemble_recv_chunks(codec.iter_recv_chunks(v))[0].shape == ()


def test_non_contiguous_and_big_endian_inputs():
    a = np.arange(24, dtype=np.int32).reshape(4, 6)[:, ::2].T
    np.testing.assert_array_equal(codec.proto_to_tensor(codec.tensor_to_proto(a)), a)
    np.testing.assert_array_equal(codec.assemble_recv_chunks(codec.iter_recv_chunks(a, chunk_bytes=5))[0], a)
    be = np.arange(5, dtype=">f8")
    p = codec.tensor_to_proto(be)
    assert p.tensor_content == np.arange(5, dtype="<f8").tobytes()
    np.testing.assert_array_equal(codec.proto_to_tensor(p), be)


@pytest.mark.parametrize("value", [
    np.array([b"a", b"", "\u00e9t\u00e9".encode()], dtype=object),
    np.array(["x", "yz"]),                    # unicode numpy array
    np.array([b"ab", b"c"]),                  # fixed-width bytes
    np.array(b"scalar", dtype=object),
    np.empty((0, 3), dtype=object),
    np.array([[b"a", b"bb"], [b"ccc", b"\x00\xff"]], dtype=object),
])
def test_strings(value):
    as_bytes = np.vectorize(lambda s: s.encode() if isinstance(s, str) else bytes(s), otypes=[object])
    expected = as_bytes(value) if value.size else value
    p = codec.tensor_to_proto(value)
    assert p.dtype == types_pb2.DT_STRING and not p.tensor_content
    b = codec.proto_to_tensor(p)
    assert b.dtype == object and b.shape == value.shape
    assert b.tolist() == expected.tolist()
    c, dead = codec.assemble_recv_chunks(codec.iter_recv_chunks(value, chunk_bytes=2))
    assert not dead and c.dtype == object and c.shape == value.shape and c.tolist() == expected.tolist()


def test_string_stream_is_chunked():
    value = np.array([b"x" * 10] * 10, dtype=object)
    msgs = list(codec.iter_recv_chunks(value, chunk_bytes=25))
    assert len(msgs) == 5 and msgs[0].total_bytes == 100
    assert [len(m.string_val) for m in msgs] == [2, 2, 2, 2, 2]


def test_large_array_streams_fast():
    a = np.random.default_rng(1).random((4096, 2048))  # 64 MiB of float64
    assert a.nbytes == 64 << 20
    t0 = time.perf_counter()
    msgs = codec.iter_recv_chunks(a)
    b, dead = codec.assemble_recv_chunks(msgs)
    elapsed = time.perf_counter() - t0
    assert not dead
    np.testing.assert_array_equal(a, b)
    assert elapsed < 1.0, f"64 MiB took {elapsed:.2f} s: something works per element"
    n = sum(1 for _ in codec.iter_recv_chunks(a))
    assert n == (64 << 20) // codec.CHUNK_BYTES


def test_dead_tensor():
    msgs = list(codec.iter_recv_chunks(None, is_dead=True))
    assert len(msgs) == 1 and msgs[0].is_dead
    assert codec.assemble_recv_chunks(msgs) == (None, True)
    msgs = list(codec.iter_recv_chunks(np.zeros(3, np.float32), is_dead=True))
    assert msgs[0].dtype == types_pb2.DT_FLOAT and not msgs[0].content
    assert codec.assemble_recv_chunks(msgs) == (None, True)


def test_truncated_stream_is_data_loss():
    msgs = list(codec.iter_recv_chunks(np.zeros(100, np.float32), chunk_bytes=64))
    with pytest.raises(errors.DataLossError, match="ended after 192 of 400 bytes"):
        codec.assemble_recv_chunks(msgs[:3])
    with pytest.raises(errors.DataLossError, match="before its first message"):
        codec.assemble_recv_chunks([])
    s = list(codec.iter_recv_chunks(np.array([b"a", b"b", b"c"], dtype=object), chunk_bytes=1))
    with pytest.raises(errors.DataLossError, match="1 of 3 strings"):
        codec.assemble_recv_chunks(s[:1])


def test_oversized_stream_is_invalid_argument():
    msgs = list(codec.iter_recv_chunks(np.zeros(100, np.float32), chunk_bytes=64))
    msgs.append(worker_pb2.RecvTensorResponse(content=b"\x00" * 8))
    with pytest.raises(errors.InvalidArgumentError, match="more than the announced 400 bytes"):
        codec.assemble_recv_chunks(msgs)
    s = list(codec.iter_recv_chunks(np.array([b"a", b"b"], dtype=object)))
    s.append(worker_pb2.RecvTensorResponse(string_val=[b"c"]))
    with pytest.raises(errors.InvalidArgumentError, match="more than the 2 strings"):
        codec.assemble_recv_chunks(s)


def test_inconsistent_header_is_invalid_argument():
    first = next(codec.iter_recv_chunks(np.zeros((2, 3), np.float64)))
    first.total_bytes = 40
    with pytest.raises(errors.InvalidArgumentError, match=r"total_bytes=40.*float64.*\[2, 3\].*48 bytes"):
        codec.assemble_recv_chunks([first])
    missing = worker_pb2.RecvTensorResponse(dtype=types_pb2.DT_FLOAT)
    missing.shape.dim.add(size=4)
    with pytest.raises(errors.InvalidArgumentError, match="total_bytes=0.*16 bytes"):
        codec.assemble_recv_chunks([missing])
    with pytest.raises(errors.InvalidArgumentError, match="no dtype"):
        codec.assemble_recv_chunks([worker_pb2.RecvTensorResponse(content=b"1234")])
    unknown = worker_pb2.RecvTensorResponse(dtype=types_pb2.DT_FLOAT)
    unknown.shape.dim.add(size=-1)
    with pytest.raises(errors.InvalidArgumentError, match="fully defined"):
        codec.assemble_recv_chunks([unknown])


def test_proto_with_wrong_byte_count_is_invalid_argument():
    """A malformed tensor in a request is the caller's error (TF: InvalidArgument)."""
    p = codec.tensor_to_proto(np.zeros(4, np.int32))
    p.tensor_content = p.tensor_content[:-1]
    with pytest.raises(errors.InvalidArgumentError, match="Cannot parse tensor from proto"):
        codec.proto_to_tensor(p)


def test_non_tensors_are_refused():
    with pytest.raises(TypeError, match="over the wire"):
        codec.tensor_to_proto(object())
    with pytest.raises(ValueError):
        list(codec.iter_recv_chunks(np.zeros(3), chunk_bytes=0))


def test_python_values_use_tf_default_dtypes():
    assert codec.proto_to_tensor(codec.tensor_to_proto(1.5)).dtype == np.float32
    assert codec.proto_to_tensor(codec.tensor_to_proto([1, 2])).dtype == np.int32
    assert codec.proto_to_tensor(codec.tensor_to_proto(b"hi")).tolist() == b"hi"


_ENCODED = [np.arange(10, dtype=np.float32), np.zeros((0, 3)), np.float64(2.5), np.arange(6, dtype=">i4"),
            np.arange(1000, dtype=np.int64).reshape(10, 100)[:, ::3],
            np.array([b"x", b"", b"yz"], dtype=object)]


def _name(v):
    return "dead" if v is None else str(np.asarray(v).dtype)


@pytest.mark.parametrize("value", _ENCODED + [None], ids=_name)
@pytest.mark.parametrize("chunk_bytes", [8, 1 << 20])
def test_encoded_chunks_are_the_serialized_messages(value, chunk_bytes):
    """What servers send (`encode_recv_chunks`) parses to exactly what `iter_recv_chunks` builds."""
    R = worker_pb2.RecvTensorResponse
    want = list(codec.iter_recv_chunks(value, is_dead=value is None, chunk_bytes=chunk_bytes))
    raw = list(codec.encode_recv_chunks(value, is_dead=value is None, chunk_bytes=chunk_bytes))
    assert all(type(b) is bytes for b in raw)
    assert [R.FromString(b) for b in raw] == want
    got, dead = codec.assemble_recv_chunks(codec.split_content(b, R) for b in raw)
    assert dead == (value is None)
    if value is not None:
        assert got.tolist() == np.asarray(value).tolist()


@pytest.mark.parametrize("value", _ENCODED[:5], ids=_name)
def test_a_snapshot_is_its_serialized_messages(value):
    arr = np.array(value)
    snap = codec.snapshot(arr, chunk_bytes=16)
    assert isinstance(snap, codec.WireSnapshot)
    assert list(codec.encode_recv_chunks(snap)) == list(codec.encode_recv_chunks(arr, chunk_bytes=16))
    if arr.size:
        arr.reshape(-1)[0] = 99          # a later update of the buffer does not reach the snapshot
    np.testing.assert_array_equal(snap.array(), np.asarray(value))
    assert [m.content for m in codec.iter_recv_chunks(snap, chunk_bytes=16)] == \
        [m.content for m in codec.iter_recv_chunks(np.asarray(value), chunk_bytes=16)]
